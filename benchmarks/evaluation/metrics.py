"""Error measures of the papers' experiments that the library does not offer itself.

The library provides the workload generators, exact answers, coverage, relative errors and
top-k precision (:mod:`polars_dp.evaluation.workloads`, :mod:`polars_dp.evaluation`); this module adds
what only an evaluation needs (pure numpy):

* square error ``(x - act)^2`` (Privelet paper Sec. VI);
* coverage quintiles: queries ranked by coverage and split into five equal groups, with
  the mean of each measure per group (the x and y of the Privelet paper's Figures 8-9);
* the total variation distance ``(1/2) sum |p - q|`` between two distributions (PrivTree
  paper Sec. 6, sequences).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl


def square_error(estimate: np.ndarray, actual: np.ndarray) -> np.ndarray:
    """``(estimate - actual)^2`` per query."""
    diff = np.asarray(estimate, dtype=np.float64) - np.asarray(actual, dtype=np.float64)
    return diff * diff


def quintile_index(values: np.ndarray, groups: int = 5) -> np.ndarray:
    """Group ``0..groups-1`` of every value by rank: equal-size groups of increasing value
    (ties broken by position, so the groups have sizes differing by at most one)."""
    values = np.asarray(values)
    rank = np.empty(values.size, dtype=np.int64)
    rank[np.argsort(values, kind="stable")] = np.arange(values.size)
    return rank * groups // max(values.size, 1)


def group_means(groups: np.ndarray, values: np.ndarray, n_groups: int) -> np.ndarray:
    """Mean of ``values`` within each group ``0..n_groups-1`` (NaN for an empty group)."""
    sums = np.bincount(groups, weights=np.asarray(values, dtype=np.float64), minlength=n_groups)
    sizes = np.bincount(groups, minlength=n_groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        return sums / sizes


def total_variation(p: np.ndarray, q: np.ndarray) -> float:
    """``(1/2) sum |p/|p| - q/|q||`` of two non-negative weight vectors over the same support.

    Negative estimates are clipped to 0 first; an all-zero vector is the uniform
    distribution (the only distribution a model without information can claim).
    """
    def normalise(x: np.ndarray) -> np.ndarray:
        x = np.clip(np.asarray(x, dtype=np.float64), 0, None)
        total = x.sum()
        return x / total if total > 0 else np.full(x.size, 1.0 / x.size)

    return 0.5 * float(np.abs(normalise(p) - normalise(q)).sum())


def answers(release: Any, queries: pl.DataFrame) -> np.ndarray:
    """The noisy answers of a batch of range-count queries as a numpy array (a grid
    release returns the query frame with a ``count`` column, a tree release the array)."""
    out = release.range_counts(queries)
    return out["count"].to_numpy() if isinstance(out, pl.DataFrame) else np.asarray(out, dtype=np.float64)
