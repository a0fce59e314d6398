"""Usable outputs: what non-negativity does to range-count error, and how close synthetic rows
come to the release they were drawn from.

    python benchmarks/evaluation/outputs_experiment.py            # writes docs/results/outputs.*
    python benchmarks/evaluation/outputs_experiment.py --quick    # fewer queries and repeats

Two experiments, each on real data (skipped cleanly when ``../shared/data`` is absent):

* GSS wages (grid releases, Basic and Privelet, replace-one neighbours): the Privelet
  experiment's attributes with income in 100 bins of 5,000 USD (72 x 2 x 538 x 100 = 7.7 M
  cells for about 37,000 rows: a sparse matrix, where noise pushes most cells below zero).
  Random range-count queries (:func:`polars_dp.evaluation.workloads.random_workload`) ranked
  by coverage (fraction of the cells) into quintiles; mean absolute error of the raw release,
  ``postprocess("nonnegative")`` and ``postprocess("nonnegative", "integer")``.
* GeoNames (tree releases, PrivTree and UG, add/remove-one neighbours): small / medium /
  large random boxes (:func:`polars_dp.evaluation.spatial.random_boxes`); raw vs nonnegative.

Synthetic rows: ``n = round(total)`` rows sampled from the non-negative release answer the
same queries exactly; their distance to the release's own answers is compared with the
multinomial sampling deviation the math predicts, ``sqrt(2/pi) sqrt(n p (1 - p))`` (the mean
absolute deviation in the normal approximation) with ``p`` the release's answer divided by
``n`` (mean over the queries of each group).

Exact answers read the private data: this is an evaluation, not a release.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: import this checkout's packages
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np
import polars as pl

import polars_dp as pdp
from benchmarks.evaluation import data, report
from benchmarks.evaluation.metrics import group_means, quintile_index
from benchmarks.evaluation.progress import seeds
from polars_dp.counting.frequency import frequency_matrix
from polars_dp.evaluation.references import exact_range_counts, true_answers
from polars_dp.evaluation.spatial_workloads import random_boxes, relative_errors
from polars_dp.evaluation.workloads import coverage, random_workload

#: GSS income for this experiment: 100 bins of 5,000 USD over [0, 500,000) (larger incomes clamped).
INCOME = (0, 499_999, 5_000)
GRID_EPSILONS = (0.1, 1.0)
TREE_EPSILONS = (0.1, 0.4, 1.6)
VARIANTS = {"raw": (), "nonnegative": ("nonnegative",), "nonnegative+integer": ("nonnegative", "integer")}


def gss_table(folder: Path) -> data.Table:
    """The Privelet experiment's GSS table with income in 100 public bins."""
    table = data.gss_wages(folder)
    lo, hi, width = INCOME
    attributes = [*table.attributes[:3], pdp.Ordinal("realrinc", lo, hi, width=width)]
    return data.Table("gss", table.frame, attributes, table.options,
                      "GSS wages: age 18..89 x gender x occupation (538 occ10 codes under 11 groups) x "
                      f"income in 100 bins of {width:,} USD-1986 (7.7 M cells)")


def sampling_deviation(answers: np.ndarray, n: int) -> np.ndarray:
    """Expected |count - mean| of a multinomial count with mean ``answers`` out of ``n`` rows, in
    the normal approximation: ``sqrt(2 / pi) * sqrt(n p (1 - p))``."""
    p = np.clip(answers / max(n, 1), 0.0, 1.0)
    return np.sqrt(2.0 / np.pi) * np.sqrt(n * p * (1 - p))


