"""The tree's share of epsilon in ``privtree_subgrid``: the table behind its default by dimension.

For every (dataset, epsilon, release) ``privtree_subgrid`` is released with ``tree_share`` 0.2,
0.3 and 0.35 (the rest of its options at their defaults) beside PrivTree with the library's
default tree (``privtree(..., levels=0)``: fanout ``2^d`` up to 3-D, 4 from 4-D),
all answering the spatial experiment's boxes (2,000 per size class, relative error with the 0.1 %
n floor, ``benchmarks/evaluate.py``).  Release ``r`` of every variant uses the same seed (common
random numbers: the differences between variants are not the spread of the seeds).

    python -m benchmarks.ablation_subgrid_tree_share [--data DIR] [--out docs/results] [--releases 8]

Writes ``subgrid_tree_share.{csv,md}``.  Needs the real data folder (see
:mod:`benchmarks.evaluation.data`).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from benchmarks.evaluation import ablation_cli
from benchmarks.evaluation import data as datasets
from benchmarks.evaluation import spatial_experiment as spatial
from benchmarks.evaluation.metrics import answers
from benchmarks.evaluation.progress import seeds
from polars_dp.evaluation.spatial_workloads import relative_errors
from polars_dp.kernels.subgrid import default_tree_share

SHARES = (0.2, 0.3, 0.35)
BASELINE = "PrivTree (default tree)"

#: Variant name -> its keywords (the baseline, PrivTree, takes none).
VARIANTS: dict[str, dict] = {BASELINE: {}, **{f"tree_share {s:g}": {"tree_share": s} for s in SHARES}}


def run(points: datasets.Points, *, epsilons: tuple[float, ...], releases: int, n_queries: int, seed: int
        ) -> pl.DataFrame:
    """One row per (epsilon, variant, class): the mean relative error over ``releases`` and its
    standard error."""
    sets = spatial.workloads(points, n_queries, seed)
    actual = {c: spatial.true_counts(points, b) for c, b in sets.items()}
    bounds = list(points.bounds.values())
    rows = []
    for eps in epsilons:
        for name, kw in VARIANTS.items():
            errs: dict[str, list[float]] = {c: [] for c in sets}
            for r in range(releases):
                s = seeds(seed, "tree_share", points.name, eps, r)
                common = {"bounds": bounds, "epsilon": eps, "seed": s}
                rel = (points.frame.dp.privtree(points.columns, levels=0, **common) if name == BASELINE
                       else points.frame.dp.privtree_subgrid(points.columns, **common, **kw))
                for c, boxes in sets.items():
                    errs[c].append(float(relative_errors(answers(rel, boxes), actual[c],
                                                         points.frame.height).mean()))
            for c, v in errs.items():
                rows.append({"dataset": points.name, "epsilon": eps, "variant": name, "query_class": c,
                             "relative_error": float(np.mean(v)), "std_error": spatial.standard_error(v),
                             "releases": releases})
    return pl.DataFrame(rows)


def table(results: pl.DataFrame, d: int) -> str:
    """Per (epsilon, class): each variant's mean (standard error) and each sub-grid's ratio to the
    PrivTree baseline; the default's column marked."""
    names = list(dict.fromkeys(results["variant"].to_list()))
    default = f"tree_share {default_tree_share(d):g}"
    order = {c: i for i, c in enumerate(spatial.QUERY_CLASSES)}
    head = [n + (" (default)" if n == default else "") for n in names]
    shares = [n for n in names if n != BASELINE]
    lines = ["| epsilon | query_class | " + " | ".join(head) + " | "
             + " | ".join(f"{n[len('tree_share '):]} / PrivTree" for n in shares) + " |",
             "|---:|---|" + "---:|" * (len(names) + len(shares))]
    keys = results.select("epsilon", "query_class").unique(maintain_order=True).sort(
        "epsilon", pl.col("query_class").replace_strict(order, return_dtype=pl.Int64))
    for eps, cls in keys.iter_rows():
        part = results.filter((pl.col("epsilon") == eps) & (pl.col("query_class") == cls))
        got = {v: (m, s) for v, m, s in part.select("variant", "relative_error", "std_error").iter_rows()}
        base = got[BASELINE][0]
        lines.append(f"| {eps} | {cls} | " + " | ".join(f"{got[n][0]:.3g} ({got[n][1]:.2g})" for n in names)
                     + " | " + " | ".join(f"{got[n][0] / base:.3f}" for n in shares) + " |")
    return "\n".join(lines)


def section(rows: pl.DataFrame, name: str, d: int) -> list[str]:
    return [f"\n## {name} ({d}-D)\n", table(rows, d), ""]


def main(argv: list[str] | None = None) -> int:
    return ablation_cli.main(
        argv, module="benchmarks.ablation_subgrid_tree_share", stem="subgrid_tree_share", doc=__doc__,
        title="privtree_subgrid: the tree's share of epsilon", releases=8, run=run, section=section,
        notes=("Mean relative error (standard error over the releases); the ratios divide by PrivTree's.",))


if __name__ == "__main__":
    raise SystemExit(main())
