"""The hierarchical plan's error formula against seeded releases, at the sizes of the strategy table.

For each case (1-D 4096 and 2-D 256² optimised for all ranges, a 3-D domain with uniform
budgets) the plan is built for its workload, then ``--releases`` seeded releases of one synthetic
table are made.  Per release the mean squared error over *every* range of the workload is computed
exactly from the noise's prefix sums (no sampling of queries):

* 1-D, ``n`` cells, prefix sums ``P_0 = 0, ..., P_n``: ``Σ_{i<j} (P_j - P_i)² = (n+1) Σ P² - (Σ P)²``
  over the ``n (n+1) / 2`` ranges;
* 2-D and 3-D: the same identity along the last axis, for every range of the other axes (their
  differences of prefix sums), which is every box.

The mean over the releases is set against the plan's ``workload_error`` (the closed form the
plan is optimised with): the z-score is their difference over the standard error of the mean
(the releases' spread), expected within ±3.  The intervals at ``--alpha`` are checked on
``--queries`` random ranges per release: the miss rate must be at most ``alpha`` plus three
binomial standard deviations.

``python -m benchmarks.empirical_strategies [--releases 200] [--quick]``
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np
import polars as pl

import polars_dp as pdp

ALPHA = 0.05


def all_ranges_mse(noise: np.ndarray) -> float:
    """Mean of the squared noise sum over every box ``[lo, hi]`` (inclusive on every axis) of the
    cell array ``noise``: prefix sums along each axis with a leading 0, then along each leading
    axis the differences over every pair of boundaries, then the identity above along the last."""
    p = noise.astype(np.float64)
    for axis in range(p.ndim):
        p = np.concatenate([np.zeros_like(np.take(p, [0], axis=axis)), np.cumsum(p, axis=axis)], axis=axis)
    for axis in range(p.ndim - 1):
        lo, hi = np.triu_indices(p.shape[axis], k=1)
        p = np.take(p, hi, axis=axis) - np.take(p, lo, axis=axis)
    rows = p.reshape(-1, p.shape[-1])
    k = rows.shape[1]
    sums = k * (rows**2).sum(axis=1) - rows.sum(axis=1) ** 2  # Σ_{i<j} (P_j - P_i)² per row
    boxes = math.prod(n * (n + 1) // 2 for n in noise.shape)
    return float(sums.sum() / boxes)


def cases(quick: bool) -> list[tuple[str, list, object]]:
    one = [pdp.Ordinal("a", 0, 255 if quick else 4095)]
    two = [pdp.Ordinal("a", 0, 31 if quick else 255), pdp.Ordinal("b", 0, 31 if quick else 255)]
    three = [pdp.Ordinal("a", 0, 15 if quick else 31), pdp.Ordinal("b", 0, 15 if quick else 31),
             pdp.Ordinal("c", 0, 7 if quick else 15)]
    return [(f"1-D {one[0].n_cells}, optimised for all ranges", one, pdp.workload.ranges(one)),
            (f"2-D {two[0].n_cells}², optimised for all ranges", two, pdp.workload.ranges(two)),
            (f"3-D {'x'.join(str(a.n_cells) for a in three)}, uniform budgets", three, None)]


def random_ranges(attrs: list, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``n`` random boxes as cell starts / stops (half-open), every axis restricted."""
    ends = [np.sort(rng.integers(0, a.n_cells + 1, (n, 2)), axis=1) for a in attrs]
    starts = np.stack([e[:, 0] for e in ends], axis=1)
    stops = np.stack([np.maximum(e[:, 1], e[:, 0] + 1) for e in ends], axis=1)
    return np.minimum(starts, stops - 1), stops


def run_case(name: str, attrs: list, workload: object, releases: int, queries: int) -> dict:
    t0 = time.perf_counter()
    plan = pdp.plan("hierarchical", attrs, epsilon=1.0, neighbours="add_remove", workload=workload)
    formula = plan.workload_error(pdp.workload.ranges(attrs))
    rng = np.random.default_rng(7)
    shape = tuple(a.n_cells for a in attrs)
    frame = pl.DataFrame({a.column: rng.integers(0, a.n_cells, 10_000) for a in attrs})
    exact = np.zeros(shape)
    np.add.at(exact, tuple(frame[a.column].to_numpy() for a in attrs), 1.0)
    starts, stops = random_ranges(attrs, queries, rng)
    errors, misses = [], 0
    half = None
    for seed in range(releases):
        release = plan.run(frame, seed=seed)
        noise = np.asarray(release.counts) - exact
        errors.append(all_ranges_mse(noise))
        if half is None:
            half = release.range_accuracy(starts, stops, ALPHA)
        answers = np.array([noise[tuple(slice(a, b) for a, b in zip(s, e, strict=True))].sum()
                            for s, e in zip(starts, stops, strict=True)])
        misses += int((np.abs(answers) > half).sum())
    mean = float(np.mean(errors))
    se = float(np.std(errors, ddof=1) / math.sqrt(releases))
    checked = releases * queries
    bound = ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / checked)
    return {"case": name, "plan": plan.strategy_name, "formula": formula, "mean": mean, "se": se,
            "z": (mean - formula) / se, "miss": misses / checked, "miss_bound": bound,
            "seconds": time.perf_counter() - t0}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--releases", type=int, default=200)
    parser.add_argument("--queries", type=int, default=200, help="random ranges per release (intervals)")
    parser.add_argument("--quick", action="store_true", help="smaller domains")
    args = parser.parse_args(argv)
    print(f"hierarchical plans (epsilon 1, add/remove-one, exact noise): the mean squared error over every "
          f"range of {args.releases} seeded releases against the formula; intervals at alpha {ALPHA}")
    print(f"  {'case':<42}{'plan':<40}{'formula':>12}{'measured':>12}{'se':>9}{'z':>7}{'miss':>8}"
          f"{'bound':>8}{'s':>7}")
    ok = True
    for name, attrs, workload in cases(args.quick):
        r = run_case(name, attrs, workload, args.releases, args.queries)
        good = abs(r["z"]) <= 3 and r["miss"] <= r["miss_bound"]
        ok &= good
        print(f"  {r['case']:<42}{r['plan'][:39]:<40}{r['formula']:>12.5g}{r['mean']:>12.5g}{r['se']:>9.3g}"
              f"{r['z']:>7.2f}{r['miss']:>8.4f}{r['miss_bound']:>8.4f}{r['seconds']:>7.1f}"
              f"  {'ok' if good else 'MISSED'}")
    print("all within |z| <= 3 and the coverage bound" if ok else "some case MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