def run_grid(table: data.Table, n_queries: int, repeats: int, seed: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Error per coverage quintile for every (mechanism, epsilon, variant), and the synthetic-row
    comparison for the non-negative releases."""
    attrs = table.attributes
    truth_matrix = frequency_matrix(table.frame, attrs, **table.options)
    n_rows = int(truth_matrix.sum())
    queries = random_workload(attrs, n_queries, seed=seeds(seed, "outputs", "workload"))
    truth = true_answers(truth_matrix, attrs, queries)
    group = quintile_index(coverage(attrs, queries))
    cov = group_means(group, coverage(attrs, queries), 5)
    errors, synthetic = [], []
    for mechanism in ("basic", "privelet"):
        for eps in GRID_EPSILONS:
            for rep in range(repeats):
                release = getattr(pdp, mechanism)(table.frame, attrs, epsilon=eps,
                                                  seed=seeds(seed, "outputs", mechanism, eps, rep),
                                                  **table.options)
                answers = {}
                for variant, steps in VARIANTS.items():
                    out = release.postprocess(*steps) if steps else release
                    answers[variant] = out.range_counts(queries)["count"].to_numpy()
                    err = np.abs(answers[variant] - truth)
                    errors.append(pl.DataFrame({
                        "dataset": table.name, "mechanism": release.mechanism, "epsilon": eps, "repeat": rep,
                        "variant": variant, "quintile": np.arange(1, 6), "coverage": cov,
                        "abs_error": group_means(group, err, 5),
                        "square_error": group_means(group, err * err, 5),
                    }))
                nonneg = release.postprocess("nonnegative")
                n = round(float(nonneg.counts.sum()))
                rows = nonneg.sample(n, seed=seeds(seed, "outputs", "sample", mechanism, eps, rep))
                syn = true_answers(frequency_matrix(rows, attrs), attrs, queries)
                own = answers["nonnegative"]
                synthetic.append(pl.DataFrame({
                    "dataset": table.name, "mechanism": release.mechanism, "epsilon": eps, "repeat": rep,
                    "group": [f"q{q}" for q in range(1, 6)], "n_synthetic": n, "n_true": n_rows,
                    "synthetic_vs_release": group_means(group, np.abs(syn - own), 5),
                    "sampling_mad": group_means(group, sampling_deviation(own, n), 5),
                    "release_vs_truth": group_means(group, np.abs(own - truth), 5),
                    "synthetic_vs_truth": group_means(group, np.abs(syn - truth), 5),
                }))
    return pl.concat(errors), pl.concat(synthetic)


def run_tree(points: data.Points, n_queries: int, repeats: int, seed: int
             ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Error per box class (raw vs nonnegative) and the synthetic-row comparison."""
    bounds = list(points.bounds.values())
    classes = ("small", "medium", "large")
    boxes = {c: random_boxes(points.columns, bounds, n_queries, volume=c,
                             seed=seeds(seed, "outputs", "boxes", c)) for c in classes}
    truth = {c: exact_range_counts(points.frame, points.columns, bounds, b).astype(np.float64)
             for c, b in boxes.items()}
    n_rows = points.frame.height
    errors, synthetic = [], []
    for mechanism in ("privtree", "uniform_grid"):
        for eps in TREE_EPSILONS:
            for rep in range(repeats):
                release = getattr(pdp, mechanism)(points.frame, points.columns, bounds=bounds, epsilon=eps,
                                                  seed=seeds(seed, "outputs", mechanism, eps, rep))
                nonneg = release.postprocess("nonnegative")
                n = round(float(nonneg.count.sum()))
                rows = nonneg.sample(n, seed=seeds(seed, "outputs", "sample", mechanism, eps, rep))
                for c in classes:
                    own = {}
                    for variant, out in (("raw", release), ("nonnegative", nonneg)):
                        own[variant] = out.range_count_array(boxes[c])
                        err = np.abs(own[variant] - truth[c])
                        errors.append({"dataset": points.name, "mechanism": release.mechanism,
                                       "epsilon": eps, "repeat": rep, "variant": variant, "query_class": c,
                                       "abs_error": float(err.mean()),
                                       "relative_error": float(relative_errors(own[variant], truth[c],
                                                                               n_rows).mean())})
                    syn = exact_range_counts(rows, points.columns, bounds, boxes[c]).astype(np.float64)
                    synthetic.append({
                        "dataset": points.name, "mechanism": release.mechanism, "epsilon": eps, "repeat": rep,
                        "group": c, "n_synthetic": n, "n_true": n_rows,
                        "synthetic_vs_release": float(np.abs(syn - own["nonnegative"]).mean()),
                        "sampling_mad": float(sampling_deviation(own["nonnegative"], n).mean()),
                        "release_vs_truth": float(np.abs(own["nonnegative"] - truth[c]).mean()),
                        "synthetic_vs_truth": float(np.abs(syn - truth[c]).mean()),
                    })
    return pl.DataFrame(errors), pl.DataFrame(synthetic)


def ratios(errors: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """Mean error of each variant (over repeats) divided by the raw release's."""
    mean = errors.group_by([*by, "variant"], maintain_order=True).agg(pl.col("abs_error").mean())
    raw = mean.filter(pl.col("variant") == "raw").select(*by, pl.col("abs_error").alias("raw"))
    return (mean.filter(pl.col("variant") != "raw").join(raw, on=by)
            .with_columns((pl.col("abs_error") / pl.col("raw")).alias("ratio")))


def plot(grid_ratio: pl.DataFrame | None, tree_ratio: pl.DataFrame | None, path: Path) -> Path:
    """Error ratio (nonnegative / raw) against query size, one line per (mechanism, epsilon)."""
    plt = report._pyplot()
    panels = [(n, r) for n, r in (("GSS wages", grid_ratio), ("GeoNames", tree_ratio)) if r is not None]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 3.6), squeeze=False)
    for ax, (name, frame) in zip(axes[0], panels, strict=True):
        part = frame.filter(pl.col("variant") == "nonnegative")
        x = "quintile" if "quintile" in part.columns else "query_class"
        for (mech, eps), line in part.group_by(["mechanism", "epsilon"], maintain_order=True):
            ax.plot(line[x].cast(pl.String).to_list(), line["ratio"].to_numpy(), marker="o",
                    label=f"{mech}, ε = {eps:g}")
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set(yscale="log", title=name,
               xlabel="coverage quintile (1 = smallest)" if x == "quintile" else "box size class")
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("abs. error: nonnegative / raw")
    fig.suptitle("Non-negative projection: error relative to the raw release (< 1: better)", fontsize=10)
    fig.savefig(path)
    plt.close(fig)
    return path


