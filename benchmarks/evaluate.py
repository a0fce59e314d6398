"""Rerun the utility experiments of the Privelet and PrivTree papers; write tables and plots.

    python benchmarks/evaluate.py               # full run (make evaluate)
    python benchmarks/evaluate.py --quick       # reduced sizes, < 10 minutes (make evaluate-quick)
    python benchmarks/evaluate.py --only spatial --out docs/results --data ../shared/data

Seeded and repeatable (``--seed``).  Real datasets are read from ``<repo>/../shared/data``
(or ``$POLARS_DP_DATA`` / ``--data``); without them the real-data experiments are skipped
and only the synthetic census experiment runs.  Writes ``<out>/*.md`` and ``<out>/*.png``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: import this checkout's packages
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import polars as pl

from benchmarks.evaluation import data, report
from benchmarks.evaluation import privelet_experiment as privelet
from benchmarks.evaluation import sequence_experiment as sequences
from benchmarks.evaluation import spatial_experiment as spatial
from benchmarks.evaluation.progress import seeds
from polars_dp.kernels import subgrid

EXPERIMENTS = ("privelet", "spatial", "sequences")
Runner = Callable[[argparse.Namespace, "Config", "Path | None", Path], dict]


@dataclass(frozen=True)
class Config:
    """Sizes of one run mode."""

    mode: str
    census_rows: int
    privelet_queries: int
    privelet_repeats: int
    spatial_queries: int
    spatial_repeats: int
    sequence_repeats: int
    #: Releases of the spatial mechanisms outside the ratio table (UG, Privelet*, PrivTree+levels).
    spatial_secondary_repeats: int = 1
    privelet_epsilons: tuple[float, ...] = privelet.EPSILONS
    spatial_epsilons: tuple[float, ...] = spatial.EPSILONS
    sequence_epsilons: tuple[float, ...] = sequences.EPSILONS


FULL = Config("full", census_rows=10_000_000, privelet_queries=40_000, privelet_repeats=3,
              spatial_queries=2_000, spatial_repeats=5, sequence_repeats=3)
QUICK = Config("quick", census_rows=1_000_000, privelet_queries=4_000, privelet_repeats=1,
               spatial_queries=1_000, spatial_repeats=1, sequence_repeats=1,
               privelet_epsilons=(0.5, 1.0), spatial_epsilons=(0.1, 0.4, 1.6),
               sequence_epsilons=(0.1, 0.4, 1.6))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="reduced sizes (under 10 minutes)")
    parser.add_argument("--only", choices=EXPERIMENTS, action="append",
                        help="run only this experiment (repeatable)")
    parser.add_argument("--out", default="docs/results", help="output folder (default docs/results)")
    parser.add_argument("--data", default=None,
                        help=f"real-data folder (default ${data.DATA_ENV} or <repo>/../shared/data)")
    parser.add_argument("--seed", type=int, default=20100901, help="master seed of the whole run")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument("--spatial-queries", type=int, default=None,
                        help="boxes per query class in the spatial experiment (overrides the mode)")
    parser.add_argument("--spatial-repeats", type=int, default=None,
                        help="releases per (mechanism, epsilon) of PrivTree, AG, privtree_subgrid "
                             "and PrivTree fanout 4 in the spatial experiment (overrides the mode)")
    parser.add_argument("--spatial-secondary-repeats", type=int, default=None,
                        help="releases per (mechanism, epsilon) of the other spatial mechanisms "
                             "(UG, Privelet*, PrivTree+levels; 0 skips them; default 1)")
    parser.add_argument("--synthetic-only", action="store_true",
                        help="without the real data, run the synthetic census experiment alone (about "
                             "15 minutes, 2.5 with --quick); otherwise a missing data folder stops the run")
    return parser.parse_args(argv)


def write(path: Path, text: str) -> None:
    path.write_text(text.rstrip() + "\n")
    print(f"  wrote {path}")


def header(title: str, config: Config, seconds: float, seed: int, notes: list[str]) -> str:
    base = QUICK if config.mode == "quick" else FULL
    flags = " --quick" if config.mode == "quick" else ""
    if config.spatial_queries != base.spatial_queries:
        flags += f" --spatial-queries {config.spatial_queries}"
    if config.spatial_repeats != base.spatial_repeats:
        flags += f" --spatial-repeats {config.spatial_repeats}"
    if config.spatial_secondary_repeats != base.spatial_secondary_repeats:
        flags += f" --spatial-secondary-repeats {config.spatial_secondary_repeats}"
    lines = [f"# {title}", "",
             f"Generated by `python benchmarks/evaluate.py{flags}` "
             f"({config.mode} mode, seed {seed}) in {seconds:,.0f} s on a shared 2-core machine "
             "(timings are contended).", ""]
    return "\n".join(lines + [f"- {n}" for n in notes] + [""])


# ---------------------------------------------------------------------- privelet
def privelet_tables(results: pl.DataFrame) -> str:
    parts = []
    for name in dict.fromkeys(results["dataset"].to_list()):
        part = results.filter(pl.col("dataset") == name)
        n = part["n"][0]
        parts.append(f"\n## {name} (n = {n:,}; sanity bound s = {0.001 * n:,.1f})\n")
        chosen = part.select("mechanism", "untransformed").unique(maintain_order=True)
        parts.append("Untransformed attributes (S_A) per mechanism:\n\n" + report.markdown_table(chosen))
        top = part.filter(pl.col("quintile") == 5)
        ratio = wide_ratio(top)
        parts.append("\nHighest coverage quintile: Basic's average square error divided by each "
                     "mechanism's (> 1: the mechanism is more accurate than Basic):\n\n"
                     + report.markdown_table(ratio))
        for value, label in (("square_error", "Average square error"),
                             ("relative_error", "Average relative error")):
            table = report.wide(part, ["epsilon", "quintile", "coverage"], value)
            parts.append(f"\n{label} per coverage quintile:\n\n" + report.markdown_table(table))
        parts.append("\nRelease time (s, mean per release):\n\n"
                     + report.markdown_table(report.wide(part.filter(pl.col("quintile") == 1),
                                                         ["epsilon"], "seconds")))
    return "\n".join(parts)


def wide_ratio(top: pl.DataFrame) -> pl.DataFrame:
    table = report.wide(top, ["epsilon", "coverage"], "square_error")
    others = [c for c in table.columns if c not in ("epsilon", "coverage", "Basic")]
    return table.select("epsilon", "coverage",
                        *[(pl.col("Basic") / pl.col(c)).alias(f"Basic / {c}") for c in others])


def run_privelet(args: argparse.Namespace, config: Config, folder: Path | None, out: Path) -> dict:
    from polars_dp.evaluation.workloads import random_workload

    t0 = time.perf_counter()
    tables = []
    if folder is not None:
        tables.append(data.gss_wages(folder))
    else:
        print("  real data not found: skipping the GSS experiment (the synthetic census still runs)")
    tables.append(data.synthetic_census(config.census_rows, seed=seeds(args.seed, "census-data")))
    results = []
    for table in tables:
        print(f"  privelet on {table.name}: {table.description}")
        queries = random_workload(table.attributes, config.privelet_queries,
                                    seed=seeds(args.seed, "workload", table.name))
        res = privelet.run(table, queries, epsilons=config.privelet_epsilons,
                           repeats=config.privelet_repeats, seed=args.seed,
                           show_progress=not args.no_progress)
        results.append(res)
        report.plot_privelet(res, out / f"privelet_{table.name}.png",
                             title=f"Privelet experiment on {table.name} (n = {res['n'][0]:,}): "
                                   "average square error per coverage quintile")
    results = pl.concat(results)
    results.write_csv(out / "privelet.csv")
    seconds = time.perf_counter() - t0
    notes = [t.description for t in tables] + [
        f"{config.privelet_queries:,} random range-count queries per dataset (1-4 predicates; ordinal: "
        "random interval, nominal: random non-root hierarchy node), answered by every release; "
        f"errors averaged over {config.privelet_repeats} release(s) per (mechanism, epsilon).",
        "Neighbours: replace one row (the paper's setting). Privelet+ uses the paper's S_A = {age, "
        "gender}; 'Privelet+ auto' applies the selection rule |A| <= P(A)^2 H(A).",
        "Plots: " + ", ".join(f"![{t.name}](privelet_{t.name}.png)" for t in tables),
    ]
    write(out / "privelet.md", header("Privelet: error by query coverage", config, seconds,
                                      args.seed, notes) + "\n" + privelet_tables(results))
    return {"seconds": seconds}


# ---------------------------------------------------------------------- spatial
def needs_real_data(runner: Runner) -> Runner:
    """Skip an experiment (with a message) when the real-data folder is absent."""
    def run(args: argparse.Namespace, config: Config, folder: Path | None, out: Path) -> dict:
        if folder is None:
            print(f"  real data not found: skipping the {runner.__name__.removeprefix('run_')} experiment")
            return {"skipped": "no real data"}
        return runner(args, config, folder, out)
    return run


@needs_real_data
def run_spatial(args: argparse.Namespace, config: Config, folder: Path, out: Path) -> dict:
    t0 = time.perf_counter()
    sets = [data.geonames(folder), data.flights(folder)]
    results = []
    for points in sets:
        print(f"  spatial on {points.name}: {points.description}")
        res = spatial.run(points, n_queries=config.spatial_queries, epsilons=config.spatial_epsilons,
                          repeats=config.spatial_repeats,
                          secondary_repeats=config.spatial_secondary_repeats,
                          seed=args.seed, show_progress=not args.no_progress)
        results.append(res)
        report.plot_spatial(res, out / f"spatial_{points.name}.png",
                            title=f"PrivTree experiment on {points.name} (n = {points.frame.height:,},"
                                  f" d = {len(points.columns)}): relative error")
    geo = sets[0]
    tree = geo.frame.dp.privtree(geo.columns, bounds=list(geo.bounds.values()), epsilon=0.4,
                                 seed=seeds(args.seed, "picture"))
    report.plot_decomposition(tree.leaves, geo.frame.to_numpy(), geo.columns,
                              out / "privtree_geonames.png",
                              title=f"PrivTree decomposition of the GeoNames points, ε = 0.4 "
                                    f"({tree.n_leaves:,} leaves)")
    results = pl.concat(results)
    results.write_csv(out / "spatial.csv")
    seconds = time.perf_counter() - t0
    parts = [spatial_ratio_section(results), spatial_fanout_section(results)]
    for name in dict.fromkeys(results["dataset"].to_list()):
        part = results.filter(pl.col("dataset") == name)
        parts.append(f"\n## {name} (n = {part['n'][0]:,})\n\n![{name}](spatial_{name}.png)\n")
        parts.append("Average relative error:\n\n"
                     + report.markdown_table(report.wide(part, ["query_class", "epsilon"],
                                                         "relative_error")))
        first = part.filter(pl.col("query_class") == "small")
        parts.append("\nRelease size (leaves / cells):\n\n"
                     + report.markdown_table(report.wide(first, ["epsilon"], "size")))
        parts.append("\nBuild time (s):\n\n"
                     + report.markdown_table(report.wide(first, ["epsilon"], "seconds")))
    base = QUICK if config.mode == "quick" else FULL
    reduced = (f" ({base.spatial_queries:,} in {base.mode} mode, reduced to keep the run short: AG's "
               "4-D answers take about a minute per release)" if config.spatial_queries < base.spatial_queries
               else "")
    notes = [p.description for p in sets] + [
        f"{config.spatial_queries:,} random boxes per query class{reduced} (volume as a fraction of the box: "
        "small [0.01%, 0.1%), medium [0.1%, 1%), large [1%, 10%)); relative error with smoothing "
        f"0.1% of n; averaged over {config.spatial_repeats} release(s) per (mechanism, epsilon) for "
        f"PrivTree, AG, privtree_subgrid and PrivTree fanout 4, over "
        f"{config.spatial_secondary_repeats} for the others. The same boxes serve every release, "
        "so a standard error is the spread of the per-release means (the release noise).",
        "Neighbours: add or remove one point. Privelet* is Privelet on a fixed public grid "
        "(`privelet_grid` default: 2^(16 // d) cells per dimension, 256 in 2-D, 16 in 4-D).",
        "PrivTree+levels is `privtree(..., levels=None)`: counted top levels (2 levels in 2-D, 1 in "
        "4-D, 16 cells on the deepest; 1/16 of the count budget, split geometrically) and the "
        "least-squares inference over the whole tree; PrivTree is `levels=0`, the paper's release and "
        "the library's default (`levels=None` is not the default: it must be asked for). "
        "Both spend the same budget on the split decisions. Where the error comes from (uniformity "
        "inside partly covered leaves vs noise) and what the counted levels remove: "
        "[privtree_levels_ablation.md](privtree_levels_ablation.md).",
        f"privtree_subgrid is `privtree_subgrid(...)` with its defaults (tree_share {subgrid.TREE_SHARE:g} "
        f"up to 3-D and {subgrid.TREE_SHARE_WIDE:g} from {subgrid.WIDE_FROM}-D, leaf_share "
        f"{subgrid.LEAF_SHARE:g}, c2 {subgrid.C2:g}, fanout 4, max_subcell_bits min("
        f"{subgrid.MAX_SUBCELL_BITS}, d * resolution)), answered with the uniform "
        "density inside a sub-cell (the default). PrivTree is the paper's tree, "
        "`privtree(..., levels=0, fanout=2^d)`; PrivTree fanout 4 (4-D only) is "
        "`privtree(..., levels=0, fanout=4)`, the library's default from 4 dimensions (fanout 2^d "
        "up to 3).",
        "![PrivTree decomposition](privtree_geonames.png)",
    ]
    write(out / "spatial.md", header("PrivTree: spatial range counts", config, seconds, args.seed, notes)
          + "\n" + "\n".join(parts))
    return {"seconds": seconds}


def spatial_ratio_section(results: pl.DataFrame) -> str:
    """privtree_subgrid's mean relative error over min(PrivTree, AG) per (dataset, epsilon,
    class), with the z-score of the difference and the count of cells below 1."""
    table = spatial.ratio_table(results)
    if table.is_empty():
        return ""
    verdict = spatial.ratio_verdict(table)
    parts = ["\n## privtree_subgrid against min(PrivTree, AG)\n",
             "Mean relative error of privtree_subgrid divided by the smaller of PrivTree's and AG's, "
             "per (dataset, ε, query class); in brackets the z-score of the difference, "
             "(m_subgrid - m_min) / sqrt(se_subgrid² + se_min²) from the per-release means "
             f"(negative: privtree_subgrid lower; at least {table['releases'].min()} release(s) per "
             "mechanism and cell).\n",
             f"**{verdict['below']} of {verdict['cells']} cells below min(PrivTree, AG)**; "
             f"{verdict['ties']} within {spatial.TIE:.0%} above it (a tie); {verdict['above']} above "
             f"(target: all below, at most 2 ties). The smaller baseline is PrivTree in "
             f"{int((table['best'] == 'PrivTree').sum())} cells and AG in "
             f"{int((table['best'] == 'AG').sum())}. |z| ≥ 2 in "
             f"{int((table['z'].abs() >= 2).sum())} cells, z ≤ -2 in {int((table['z'] <= -2).sum())}.\n",
             *ratio_tables(table)]
    return "\n".join(parts) + spatial_default_tree_section(results)


def ratio_tables(table: pl.DataFrame) -> list[str]:
    """One markdown table per dataset of a :func:`~benchmarks.evaluation.spatial_experiment.ratio_table`:
    epsilon by query class, each cell ``ratio (z = ...)``."""
    cells = table.with_columns(pl.Series("cell", [f"{r:.3f} ({z_text(z)})"
                                                  for r, z in zip(table["ratio"], table["z"], strict=True)]))
    out = []
    for name in dict.fromkeys(table["dataset"].to_list()):
        part = cells.filter(pl.col("dataset") == name)
        wide = part.pivot(on="query_class", index="epsilon", values="cell", maintain_order=True)
        out.append(f"{name}:\n\n" + report.markdown_table(wide) + "\n")
    return out


def spatial_default_tree_section(results: pl.DataFrame) -> str:
    """Where PrivTree fanout 4 was run (4-D): privtree_subgrid against min(PrivTree fanout 4,
    AG), PrivTree's default tree from 4 dimensions."""
    table = spatial.ratio_table(results, (spatial.FANOUT4, "AG"))
    if table.is_empty():
        return ""
    verdict = spatial.ratio_verdict(table)
    parts = ["\n### Against PrivTree's default tree in 4-D (fanout 4)\n",
             "The same ratio and z-score with PrivTree fanout 4, the library's default from 4 "
             "dimensions, in place of the paper's fanout 2^d: "
             f"**{verdict['below']} of {verdict['cells']} cells below min(PrivTree fanout 4, AG)**, "
             f"{verdict['ties']} within {spatial.TIE:.0%} above, {verdict['above']} above.\n",
             *ratio_tables(table)]
    return "\n".join(parts)


