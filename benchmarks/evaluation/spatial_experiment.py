"""PrivTree paper, Sec. 6.1 (Zhang, Xiao, Xie, SIGMOD 2016): relative error of random range-count boxes.

Three query classes by volume (a fraction of the public box): small [0.01%, 0.1%), medium
[0.1%, 1%), large [1%, 10%).  Each mechanism releases the points once per (epsilon, repeat)
and answers every class; the error is ``|x - act| / max(act, 0.1% n)`` averaged over the
queries.  Also recorded: the release's size (leaves or cells), its build time, and the standard
error of the mean over the releases (the spread of the per-release means; the boxes are the same
for every release, so it is the error of the release noise, conditional on the workload).

:func:`ratio_table` compares ``privtree_subgrid`` with the better of PrivTree and AG per cell
(issue 41's target), with a z-score of the difference.
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
#: The releases the ratio table compares (run with the full number of repeats); every other one
#: is a secondary reference (``secondary_repeats`` of :func:`run`).
SUBGRID = "privtree_subgrid"
BASELINES = ("PrivTree", "AG")
FANOUT4 = "PrivTree fanout 4"
PRIMARY = (*BASELINES, SUBGRID, FANOUT4)
#: A ratio within this fraction above 1 counts as a tie (issue 41: at most 2 of 36 cells).
TIE = 0.03


def mechanisms(d: int = 2) -> dict[str, Mechanism]:
    """PrivTree+levels (``levels=None``: PrivTree with counted top levels and least-squares
    inference), PrivTree as published (``levels=0``, the library's default), UG, AG, Privelet*
    (Privelet on the library's default fixed grid, 2^(16 // d) cells per dimension) and
    ``privtree_subgrid`` (PrivTree leaves with noisy sub-grids, uniform density inside a sub-cell),
    all with their defaults otherwise, under add/remove-one neighbours.  "PrivTree" is the
    paper's tree, fanout ``2^d`` (the library's default up to 3 dimensions); in more than 2
    dimensions also PrivTree with fanout 4 ("PrivTree fanout 4", the library's default from 4
    dimensions, :func:`polars_dp.plans.spatial.privtree_fanout`; in 2-D it is the same tree)."""
    def tree_levels(t: Points, eps: float, seed: Any) -> Any:
        return t.frame.dp.privtree(t.columns, bounds=list(t.bounds.values()), epsilon=eps, seed=seed,
                                   levels=None)

    def tree(t: Points, eps: float, seed: Any) -> Any:
        return t.frame.dp.privtree(t.columns, bounds=list(t.bounds.values()), epsilon=eps, seed=seed,
                                   levels=0, fanout=2 ** len(t.columns))

    def ug(t: Points, eps: float, seed: Any) -> Any:
        return t.frame.dp.uniform_grid(t.columns, bounds=list(t.bounds.values()), epsilon=eps,
                                       seed=seed)

    def ag(t: Points, eps: float, seed: Any) -> Any:
        return t.frame.dp.adaptive_grid(t.columns, bounds=list(t.bounds.values()), epsilon=eps,
                                        seed=seed)

    def privelet_star(t: Points, eps: float, seed: Any) -> Any:
        return t.frame.dp.privelet_grid(t.columns, bounds=list(t.bounds.values()), epsilon=eps,
                                        seed=seed)

    def subgrid(t: Points, eps: float, seed: Any) -> Any:
        return t.frame.dp.privtree_subgrid(t.columns, bounds=list(t.bounds.values()), epsilon=eps,
                                           seed=seed)

    def tree_fanout4(t: Points, eps: float, seed: Any) -> Any:
        return t.frame.dp.privtree(t.columns, bounds=list(t.bounds.values()), epsilon=eps, seed=seed,
                                   levels=0, fanout=4)

    chosen: dict[str, Mechanism] = {"PrivTree+levels": tree_levels, "PrivTree": tree, "UG": ug, "AG": ag,
                                    "Privelet*": privelet_star, SUBGRID: subgrid}
    if d > 2:
        chosen[FANOUT4] = tree_fanout4
    return chosen


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
        secondary_repeats: int | None = None, show_progress: bool = True) -> pl.DataFrame:
    """One row per (mechanism, epsilon, query class): mean relative error over the releases, its
    standard error (``std_error``, NaN with one release), the number of releases, size, build time.

    ``repeats`` releases per (mechanism, epsilon) of the :data:`PRIMARY` mechanisms,
    ``secondary_repeats`` (default: ``repeats``; 0 skips them) of the others."""
    chosen = mechanisms_ or mechanisms(len(points.columns))
    sets = workloads(points, n_queries, seed)
    actual = {name: true_counts(points, boxes) for name, boxes in sets.items()}
    rows = []
    others = repeats if secondary_repeats is None else secondary_repeats
    count = {name: repeats if name in PRIMARY else others for name in chosen}
    cells = [(name, eps, r) for eps in epsilons for name in chosen for r in range(count[name])]
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
                     "std_error": standard_error(errors), "releases": len(errors),
                     "size": float(np.mean(sizes)), "seconds": float(np.mean(seconds))})
    return pl.DataFrame(rows)


def standard_error(values: Sequence[float]) -> float:
    """Standard error of the mean, ``s / sqrt(k)`` with the unbiased ``s`` (NaN for one value)."""
    if len(values) < 2:
        return float("nan")
    return float(np.std(values, ddof=1) / np.sqrt(len(values)))


def ratio_table(results: pl.DataFrame, baselines: Sequence[str] = BASELINES) -> pl.DataFrame:
    """Per (dataset, epsilon, query class): ``privtree_subgrid``'s mean relative error over
    the better of ``baselines`` (``best``; default PrivTree and AG), and the z-score of the
    difference of the two means, ``(m_sub - m_best) / sqrt(se_sub^2 + se_best^2)`` (negative:
    privtree_subgrid is better).  Rows only where privtree_subgrid and every baseline were run."""
    keys = ["dataset", "epsilon", "query_class"]
    sub = results.filter(pl.col("mechanism") == SUBGRID).select(
        *keys, pl.col("relative_error").alias("subgrid"), pl.col("std_error").alias("se_sub"),
        pl.col("releases").alias("releases_sub"))
    base = (results.filter(pl.col("mechanism").is_in(list(baselines)))
            .sort("relative_error").group_by(keys, maintain_order=True).agg(
                pl.len().alias("baselines"), pl.col("mechanism").first().alias("best"),
                pl.col("relative_error").first().alias("best_error"),
                pl.col("std_error").first().alias("se_best"),
                pl.col("releases").first().alias("releases_best"))
            .filter(pl.col("baselines") == len(baselines)))
    order = {c: i for i, c in enumerate(QUERY_CLASSES)}
    datasets = {name: i for i, name in enumerate(dict.fromkeys(results["dataset"].to_list()))}
    return (sub.join(base, on=keys, how="inner")
            .with_columns((pl.col("subgrid") / pl.col("best_error")).alias("ratio"),
                          ((pl.col("subgrid") - pl.col("best_error"))
                           / (pl.col("se_sub") ** 2 + pl.col("se_best") ** 2).sqrt()).alias("z"),
                          pl.min_horizontal("releases_sub", "releases_best").alias("releases"),
                          pl.col("dataset").replace_strict(datasets).alias("_dataset"),
                          pl.col("query_class").replace_strict(order).alias("_order"))
            .sort("_dataset", "epsilon", "_order", maintain_order=True)
            .select(*keys, "subgrid", "best", "best_error", "ratio", "z", "releases"))


def ratio_verdict(table: pl.DataFrame, tie: float = TIE) -> dict[str, int]:
    """Cells below 1 (``below``), within ``tie`` above it (``ties``) and above that (``above``)."""
    ratio = table["ratio"]
    below = int((ratio < 1).sum())
    ties = int(((ratio >= 1) & (ratio <= 1 + tie)).sum())
    return {"cells": table.height, "below": below, "ties": ties, "above": table.height - below - ties}
