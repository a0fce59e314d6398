"""Peak memory of streaming a large grid release through the Arrow PyCapsule interface.

    python -m benchmarks.bench_arrow_stream [--quick] [--cells N]

Each consumer runs in a fresh process that builds a grid release of N cells (default 1e8:
two ordinal attributes, 100 x 1e6 cells; ``--quick``: 1e7) and then reads it as an Arrow
stream.  The figure is the growth of the peak resident set (``VmHWM``) from just before the
counts were allocated, divided by the bytes of the release's own arrays (the counts): the
target is <= 1.3x (the stream holds one batch of labels at a time, the count column is a
view of the counts).  ``to_arrow()`` (the whole table at once) is the baseline.  Page faults
(``ru_minflt``) and wall time are shown beside it; the machine is shared, so times are noisy.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

CONSUMERS = ("pyarrow_reader", "duckdb_sum", "polars_batches", "to_arrow_baseline")


def _rss() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise OSError("no VmRSS")


def child(consumer: str, cells: int) -> dict:
    import duckdb
    import numpy as np
    import polars as pl
    import pyarrow as pa
    import pyarrow.compute as pc

    import polars_dp as pdp
    from benchmarks.memory import hwm_bytes

    inner = cells // 100
    attrs = [pdp.Ordinal("a", 0, 99), pdp.Ordinal("b", 0, inner - 1)]
    before = _rss()
    counts = np.random.default_rng(0).standard_normal((100, inner))  # stands in for noisy counts
    release = pdp.GridRelease(counts, attrs, mechanism="basic", epsilon=1.0, neighbours="add_remove",
                              noise_scale=1.0, seeded=True)
    own = counts.nbytes
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t0 = time.perf_counter()
    if consumer == "pyarrow_reader":
        reader = pa.RecordBatchReader.from_stream(release)
        total = sum(float(pc.sum(b.column("count")).as_py()) for b in reader)
    elif consumer == "duckdb_sum":
        total = duckdb.sql("SELECT sum(count) FROM release").fetchall()[0][0]
    elif consumer == "polars_batches":
        total = float(sum(pl.from_arrow(b)["count"].sum() for b in pa.RecordBatchReader.from_stream(release)))
    else:
        total = float(pc.sum(release.to_arrow().column("count")).as_py())
    secs = time.perf_counter() - t0
    expected = float(counts.sum())
    return {"consumer": consumer, "cells": cells, "own_bytes": own, "peak_growth": hwm_bytes() - before,
            "minflt": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults, "seconds": secs,
            "sum_ok": abs(total - expected) <= 1e-6 * max(1.0, abs(expected)) + 1e-3}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--cells", type=int, default=None)
    parser.add_argument("--child", default=None)
    args = parser.parse_args(argv)
    cells = args.cells or (10_000_000 if args.quick else 100_000_000)
    if args.child:
        print(json.dumps(child(args.child, cells)))
        return 0
    print(f"grid of {cells:,} cells; peak = VmHWM growth from before the counts, / the counts' bytes")
    print(f"{'consumer':<20}{'peak / arrays':>14}{'peak MB':>10}{'minflt':>10}{'seconds':>9}  sum")
    worst = 0.0
    for consumer in CONSUMERS:
        out = subprocess.run([sys.executable, "-m", "benchmarks.bench_arrow_stream", "--cells", str(cells),
                              "--child", consumer], capture_output=True, text=True, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        ratio = r["peak_growth"] / r["own_bytes"]
        if consumer != "to_arrow_baseline":
            worst = max(worst, ratio)
        print(f"{consumer:<20}{ratio:>14.3f}{r['peak_growth'] / 2**20:>10.0f}{r['minflt']:>10,}"
              f"{r['seconds']:>9.2f}  {'ok' if r['sum_ok'] else 'WRONG'}")
    print(f"worst streaming consumer: {worst:.3f}x the release arrays (target <= 1.3x)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