def write_report(out: Path, grid: tuple | None, tree: tuple | None, seconds: float, args: Any) -> None:
    parts = ["# Usable outputs: non-negative counts and synthetic rows", "",
             "Generated by `python benchmarks/evaluation/outputs_experiment.py"
             f"{' --quick' if args.quick else ''}`"
             f" (seed {args.seed}, {args.queries:,} queries per group, {args.repeats} release(s) per "
             f"(mechanism, ε)) in {seconds:,.0f} s on a shared 2-core machine.", "",
             "- Errors are mean absolute errors against the exact answers, averaged over the releases.",
             "- `nonnegative`: `release.postprocess(\"nonnegative\")`, the least-squares projection onto "
             "non-negative counts with the same total; `nonnegative+integer` then rounds to integers "
             "keeping the rounded total (grid releases).",
             "- Synthetic rows: `round(total)` rows from `release.postprocess(\"nonnegative\").sample(...)`; "
             "`synthetic_vs_release` is the mean |synthetic count - release answer|, `sampling_mad` the "
             "mean absolute deviation that multinomial sampling alone predicts, sqrt(2/pi) sqrt(n p (1 - p)) "
             "with p = answer / n (normal approximation): synthetic_vs_release close to sampling_mad "
             "means the rows reproduce the release up to sampling noise.",
             "", "![ratio](outputs_nonnegative.png)", "",
             "How to read it: the projection sets every count below a threshold t to 0 and subtracts t "
             "from the others, keeping the total. A small query over a sparse region loses the noise "
             "of its (mostly empty) cells, so its error falls, often by orders of magnitude on a sparse "
             "grid. A large query covering many positive cells loses t per cell: the mass the negative "
             "cells gave up moves to wherever positive noise survived, and the error of large queries can "
             "grow. Use the raw release (or its exact `std`) for large aggregates and the non-negative "
             "one for small cells and for synthetic data.", ""]
    if grid is not None:
        errors, syn = grid
        table = ratios(errors, ["mechanism", "epsilon", "quintile"])
        wide = table.pivot(on="variant", index=["mechanism", "epsilon", "quintile"], values="ratio")
        raw = table.filter(pl.col("variant") == "nonnegative").select("mechanism", "epsilon", "quintile",
                                                                       pl.col("raw").alias("raw error"))
        cov = errors.group_by("quintile").agg(pl.col("coverage").first()).sort("quintile")
        parts += [f"## GSS wages ({syn['n_true'][0]:,} rows, 7.7 M cells; grid releases, replace-one)", "",
                  "Mean coverage (fraction of cells) per quintile: "
                  + ", ".join(f"q{q}: {report.fmt(c)}" for q, c in cov.iter_rows()) + ".", "",
                  "Mean absolute error of the raw release, and each post-processing's error divided by it "
                  "(< 1: post-processing helps):", "",
                  report.markdown_table(raw.join(wide, on=["mechanism", "epsilon", "quintile"])), "",
                  "Synthetic rows vs the release (per coverage quintile):", "",
                  report.markdown_table(mean_synthetic(syn)), ""]
    if tree is not None:
        errors, syn = tree
        table = ratios(errors, ["mechanism", "epsilon", "query_class"])
        rel = (errors.group_by(["mechanism", "epsilon", "query_class", "variant"], maintain_order=True)
               .agg(pl.col("relative_error").mean())
               .pivot(on="variant", index=["mechanism", "epsilon", "query_class"], values="relative_error"))
        parts += [f"## GeoNames ({syn['n_true'][0]:,} points; tree releases, add/remove-one)", "",
                  "Mean absolute error of the raw release and the nonnegative/raw ratio; relative error "
                  "(smoothing 0.1% of n) of both:", "",
                  report.markdown_table(
                      table.select("mechanism", "epsilon", "query_class", pl.col("raw").alias("raw error"),
                                   "ratio")
                      .join(rel.rename({"raw": "rel. error raw", "nonnegative": "rel. error nonneg"}),
                            on=["mechanism", "epsilon", "query_class"])), "",
                  "Synthetic points vs the release (per box class):", "",
                  report.markdown_table(mean_synthetic(syn)), ""]
    (out / "outputs.md").write_text("\n".join(parts).rstrip() + "\n")
    print(f"  wrote {out / 'outputs.md'}")


