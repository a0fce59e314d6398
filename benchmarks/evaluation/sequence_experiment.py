"""PrivTree paper, Sec. 6.2 (spec §2.10): frequent strings of msnbc sessions.

Each model (the private prediction suffix tree, the fixed-depth n-gram baseline, and
non-private truncation to the same length) reports its top-k strings; precision is the
overlap with the exact top-k of the full (untruncated) data over ``k``.  The total
variation distance compares the true distribution of length-2 strings (occurrences of each
of the |I|^2 pairs, normalised) with the model's estimated one.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import polars as pl

from .data import MSNBC_ALPHABET, MSNBC_MAX_LENGTH
from .metrics import exact_top_k, ngram_counts, top_k_precision, total_variation
from .progress import progress, seeds

EPSILONS = (0.05, 0.1, 0.2, 0.4, 0.8, 1.6)
KS = (10, 50, 100)

Model = Callable[[pl.DataFrame, float, Any], Any]


def models(alphabet: Sequence[int] = MSNBC_ALPHABET, max_length: int = MSNBC_MAX_LENGTH
           ) -> dict[str, Model]:
    """The PST, the n-gram baseline (both epsilon-DP, add/remove one sequence) and
    truncation (exact counts of the truncated sequences: no privacy, a reference)."""
    def pst(frame: pl.DataFrame, eps: float, seed: Any) -> Any:
        return frame.dp.privtree_sequences("pages", alphabet=list(alphabet), max_length=max_length,
                                           epsilon=eps, seed=seed)

    def ngram(frame: pl.DataFrame, eps: float, seed: Any) -> Any:
        return frame.dp.ngram_sequences("pages", alphabet=list(alphabet), max_length=max_length,
                                        epsilon=eps, seed=seed)

    def truncate(frame: pl.DataFrame, eps: float, seed: Any) -> Any:
        from polars_dp.mechanisms.sequences import truncated_model

        return truncated_model(frame, "pages", alphabet=list(alphabet), max_length=max_length)

    return {"PrivTree (PST)": pst, "N-gram": ngram, "Truncate (non-private)": truncate}


def flat_symbols(frame: pl.DataFrame, column: str = "pages") -> tuple[np.ndarray, np.ndarray]:
    """All sequences back to back and their offsets (the Arrow list layout)."""
    lengths = frame[column].list.len().to_numpy().astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    return frame[column].explode().to_numpy().astype(np.int64), offsets


def pair_counts(symbols: np.ndarray, offsets: np.ndarray, alphabet: Sequence[int]) -> np.ndarray:
    """Occurrences of every length-2 string over ``alphabet`` (in :func:`all_pairs` order)."""
    base = max(alphabet) + 1
    codes, counts = ngram_counts(symbols, offsets, 2, base)
    table = np.zeros(base * base)
    table[codes] = counts
    pairs = np.array([a * base + b for a, b in all_pairs(alphabet)])
    return table[pairs]


def all_pairs(alphabet: Sequence[int]) -> list[tuple[int, int]]:
    return list(itertools.product(alphabet, repeat=2))


def model_top_k(model: Any, k: int) -> list[tuple[int, ...]]:
    top = model.top_k(k)
    return [tuple(int(x) for x in s) for s in top["string"].to_list()]


def model_pairs(model: Any, alphabet: Sequence[int]) -> np.ndarray:
    return np.asarray(model.frequencies([list(p) for p in all_pairs(alphabet)]), dtype=np.float64)


def run(frame: pl.DataFrame, *, epsilons: Sequence[float] = EPSILONS, ks: Sequence[int] = KS,
        repeats: int = 1, seed: int = 0, alphabet: Sequence[int] = MSNBC_ALPHABET,
        models_: dict[str, Model] | None = None, show_progress: bool = True) -> pl.DataFrame:
    """One row per (model, epsilon): precision at every k, TV distance, build time.  The
    non-private truncation does not depend on epsilon and is built once."""
    chosen = models_ or models(alphabet)
    symbols, offsets = flat_symbols(frame)
    truth, _ = exact_top_k(symbols, offsets, max(ks), max(alphabet) + 1)
    true_pairs = pair_counts(symbols, offsets, alphabet)
    cells = [(name, eps, r) for eps in epsilons for name in chosen for r in range(repeats)
             if not (name.startswith("Truncate") and (eps != epsilons[0] or r))]
    acc: dict[tuple[str, float], list[dict[str, float]]] = {}
    for name, eps, r in progress(cells, enabled=show_progress, desc="sequences/msnbc"):
        t0 = time.perf_counter()
        model = chosen[name](frame, eps, seeds(seed, "sequences", name, eps, r))
        seconds = time.perf_counter() - t0
        top = model_top_k(model, max(ks))
        result = {f"precision@{k}": top_k_precision(top, truth, k) for k in ks}
        result["tv_pairs"] = total_variation(true_pairs, model_pairs(model, alphabet))
        result["seconds"] = seconds
        acc.setdefault((name, eps), []).append(result)
    rows = []
    for eps in epsilons:
        for name in chosen:
            key = (name, eps) if (name, eps) in acc else (name, epsilons[0])
            results = acc[key]
            rows.append({"dataset": "msnbc", "n": frame.height, "epsilon": eps, "mechanism": name,
                         **{m: float(np.mean([x[m] for x in results])) for m in results[0]}})
    return pl.DataFrame(rows)
