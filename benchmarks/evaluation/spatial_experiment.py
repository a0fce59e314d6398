"""PrivTree paper, Sec. 6.1 (Zhang, Xiao, Xie, SIGMOD 2016): relative error of random range-count boxes.

Three query classes by volume (a fraction of the public box): small [0.01%, 0.1%), medium
[0.1%, 1%), large [1%, 10%).  Each mechanism releases the points once per (epsilon, repeat)
and answers every class; the error is ``|x - act| / max(act, 0.1% n)`` averaged over the
queries.  Also recorded: the release's size (leaves or cells) and its build time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import polars as pl

import polars_dp  # noqa: F401  (registers df.dp)
from polars_dp.evaluation.references import exact_range_counts
from polars_dp.evaluation.spatial_workloads import random_boxes, relative_errors

from .data import Points
from .metrics import answers
from .progress import progress, seeds

EPSILONS = (0.05, 0.1, 0.2, 0.4, 0.8, 1.6)
#: The paper's size classes (:data:`polars_dp.evaluation.spatial_workloads.SIZE_CLASSES`).
QUERY_CLASSES = ("small", "medium", "large")
Mechanism = Callable[[Points, float, Any], Any]


def mechanisms() -> dict[str, Mechanism]:
    """PrivTree+levels (``levels=None``: PrivTree with counted top levels and least-squares
    inference), PrivTree as published (``levels=0``, the library's default), UG, AG and Privelet*
    (Privelet on the library's default fixed grid, 2^(16 // d) cells per dimension), all with
    their defaults otherwise, under add/remove-one neighbours."""
    def tree_levels(t: Points, eps: float, seed: Any) -> Any:
        return t.frame.dp.privtree(t.columns, bounds=list(t.bounds.values()), epsilon=eps, seed=seed,
                                   levels=None)

    def tree(t: Points, eps: float, seed: Any) -> Any:
        return t.frame.dp.privtree(t.columns, bounds=list(t.bounds.values()), epsilon=eps, seed=seed,
                                   levels=0)

    def ug(t: Points, eps: float, seed: Any) -> Any:
        return t.frame.dp.uniform_grid(t.columns, bounds=list(t.bounds.values()), epsilon=eps,
                                       seed=seed)

    def ag(t: Points, eps: float, seed: Any) -> Any:
        return t.frame.dp.adaptive_grid(t.columns, bounds=list(t.bounds.values()), epsilon=eps,
                                        seed=seed)

    def privelet_star(t: Points, eps: float, seed: Any) -> Any:
        return t.frame.dp.privelet_grid(t.columns, bounds=list(t.bounds.values()), epsilon=eps,
                                        seed=seed)

    return {"PrivTree+levels": tree_levels, "PrivTree": tree, "UG": ug, "AG": ag, "Privelet*": privelet_star}


def workloads(points: Points, n_queries: int, seed: int) -> dict[str, pl.DataFrame]:
    """One set of random square boxes per class (frames with ``<col>_lo`` / ``<col>_hi``)."""
    return {name: random_boxes(points.columns, list(points.bounds.values()), n_queries, volume=name,
                               seed=seeds(seed, "boxes", points.name, name))
            for name in QUERY_CLASSES}


def true_counts(points: Points, boxes: pl.DataFrame) -> np.ndarray:
    """Exact counts (evaluation only).  The points are scanned sorted by their most spread
    column (largest number of distinct values), which keeps each box's scan short."""
    spread = points.frame.select(pl.all().n_unique()).row(0)
    order = sorted(points.columns, key=lambda c: -spread[points.columns.index(c)])
    return exact_range_counts(points.frame, order, [points.bounds[c] for c in order], boxes)


def size(release: Any) -> int:
    """Leaves of a tree release, cells of a grid release."""
    return int(getattr(release, "n_leaves", None) or release.n_cells)


def run(points: Points, *, n_queries: int, epsilons: Sequence[float] = EPSILONS, repeats: int = 1,
        seed: int = 0, mechanisms_: dict[str, Mechanism] | None = None,
        show_progress: bool = True) -> pl.DataFrame:
    """One row per (mechanism, epsilon, query class): mean relative error, size, build time."""
    chosen = mechanisms_ or mechanisms()
    sets = workloads(points, n_queries, seed)
    actual = {name: true_counts(points, boxes) for name, boxes in sets.items()}
    rows = []
    cells = [(name, eps, r) for eps in epsilons for name in chosen for r in range(repeats)]
    acc: dict[tuple[str, float, str], list[float]] = {}
    built: dict[tuple[str, float], list[tuple[float, int]]] = {}
    for name, eps, r in progress(cells, enabled=show_progress, desc=f"spatial/{points.name}"):
        t0 = time.perf_counter()
        release = chosen[name](points, eps, seeds(seed, "spatial", points.name, name, eps, r))
        built.setdefault((name, eps), []).append((time.perf_counter() - t0, size(release)))
        for cls, boxes in sets.items():
            errors = relative_errors(answers(release, boxes), actual[cls], points.frame.height)
            acc.setdefault((name, eps, cls), []).append(float(errors.mean()))
    for (name, eps, cls), errors in acc.items():
        seconds, sizes = zip(*built[(name, eps)], strict=True)
        rows.append({"dataset": points.name, "n": points.frame.height, "epsilon": eps,
                     "mechanism": name, "query_class": cls, "relative_error": float(np.mean(errors)),
                     "size": float(np.mean(sizes)), "seconds": float(np.mean(seconds))})
    return pl.DataFrame(rows)
