"""Where PrivTree's range-count error comes from, and how much counted top levels can remove.

For every (dataset, epsilon, release) one seeded tree is grown; a seed fixes the split
decisions whatever ``levels`` is (the decisions spend the same budget and are drawn first), so
every row below answers the same boxes from the same leaves.  Rows, per size class (the
spatial experiment's boxes and relative error, ``benchmarks/evaluate.py``):

* ``levels=k``: releases with ``k`` counted top levels and the least-squares inference
  (``k = 0``: PrivTree as published);
* ``levels=k, finest``: the deepest of those releases answered from the finest nodes of its
  inferred tree, i.e. a leaf shallower than ``k`` split into its inferred level-``k`` cells
  (post-processing; the library's releases answer from the leaves);
* ``exact leaves`` (NOT PRIVATE): the same leaves with their exact counts, i.e. the error of
  the uniformity assumption inside partly covered leaves alone;
* ``exact level-K cells`` (NOT PRIVATE): the leaves shallower than level ``K`` (the level with
  ``2^12`` cells) split into their exact level-``K`` cells: the most that the counted level-``K``
  cells could remove from the uniformity error if they carried no noise.

    python -m benchmarks.ablation_privtree_levels [--data DIR] [--out docs/results] [--releases 4]

Writes ``privtree_levels_ablation.{csv,md}``.  Needs the real data folder (see
:mod:`benchmarks.evaluation.data`).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import polars as pl

import polars_dp as pdp
from benchmarks.evaluation import ablation_cli
from benchmarks.evaluation import data as datasets
from benchmarks.evaluation import spatial_experiment as spatial
from polars_dp.counting.points import finest_cells
from polars_dp.evaluation.spatial_workloads import relative_errors
from polars_dp.kernels.morton import MortonLayout, morton_codes
from polars_dp.kernels.tree_levels import level_tree, level_tree_sums
from polars_dp.plans.privtree_levels import LEVELS_SHARE

#: Counted top levels per dimension count (``levels=0`` is always included).
LEVELS = {2: (1, 2, 4, 6), 4: (1, 2, 3)}
#: ``log2`` of the cells of the oracle level ``K``.
ORACLE_BITS = 12


def exact_counts(codes: np.ndarray, cum: np.ndarray, starts: np.ndarray, depth: np.ndarray,
                 layout: MortonLayout) -> np.ndarray:
    """Exact points of nodes (first finest code, depth) from sorted finest codes (NOT PRIVATE)."""
    shift = (layout.total_bits - layout.split_bits * depth.astype(np.int64))
    a = np.searchsorted(codes, starts)
    b = np.searchsorted(codes, starts + (np.int64(1) << shift))
    return (cum[b] - cum[a]).astype(np.float64)


def refined(starts: np.ndarray, depth: np.ndarray, layout: MortonLayout, level: int
            ) -> tuple[np.ndarray, np.ndarray]:
    """The partition with every leaf shallower than ``level`` replaced by its level cells."""
    depth = depth.astype(np.int64)
    shallow = depth < level
    per = np.where(shallow, np.int64(1) << (layout.split_bits * np.maximum(level - depth, 0)), 1)
    owner = np.repeat(np.arange(starts.size), per)
    local = np.arange(owner.size) - np.repeat(np.cumsum(per) - per, per)
    cell = np.int64(1) << layout.shift(level)
    new_starts = starts[owner] + np.where(shallow[owner], local * cell, 0)
    new_depth = np.where(shallow[owner], level, depth[owner])
    return new_starts, new_depth


def answer(starts: np.ndarray, depth: np.ndarray, counts: np.ndarray, layout: MortonLayout, box: Any,
           queries: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, np.ndarray]:
    """Answers of every class from a partition's counts under uniformity (pure post-processing)."""
    tree = level_tree(starts, depth, layout, 0)
    return {cls: level_tree_sums(tree, starts, counts, box, lo, hi)[0] for cls, (lo, hi) in queries.items()}


