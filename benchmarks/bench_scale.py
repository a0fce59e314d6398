"""Out-of-core scale: Privelet+ on a census-like Parquet file through Polars, DuckDB and Spark.

A 4-column Parquet file (Age 0..100, Gender 2, Occupation 512 leaves under 8 groups, Income
0..1000 in bins of 100: 101 x 2 x 512 x 11 = 1,137,664 cells) of ``--rows`` rows (default
3e8, ~1-2 GB) is generated in chunks under ``benchmarks/out/`` (kept between runs).  Each
measurement runs in its own child process, which reports its wall time and its peak resident
memory (``VmHWM``; the Spark row counts the Python driver only, not the JVM):

* ``duckdb GROUP BY``: the baseline, a plain ``SELECT ..., COUNT(*) ... GROUP BY`` in DuckDB;
* ``privelet+ polars``: ``pdp.privelet(pl.scan_parquet(file), ...)`` (streamed batches);
* ``privelet+ duckdb``: ``pdp.privelet(con.read_parquet(file), ...)`` (GROUP BY in DuckDB);
* Spark (``local[2]``) on a ``--spark-rows`` file (default 1e7) against the Polars path on the
  same file; Spark start-up is timed apart.

DuckDB runs with ``memory_limit = --duckdb-memory`` (default 1GB; it spills).  Memory is not
pre-touched: each child also reports its minor page faults (``ru_minflt``).  The three runs are
repeated ``--repeats`` times, interleaved, and ratios are taken within a round.  Targets (issue
26, at 1e8 rows): Polars <= 1.1x and DuckDB relation <= 1.3x the plain ``GROUP BY ALL``; peak
RSS <= 1.5 GiB.

``python -m benchmarks.bench_scale [--quick] [--rows N] [--spark-rows N] [--no-spark]``
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.memory import hwm_bytes
from benchmarks.peers import missing, skip_line

OUT = Path(__file__).parent / "out"
TARGET_PEAK_GIB = 1.5
TARGET_POLARS = 1.1
TARGET_DUCKDB = 1.3
CHUNK = 10_000_000
EPSILON = 1.0


def attributes():
    import polars_dp as pdp
    occupation = pdp.Hierarchy.from_dict({f"group{g}": list(range(g * 64, (g + 1) * 64)) for g in range(8)})
    return [pdp.Ordinal("age", 0, 100), pdp.Nominal("gender", categories=["female", "male"]),
            pdp.Nominal("occupation", occupation), pdp.Ordinal("income", 0, 1000, width=100)]


def generate(path: Path, rows: int, seed: int = 2010) -> None:
    """Write ``rows`` census-like rows in chunks (never more than one chunk in memory)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".partial")
    rng = np.random.default_rng(seed)
    schema = pa.schema([("age", pa.int16()), ("gender", pa.dictionary(pa.int8(), pa.string())),
                        ("occupation", pa.int16()), ("income", pa.int16())])
    genders = pa.array(["female", "male"])
    with pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
        for start in range(0, rows, CHUNK):
            n = min(CHUNK, rows - start)
            age = np.clip(rng.normal(38, 18, n), 0, 100).astype(np.int16)
            gender = pa.DictionaryArray.from_arrays(pa.array((rng.random(n) < 0.5).astype(np.int8)), genders)
            occupation = np.minimum(rng.zipf(1.3, n) - 1, 511).astype(np.int16)
            income = np.minimum(rng.lognormal(5.0, 0.9, n), 1000).astype(np.int16)
            writer.write_table(pa.table([age, gender, occupation, income], schema=schema),
                               row_group_size=1 << 20)
    tmp.rename(path)