def z_text(z: float | None) -> str:
    return "–" if z is None or z != z else f"z = {z:+.1f}"


def spatial_fanout_section(results: pl.DataFrame) -> str:
    """PrivTree with the paper's fanout 2^d against fanout 4 (the datasets with more than 2
    dimensions): the table behind :func:`polars_dp.plans.spatial.privtree_fanout`."""
    chosen = results.filter(pl.col("mechanism").is_in(["PrivTree", spatial.FANOUT4]))
    parts = []
    for name in dict.fromkeys(chosen.filter(pl.col("mechanism") == spatial.FANOUT4)["dataset"].to_list()):
        part = chosen.filter(pl.col("dataset") == name)
        wide = report.wide(part, ["query_class", "epsilon"], "relative_error")
        wide = wide.with_columns((pl.col(spatial.FANOUT4) / pl.col("PrivTree")).alias("fanout 4 / 2^d"))
        parts.append(f"\n## PrivTree fanout 4 against fanout 2^d ({name})\n\n"
                     "Mean relative error of PrivTree (`levels=0`) with the paper's fanout 2^d (every axis "
                     "halved per level) and with fanout 4 (two axes halved per level, the library's default "
                     "from 4 dimensions, chosen from this table); the last column is the ratio (< 1: fanout "
                     "4 lower).\n\n" + report.markdown_table(wide))
    return "\n".join(parts)


