"""PrivTree paper, Sec. 6.2 (spec §2.10): frequent strings of msnbc sessions.

Each model (the private prediction suffix tree, the fixed-depth n-gram baseline, and
non-private truncation to the same length) reports its top-k strings; precision is the
overlap with the exact top-k of the full (untruncated) data, over ``k``.  The total
variation distance compares the true distribution of length-2 strings (occurrences of each
of the |I|^2 pairs, normalised) with the model's estimate.
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

from .data import MSNBC_ALPHABET, MSNBC_MAX_LENGTH
from .metrics import total_variation
from .progress import progress, seeds

EPSILONS = (0.05, 0.1, 0.2, 0.4, 0.8, 1.6)
KS = (10, 50, 100)
TRUNCATE = "Truncate (non-private)"

Model = Callable[[pl.DataFrame, float, Any], Any]


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
    """The PST and the n-gram baseline (both epsilon-DP, add/remove one sequence) and the
    exact truncation reference (no privacy)."""
    def pst(frame: pl.DataFrame, eps: float, seed: Any) -> Any:
        return frame.dp.privtree_sequences("pages", alphabet=list(alphabet), max_length=max_length,
                                           epsilon=eps, seed=seed)

    def ngram(frame: pl.DataFrame, eps: float, seed: Any) -> Any:
        return frame.dp.ngram_sequences("pages", alphabet=list(alphabet), max_length=max_length,
                                        epsilon=eps, seed=seed)

    def truncate(frame: pl.DataFrame, eps: float, seed: Any) -> Any:
        return ExactModel(frame, "pages", list(alphabet), max_length)

    return {"PrivTree (PST)": pst, "N-gram": ngram, TRUNCATE: truncate}


def all_pairs(alphabet: Sequence[int]) -> list[list[int]]:
    return [list(p) for p in itertools.product(alphabet, repeat=2)]


def run(frame: pl.DataFrame, *, epsilons: Sequence[float] = EPSILONS, ks: Sequence[int] = KS,
        repeats: int = 1, seed: int = 0, alphabet: Sequence[int] = MSNBC_ALPHABET,
        models_: dict[str, Model] | None = None, show_progress: bool = True) -> pl.DataFrame:
    """One row per (model, epsilon): precision at every k, TV distance, build time.  The
    non-private truncation does not depend on epsilon: it is built once."""
    chosen = models_ or models(alphabet)
    exact = ExactModel(frame, "pages", list(alphabet), None)
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
