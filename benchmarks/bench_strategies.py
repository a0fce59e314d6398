"""Best-known accuracy per declared workload: level-tuple strategies against today's grid plans.

For each workload, the exact expected RMSE (no sampling; epsilon = 1, add/remove-one, exact
noise) of

* today's best grid plan: the least over Basic, Privelet and every Privelet+ subset, from the
  plans' own variance formulas (``GridPlan.noise_model`` and
  :func:`polars_dp.kernels.wavelet_variance.range_variance_factor`), averaged over the
  workload's queries exactly (per-axis sums over its intervals);
* the optimised level strategy: per-axis nested block levels, one budget per level tuple
  optimised for the workload (:func:`polars_dp.kernels.level_budgets.choose_strategy`),
  least-squares inference, exact discrete-Laplace variances;

beside the published reference figures (HDMM: McKenna et al., VLDB 2018; hierarchies with
least squares: Hay et al., VLDB 2010 and Qardaji, Yang, Li, VLDB 2013), with the ratios and
the optimiser's CPU time: ``CPU s`` the level choice with its budgets (every candidate chain
per axis optimised), ``budgets`` one budget optimisation on the chosen levels.
RMSE = sqrt(total expected squared error / number of queries); the random workload is the
exact expectation of one query of :func:`polars_dp.random_workload`.

Targets: the level strategy within 1.3x of the best-known figure and never above today's
best plan on every row.

    python -m benchmarks.bench_strategies              # every row
    python -m benchmarks.bench_strategies --quick      # the rows that take under a second
    python -m benchmarks.bench_strategies --optimiser  # the optimiser's wall and CPU time per row
    python -m benchmarks.bench_strategies --census-release [--repeats 3] [--rows 1e7]

``--optimiser`` times, per workload, the level choice with its budgets
(:func:`~polars_dp.kernels.level_budgets.choose_strategy`) and one budget optimisation on the
chosen levels (:func:`~polars_dp.kernels.level_budgets.choose_budgets`), wall and CPU, with
the number of level tuples and the RMSE; then the same with the optimiser's shortcuts off
(every relaxation step, every support-growth candidate to convergence, every candidate chain
grown: ``exhaustive``), and a 3-D row of 2,028 level tuples.  Targets (issue 40): budget
optimisation <= 5 s of CPU for <= 2,000 level tuples; the level choice with its budgets (what
a plan with a declared workload runs) <= 1 s.

``--census-release`` releases the census shape (Age 101 x Gender 2 x Occupation 512 (8 x 64) x
Income 1001 = 1.04e8 cells; the same synthetic rows as ``bench_floor``'s census case, 1e7 by
default) with exact noise: the hierarchical mechanism on its plan optimised for the random
range workload (the plan built before the clock starts; its build time printed apart) against
Privelet+ ``untransformed=["age", "gender"]``.  Each release runs in a fresh child process,
the two kinds interleaved (the order alternating per pair); each child reports wall and CPU
seconds, minor page faults, its peak resident set (``VmHWM``, read at its end: the frame and
the interpreter included) and the resident set before the release.  Medians over ``--repeats``
pairs (at least 3), the load average per child.  Target (issue 40): the hierarchical release
<= 2x the wall time and <= 2x the peak memory of Privelet+ in the same run.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence

import numpy as np

import polars_dp as pdp
from polars_dp.kernels import level_budgets
from polars_dp.kernels.block_levels import bary_levels, tuple_shape
from polars_dp.kernels.level_budgets import choose_budgets, choose_strategy
from polars_dp.kernels.level_inference import workload_costs
from polars_dp.kernels.wavelet_variance import range_variance_factor
from polars_dp.plans.grid import transformable

TARGET_RATIO = 1.3
#: issue 40: one budget optimisation of at most 2,000 level tuples, and a plan's level choice.
BUDGET_SECONDS = 5.0
PLAN_SECONDS = 1.0
#: The optimiser's shortcuts and their values with the shortcuts off (``exhaustive``).
EXHAUSTIVE = {"RELAXATION_ITERATIONS": level_budgets.ITERATIONS, "INSERT_STEPS": None, "SCREEN_MARGIN": None,
              "SCREEN_TOLERANCE": level_budgets.DESCENT_TOLERANCE}
EPSILON = 1.0
NEIGHBOURS = "add_remove"


def census() -> list:
    occupation = pdp.Hierarchy.from_dict({f"group{g}": list(range(g * 64, (g + 1) * 64)) for g in range(8)})
    return [pdp.Ordinal("age", 0, 100), pdp.Nominal("gender", categories=["female", "male"]),
            pdp.Nominal("occupation", occupation), pdp.Ordinal("income", 0, 1000)]


def rows(quick: bool) -> list[tuple[str, list, object, float | None, str]]:
    """``(label, attributes, workload, best-known RMSE or None, its source)``."""
    o = pdp.Ordinal
    out = []
    a = [o("x", 0, 1023)]
    out.append(("1-D 1024, all ranges", a, pdp.workload.ranges(a), 11.2, "HDMM"))
    a = [o("x", 0, 4095)]
    out.append(("1-D 4096, all ranges", a, pdp.workload.ranges(a), 16.2, "16x16x16 tree, GLS, no root"))
    a = [o("x", 0, 65535)]
    out.append(("1-D 65536, prefixes", a, pdp.workload.prefixes(a), 20.4, "hierarchy, GLS"))
    a = [o("x", 0, 63), o("y", 0, 63)]
    out.append(("2-D 64^2, all ranges", a, pdp.workload.ranges(a), None, "-"))
    a = [o("x", 0, 255), o("y", 0, 255)]
    out.append(("2-D 256^2, all ranges", a, pdp.workload.ranges(a), 46.1, "HDMM"))
    out.append(("2-D 256^2, 1-way marginals", a, pdp.workload.marginals(a, 1), 2.83, "HDMM"))
    a = [o("x", 0, 1023), o("y", 0, 1023)]
    out.append(("2-D 1024^2, prefixes", a, pdp.workload.prefixes(a), 66.0, "HDMM"))
    if not quick:
        c = census()
        out.append(("census, random ranges", c, pdp.workload.random_ranges(c), 135.0, "HDMM, 342 CPU-s"))
        out.append(("census, all 2-way marginals", c, pdp.workload.marginals(c, 2), 4.55, "HDMM OPT_M"))
        out.append(("census, all 1-way marginals", c, pdp.workload.marginals(c, 1), 4.09, "HDMM OPT_M"))
    return out


def grid_plan_errors(attrs: list, workload) -> dict[str, float]:
    """Expected mean squared error of Basic, Privelet and every Privelet+ subset (by name)."""
    terms = workload.axis_terms(attrs)
    sums: dict[tuple[int, int, bool], float] = {}

    def axis_sum(term: int, i: int, transformed: bool) -> float:
        key = (term, i, transformed)
        if key not in sums:
            starts, stops, weights = terms[term][1][i].intervals()
            if transformed:
                f = np.empty(starts.size)
                for a in range(0, starts.size, 1 << 21):
                    f[a:a + (1 << 21)] = range_variance_factor(attrs[i], starts[a:a + (1 << 21)],
                                                               stops[a:a + (1 << 21)])
            else:
                f = (stops - starts).astype(np.float64)
            sums[key] = float(f @ weights)
        return sums[key]

    out = {}
    for mask in itertools.product([False, True], repeat=len(attrs)):
        if any(m and not transformable(a) for m, a in zip(mask, attrs, strict=True)):
            continue
        if any(mask):
            names = [a.column for a, m in zip(attrs, mask, strict=True) if not m]
            plan = pdp.plan("privelet", attrs, epsilon=EPSILON, neighbours=NEIGHBOURS, untransformed=names)
            name = "Privelet" if all(mask) else "Privelet+ " + "".join("T" if m else "u" for m in mask)
        else:
            plan = pdp.plan("basic", attrs, epsilon=EPSILON, neighbours=NEIGHBOURS)
            name = "Basic"
        unit = plan.noise_model.unit_variance()
        total = sum(w * math.prod(axis_sum(k, i, m) for i, m in enumerate(mask))
                    for k, (w, _) in enumerate(terms))
        out[name] = unit * total / workload.queries
    return out


@contextlib.contextmanager
def exhaustive(on: bool = True) -> Iterator[None]:
    """The optimiser with its shortcuts off (:data:`EXHAUSTIVE`) inside the block."""
    saved = {k: getattr(level_budgets, k) for k in EXHAUSTIVE}
    try:
        if on:
            for k, v in EXHAUSTIVE.items():
                setattr(level_budgets, k, v)
        yield
    finally:
        for k, v in saved.items():
            setattr(level_budgets, k, v)


def _timed(fn, *args):
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn(*args)
    return out, time.perf_counter() - wall, time.process_time() - cpu


def big_row() -> tuple[str, list, object, list]:
    """3-D 4096 x 4096 x 2048, random ranges, binary levels: 13 x 13 x 12 = 2,028 level tuples."""
    attrs = [pdp.Ordinal("a", 0, 4095), pdp.Ordinal("b", 0, 4095), pdp.Ordinal("c", 0, 2047)]
    axes = [bary_levels(4096), bary_levels(4096), bary_levels(2048)]
    return "3-D 4096^2x2048, random", attrs, pdp.workload.random_ranges(attrs), axes


def optimiser_rows(quick: bool, reference: bool = True) -> list[dict]:
    """Per workload and mode (``fast``: the defaults; ``exhaustive``): the level choice with its
    budgets and one budget optimisation on the chosen levels, wall and CPU seconds, level tuples
    of the chosen levels, tuples measured and RMSE.  The 3-D row times the budgets only."""
    out = []
    cases = [(label, attrs, workload, None) for label, attrs, workload, _, _ in rows(quick)]
    if not quick:
        cases.append(big_row())
    for label, attrs, workload, fixed in cases:
        for mode in ("fast", "exhaustive") if reference else ("fast",):
            with exhaustive(mode == "exhaustive"):
                row = {"workload": label, "mode": mode}
                if fixed is None:
                    result, row["levels_wall"], row["levels_cpu"] = _timed(
                        choose_strategy, attrs, workload, EPSILON, 1)
                    axes = result.strategy.axes
                else:
                    axes = tuple(fixed)
                    row["levels_wall"] = row["levels_cpu"] = float("nan")
                costs, m = workload_costs(workload, attrs, axes)
                budgets, row["budgets_wall"], row["budgets_cpu"] = _timed(choose_budgets, axes, costs, m,
                                                                          EPSILON, 1)
                if fixed is not None:
                    result = budgets
            row["tuples"] = math.prod(tuple_shape(axes))
            row["measured"] = len(result.strategy.measured)
            row["rmse"] = math.sqrt(result.error)
            out.append(row)
    return out


def print_optimiser(quick: bool, reference: bool = True) -> bool:
    table = optimiser_rows(quick, reference)
    header = (f"{'workload':<30} {'mode':<10} {'tuples':>6} {'levels wall':>11} {'CPU':>6} "
              f"{'budgets wall':>12} {'CPU':>6} {'measured':>8} {'RMSE':>10}")
    print(f"budget optimiser, epsilon = {EPSILON:g}, {NEIGHBOURS}: seconds per workload "
          "(levels: the level choice with its budgets; budgets: one optimisation on the chosen levels)")
    print(header)
    print("-" * len(header))
    for r in table:
        print(f"{r['workload']:<30} {r['mode']:<10} {r['tuples']:>6} {r['levels_wall']:>11.2f} "
              f"{r['levels_cpu']:>6.2f} {r['budgets_wall']:>12.2f} {r['budgets_cpu']:>6.2f} "
              f"{r['measured']:>8} {r['rmse']:>10.5g}")
    fast = [r for r in table if r["mode"] == "fast"]
    budgets = max(r["budgets_cpu"] for r in fast)
    levels = max((r["levels_cpu"] for r in fast if not math.isnan(r["levels_cpu"])), default=0.0)
    ok = budgets <= BUDGET_SECONDS
    print(f"\ntarget: budget optimisation <= {BUDGET_SECONDS:g} s CPU for about 2,000 level tuples: "
          f"{'met' if ok else 'NOT met'} (largest {budgets:.2f} s)")
    print(f"target: level choice with its budgets <= {PLAN_SECONDS:g} s CPU per workload: "
          f"{'met' if levels <= PLAN_SECONDS else 'NOT met'} (largest {levels:.2f} s)")
    if reference:
        worst = max(r["rmse"] / e["rmse"] for r, e in zip(table[::2], table[1::2], strict=True))
        print(f"fast / exhaustive RMSE: at most {worst:.6f}")
    return ok


# ---------------------------------------------------------------------------- census release
#: issue 40: the hierarchical census release within these multiples of Privelet+ (uuTT).
RELEASE_TIME_RATIO = 2.0
RELEASE_MEMORY_RATIO = 2.0
RELEASE_MECHANISMS = ("hierarchical", "privelet+")


def _status_bytes(key: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def release_child(mechanism: str, rows: int, quick: bool = False) -> dict:
    """One census release in this (fresh) process: the plan built first (timed apart), then
    the release timed; peak memory read at the end."""
    from benchmarks.bench_floor import case_attributes, case_rows
    attrs, plus = case_attributes("census", quick)
    frame = case_rows("census", attrs, rows)
    t0, c0 = time.perf_counter(), time.process_time()
    if mechanism == "hierarchical":
        plan = pdp.plan("hierarchical", attrs, epsilon=EPSILON, neighbours=NEIGHBOURS, noise="exact",
                        workload=pdp.workload.random_ranges(attrs))
    else:
        plan = pdp.plan("privelet", attrs, epsilon=EPSILON, neighbours=NEIGHBOURS, noise="exact",
                        untransformed=plus)
    plan_wall, plan_cpu = time.perf_counter() - t0, time.process_time() - c0
    before = _status_bytes("VmRSS")
    load = os.getloadavg()[0]
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t0, c0 = time.perf_counter(), time.process_time()
    release = plan.run(frame, seed=1, progress=False)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    minflt = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
    cells = int(release.counts.size)
    del release
    return {"mechanism": mechanism, "wall": wall, "cpu": cpu, "minflt": minflt, "plan_wall": plan_wall,
            "plan_cpu": plan_cpu, "rss_before": before, "hwm": _status_bytes("VmHWM"), "load": load,
            "cells": cells, "measured": len(plan.measured) if mechanism == "hierarchical" else None}


def _release_run(mechanism: str, rows: int, quick: bool) -> dict:
    args = [sys.executable, "-m", "benchmarks.bench_strategies", "--release-child", mechanism,
            "--rows", str(rows)]
    proc = subprocess.run(args + (["--quick"] if quick else []), capture_output=True, text=True, check=False)
    if proc.returncode:
        return {"mechanism": mechanism, "error": (proc.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def census_release(rows: int, repeats: int, quick: bool = False) -> list[tuple[dict, dict]]:
    """``repeats`` interleaved pairs (hierarchical, Privelet+), the order alternating."""
    pairs = []
    for i in range(repeats):
        order = RELEASE_MECHANISMS if i % 2 == 0 else RELEASE_MECHANISMS[::-1]
        runs = {m: _release_run(m, rows, quick) for m in order}
        pairs.append((runs["hierarchical"], runs["privelet+"]))
    return pairs


def print_census_release(rows: int, repeats: int, quick: bool = False) -> bool:
    print(f"census release, {rows:,} rows, exact noise, epsilon = {EPSILON:g}, {NEIGHBOURS}: hierarchical "
          "(plan for the random range workload) vs Privelet+ untransformed=[age, gender]; one fresh "
          "process per release, interleaved pairs")
    header = (f"{'pair':>4} {'mechanism':<13} {'wall s':>7} {'CPU s':>7} {'peak GiB':>8} {'before GiB':>10} "
              f"{'minflt':>10} {'plan s':>7} {'load':>5}")
    print(header)
    print("-" * len(header))
    pairs = census_release(rows, repeats, quick)
    for i, pair in enumerate(pairs):
        for r in pair:
            if "error" in r:
                print(f"{i:>4} {r['mechanism']:<13} failed: {r['error']}")
                continue
            print(f"{i:>4} {r['mechanism']:<13} {r['wall']:>7.2f} {r['cpu']:>7.2f} {r['hwm'] / 2**30:>8.2f} "
                  f"{r['rss_before'] / 2**30:>10.2f} {r['minflt']:>10,} {r['plan_wall']:>7.2f} "
                  f"{r['load']:>5.2f}")
    good = [(h, p) for h, p in pairs if "error" not in h and "error" not in p]
    if not good:
        print("\nno pair completed")
        return False

    def med(key: str, k: int) -> float:
        return statistics.median(pair[k][key] for pair in good)

    time_ratio = statistics.median(h["wall"] / p["wall"] for h, p in good)
    cpu_ratio = statistics.median(h["cpu"] / p["cpu"] for h, p in good)
    memory_ratio = statistics.median(h["hwm"] / p["hwm"] for h, p in good)
    growth_ratio = statistics.median((h["hwm"] - h["rss_before"]) / max(1, p["hwm"] - p["rss_before"])
                                     for h, p in good)
    print(f"\nmedians over {len(good)} pairs: hierarchical {med('wall', 0):.2f} s wall, "
          f"{med('cpu', 0):.2f} s CPU, peak {med('hwm', 0) / 2**30:.2f} GiB; Privelet+ "
          f"{med('wall', 1):.2f} s wall, {med('cpu', 1):.2f} s CPU, peak {med('hwm', 1) / 2**30:.2f} GiB; "
          f"hierarchical plan (before the clock) {med('plan_wall', 0):.2f} s")
    ok_time = time_ratio <= RELEASE_TIME_RATIO
    ok_memory = memory_ratio <= RELEASE_MEMORY_RATIO
    print(f"target: hierarchical wall <= {RELEASE_TIME_RATIO:g}x Privelet+: "
          f"{'met' if ok_time else 'NOT met'} "
          f"({time_ratio:.2f}; CPU {cpu_ratio:.2f})")
    print(f"target: hierarchical peak memory <= {RELEASE_MEMORY_RATIO:g}x Privelet+: "
          f"{'met' if ok_memory else 'NOT met'} ({memory_ratio:.2f}; growth over the frame "
          f"{growth_ratio:.2f})")
    return ok_time and ok_memory and len(good) == len(pairs)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="skip the census rows (census release: 8 x 8 occupations)")
    parser.add_argument("--optimiser", action="store_true",
                        help="the optimiser's wall and CPU time per workload, fast and exhaustive")
    parser.add_argument("--census-release", action="store_true",
                        help="census release time and peak memory: hierarchical vs Privelet+ "
                        "(fresh processes)")
    parser.add_argument("--repeats", type=int, default=3, help="pairs of the census release (at least 3)")
    parser.add_argument("--rows", type=float, default=1e7, help="rows of the census release")
    parser.add_argument("--release-child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.release_child:
        print(json.dumps(release_child(args.release_child, int(args.rows), args.quick)))
        return 0
    if args.census_release:
        return 0 if print_census_release(int(args.rows), max(3, args.repeats), args.quick) else 1
    if args.optimiser:
        return 0 if print_optimiser(args.quick) else 1
    header = (f"{'workload':<30} {'today best plan':>26} {'levels':>8} {'best known':>11} "
              f"{'levels/best':>11} {'levels/today':>12} {'CPU s':>6} {'budgets':>7}  chosen levels")
    print(f"exact expected RMSE, epsilon = {EPSILON:g}, {NEIGHBOURS}, exact noise")
    print(header)
    print("-" * len(header))
    ok = True
    for label, attrs, workload, best, source in rows(args.quick):
        plans = grid_plan_errors(attrs, workload)
        today_name = min(plans, key=plans.__getitem__)
        today = math.sqrt(plans[today_name])
        start = time.process_time()
        result = choose_strategy(attrs, workload, EPSILON, 1)
        cpu = time.process_time() - start
        axes = result.strategy.axes
        costs, m = workload_costs(workload, attrs, axes)
        start = time.process_time()
        choose_budgets(axes, costs, m, EPSILON, 1)  # the budgets alone, on the chosen levels
        budget_cpu = time.process_time() - start
        ours = math.sqrt(result.error)
        vs_best = ours / best if best else float("nan")
        chains = " x ".join(ax.label for ax in result.strategy.axes)
        print(f"{label:<30} {today:>8.3g} ({today_name[:15]:>15}) {ours:>8.4g} "
              f"{(f'{best:.3g}' if best else '-'):>11} {vs_best:>11.2f} {ours / today:>12.2f} "
              f"{cpu:>6.2f} {budget_cpu:>7.2f}  "
              f"{chains}; {len(result.strategy.measured)} tuples measured"
              + (f"; best known: {source}" if best else ""))
        ok &= ours <= today * (1 + 1e-12) and (best is None or vs_best <= TARGET_RATIO)
    print(f"\ntarget: levels <= {TARGET_RATIO}x best known and <= today's best plan on every row: "
          f"{'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
