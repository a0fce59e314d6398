"""``polars-dp demo``: release bundled and synthetic tables and compare noisy range counts with the truth."""

from __future__ import annotations

import argparse
import functools
import time
from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np
import polars as pl

import polars_dp as pdp
from polars_dp.counting.frequency import frequency_matrix
from polars_dp.datasets import load_military, military_attributes
from polars_dp.evaluation.references import exact_range_count, exact_range_counts
from polars_dp.plans.grid import PriveletPlan


def _timed(make: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = make()
    return out, time.perf_counter() - t0


def _table(rows: list[tuple[str, dict]], truth: Callable[[dict], float], releases: dict) -> None:
    header = f"{'range-count query':<38}{'true':>11}" + "".join(f"{k + ' ± std':>22}" for k in releases)
    print(header)
    print("-" * len(header))
    for label, pred in rows:
        line = f"{label:<38}{truth(pred):>11,.0f}"
        for r in releases.values():
            line += f"{r.range_count(**pred):>13,.0f} ±{r.range_std(**pred):>7,.0f}"
        print(line)


def _truth(frame: pl.DataFrame | pl.LazyFrame, attrs: Sequence[pdp.Attribute]) -> Callable[[dict], float]:
    """Exact answers (NOT private), only to show the error next to the noisy answers."""
    counts = frequency_matrix(frame, attrs)
    return lambda predicates: exact_range_count(counts, attrs, **predicates)


def _military(args: argparse.Namespace) -> None:
    frame = load_military(lazy=True)
    attrs = military_attributes()
    n = frame.select(pl.len()).collect().item()
    print(f"1. US military personnel: {n:,} rows (bundled, public domain)")
    print("   public domain: " + " x ".join(f"{a.column}({a.n_cells})" for a in attrs)
          + f" = {int(np.prod([a.n_cells for a in attrs])):,} cells\n")
    releases: dict[str, Any] = {}
    for name in ("basic", "privelet"):
        method = getattr(frame.dp, name)  # type: ignore[attr-defined]  # df.dp: registered at import, unknown to Polars' types
        releases[name], secs = _timed(functools.partial(method, attrs, epsilon=args.epsilon, seed=args.seed))
        r = releases[name]
        print(f"   {name:<9} epsilon={r.epsilon}, neighbours={r.neighbours!r}, "
              f"noise scale {r.noise_scale:.3g}, {r.n_cells:,} cells, {secs:.2f} s")
    truth = _truth(frame, attrs)
    print()
    _table([
        ("all personnel", {}),
        ("Department of the Navy, rank 5..11", {"branch": "Department of the Navy", "rank": (5, 11)}),
        ("female officers", {"gender": "female", "grade": "officer"}),
        ("asian/pacific, commissioned", {"race": "asian/pacific", "grade": "commissioned"}),
        ("hispanic marines, rank 1..3", {"hisp": True, "branch": "marine corps", "rank": (1, 3)}),
    ], truth, releases)
    meta = releases["basic"].to_arrow().schema.metadata
    print("\n   Arrow schema metadata of a release: " + ", ".join(
        f"{k.decode()}={meta[k].decode()}" for k in (b"polars_dp.mechanism", b"polars_dp.epsilon",
                                                      b"polars_dp.neighbours")))
    print("   On six small domains the wavelet's noise outweighs its gain; it pays off on large ones:\n")


def _incomes(args: argparse.Namespace) -> None:
    rng = np.random.default_rng(2010)  # synthetic data: a public generator, not a secret
    n = 1_000_000
    frame = pl.DataFrame({
        "age": rng.integers(18, 90, n),
        "income": np.minimum(rng.lognormal(10.4, 0.7, n), 99_999.0).astype(np.int64),  # whole dollars
    })
    attrs = [pdp.Ordinal("age", 0, 100), pdp.Ordinal("income", 0, 99_999, width=100)]
    print(f"2. Synthetic incomes: {n:,} rows, age(101) x income(1,000 bins of $100) = 101,000 cells\n")
    releases = {"basic": frame.dp.basic(attrs, epsilon=args.epsilon, seed=args.seed)}  # type: ignore[attr-defined]  # df.dp: registered at import, unknown to Polars' types
    releases["privelet+"], secs = _timed(lambda: frame.dp.privelet(  # type: ignore[attr-defined]  # df.dp: registered at import, unknown to Polars' types
        attrs, epsilon=args.epsilon, untransformed="auto", seed=args.seed))
    plan = cast(PriveletPlan, releases["privelet+"].plan)
    print(f"   privelet+ untransformed={list(plan.untransformed)} (the paper's rule), rho={plan.rho}, "
          f"{secs:.2f} s\n")
    truth = _truth(frame, attrs)
    _table([
        ("income $20k..$60k", {"income": (20_000, 59_999)}),
        ("age 30..49, income $40k..$100k", {"age": (30, 49), "income": (40_000, 99_999)}),
        ("age 65..100", {"age": (65, 100)}),
        ("age 40, income $31,200..$31,299", {"age": (40, 40), "income": (31_200, 31_299)}),
    ], truth, releases)
    print()


def _points(args: argparse.Namespace) -> None:
    rng = np.random.default_rng(2016)  # synthetic points: a public generator, not a secret
    centres = np.array([[-74.0, 40.7], [2.35, 48.9], [139.7, 35.7], [-46.6, -23.5]])
    which = rng.choice(len(centres), 400_000, p=[0.4, 0.3, 0.2, 0.1])
    xy = centres[which] + rng.normal(0, 1.5, (which.size, 2)) * rng.choice([0.2, 3.0], (which.size, 1))
    frame = pl.DataFrame({"lon": np.clip(xy[:, 0], -180, 180), "lat": np.clip(xy[:, 1], -90, 90)})
    bounds = [(-180.0, 180.0), (-90.0, 90.0)]
    print(f"3. Synthetic points around four cities: {frame.height:,} rows in the box lon x lat = "
          "[-180, 180] x [-90, 90]\n")
    tree, secs = _timed(lambda: frame.dp.privtree(["lon", "lat"], bounds=bounds, epsilon=args.epsilon,  # type: ignore[attr-defined]  # df.dp: registered at import, unknown to Polars' types
                                                  seed=args.seed))
    grid = frame.dp.uniform_grid(["lon", "lat"], bounds=bounds, epsilon=args.epsilon, seed=args.seed)  # type: ignore[attr-defined]  # df.dp: registered at import, unknown to Polars' types
    print(f"   privtree  {tree.n_leaves:,} leaves, deepest at depth {int(tree.depth.max())}, {secs:.2f} s "
          f"(uniform grid: {grid.n_leaves:,} cells)\n")
    boxes = pl.DataFrame({"lon_lo": [-75.0, -74.2, 0.0, -180.0], "lon_hi": [-73.0, -73.8, 5.0, 180.0],
                          "lat_lo": [40.0, 40.5, 45.0, -90.0], "lat_hi": [42.0, 40.9, 50.0, 0.0]})
    names = ["New York region (2 x 2 deg)", "Manhattan-sized box", "Paris region (5 x 5 deg)",
             "southern hemisphere"]
    exact = exact_range_counts(frame, ["lon", "lat"], bounds, boxes)
    answers = {"privtree": tree.range_count_array(boxes), "uniform grid": grid.range_count_array(boxes)}
    header = f"{'box range-count query':<38}{'true':>11}" + "".join(f"{k:>16}" for k in answers)
    print(header)
    print("-" * len(header))
    for i, name in enumerate(names):
        print(f"{name:<38}{exact[i]:>11,.0f}" + "".join(f"{v[i]:>16,.0f}" for v in answers.values()))
    print()


def run(args: argparse.Namespace) -> int:
    print(f"polars-dp demo: epsilon={args.epsilon} per release\n")
    _military(args)
    _incomes(args)
    _points(args)
    if args.seed is not None:
        print(f"(seed={args.seed} makes this run reproducible; never use a known seed in a real release: "
              "it lets anyone remove the noise)")
    return 0


EXAMPLES = """\
example:
  polars-dp demo                       # epsilon 1 per release, noise from OS entropy
  polars-dp demo --epsilon 0.5 --seed 3   # reproducible (never use a known seed for a real release)
"""


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    demo = sub.add_parser("demo", parents=[common], epilog=EXAMPLES,
                          formatter_class=argparse.RawDescriptionHelpFormatter,
                          help="release bundled and synthetic tables and compare range counts",
                          description="Release a bundled 1.4M-row table and synthetic data with several "
                                      "mechanisms and print noisy range counts next to the exact ones.")
    demo.add_argument("--epsilon", type=float, default=1.0, help="privacy budget per release (default 1.0)")
    demo.add_argument("--seed", type=int, default=None, help="reproducible noise (never in production)")
