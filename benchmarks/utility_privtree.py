"""Utility of PrivTree vs UG, AG, Privelet* (256^2 grid) on GeoNames cities500 (PrivTree paper Sec. 6.1).

Relative error (smoothing 0.1% of n) of random square queries per size class at several
epsilons, averaged over queries and ``--runs`` releases.  The grids get the public
``n`` (the paper's setting), so they spend no budget on estimating it.

    python -m benchmarks.utility_privtree [--quick] [--queries 10000] [--runs 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

import polars_dp as pdp
from polars_dp.evaluation.references import exact_range_counts
from polars_dp.evaluation.spatial_workloads import SIZE_CLASSES, random_boxes, relative_errors

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "spatial_geonames_cities500.parquet"
COLUMNS = ["longitude", "latitude"]
BOUNDS = [(-180.0, 180.0), (-90.0, 90.0)]
EPSILONS = (0.1, 0.4, 1.6)


def mechanisms() -> dict:
    """The four mechanisms; UG and AG estimate N privately (the exact N is not public under add/remove)."""
    return {
        "PrivTree": lambda df, eps, seed: df.dp.privtree(COLUMNS, bounds=BOUNDS, epsilon=eps, seed=seed),
        "UG": lambda df, eps, seed: df.dp.uniform_grid(COLUMNS, bounds=BOUNDS, epsilon=eps, seed=seed),
        "AG": lambda df, eps, seed: df.dp.adaptive_grid(COLUMNS, bounds=BOUNDS, epsilon=eps, seed=seed),
        "Privelet*": lambda df, eps, seed: df.dp.privelet_grid(COLUMNS, bounds=BOUNDS, epsilon=eps,
                                                               seed=seed),
    }


def evaluate(frame: pl.DataFrame, *, n_queries: int = 10_000, runs: int = 3, epsilons=EPSILONS,
             seed: int = 0) -> pl.DataFrame:
    """One row per (mechanism, epsilon, size class): mean relative error over queries and runs."""
    n = frame.height
    workloads = {}
    for i, name in enumerate(SIZE_CLASSES):
        boxes = random_boxes(COLUMNS, BOUNDS, n_queries, volume=name, seed=seed + i)
        workloads[name] = (boxes, exact_range_counts(frame, COLUMNS, BOUNDS, boxes))
    rows = []
    for mech, make in mechanisms().items():
        for eps in epsilons:
            errs = {name: [] for name in SIZE_CLASSES}
            leaves = []
            for r in range(runs):
                rel = make(frame, eps, seed + 1000 * r + 7)
                leaves.append(rel.n_leaves)
                for name, (boxes, truth) in workloads.items():
                    errs[name].append(np.mean(relative_errors(rel.range_count_array(boxes), truth, n)))
            rows.append({"mechanism": mech, "epsilon": eps, "leaves": int(np.mean(leaves)),
                         **{name: float(np.mean(v)) for name, v in errs.items()}})
    return pl.DataFrame(rows)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1,000 queries, one run")
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args(argv)
    if not DATA.exists():
        print(f"dataset not found: {DATA}")
        return 0
    frame = pl.read_parquet(DATA, columns=COLUMNS)
    n_queries, runs = (1000, 1) if args.quick else (args.queries, args.runs)
    t = time.perf_counter()
    table = evaluate(frame, n_queries=n_queries, runs=runs)
    with pl.Config(tbl_rows=50, float_precision=4):
        print(f"GeoNames cities500: n={frame.height:,}; {n_queries:,} queries per class; "
              f"mean relative error (smoothing 0.1% of n) over queries and {runs} run(s)")
        print(table)
    print(f"({time.perf_counter() - t:.1f} s)")
    _ = pdp  # the dp namespace is registered by importing polars_dp
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
