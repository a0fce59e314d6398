"""A filtered ``scan_release`` against a full ``read_release`` of a large grid release file.

    python -m benchmarks.bench_scan [--quick] [--cells N]

Writes a grid release of N cells (default 1e8: ``a`` 100 values x ``b`` N/100 values, noisy
counts stood in by Gaussian numbers; ``--quick``: 1e7) with ``write_parquet`` (cells in C
order, row groups of 2^20 rows with statistics), then, each in a fresh process:

* ``read_release``: read and verify the whole file (the baseline);
* ``scan_release`` creation (verifies the whole file once, like ``read_release``);
* a collect of ``scan.filter(a == 42)``: 1 % of the cells.

Targets: the filtered collect reads <= 5 % of the file (``rchar`` of /proc/self/io, bytes
returned by read calls) and takes <= 10 % of the ``read_release`` time.  Times are wall
clock on a shared machine: noisy, run it twice and read ranges; the first run is cold
(fresh pages, page cache), the repeat warm.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _rchar() -> int:
    with open("/proc/self/io") as fh:
        for line in fh:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    raise OSError("no rchar")


def write(path: Path, cells: int) -> float:
    import numpy as np

    import polars_dp as pdp

    inner = cells // 100
    counts = np.random.default_rng(0).standard_normal((100, inner))
    release = pdp.GridRelease(counts, [pdp.Ordinal("a", 0, 99), pdp.Ordinal("b", 0, inner - 1)],
                              mechanism="basic", epsilon=1.0, neighbours="add_remove", noise_scale=1.0,
                              seeded=True)
    t0 = time.perf_counter()
    release.write_parquet(path)
    return time.perf_counter() - t0


def child(phase: str, path: Path) -> dict:
    import polars as pl

    import polars_dp as pdp
    from benchmarks.memory import hwm_bytes

    r0, t0 = _rchar(), time.perf_counter()
    if phase == "read_release":
        rows = pdp.read_release(path).n_cells
    elif phase == "scan_create":
        pdp.scan_release(path)
        rows = 0
    else:
        lf = pdp.scan_release(path)
        r0, t0 = _rchar(), time.perf_counter()
        rows = lf.filter(pl.col("a") == 42).collect().height
    return {"phase": phase, "seconds": time.perf_counter() - t0, "read": _rchar() - r0, "rows": rows,
            "peak_mb": hwm_bytes() / 2**20}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--cells", type=int, default=None)
    parser.add_argument("--child", default=None)
    parser.add_argument("--path", default=None)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, Path(args.path))))
        return 0
    cells = args.cells or (10_000_000 if args.quick else 100_000_000)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "grid.parquet"
        secs = write(path, cells)
        size = os.path.getsize(path)
        print(f"grid release of {cells:,} cells: {size / 2**20:,.0f} MB written in {secs:.1f} s")
        print(f"{'phase':<22}{'run':>5}{'seconds':>10}{'MB read':>10}{'% file':>8}{'peak MB':>9}{'rows':>12}")
        results: dict[str, list[dict]] = {}
        for run in ("cold", "warm"):
            for phase in ("read_release", "scan_create", "filtered_collect"):
                out = subprocess.run([sys.executable, "-m", "benchmarks.bench_scan", "--child", phase,
                                      "--path", str(path)], capture_output=True, text=True, check=True)
                r = json.loads(out.stdout.strip().splitlines()[-1])
                results.setdefault(phase, []).append(r)
                print(f"{phase:<22}{run:>5}{r['seconds']:>10.3f}{r['read'] / 2**20:>10.1f}"
                      f"{100 * r['read'] / size:>8.2f}{r['peak_mb']:>9.0f}{r['rows']:>12,}")
        for i, run in enumerate(("cold", "warm")):
            f, full = results["filtered_collect"][i], results["read_release"][i]
            print(f"{run}: filtered collect reads {100 * f['read'] / size:.2f} % of the file (target <= 5 %) "
                  f"in {100 * f['seconds'] / full['seconds']:.1f} % of read_release's time (target <= 10 %)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