def child(task: str, path: str, duckdb_memory: str) -> None:
    """One measurement in this process; prints a JSON line."""
    import resource

    import duckdb
    import polars as pl

    import polars_dp as pdp

    attrs = attributes()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    out: dict = {"task": task}
    if task == "duckdb_groupby":
        con = duckdb.connect(config={"memory_limit": duckdb_memory})
        t0 = time.perf_counter()
        rows = con.sql(f"SELECT age, gender, occupation, income // 100 AS income, COUNT(*) AS n "
                       f"FROM read_parquet('{path}') GROUP BY ALL").arrow().read_all()
        out["seconds"] = time.perf_counter() - t0
        out["groups"] = rows.num_rows
    elif task == "spark":
        from pyspark.sql import SparkSession
        t0 = time.perf_counter()
        spark = (SparkSession.builder.master("local[2]").appName("polars-dp-bench")
                 .config("spark.driver.memory", "2g").config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false")
                 .config("spark.sql.shuffle.partitions", "4").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        out["startup_seconds"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        release = pdp.privelet(spark.read.parquet(path), attrs, epsilon=EPSILON, untransformed="auto", seed=1)
        out["seconds"] = time.perf_counter() - t0
        out["total"] = float(release.counts.sum())
        spark.stop()
    else:
        data = (pl.scan_parquet(path) if task == "polars"
                else duckdb.connect(config={"memory_limit": duckdb_memory}).read_parquet(path))
        t0 = time.perf_counter()
        release = pdp.privelet(data, attrs, epsilon=EPSILON, untransformed="auto", seed=1)
        out["seconds"] = time.perf_counter() - t0
        out["total"] = float(release.counts.sum())
        out["mechanism"] = release.mechanism
    out["peak_bytes"] = hwm_bytes()
    out["minflt"] = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    print(json.dumps(out))


def run_child(task: str, path: Path, duckdb_memory: str) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.bench_scale", "--child", task, "--file", str(path),
           "--duckdb-memory", duckdb_memory]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=Path(__file__).parent.parent)
    if proc.returncode:
        sys.stderr.write(proc.stderr[-4000:])
        raise SystemExit(f"{task} failed")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2e6 rows, Spark on 2e5 rows")
    parser.add_argument("--rows", type=float, default=None, help="rows of the scale file (default 3e8)")
    parser.add_argument("--spark-rows", type=float, default=None, help="rows of the Spark file (default 1e7)")
    parser.add_argument("--no-spark", action="store_true")
    parser.add_argument("--duckdb-memory", default="1GB")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--file", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.file, args.duckdb_memory)
        return 0
    rows = int(args.rows or (2e6 if args.quick else 3e8))
    spark_rows = int(args.spark_rows or (2e5 if args.quick else 1e7))
    gib = 2**30
    path = OUT / f"census_{rows}.parquet"
    t0 = time.perf_counter()
    generate(path, rows)
    print(f"{rows:,} rows, 101 x 2 x 512 x 11 = 1,137,664 cells; file {path.stat().st_size / gib:.2f} GiB "
          f"(ready in {time.perf_counter() - t0:.0f} s); Privelet+ (untransformed='auto'), epsilon = 1; "
          f"DuckDB memory_limit = {args.duckdb_memory}")
    tasks = ("duckdb_groupby", "polars", "duckdb")
    rounds = [{task: run_child(task, path, args.duckdb_memory) for task in tasks}
              for _ in range(args.repeats)]
    names = {"duckdb_groupby": "duckdb GROUP BY (baseline)", "polars": "privelet+ polars scan_parquet",
             "duckdb": "privelet+ duckdb relation"}
    targets = {"polars": TARGET_POLARS, "duckdb": TARGET_DUCKDB}
    print(f"\n{'run':<30}{'time s':>14}{'x GROUP BY':>13}{'peak RSS GiB':>14}{'minor faults':>14}")
    for task in tasks:
        times = [r[task]["seconds"] for r in rounds]
        ratios = [r[task]["seconds"] / r["duckdb_groupby"]["seconds"] for r in rounds]
        peak = max(r[task]["peak_bytes"] for r in rounds) / gib
        faults = max(r[task]["minflt"] for r in rounds)
        verdict = ""
        if task in targets:
            verdict = f"  target <= {targets[task]}: {'met' if min(ratios) <= targets[task] else 'MISSED'}"
        print(f"{names[task]:<30}{min(times):>6.2f}-{max(times):<7.2f}{min(ratios):>6.2f}-{max(ratios):<6.2f}"
              f"{peak:>14.2f}{faults:>14,}{verdict}")
    for i, r in enumerate(rounds):
        base = r["duckdb_groupby"]["seconds"]
        print(f"  round {i + 1}: " + ", ".join(f"{t} {r[t]['seconds'] / base:.2f}x" for t in tasks[1:]))
    worst = max(r[t]["peak_bytes"] for r in rounds for t in ("polars", "duckdb")) / gib
    print(f"peak RSS of the releases {worst:.2f} GiB (target <= {TARGET_PEAK_GIB}: "
          f"{'met' if worst <= TARGET_PEAK_GIB else 'MISSED'})")
    if args.no_spark:
        return 0
    line = skip_line(missing("bench_scale"), "\nSpark: ")
    if line:
        print(line)
        return 0
    small = OUT / f"census_{spark_rows}.parquet"
    generate(small, spark_rows)
    sp = run_child("spark", small, args.duckdb_memory)
    po = run_child("polars", small, args.duckdb_memory)
    print(f"\nSpark local[2], {spark_rows:,} rows: start-up {sp['startup_seconds']:.1f} s, Privelet+ "
          f"{sp['seconds']:.2f} s vs Polars scan_parquet {po['seconds']:.2f} s "
          f"({sp['seconds'] / po['seconds']:.1f}x); driver peak RSS {sp['peak_bytes'] / gib:.2f} GiB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] if sys.argv[0].endswith("bench_scale.py") else []))
