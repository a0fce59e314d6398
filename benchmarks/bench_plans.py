"""Plans before data: building a plan, comparing plans over a workload, choosing for a workload.

* ``compare`` of 4 plans (Basic, Privelet, the paper's rule, the workload choice) over 10,000
  random range queries on a 6-attribute domain: target <= 1 s (the baseline in the same run
  is one ``range_variance`` call of one plan over the same queries, i.e. 4 plans should cost
  about 4 of those plus the coverage sort).
* building a plan (no data): target <= 10 ms.
* the workload choice against the exhaustive best subset, Basic and the paper's rule, on the
  benchmarks' census shape and two shapes with several nominal axes, over all queries and over
  the fifth with the largest coverage.

    python -m benchmarks.bench_plans           # full
    python -m benchmarks.bench_plans --quick   # fewer queries
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np
import polars as pl

import polars_dp as pdp
from polars_dp.domains.queries import query_ranges
from polars_dp.plans.grid import auto_untransformed, transformable

TARGET_COMPARE_S = 1.0
TARGET_PLAN_MS = 10.0


def _nested(groups: int, per: int) -> pdp.Hierarchy:
    return pdp.Hierarchy.from_dict({f"h{g}": [g * per + j for j in range(per)] for g in range(groups)})


def shapes() -> dict[str, list]:
    occ = pdp.Hierarchy.from_dict({f"g{g}": list(range(g * 64, (g + 1) * 64)) for g in range(8)})
    return {
        "census": [pdp.Ordinal("age", 0, 100), pdp.Nominal("gender", categories=[0, 1]),
                   pdp.Nominal("occupation", occ), pdp.Ordinal("income", 0, 1000)],
        "nominal5": [pdp.Ordinal("age", 0, 99), pdp.Nominal("region", _nested(4, 5)),
                     pdp.Nominal("education", _nested(4, 4)), pdp.Nominal("marital", _nested(3, 3)),
                     pdp.Ordinal("hours", 0, 99)],
        "nominal6": [pdp.Nominal("state", _nested(10, 5)), pdp.Nominal("sector", _nested(6, 8)),
                     pdp.Nominal("sex", categories=[0, 1]), pdp.Ordinal("age", 0, 119),
                     pdp.Nominal("degree", _nested(3, 4)), pdp.Ordinal("year", 0, 15)],
    }


def _best(times: list[float]) -> float:
    return min(times)


def bench_compare(n_queries: int) -> None:
    attrs = shapes()["nominal6"]
    queries = pdp.random_workload(attrs, n_queries, seed=1)
    t0 = time.perf_counter()
    chosen = pdp.plan("privelet", attrs, epsilon=1.0, untransformed="workload", workload=queries)
    choose_s = time.perf_counter() - t0
    plans = [pdp.plan("basic", attrs, epsilon=1.0), pdp.plan("privelet", attrs, epsilon=1.0),
             pdp.plan("privelet", attrs, epsilon=1.0, untransformed="auto"), chosen]
    starts, stops = query_ranges(attrs, queries)
    base, runs = [], []
    for _ in range(3):
        t0 = time.perf_counter()
        plans[1].range_variance(starts, stops)
        base.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        table = pdp.compare(plans, queries)
        runs.append(time.perf_counter() - t0)
    print(f"compare: 4 plans x {n_queries:,} queries on 6 attributes: cold {runs[0]:.3f} s, warm "
          f"{_best(runs[1:]):.3f} s (target <= {TARGET_COMPARE_S} s; one plan's variance alone "
          f"{_best(base):.3f} s, ratio {_best(runs[1:]) / _best(base):.1f}x); workload choice over 64 "
          f"subsets {choose_s:.3f} s")
    print(table.select("mechanism", "transformed", "mean", "max", "q1", "q5"))


def bench_plan_build() -> None:
    attrs = shapes()["census"]
    times = []
    for _ in range(50):
        t0 = time.perf_counter()
        pdp.plan("privelet", attrs, epsilon=1.0, untransformed="auto")
        times.append(time.perf_counter() - t0)
    print(f"plan build (census shape, privelet auto): first {times[0] * 1e3:.2f} ms, median "
          f"{np.median(times[1:]) * 1e3:.3f} ms (target <= {TARGET_PLAN_MS} ms)")


def bench_workload_choice(n_queries: int) -> None:
    print("workload choice: mean expected squared error / the exhaustive best (rule, Basic alongside)")
    for name, attrs in shapes().items():
        queries = pdp.random_workload(attrs, n_queries, seed=3)
        starts, stops = query_ranges(attrs, queries)
        cover = np.prod((stops - starts) / np.array([a.n_cells for a in attrs], dtype=float), axis=1)
        wide = cover >= np.quantile(cover, 0.8)
        for label, mask in (("all", np.ones(len(cover), bool)), ("widest fifth", wide)):
            q = queries.filter(pl.Series(mask))
            s, t = starts[mask], stops[mask]

            def err(transformed: tuple[bool, ...], attrs: list = attrs, s: np.ndarray = s,
                    t: np.ndarray = t) -> float:
                un = [a.column for a, x in zip(attrs, transformed, strict=True) if not x]
                return float(pdp.plan("privelet", attrs, epsilon=1.0, untransformed=un, noise="float")
                             .range_variance(s, t).mean())

            best = min(err(x) for x in itertools.product([False, True], repeat=len(attrs))
                       if all(transformable(a) or not y for a, y in zip(attrs, x, strict=True)))
            chosen = pdp.plan("privelet", attrs, epsilon=1.0, untransformed="workload", workload=q,
                              noise="float")
            mine = float(chosen.range_variance(s, t).mean())
            rule = err(tuple(not auto_untransformed(a) for a in attrs))
            basic = err((False,) * len(attrs))
            print(f"  {name:9s} {label:13s} chosen/best {mine / best:.4f}  rule/chosen {rule / mine:6.2f}  "
                  f"basic/chosen {basic / mine:6.2f}  untransformed={list(chosen.untransformed)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    bench_plan_build()
    bench_compare(2_000 if args.quick else 10_000)
    bench_workload_choice(500 if args.quick else 2_000)


if __name__ == "__main__":
    main()