# ---------------------------------------------------------------------- sequences
@needs_real_data
def run_sequences(args: argparse.Namespace, config: Config, folder: Path, out: Path) -> dict:
    t0 = time.perf_counter()
    frame = data.msnbc(folder)
    results = sequences.run(frame, epsilons=config.sequence_epsilons, repeats=config.sequence_repeats,
                            seed=args.seed,
                            show_progress=not args.no_progress)
    results.write_csv(out / "sequences.csv")
    report.plot_sequences(results, out / "sequences_msnbc.png",
                          title=f"msnbc ({frame.height:,} sessions): frequent strings")
    seconds = time.perf_counter() - t0
    metrics = ([c for c in results.columns if c.startswith("precision@")]
               + ["tv_length", "tv_pairs", "seconds"])
    parts = [f"{m}:\n\n" + report.markdown_table(report.wide(results, ["epsilon"], m)) for m in metrics]
    notes = [
        f"msnbc page-category sessions, alphabet 1..17, sequences truncated to "
        f"{data.MSNBC_MAX_LENGTH} page views for every model (a public rule).",
        "Precision: overlap of the model's top-k strings (substring occurrences) with the exact "
        "top-k of the full, untruncated data, divided by k.",
        f"tv_length: total variation distance between the length law of {sequences.SAMPLES:,} sequences "
        "sampled from the model and that of the truncated data.",
        "tv_pairs: total variation distance between the true distribution of length-2 strings and "
        "the model's estimate (negative estimates clipped to 0).",
        "PrivTree (PST) and N-gram use the library's defaults (PST tree_share 0.25 and a noisy length "
        "law from 5% of ε that calibrates the sampler; frequencies from the node holding a string's "
        "prefix, back-off to significant nodes); the 'paper settings' rows use tree_share 0.5, no "
        "length law, the paper's chain formula and no back-off (the library's behaviour before).",
        f"Averaged over {config.sequence_repeats} model(s) per (mechanism, epsilon); truncation is "
        "exact and non-private (the same at every epsilon).",
        "![msnbc](sequences_msnbc.png) ![msnbc TV](sequences_msnbc_tv.png)",
    ]
    write(out / "sequences.md", header("PrivTree: frequent strings of msnbc sessions", config, seconds,
                                       args.seed, notes) + "\n" + "\n\n".join(parts))
    return {"seconds": seconds}