def mean_synthetic(syn: pl.DataFrame) -> pl.DataFrame:
    cols = ["synthetic_vs_release", "sampling_mad", "release_vs_truth", "synthetic_vs_truth"]
    return (syn.group_by(["mechanism", "epsilon", "group"], maintain_order=True)
            .agg(pl.col("n_synthetic").mean().round(0).cast(pl.Int64), *[pl.col(c).mean() for c in cols]))


def _uniform(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """Frames stacked by column name (missing columns null; integer columns as Int64)."""
    return pl.concat([f.with_columns(pl.col(pl.Int32).cast(pl.Int64)) for f in frames],
                     how="diagonal_relaxed")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer queries and one release each")
    parser.add_argument("--out", default="docs/results")
    parser.add_argument("--data", default=None, help=f"real-data folder (default ${data.DATA_ENV} or "
                                                      "<repo>/../shared/data)")
    parser.add_argument("--seed", type=int, default=20100901)
    args = parser.parse_args(argv)
    args.queries, args.repeats = (1_000, 1) if args.quick else (4_000, 2)
    folder = data.data_dir(args.data)
    if folder is None:
        print("Real datasets not found (looked at --data, $POLARS_DP_DATA, <repo>/../shared/data): "
              "skipping the outputs experiment.")
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    print("  outputs on gss ...", flush=True)
    grid = run_grid(gss_table(folder), args.queries, args.repeats, args.seed)
    print("  outputs on geonames ...", flush=True)
    tree = run_tree(data.geonames(folder), args.queries, args.repeats, args.seed)
    long = [grid[0].with_columns(pl.col("quintile").cast(pl.String).alias("group"))
            .drop("quintile", "coverage"),
            tree[0].rename({"query_class": "group"})]
    _uniform(long).write_csv(out / "outputs.csv")
    _uniform([grid[1], tree[1]]).write_csv(out / "outputs_synthetic.csv")
    plot(ratios(grid[0], ["mechanism", "epsilon", "quintile"]),
         ratios(tree[0], ["mechanism", "epsilon", "query_class"]), out / "outputs_nonnegative.png")
    write_report(out, grid, tree, time.perf_counter() - t0, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
