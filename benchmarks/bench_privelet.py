"""Privelet at census scale: time and peak memory of counts, Basic, Privelet+ and Privelet.

The table follows the Privelet paper's census set-up (Sec. VII): Age 0..100 (ordinal),
Gender (2), Occupation (512 leaves under 8 groups of 64: a 3-level hierarchy), Income
0..1000 (ordinal): 101 x 2 x 512 x 1001 ~ 1.04e8 cells, with 1e7 synthetic rows drawn by
numpy (seeded).  Every stage runs in one child process; its peak resident memory is the
kernel's high-water mark (``VmHWM``), reset before each stage (``/proc/self/clear_refs``;
where that is unavailable the process-wide ``ru_maxrss`` is shown instead).  Each
mechanism's time includes building its counts.  Ratios are against Basic in the same run.

It also prints the exact noise variance of a random range-count workload (Sec. VII-A:
1 to 4 predicates, random intervals and random non-root hierarchy nodes) per coverage
quintile, from :meth:`GridRelease.range_variance`.

``python -m benchmarks.bench_privelet [--quick] [--rows N]``
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import numpy as np

from benchmarks.memory import hwm_bytes

TARGET_RATIO = 2.0
TARGET_PEAK_GIB = 4.0


def census_attributes(occupation_groups: int, per_group: int):
    import polars_dp as pdp
    occupation = pdp.Hierarchy.from_dict({
        f"group{g}": list(range(g * per_group, (g + 1) * per_group)) for g in range(occupation_groups)
    })
    return [pdp.Ordinal("age", 0, 100), pdp.Nominal("gender", categories=["female", "male"]),
            pdp.Nominal("occupation", occupation), pdp.Ordinal("income", 0, 1000)]


def census_rows(n: int, n_occupations: int, seed: int = 2010):
    import polars as pl
    rng = np.random.default_rng(seed)
    age = np.clip(rng.normal(38, 18, n), 0, 100).astype(np.int64)
    occupation = np.minimum(rng.zipf(1.3, n) - 1, n_occupations - 1)
    income = np.minimum(rng.lognormal(5.0, 0.9, n), 1000).astype(np.int64)
    gender = np.where(rng.random(n) < 0.5, "female", "male")
    return pl.DataFrame({"age": age, "gender": gender, "occupation": occupation, "income": income})


def _reset_hwm() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def workload(attrs, n_queries: int, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    """Random range-count queries as cell ranges (starts, stops), shape (queries, d)."""
    rng = np.random.default_rng(seed)
    d = len(attrs)
    starts = np.zeros((n_queries, d), dtype=np.int64)
    stops = np.tile(np.array([a.n_cells for a in attrs]), (n_queries, 1))
    k = rng.integers(1, d + 1, n_queries)
    rank = np.argsort(np.argsort(rng.random((n_queries, d)), axis=1), axis=1)
    for axis, a in enumerate(attrs):
        use = rank[:, axis] < k  # k distinct random attributes per query
        if hasattr(a, "hierarchy"):
            h = a.hierarchy
            node = rng.integers(1, h.n_nodes, n_queries)  # a random non-root node
            s, t = h.node_start[node], h.node_stop[node]
        else:
            x, y = rng.integers(0, a.n_cells, (2, n_queries))
            s, t = np.minimum(x, y), np.maximum(x, y) + 1
        starts[use, axis], stops[use, axis] = s[use], t[use]
    return starts, stops


def child(rows: int, groups: int, per_group: int) -> None:
    import polars_dp as pdp
    from polars_dp.counting.frequency import frequency_matrix

    attrs = census_attributes(groups, per_group)
    frame = census_rows(rows, groups * per_group)
    out = {"cells": int(np.prod([a.n_cells for a in attrs])), "rows": rows, "stages": []}
    stages = [
        ("counts", lambda: frequency_matrix(frame, attrs)),
        ("basic", lambda: pdp.basic(frame, attrs, epsilon=1.0, seed=1)),
        ("privelet+ {age, gender}", lambda: pdp.privelet(frame, attrs, epsilon=1.0,
                                                          untransformed=["age", "gender"], seed=1)),
        ("privelet (all transformed)", lambda: pdp.privelet(frame, attrs, epsilon=1.0, seed=1)),
    ]
    starts, stops = workload(attrs, 40_000)
    cover = np.prod((stops - starts) / np.array([a.n_cells for a in attrs]), axis=1)
    edges = np.quantile(cover, [0.2, 0.4, 0.6, 0.8])
    bucket = np.searchsorted(edges, cover, side="right")
    out["quintile_coverage"] = [float(cover[bucket == b].mean()) for b in range(5)]
    out["quintile_variance"] = {}
    frequency_matrix(frame.head(1000), attrs)  # warm-up: the first stage should not pay it
    out["baseline_bytes"] = hwm_bytes()
    for name, run in stages:
        reset = _reset_hwm()
        t0 = time.perf_counter()
        result = run()
        seconds = time.perf_counter() - t0
        out["stages"].append({"name": name, "seconds": seconds, "peak_bytes": hwm_bytes(), "reset": reset})
        if name != "counts":
            var = result.range_variance(starts, stops)
            out["quintile_variance"][name] = (np.bincount(bucket, var, 5)
                                              / np.bincount(bucket, minlength=5)).tolist()
        del result  # each stage's peak counts its own output only
    print(json.dumps(out))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1e6 rows, Occupation 64 leaves (8 x 8)")
    parser.add_argument("--rows", type=int, default=None)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    groups, per_group = (8, 8) if args.quick else (8, 64)
    rows = args.rows or (1_000_000 if args.quick else 10_000_000)
    if args.child:
        child(rows, groups, per_group)
        return 0
    cmd = [sys.executable, "-m", "benchmarks.bench_privelet", "--child", "--rows", str(rows)]
    if args.quick:
        cmd.append("--quick")
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode:
        sys.stderr.write(proc.stderr)
        return proc.returncode
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    gib = 2**30
    print(f"census shape: Age 101 x Gender 2 x Occupation {groups * per_group} ({groups} x {per_group}) "
          f"x Income 1001 = {res['cells']:,} cells, {res['rows']:,} rows; epsilon = 1, replace")
    print(f"data frame and interpreter before the stages: {res['baseline_bytes'] / gib:.2f} GiB RSS")
    basic = next(s for s in res["stages"] if s["name"] == "basic")
    print(f"\n{'stage':<28}{'time s':>9}{'x Basic':>9}{'peak RSS GiB':>14}")
    for s in res["stages"]:
        print(f"{s['name']:<28}{s['seconds']:>9.2f}{s['seconds'] / basic['seconds']:>9.2f}"
              f"{s['peak_bytes'] / gib:>14.2f}")
    whole = max(max(s["peak_bytes"] for s in res["stages"]), res["baseline_bytes"]) / gib
    plus = next(s for s in res["stages"] if s["name"].startswith("privelet+"))
    ratio = plus["seconds"] / basic["seconds"]
    print(f"\nPrivelet+ / Basic time: {ratio:.2f} (target <= {TARGET_RATIO}: "
          f"{'met' if ratio <= TARGET_RATIO else 'MISSED'}); peak RSS of the run {whole:.2f} GiB "
          f"(target < {TARGET_PEAK_GIB}: {'met' if whole < TARGET_PEAK_GIB else 'MISSED'})")
    if not all(s["reset"] for s in res["stages"]):
        print("(peak RSS could not be reset between stages: each value is the running maximum)")
    print("\nexact noise variance of 40,000 random range counts, mean per coverage quintile "
          "(ratio to Basic)")
    names = list(res["quintile_variance"])
    print(f"{'coverage':>12}" + "".join(f"{n.split()[0]:>22}" for n in names))
    for q, cov in enumerate(res["quintile_coverage"]):
        base = res["quintile_variance"]["basic"][q]
        var = [res["quintile_variance"][n][q] for n in names]
        cells = "".join(f"{v:>13.3g} ({v / base:6.3f})" for v in var)
        print(f"{cov:>12.2e}{cells}")
    return 0


if __name__ == "__main__":
    # run by ``python -m benchmarks`` the argv belongs to the runner
    sys.exit(main(sys.argv[1:] if sys.argv[0].endswith("bench_privelet.py") else []))