RUNNERS = {"privelet": run_privelet, "spatial": run_spatial, "sequences": run_sequences}


def write_index(out: Path, config: Config, timings: dict[str, Any]) -> None:
    """``<out>/README.md``: what each file holds and how long each experiment took."""
    store = out / "timings.json"
    saved = json.loads(store.read_text()) if store.exists() else {}
    saved.setdefault(config.mode, {}).update(timings)
    store.write_text(json.dumps(saved, indent=2, sort_keys=True) + "\n")
    lines = ["# Evaluation results", "",
             "Regenerate everything with `make evaluate` (`python benchmarks/evaluate.py`); "
             "`make evaluate-quick` runs reduced sizes. Seeded: the same command gives the same "
             "numbers.", "",
             "| file | content |", "|---|---|",
             "| [privelet.md](privelet.md) | Privelet paper: square and relative error per coverage "
             "quintile, Basic vs Privelet vs Privelet+ (GSS wages; synthetic census) |",
             "| [spatial.md](spatial.md) | PrivTree paper: relative error of small/medium/large boxes, "
             "PrivTree vs UG vs AG vs Privelet* vs privtree_subgrid (GeoNames 2-D, flights 4-D), sizes, "
             "build times; privtree_subgrid over min(PrivTree, AG) with z-scores; 4-D PrivTree fanout 4 |",
             "| [privtree_levels_ablation.md](privtree_levels_ablation.md) | PrivTree with counted top "
             "levels: the error of the uniformity assumption alone (exact counts, not private) vs the "
             "noise, and what the counted levels remove (`python -m benchmarks.ablation_privtree_levels`) |",
             "| [subgrid_tree_share.md](subgrid_tree_share.md) | privtree_subgrid's tree share of epsilon "
             "(0.2 / 0.3 / 0.35) against PrivTree, the table behind its default by dimension "
             "(`python -m benchmarks.ablation_subgrid_tree_share`) |",
             "| [sequences.md](sequences.md) | PrivTree paper: top-k precision and TV distance on msnbc, "
             "PST vs n-gram vs truncation |",
             "| [outputs.md](outputs.md) | non-negative projection vs range-query error; synthetic rows vs "
             "the release (GSS, GeoNames; `python benchmarks/evaluation/outputs_experiment.py`) |",
             "| `*.csv` | the raw result rows behind each table |", "",
             "## Run time (shared 2-core machine, contended)", "",
             "| mode | experiment | seconds |", "|---|---|---:|"]
    for mode, entries in sorted(saved.items()):
        for name, value in entries.items():
            lines.append(f"| {mode} | {name} | {value} |")
    lines += ["", "Most of the full run is the 4-D spatial experiment: answering the boxes from each "
              "adaptive-grid (AG) release of the flights data (3 x 2,000 boxes over about 900,000 cells, "
              "8 s per release on this machine, contended). Headline numbers: [headline.md](headline.md)."]
    write(out / "README.md", "\n".join(lines))


