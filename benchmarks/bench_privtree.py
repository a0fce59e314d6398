"""PrivTree vs UG and AG: release time, peak memory, range queries per second.

Skewed points (half in a tight Gaussian cluster per dimension, half uniform).  Every
(size, mechanism) runs in a fresh process: the input frame is built there first, then the
release is timed; "extra peak" is the growth of the process's peak RSS during the release.
10,000 random medium-size square queries are then answered by the release.  Targets on 1e7 2-D
points: PrivTree (its default, ``levels=0``: as published) within 3x the time of UG, and PrivTree
with counted top levels (``levels=None``: the documented number for ``d``, the inference included)
within 1.3x PrivTree as published; ``privtree_subgrid`` (PrivTree leaves with noisy sub-grids,
issue 41) within 1.5x PrivTree's release time and 1.5x its time answering the 10,000 boxes.
Every run is cold (a fresh process); ``faults`` counts its minor page faults.

    python -m benchmarks.bench_privtree [--quick | --large-2d | --subgrid]

``--subgrid``: only PrivTree and privtree_subgrid on 1e7 clustered 2-D points, in the same run.
"""

from __future__ import annotations

import multiprocessing as mp
import resource
import sys
import time

import numpy as np

CASES = [(1_000_000, 2), (10_000_000, 2), (1_000_000, 4)]
QUICK_CASES = [(100_000, 2), (100_000, 4)]
#: label -> (mechanism, keyword arguments)
MECHANISMS = {"uniform_grid": ("uniform_grid", {}), "privtree": ("privtree", {}),
              "privtree levels": ("privtree", {"levels": None}), "adaptive_grid": ("adaptive_grid", {}),
              "privtree_subgrid": ("privtree_subgrid", {})}
#: The labels of ``--subgrid`` (the first is the base of the ratios).
SUBGRID_LABELS = ("privtree", "privtree_subgrid")
EPSILON = 1.0


def skewed_frame(n: int, d: int, seed: int = 0):
    import polars as pl
    rng = np.random.default_rng(seed)
    cols = {}
    for j in range(d):
        hot = np.clip(rng.normal(0.3 + 0.1 * j, 0.02, n // 2), 0, 1)
        cols[f"x{j}"] = np.concatenate([hot, rng.uniform(0, 1, n - n // 2)])
    return pl.DataFrame(cols)


def _run(n: int, d: int, label: str, out: mp.Queue) -> None:
    import polars_dp  # noqa: F401  (registers df.dp)
    from polars_dp.evaluation.spatial_workloads import random_boxes
    frame = skewed_frame(n, d)
    cols = list(frame.columns)
    bounds = [(0.0, 1.0)] * d
    mechanism, kwargs = MECHANISMS[label]
    usage = resource.getrusage(resource.RUSAGE_SELF)
    base, faults = usage.ru_maxrss, usage.ru_minflt
    t = time.perf_counter()
    release = getattr(frame.dp, mechanism)(cols, bounds=bounds, epsilon=EPSILON, seed=1, **kwargs)
    seconds = time.perf_counter() - t
    usage = resource.getrusage(resource.RUSAGE_SELF)
    peak, faults = usage.ru_maxrss, usage.ru_minflt - faults
    boxes = random_boxes(cols, bounds, 10_000, volume="medium", seed=2)
    t = time.perf_counter()
    release.range_count_array(boxes)
    q_seconds = time.perf_counter() - t
    out.put({"seconds": seconds, "extra_mib": (peak - base) / 1024, "peak_mib": peak / 1024, "faults": faults,
             "leaves": release.n_leaves, "qps": 10_000 / q_seconds, "q_seconds": q_seconds})


def measure(n: int, d: int, mechanism: str) -> dict:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_run, args=(n, d, mechanism, q))
    p.start()
    result = q.get()
    p.join()
    return result


def main(argv: list[str]) -> int:
    subgrid = "--subgrid" in argv
    cases = (QUICK_CASES if "--quick" in argv else [(10_000_000, 2)] if "--large-2d" in argv or subgrid
             else CASES)
    labels = list(SUBGRID_LABELS) if subgrid else list(MECHANISMS)
    base_label = labels[0] if subgrid else "uniform_grid"
    short = "PT" if subgrid else "UG"
    print(f"epsilon={EPSILON}; time and peak memory per release (fresh process each); "
          f"ratios against {base_label} on the same points; 10,000 medium queries")
    header = (f"{'points':>12} {'d':>2} {'mechanism':>16} {'seconds':>8} {'x ' + short:>6} {'extra MiB':>10} "
              f"{'peak MiB':>9} {'faults':>9} {'leaves':>10} {'queries/s':>10}")
    print(header)
    print("-" * len(header))
    for n, d in cases:
        results = {m: measure(n, d, m) for m in labels}
        base = results[base_label]["seconds"]
        for m in labels:
            r = results[m]
            print(f"{n:>12,} {d:>2} {m:>16} {r['seconds']:>8.3f} {r['seconds'] / base:>6.2f} "
                  f"{r['extra_mib']:>10.0f} {r['peak_mib']:>9.0f} {r['faults']:>9,} {r['leaves']:>10,} "
                  f"{r['qps']:>10,.0f}")
        if n >= 10_000_000 and d == 2:
            pt, sg = results["privtree"], results["privtree_subgrid"]
            build, answer = sg["seconds"] / pt["seconds"], sg["q_seconds"] / pt["q_seconds"]
            print(f"target privtree_subgrid <= 1.5x PrivTree's release time on {n:,} 2-D points: "
                  f"{build:.2f}x -> {'met' if build <= 1.5 else 'NOT met'}")
            print(f"target privtree_subgrid <= 1.5x PrivTree's time answering 10,000 boxes: {answer:.2f}x -> "
                  f"{'met' if answer <= 1.5 else 'NOT met'}")
        if n >= 10_000_000 and d == 2 and not subgrid:
            ratio = results["privtree"]["seconds"] / base
            print(f"target PrivTree <= 3x UG on {n:,} 2-D points: {ratio:.2f}x -> "
                  f"{'met' if ratio <= 3 else 'NOT met'}")
            ratio = results["privtree levels"]["seconds"] / results["privtree"]["seconds"]
            print(f"target PrivTree (levels=None) <= 1.3x PrivTree (levels=0) on {n:,} 2-D points: "
                  f"{ratio:.2f}x -> {'met' if ratio <= 1.3 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
