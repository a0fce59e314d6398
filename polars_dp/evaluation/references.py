"""Exact, NOT-PRIVATE reference answers for experiments: they read the data without noise.

Never publish their output.  They exist to measure the error of releases in evaluations and
demos: true range counts of points and of frequency matrices, and selectivity.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from polars_dp.counting.points import collect_weighted_points
from polars_dp.domains.attributes import Attribute, as_attributes
from polars_dp.domains.box import as_box
from polars_dp.domains.queries import predicate_ranges, query_ranges
from polars_dp.errors import ParameterError
from polars_dp.kernels.prefix import box_sums, prefix_sums


def exact_range_counts(frame: Any, columns: str | Sequence[str], bounds: Any, boxes: pl.DataFrame,
                       *, max_work: int = 20_000_000) -> np.ndarray:
    """True number of points in each closed box (evaluation only: reads the private data).

    Points sorted by the first column: each box scans only its slice of that column and
    checks the other columns there, in chunks of about ``max_work`` point checks.
    """
    box = as_box(columns, bounds)
    pts = collect_weighted_points(frame, box)[0]
    order = np.argsort(pts[0], kind="stable")
    pts = [p[order] for p in pts]
    q_lo = np.column_stack([boxes[f"{c}_lo"].to_numpy() for c in box.columns])
    q_hi = np.column_stack([boxes[f"{c}_hi"].to_numpy() for c in box.columns])
    first = np.searchsorted(pts[0], q_lo[:, 0], side="left")
    length = np.searchsorted(pts[0], q_hi[:, 0], side="right") - first
    out = np.zeros(len(q_lo), dtype=np.int64)
    ends = np.cumsum(length)
    start_q = 0
    while start_q < len(q_lo):
        base = ends[start_q - 1] if start_q else 0
        stop_q = max(int(np.searchsorted(ends, base + max_work, side="right")), start_q + 1)
        qi = np.repeat(np.arange(start_q, stop_q), length[start_q:stop_q])
        pos = np.arange(qi.size) - np.repeat(np.cumsum(length[start_q:stop_q]) - length[start_q:stop_q],
                                             length[start_q:stop_q]) + first[qi]
        ok = np.ones(qi.size, dtype=bool)
        for j in range(1, box.d):
            x = pts[j][pos]
            ok &= (x >= q_lo[qi, j]) & (x <= q_hi[qi, j])
        out[start_q:stop_q] = np.bincount(qi[ok] - start_q, minlength=stop_q - start_q)
        start_q = stop_q
    return out


def true_answers(counts: np.ndarray, attributes: Sequence[Attribute], queries: pl.DataFrame
                 ) -> np.ndarray:
    """Exact answers of ``queries`` on a true frequency matrix (evaluation only)."""
    starts, stops = query_ranges(as_attributes(attributes), queries)
    return box_sums(prefix_sums(counts), starts, stops)


def selectivity(counts: np.ndarray, attributes: Sequence[Attribute], queries: pl.DataFrame
                ) -> np.ndarray:
    """Fraction of the rows each query selects, from the true frequency matrix (evaluation only)."""
    total = float(np.sum(counts))
    if total <= 0:
        raise ParameterError("selectivity needs a frequency matrix with at least one row")
    return true_answers(counts, attributes, queries) / total


def exact_range_count(counts: np.ndarray, attributes: Sequence[Attribute], **predicates: Any) -> float:
    """Exact answer of one ``range_count``-style query on a true frequency matrix (not private)."""
    starts, stops = predicate_ranges(as_attributes(attributes), predicates)
    return float(box_sums(prefix_sums(counts), starts[None], stops[None])[0])


__all__ = ["exact_range_count", "exact_range_counts", "selectivity", "true_answers"]
