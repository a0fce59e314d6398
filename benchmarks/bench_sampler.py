"""ns per draw of the exact discrete Laplace across scales, this checkout against a baseline.

For every scale (2 ... 1e6; the census Privelet+ release draws at 66, 924 and 8316, all-axes
Privelet up to about 3e5) and both sources (seeded PCG64 ``noise_source(1)``, ChaCha20
``noise_source(None)``), ``discrete_laplace`` draws 2^22 values (in calls of 2^18, whose
2 MiB outputs the allocator reuses: no fresh pages after the first call; the minor page faults
per 2^22 draws are printed) and the time is divided by the draws.  The baseline is another
git revision (default ``main``) exported to a temporary folder; both run in child processes
that alternate round by round (the machine is shared: the figures are min..max over rounds).
Target: scales 341 .. 3e5 at <= 1.3x the scale-2 rate of the same version and source.

``python -m benchmarks.bench_sampler [--baseline main] [--rounds 3] [--reps 3] [--quick]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCALES = [2, 66, 300, 400, 924, 3000, 8316, 50_000, 300_000, 1_000_000]
DRAWS = 1 << 22
CALL = 1 << 18


def measure(reps: int) -> dict[str, dict[str, list[float]]]:
    """In this process: ``{source: {scale: [ns per draw of each repetition]}}`` and faults."""
    import resource
    import time

    from polars_dp.noise import discrete_laplace, noise_source

    out: dict[str, dict[str, list[float]]] = {}
    for name, seed in (("pcg64", 1), ("chacha20", None)):
        src = noise_source(seed)
        row: dict[str, list[float]] = {}
        for scale in SCALES:
            discrete_laplace(src, scale, 1, CALL)  # tables built, allocator warm
            times = []
            faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            for _ in range(reps):
                t0 = time.perf_counter()
                for _ in range(DRAWS // CALL):
                    discrete_laplace(src, scale, 1, CALL)
                times.append((time.perf_counter() - t0) / DRAWS * 1e9)
            row[str(scale)] = times
            row[f"faults{scale}"] = [(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / reps]
        out[name] = row
    return out


def _child(path: Path, reps: int) -> dict[str, dict[str, list[float]]]:
    env = dict(os.environ, PYTHONPATH=str(path))
    code = f"import json, benchmarks.bench_sampler as b; print(json.dumps(b.measure({reps})))"
    bench = Path(tempfile.mkdtemp(prefix="bench_sampler_"))  # this file, beside the baseline's package
    (bench / "benchmarks").mkdir()
    (bench / "benchmarks" / "__init__.py").write_text("")
    (bench / "benchmarks" / "bench_sampler.py").write_text(Path(__file__).read_text())
    env["PYTHONPATH"] = f"{path}{os.pathsep}{bench}"
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True, cwd=bench)
    return json.loads(res.stdout.strip().splitlines()[-1])


def _export(ref: str) -> Path:
    tmp = Path(tempfile.mkdtemp(prefix="bench_sampler_base_"))
    archive = tmp / "src.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "-o", str(archive), ref, "polars_dp"], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(tmp, filter="data")
    return tmp


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default="main", help="git revision to compare against (default main)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3, help="repetitions of 2^22 draws per round")
    ap.add_argument("--quick", action="store_true", help="one round of one repetition")
    args, _ = ap.parse_known_args(argv)  # options meant for other benchmarks are ignored
    if args.quick:
        args.rounds, args.reps = 1, 1
    versions = {"base": _export(args.baseline), "new": ROOT}
    runs: dict[str, list[dict]] = {"base": [], "new": []}
    for r in range(args.rounds):
        for v in (("new", "base") if r % 2 else ("base", "new")):
            runs[v].append(_child(versions[v], args.reps))
    print(f"discrete_laplace, ns/draw over {args.rounds} rounds x {args.reps} x 2^22 draws "
          f"(min..max; ratio = min / min at scale 2 of the same version and source); "
          f"base = {args.baseline}, new = this checkout")
    for src in ("pcg64", "chacha20"):
        print(f"\n{src}")
        print(f"{'scale':>9} | {'base ns':>13} {'x s=2':>6} | {'new ns':>13} {'x s=2':>6} | "
              f"{'new/base':>8} | {'faults/2^22':>11}")
        lo = {v: {s: min(t for run in runs[v] for t in run[src][str(s)]) for s in SCALES} for v in runs}
        hi = {v: {s: max(t for run in runs[v] for t in run[src][str(s)]) for s in SCALES} for v in runs}
        worst = 0.0
        for s in SCALES:
            faults = max(run[src][f"faults{s}"][0] for run in runs["new"])
            ratio = lo["new"][s] / lo["new"][2]
            if 341 <= s <= 300_000:
                worst = max(worst, ratio)
            base_ratio = lo["base"][s] / lo["base"][2]
            print(f"{s:>9} | {lo['base'][s]:>6.2f}..{hi['base'][s]:<6.2f} {base_ratio:>6.2f} | "
                  f"{lo['new'][s]:>6.2f}..{hi['new'][s]:<6.2f} {ratio:>6.2f} | "
                  f"{lo['new'][s] / lo['base'][s]:>8.2f} | {faults:>11.0f}")
        print(f"worst new ratio over scales 341 .. 3e5: {worst:.2f} (target <= 1.3: "
              f"{'met' if worst <= 1.3 else 'MISSED'})")


if __name__ == "__main__":
    main()