def finest_nodes(rel: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """First codes, depths and inferred counts of the childless nodes of a release's inferred
    tree (PrivTree leaves at or below level ``k``, level-``k`` cells inside shallower leaves)."""
    tree, xhat = rel.levels.tree, rel.levels.estimate.xhat
    lay = tree.layout
    starts, depths, counts = [], [], []
    for lev, pre in enumerate(tree.prefixes):
        has = np.zeros(pre.size, dtype=bool)
        if lev + 1 < len(tree.prefixes):
            has[tree.parent[lev + 1]] = True
        starts.append(pre[~has] << lay.shift(lev))
        depths.append(np.full(int((~has).sum()), lev, dtype=np.int64))
        counts.append(xhat[lev][~has])
    s, dep, c = np.concatenate(starts), np.concatenate(depths), np.concatenate(counts)
    order = np.argsort(s, kind="stable")
    return s[order], dep[order], c[order]


def run(points: datasets.Points, *, epsilons: tuple[float, ...], releases: int, n_queries: int, seed: int
        ) -> pl.DataFrame:
    """One row per (epsilon, size class, variant): mean relative error over boxes and releases."""
    sets = spatial.workloads(points, n_queries, seed)
    actual = {cls: spatial.true_counts(points, boxes) for cls, boxes in sets.items()}
    queries = {cls: (np.column_stack([b[f"{c}_lo"].to_numpy() for c in points.columns]).astype(np.float64),
                     np.column_stack([b[f"{c}_hi"].to_numpy() for c in points.columns]).astype(np.float64))
               for cls, b in sets.items()}
    n = points.frame.height
    bounds = list(points.bounds.values())
    levels = LEVELS.get(len(points.columns), (1, 2))
    acc: dict[tuple[float, str, str], list[float]] = {}

    def record(eps: float, name: str, got: dict[str, np.ndarray]) -> None:
        for cls in sets:
            err = relative_errors(got[cls], actual[cls], n).mean()
            acc.setdefault((eps, cls, name), []).append(float(err))

    codes = cum = None
    for eps in epsilons:
        for r in range(releases):
            rseed = seed + 1000 * r + int(eps * 1000)
            for k in (0, *levels):
                rel = pdp.privtree(points.frame, points.columns, bounds=bounds, epsilon=eps, seed=rseed,
                                   levels=k)
                record(eps, f"levels={k}", {cls: rel.range_count_array(boxes) for cls, boxes in sets.items()})
            layout = MortonLayout(rel.box.d, rel.layout["bits"], rel.layout["split_bits"])
            s, dep, c = finest_nodes(rel)  # rel: the deepest counted levels
            record(eps, f"levels={levels[-1]}, finest", answer(s, dep, c, layout, rel.box, queries))
            if codes is None:
                raw, weights = finest_cells(points.frame, rel.box, layout.bits,
                                            functools.partial(morton_codes, bits=layout.bits))
                codes = np.asarray(raw, dtype=np.int64)
                ones = np.ones(codes.size, dtype=np.int64) if weights is None else np.asarray(weights)
                cum = np.r_[np.int64(0), np.cumsum(ones, dtype=np.int64)]
            assert cum is not None
            starts, depth = np.asarray(rel.codes, dtype=np.int64), np.asarray(rel.depth, dtype=np.int64)
            oracle_level = min(max(1, ORACLE_BITS // layout.split_bits), layout.max_depth)
            variants = {"exact leaves": (starts, depth),
                        f"exact level-{oracle_level} cells": refined(starts, depth, layout, oracle_level)}
            for name, (s, dep) in variants.items():
                record(eps, name, answer(s, dep, exact_counts(codes, cum, s, dep, layout), layout, rel.box,
                                         queries))
    rows = [{"dataset": points.name, "epsilon": eps, "query_class": cls, "variant": name,
             "relative_error": float(np.mean(v))} for (eps, cls, name), v in acc.items()]
    return pl.DataFrame(rows)


def table(results: pl.DataFrame) -> str:
    """A markdown table: one row per (epsilon, class), one column per variant."""
    variants = list(dict.fromkeys(results["variant"].to_list()))
    wide = results.pivot("variant", index=["query_class", "epsilon"], values="relative_error")
    order = {c: i for i, c in enumerate(spatial.QUERY_CLASSES)}
    wide = wide.sort(["epsilon", pl.col("query_class").replace_strict(order, return_dtype=pl.Int64)])
    lines = ["| epsilon | query_class | " + " | ".join(variants) + " |",
             "|---:|---|" + "---:|" * len(variants)]
    for row in wide.iter_rows(named=True):
        lines.append(f"| {row['epsilon']} | {row['query_class']} | "
                     + " | ".join(f"{row[v]:.3g}" for v in variants) + " |")
    return "\n".join(lines)


def ratios(results: pl.DataFrame) -> str:
    """Per (epsilon, class): each variant's error divided by ``levels=0``'s, and the best counted
    ``levels=k`` (``k >= 1``, answered from the leaves as the library does) with its ratio."""
    wide = results.pivot("variant", index=["query_class", "epsilon"], values="relative_error")
    counted = [c for c in wide.columns if c.startswith("levels=") and c != "levels=0" and "," not in c]
    exact = [c for c in wide.columns if c.startswith("exact")]
    order = {c: i for i, c in enumerate(spatial.QUERY_CLASSES)}
    wide = wide.sort(["epsilon", pl.col("query_class").replace_strict(order, return_dtype=pl.Int64)])
    lines = ["| epsilon | query_class | " + " | ".join(f"{c} / levels=0" for c in exact)
             + " | best levels=k | its / levels=0 |", "|---:|---|" + "---:|" * (len(exact) + 2)]
    for row in wide.iter_rows(named=True):
        best = min(counted, key=lambda c: row[c])
        lines.append(f"| {row['epsilon']} | {row['query_class']} | "
                     + " | ".join(f"{row[c] / row['levels=0']:.2f}" for c in exact)
                     + f" | {best} | {row[best] / row['levels=0']:.3f} |")
    return "\n".join(lines)


READING = f"""How to read it: ``exact leaves / levels=0`` is the share of PrivTree's error that no
noise reduction can remove (the leaves' uniformity error); the rest is noise.  Counted levels
can only lower the noise part, and they pay for it with the leaves' budget (the leaves get
``{1 - LEVELS_SHARE}`` of the count budget); ``exact level-K cells`` bounds what splitting the shallow
leaves could gain if those cells were noise-free.  ``levels=k, finest`` shows what the noisy
cells give instead: on a sparse leaf their noise exceeds the uniformity error they remove."""


def section(rows: pl.DataFrame, name: str, d: int) -> list[str]:
    return [f"\n## {name}\n", "Mean relative error:\n", table(rows), "",
            "Ratios to PrivTree as published:\n", ratios(rows), ""]


def main(argv: list[str] | None = None) -> int:
    return ablation_cli.main(
        argv, module="benchmarks.ablation_privtree_levels", stem="privtree_levels_ablation", doc=__doc__,
        title="PrivTree with counted top levels: where the error comes from", releases=4, run=run,
        section=section, notes=(READING,))


if __name__ == "__main__":
    raise SystemExit(main())
