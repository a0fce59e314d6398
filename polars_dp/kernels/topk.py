"""Best-first top-k over strings grown one symbol at a time (pure numpy).

For a score that never grows when a string is extended (anti-monotone: exact substring
counts, or a sequence model's frequency estimates), only strings scoring at least the current
k-th best of everything seen so far can have an extension in the top ``k``; each length keeps
at most ``k`` of them to extend.  Used by :meth:`SequenceRelease.top_k` and by the exact
reference in :mod:`polars_dp.evaluation.sequences`.
"""

from __future__ import annotations

import numpy as np


def frontier(found_scores: list[np.ndarray], scores: np.ndarray, k: int, *, floor: float = 0.0
             ) -> np.ndarray:
    """Indices of the strings of the current length to extend: score at least the k-th best
    over ``found_scores`` (every length so far, this one included) and above ``floor``; at
    most ``k``, best first."""
    seen = np.concatenate(found_scores)
    bar = np.partition(seen, seen.size - k)[seen.size - k] if seen.size >= k else floor
    keep = np.flatnonzero((scores >= bar) & (scores > floor))
    if keep.size > k:
        keep = keep[np.argsort(-scores[keep], kind="stable")[:k]]
    return keep


def best_order(found_scores: list[np.ndarray], k: int) -> np.ndarray:
    """Positions of the ``k`` best scores in ``np.concatenate(found_scores)`` (ties: shorter
    and earlier first), best first."""
    return np.argsort(-np.concatenate(found_scores), kind="stable")[:k]


def best_k(found_strings: list[np.ndarray], found_scores: list[np.ndarray], k: int
           ) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best strings over all lengths (:func:`best_order`), as a matrix padded with
    ``-1`` and their scores."""
    width = found_strings[-1].shape[1]
    padded = np.concatenate([np.pad(m, ((0, 0), (0, width - m.shape[1])), constant_values=-1)
                             for m in found_strings])
    order = best_order(found_scores, k)
    return padded[order], np.concatenate(found_scores)[order]


__all__ = ["best_k", "best_order", "frontier"]
