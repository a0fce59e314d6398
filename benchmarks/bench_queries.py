"""Range-count queries on a census-shaped release: Python batch, DuckDB registration and SQL batch.

The release is Basic (or Privelet: ``--mechanism privelet``) on synthetic rows over the Privelet
paper's census shape (Age 0..100, Gender 2, Occupation 512 leaves under 3 levels, Income
0..1000: 103,521,024 cells); the
queries are the paper's workload (40,000 queries, 1-4 predicates).  Baselines measured in
the same run: summing the cells of each query's slice in numpy (Python), and the Python
batch path (SQL).

    python -m benchmarks.bench_queries            # full size (about 10 GiB peak)
    python -m benchmarks.bench_queries --quick    # 1.3e6 cells, seconds
    python -m benchmarks.bench_queries --quick --mechanism privelet

Besides the timings it prints the ratios the SQL targets are stated in, measured in the same run
(the machine may be shared: wall time, CPU time of this process and the load average are shown
side by side, each the median of interleaved repeats):

* the SQL batch with ``alpha`` (``lo`` / ``hi``) over the same batch asking ``std`` only;
* ``to_duckdb`` (in-memory database; a database file) over ``write_parquet`` of the same
  release, and the peak memory of each over the release's count array (``VmHWM`` of a fresh
  process that reads the release file and does only that step; the increment over its memory
  once the release is read beside it);
* the registration by the release's SQL script (``release.sql_script``, written once before),
  run through the ``duckdb`` module on an in-memory connection and on a database file, in a
  fresh process that does not read the release (no Python of the library runs: the script
  reads the Parquet file itself), over the same ``write_parquet``, and its peak memory.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import polars as pl

import polars_dp as pdp
from polars_dp.domains.queries import query_ranges
from polars_dp.evaluation.workloads import random_workload

TARGET_QPS = 200_000
TARGET_SQL_S = 5.0
TARGET_REGISTER_S = 30.0


def census_attributes(quick: bool) -> list:
    groups, leaves, income_hi = (8, 8, 100) if quick else (16, 32, 1000)
    occupation = {f"group{g:02d}": [f"occ{g:02d}_{j:02d}" for j in range(leaves)] for g in range(groups)}
    return [
        pdp.Ordinal("age", 0, 100),
        pdp.Nominal("gender", categories=["female", "male"]),
        pdp.Nominal("occupation", pdp.Hierarchy.from_dict(occupation, level_names=["group"])),
        pdp.Ordinal("income", 0, income_hi),
    ]


def synthetic_rows(attrs: list, n: int, seed: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    occupations = np.array(attrs[2].hierarchy.leaves)
    return pl.DataFrame({
        "age": np.clip(rng.normal(40, 18, n), 0, 100).astype(np.int64),
        "gender": rng.choice(["female", "male"], n),
        "occupation": occupations[rng.zipf(1.6, n) % occupations.size],
        "income": np.clip(rng.lognormal(4.5 if attrs[3].hi > 100 else 3.0, 0.8, n), 0, attrs[3].hi)
        .astype(np.int64),
    })


def timed(fn, *args, **kwargs):
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def measured(fn) -> dict[str, float]:
    """Wall and CPU seconds (this process, every thread) of ``fn()`` and the 1-minute load."""
    w, c = time.perf_counter(), time.process_time()
    fn()
    return {"wall": time.perf_counter() - w, "cpu": time.process_time() - c, "load": os.getloadavg()[0]}


def interleaved(runs: dict[str, object], repeats: int) -> dict[str, dict[str, float]]:
    """Median wall / CPU / load of each of ``runs`` (name -> function), run in turn ``repeats``
    times (after one warm-up each), so a change of load hits them alike."""
    for fn in runs.values():
        fn()
    seen: dict[str, list[dict[str, float]]] = {k: [] for k in runs}
    for _ in range(repeats):
        for k, fn in runs.items():
            seen[k].append(measured(fn))
    fields = ("wall", "cpu", "load")
    return {k: {f: statistics.median(x[f] for x in v) for f in fields} for k, v in seen.items()}


def memory_status() -> dict[str, int]:
    """``VmRSS`` and ``VmHWM`` (peak) of this process in bytes (Linux)."""
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            key, value = line.split(":")
            out[key] = int(value.split()[0]) * 1024
    return out


def child(step: str, path: str) -> None:
    """One step on the release file ``path`` in this fresh process; prints JSON: times, the
    count array's bytes, memory once the release is read and the peak after the step.  The
    script steps run ``<path>.sql`` (the release's script) and read no release (``counts``: 0)."""
    if step.startswith("script"):
        script = Path(path + ".sql").read_text()
        before = memory_status()
        with tempfile.TemporaryDirectory() as tmp:
            con = duckdb.connect(str(Path(tmp) / "copy.duckdb") if step == "script_file" else ":memory:")
            cost = measured(lambda: con.execute(script))
            con.close()
        print(json.dumps({**cost, "counts": 0, "rss": before["VmRSS"], "peak": memory_status()["VmHWM"]}))
        return
    release = pdp.read_release(path)
    before = memory_status()
    with tempfile.TemporaryDirectory() as tmp:
        if step == "write_parquet":
            cost = measured(lambda: release.write_parquet(Path(tmp) / "copy.parquet"))
        else:  # to_duckdb into an in-memory database, or a database file
            con = duckdb.connect(str(Path(tmp) / "copy.duckdb") if step == "to_duckdb_file" else ":memory:")
            cost = measured(lambda: release.to_duckdb(con, "census"))
            con.close()
    print(json.dumps({**cost, "counts": release.counts.nbytes, "rss": before["VmRSS"],
                      "peak": memory_status()["VmHWM"]}))


def in_child(step: str, path: Path) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-m", "benchmarks.bench_queries", "--child", step, str(path)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def registration_vs_parquet(release, repeats: int) -> dict[str, dict[str, float]]:
    """Medians over ``repeats`` interleaved fresh processes of ``write_parquet``, ``to_duckdb`` and the
    script's registration (in-memory; a database file)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "release.parquet"
        release.write_parquet(path)
        Path(str(path) + ".sql").write_text(release.sql_script(path, "census"))
        seen: dict[str, list[dict[str, float]]] = {"write_parquet": [], "to_duckdb": [], "to_duckdb_file": [],
                                                   "script": [], "script_file": []}
        for _ in range(repeats):
            for step in seen:
                seen[step].append(in_child(step, path))
    return {k: {f: statistics.median(x[f] for x in v) for f in v[0]} for k, v in seen.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small cube (1.3e6 cells)")
    parser.add_argument("--queries", type=int, default=40_000)
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repeats of each ratio")
    parser.add_argument("--mechanism", choices=["basic", "privelet"], default="basic",
                        help="the release's mechanism (privelet: Haar / nominal wavelet noise on every axis)")
    parser.add_argument("--child", nargs=2, metavar=("STEP", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child)
        return
    attrs = census_attributes(args.quick)
    rows = 1_000_000 if args.quick else 10_000_000
    frame = synthetic_rows(attrs, rows, seed=1)
    release, t_release = timed(getattr(frame.dp, args.mechanism), attrs, epsilon=1.0, seed=2)
    del frame
    workload = random_workload(attrs, args.queries, seed=3)
    print(f"{args.mechanism} release: {release.n_cells:,} cells from {rows:,} rows in {t_release:.1f} s; "
          f"{args.queries:,} workload queries")

    _, t_prefix = timed(lambda: release.prefix)
    answers, t_python = timed(release.range_counts, workload, std=True)

    # baseline: numpy sum over each query's slice (one Python call per query; a sample)
    sample = workload.head(200)
    starts, stops = query_ranges(attrs, sample)

    def slice_sums() -> list[float]:
        return [float(release.counts[tuple(slice(s, t) for s, t in zip(a, b, strict=True))].sum())
                for a, b in zip(starts, stops, strict=True)]
    baseline, t_base = timed(slice_sums)
    assert np.allclose(baseline, answers["count"].to_numpy()[:200], rtol=1e-6, atol=1e-6)

    con = duckdb.connect()
    _, t_register = timed(release.to_duckdb, con, "census")
    con.register("workload_arrow", workload.to_arrow())
    con.execute("CREATE TABLE workload AS SELECT * FROM workload_arrow")
    sql, t_sql = timed(lambda: con.sql("SELECT * FROM census_range_counts('workload') ORDER BY id").pl())
    assert np.allclose(sql["count"].to_numpy(), answers["count"].to_numpy(), rtol=1e-6, atol=1e-6)
    assert np.allclose(sql["std"].to_numpy(), answers["std"].to_numpy(), rtol=1e-9)
    single, t_single = timed(lambda: con.execute(
        "SELECT * FROM census_range_count(age_lo := 20, age_hi := 30, occupation := 'group03')").fetchall())
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    std_only = "SELECT id, count, std FROM census_range_counts('workload', alpha := NULL)"
    with_alpha = "SELECT * FROM census_range_counts('workload', alpha := 0.05)"
    batch = interleaved({"std": lambda: con.sql(std_only).fetchall(),
                         "alpha": lambda: con.sql(with_alpha).fetchall()}, args.repeats)
    con.close()
    steps = registration_vs_parquet(release, args.repeats)

    qps_python = args.queries / t_python
    qps_base = len(sample) / t_base
    print(f"\n{'step':<40}{'time (s)':>10}{'queries/s':>14}{'ratio':>10}  target")
    print("-" * 90)
    print(f"{'numpy slice sums (baseline, 200 q)':<40}{t_base:>10.3f}{qps_base:>14,.0f}{1:>10.1f}")
    print(f"{'Python prefix array (once)':<40}{t_prefix:>10.3f}")
    print(f"{'Python batch range_counts(std=True)':<40}{t_python:>10.3f}{qps_python:>14,.0f}"
          f"{qps_python / qps_base:>10.1f}  >= {TARGET_QPS:,} q/s "
          f"{'ok' if qps_python >= TARGET_QPS else 'MISSED'}")
    print(f"{'DuckDB registration':<40}{t_register:>10.3f}{'':>14}{'':>10}  < {TARGET_REGISTER_S:.0f} s "
          f"{'ok' if t_register < TARGET_REGISTER_S else 'MISSED'}")
    print(f"{'SQL batch census_range_counts':<40}{t_sql:>10.3f}{args.queries / t_sql:>14,.0f}"
          f"{(args.queries / t_sql) / qps_base:>10.1f}  < {TARGET_SQL_S:.0f} s "
          f"{'ok' if t_sql < TARGET_SQL_S else 'MISSED'}")
    print(f"{'SQL single census_range_count':<40}{t_single:>10.3f}{1 / t_single:>14,.0f}"
          f"{(1 / t_single) / qps_base:>10.1f}")
    print(f"\npeak RSS {peak:.1f} GiB; answer {single[0][0]:,.0f} +- {single[0][1]:,.0f}; "
          "ratio = queries/s over the baseline (timings on a shared 2-core machine)")

    def row(label: str, a: dict[str, float], b: dict[str, float], target: float) -> None:
        wall, cpu = a["wall"] / b["wall"], a["cpu"] / b["cpu"]
        verdict = "ok" if wall <= target else "MISSED"
        print(f"{label:<44}{a['wall']:>8.3f}{b['wall']:>8.3f}{wall:>7.2f}{a['cpu']:>8.3f}{b['cpu']:>8.3f}"
              f"{cpu:>7.2f}{(a['load'] + b['load']) / 2:>6.1f}  <= {target} {verdict}")

    print(f"\nratios (medians of {args.repeats} interleaved repeats; load = 1-min load average)")
    print(f"{'':<44}{'wall A':>8}{'wall B':>8}{'A/B':>7}{'cpu A':>8}{'cpu B':>8}{'A/B':>7}{'load':>6}")
    row("SQL batch: A alpha (lo/hi), B std only", batch["alpha"], batch["std"], 1.5)
    row("A to_duckdb, B write_parquet (fresh process)", steps["to_duckdb"], steps["write_parquet"], 1.5)
    row("A to_duckdb (database file), B write_parquet", steps["to_duckdb_file"], steps["write_parquet"], 1.5)
    row("A sql_script (in-memory), B write_parquet", steps["script"], steps["write_parquet"], 1.5)
    row("A sql_script (db file), B write_parquet", steps["script_file"], steps["write_parquet"], 1.5)
    counts = steps["to_duckdb"]["counts"]
    for step, cost in steps.items():
        print(f"peak memory of {step:<15} {cost['peak'] / counts:5.2f} x the count array "
              f"({cost['peak'] / 2**30:.2f} GiB; {(cost['peak'] - cost['rss']) / counts:.2f} x its increment "
              f"over the process before the step; count array {counts / 2**30:.2f} GiB)  target <= 2")


if __name__ == "__main__":
    main()