def headline(out: Path) -> str:
    """The headline numbers, read back from the result CSVs present in ``out``."""
    lines = ["# Headline numbers", "",
             "Read from the tables of this folder; regenerate with `make evaluate`.", ""]
    if (out / "privelet.csv").exists():
        top = pl.read_csv(out / "privelet.csv").filter((pl.col("quintile") == 5) & (pl.col("epsilon") == 1.0))
        for name in dict.fromkeys(top["dataset"].to_list()):
            part = top.filter(pl.col("dataset") == name)
            err = dict(zip(part["mechanism"], part["square_error"], strict=True))
            lines.append(f"- Privelet, {name}, ε = 1, highest coverage quintile (mean coverage "
                         f"{part['coverage'][0]:.2f}): Basic's average square error is "
                         f"{err['Basic'] / err['Privelet+']:.0f}x Privelet+'s ({report.fmt(err['Basic'])} vs "
                         f"{report.fmt(err['Privelet+'])}).")
    if (out / "spatial.csv").exists():
        at = pl.read_csv(out / "spatial.csv").filter(pl.col("epsilon") == 0.4)
        for (name, cls), part in at.group_by(["dataset", "query_class"], maintain_order=True):
            err = dict(zip(part["mechanism"], part["relative_error"], strict=True))
            lines.append(f"- PrivTree, {name}, ε = 0.4, {cls} queries, relative error: "
                         + ", ".join(f"{k} {report.fmt(v)}" for k, v in err.items()) + ".")
        results = pl.read_csv(out / "spatial.csv")
        table = spatial.ratio_table(results) if "std_error" in results.columns else pl.DataFrame()
        if not table.is_empty():
            verdict = spatial.ratio_verdict(table)
            lines.append(f"- privtree_subgrid's mean relative error is below min(PrivTree, AG) in "
                         f"{verdict['below']} of {verdict['cells']} (dataset, ε, class) cells, within "
                         f"{spatial.TIE:.0%} above it in {verdict['ties']}; ratio "
                         f"{table['ratio'].min():.2f}-{table['ratio'].max():.2f} (median "
                         f"{table['ratio'].median():.2f}).")
    if (out / "sequences.csv").exists():
        at = pl.read_csv(out / "sequences.csv").filter(pl.col("epsilon") == 1.6)
        prec = dict(zip(at["mechanism"], at["precision@100"], strict=True))
        lines.append("- msnbc, ε = 1.6, top-100 precision: "
                     + ", ".join(f"{k} {v:.2f}" for k, v in prec.items()) + ".")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    config = QUICK if args.quick else FULL
    overrides = {k: v for k, v in (("spatial_queries", args.spatial_queries),
                                   ("spatial_repeats", args.spatial_repeats),
                                   ("spatial_secondary_repeats", args.spatial_secondary_repeats))
                 if v is not None}
    config = dataclasses.replace(config, **overrides)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    folder = data.data_dir(args.data)
    if folder is None and not args.synthetic_only:
        print("Real datasets not found (looked at --data, $POLARS_DP_DATA, <repo>/../shared/data): nothing "
              "to evaluate. Pass --synthetic-only to run the synthetic census experiment alone.")
        return 0
    if folder is None:
        print("Real datasets not found: running the synthetic census experiment only.")
        args.only = ["privelet"]
    else:
        print(f"Using real datasets from {folder}")
    timings: dict[str, Any] = {}
    start = time.perf_counter()
    for name in args.only or EXPERIMENTS:
        print(f"[{name}] ({config.mode} mode)", flush=True)
        result = RUNNERS[name](args, config, folder, out)
        timings[name] = result.get("skipped") or round(result["seconds"])
    if not args.only:
        timings["total"] = round(time.perf_counter() - start)
    write_index(out, config, timings)
    write(out / "headline.md", headline(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
