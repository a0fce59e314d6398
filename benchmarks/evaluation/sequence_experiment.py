"""PrivTree paper, Sec. 6.2 (model of Sec. 4): frequent strings of msnbc sessions.

Each model (the private prediction suffix tree, the fixed-depth n-gram baseline, and
non-private truncation to the same length) reports its top-k strings; precision is the
overlap with the exact top-k of the full (untruncated) data, over ``k``.  Two total
variation distances: ``tv_length`` between the length law of ``SAMPLES`` sequences sampled from
the model and that of the truncated data; ``tv_pairs`` between the true distribution of
length-2 strings (occurrences of each of the |I|^2 pairs, normalised) and the model's estimate.

Both private models run twice: with the library's defaults (the PST with ``tree_share=0.25``
and a length law from 5% of epsilon that calibrates its sampler; both answering with the
direct estimator and the back-off of :mod:`polars_dp.releases.sequence`) and in the paper's
configuration (``tree_share=0.5``, no length law, the chain formula for frequencies, no
back-off), which is what the library did before.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import polars as pl

import polars_dp  # noqa: F401  (registers df.dp)
from polars_dp.evaluation.sequences import exact_top_k_strings, top_k_precision
from polars_dp.releases.sequence import BACKOFF_Z

from .data import MSNBC_ALPHABET, MSNBC_MAX_LENGTH
from .metrics import total_variation
from .progress import progress, seeds

EPSILONS = (0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 16.0)
SAMPLES = 200_000
KS = (10, 50, 100)
TRUNCATE = "Truncate (non-private)"

Model = Callable[[pl.DataFrame, float, Any], Any]


class Configured:
    """A released model answered with fixed query options (``backoff``, ``estimator``)."""

    def __init__(self, model: Any, **options: Any):
        self.model, self.options = model, options

    def top_k(self, k: int) -> pl.DataFrame:
        return self.model.top_k(k, **self.options)

    def frequencies(self, strings: Sequence[Sequence[Any]]) -> np.ndarray:
        return self.model.frequencies(strings, **self.options)

    def sample(self, n: int, *, seed: Any) -> pl.DataFrame:
        return self.model.sample(n, seed=seed, backoff=self.options.get("backoff", BACKOFF_Z),
                                 calibrate=self.options.get("estimator") != "chain")


class ExactModel:
    """Exact (NON-PRIVATE) counts of the sequences truncated to ``max_length``: the paper's
    "Truncate" reference, answering like a model (``top_k``, ``frequencies``)."""

    def __init__(self, frame: pl.DataFrame, column: str, alphabet: Sequence[Any],
                 max_length: int | None):
        self.frame, self.column, self.alphabet, self.max_length = frame, column, alphabet, max_length

    def top_k(self, k: int, max_len: int | None = None) -> pl.DataFrame:
        return exact_top_k_strings(self.frame, self.column, alphabet=self.alphabet, k=k,
                                   max_length=self.max_length, max_len=max_len)

    def frequencies(self, strings: Sequence[Sequence[Any]]) -> np.ndarray:
        """Occurrences of short strings: every string up to their longest length is counted."""
        width = max(len(s) for s in strings)
        n_all = sum(len(self.alphabet) ** j for j in range(1, width + 1))
        top = self.top_k(n_all, max_len=width)
        found = dict(zip(map(tuple, top["string"].to_list()), top["count"].to_list(), strict=True))
        return np.array([found.get(tuple(s), 0.0) for s in strings])


def models(alphabet: Sequence[int] = MSNBC_ALPHABET, max_length: int = MSNBC_MAX_LENGTH
           ) -> dict[str, Model]:
    """The PST and the n-gram baseline (both epsilon-DP, add/remove one sequence), each with the
    library's defaults and in the paper's configuration, and the exact truncation reference."""
    paper = {"backoff": None, "estimator": "chain"}

    def pst(share: float | None, options: dict) -> Model:
        def build(frame: pl.DataFrame, eps: float, seed: Any) -> Any:
            extra = {} if share is None else {"tree_share": share, "length_share": 0.0}
            return Configured(frame.dp.privtree_sequences(
                "pages", alphabet=list(alphabet), max_length=max_length, epsilon=eps, seed=seed, **extra),
                **options)
        return build

    def ngram(options: dict) -> Model:
        def build(frame: pl.DataFrame, eps: float, seed: Any) -> Any:
            return Configured(frame.dp.ngram_sequences(
                "pages", alphabet=list(alphabet), max_length=max_length, epsilon=eps, seed=seed), **options)
        return build

    def truncate(frame: pl.DataFrame, eps: float, seed: Any) -> Any:
        return ExactModel(frame, "pages", list(alphabet), max_length)

    return {"PrivTree (PST)": pst(None, {}), "N-gram": ngram({}),
            "PrivTree, paper settings": pst(0.5, paper), "N-gram, paper settings": ngram(paper),
            TRUNCATE: truncate}


def all_pairs(alphabet: Sequence[int]) -> list[list[int]]:
    return [list(p) for p in itertools.product(alphabet, repeat=2)]


def run(frame: pl.DataFrame, *, epsilons: Sequence[float] = EPSILONS, ks: Sequence[int] = KS,
        repeats: int = 1, seed: int = 0, alphabet: Sequence[int] = MSNBC_ALPHABET,
        models_: dict[str, Model] | None = None, show_progress: bool = True,
        max_length: int = MSNBC_MAX_LENGTH, samples: int = SAMPLES) -> pl.DataFrame:
    """One row per (model, epsilon): precision at every k, TV distance, build time.  The
    non-private truncation does not depend on epsilon: it is built once."""
    chosen = models_ or models(alphabet)
    exact = ExactModel(frame, "pages", list(alphabet), None)
    lengths = np.minimum(frame["pages"].list.len().to_numpy(), max_length)
    true_lengths = np.bincount(lengths, minlength=max_length + 1) / frame.height
    truth = exact.top_k(max(ks))
    pairs = all_pairs(alphabet)
    true_pairs = exact.frequencies(pairs)
    cells = [(name, eps, r) for eps in epsilons for name in chosen for r in range(repeats)
             if name != TRUNCATE or (eps == epsilons[0] and r == 0)]
    acc: dict[str, dict[float, list[dict[str, float]]]] = {}
    for name, eps, r in progress(cells, enabled=show_progress, desc="sequences/msnbc"):
        t0 = time.perf_counter()
        model = chosen[name](frame, eps, seeds(seed, "sequences", name, eps, r))
        seconds = time.perf_counter() - t0
        top = model.top_k(max(ks))
        result = {f"precision@{k}": top_k_precision(top.head(k), truth.head(k)) for k in ks}
        if name == TRUNCATE:
            result["tv_length"] = 0.0  # the truncated data are the reference
        else:
            drawn = model.sample(samples, seed=seeds(seed, "sample", name, eps, r))["sequence"]
            got = np.bincount(drawn.list.len().to_numpy(), minlength=max_length + 1)
            result["tv_length"] = total_variation(true_lengths, got)
        result["tv_pairs"] = total_variation(true_pairs, model.frequencies(pairs))
        result["seconds"] = time.perf_counter() - t0 if name == TRUNCATE else seconds
        acc.setdefault(name, {}).setdefault(eps, []).append(result)
    rows = []
    for eps in epsilons:
        for name, by_eps in acc.items():
            results = by_eps.get(eps) or next(iter(by_eps.values()))
            rows.append({"dataset": "msnbc", "n": frame.height, "epsilon": eps, "mechanism": name,
                         **{m: float(np.mean([x[m] for x in results])) for m in results[0]}})
    return pl.DataFrame(rows)
