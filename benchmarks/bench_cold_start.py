"""Cold start: a fresh process's first release or draw against the same call made again.

Each case runs in a fresh Python process that imports ``polars_dp`` (timed: what a user's
first line costs, numpy and Polars included), builds its input, then times the call twice:
*cold* (the first call in the process: imports and kernel loads on its path) and *warm* (the
same call again).  Wall and CPU seconds, the minor page faults of the cold call
(``ru_minflt``) and whether numba got imported are recorded.

Cases:
  privtree  ``pdp.privtree`` of 1e5 uniform 2-D points (exact noise).  Target: cold <= 3x warm.
  noise     2^20 exact discrete Laplace draws at scale 2 (``polars_dp.noise.discrete_laplace``,
            a direct call), and OpenDP's ``make_laplace`` on 2^20 integer counts in its own
            fresh process when ``opendp`` is installed (or in the interpreter given by
            ``--opendp-python``, e.g. a throwaway venv; skipped with one line otherwise).
            Target: cold <= 0.02x OpenDP's cold.

``--baseline DIR`` runs the same cases on another checkout of polars-dp (e.g. an export of an
older commit), each of its fresh processes interleaved with one of this checkout's, so that
before and after see the same machine.  Every figure is the median of ``--repeats`` (>= 5)
interleaved fresh processes; the load average is printed before and after.

    python -m benchmarks.bench_cold_start [--repeats 7] [--baseline DIR] [--cases privtree,noise]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks.peers import PEERS, skip_line

HERE = Path(__file__).resolve().parent.parent

#: The child: imports polars_dp, builds the input, times the call cold then warm.
CHILD = r"""
import json, resource, sys, time
def clocks():
    return time.perf_counter(), time.process_time()
w0, c0 = clocks()
import polars_dp as pdp
w1, c1 = clocks()
case = sys.argv[1]
if case == "privtree":
    import numpy as np, polars as pl
    rng = np.random.default_rng(0)
    df = pl.DataFrame({"x": rng.random(100_000), "y": rng.random(100_000)})
    def call():
        return pdp.privtree(df, ["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=1.0)
else:
    from polars_dp import noise as N
    def call():
        return N.discrete_laplace(N.noise_source(None), 2, 1, 1 << 20)
flt0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
a = clocks(); call(); b = clocks()
flt1 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
call(); c = clocks()
print(json.dumps({"import": w1 - w0, "import_cpu": c1 - c0, "cold": b[0] - a[0], "cold_cpu": b[1] - a[1],
                  "warm": c[0] - b[0], "warm_cpu": c[1] - b[1], "cold_minflt": flt1 - flt0,
                  "numba": "numba" in sys.modules}))
"""

#: OpenDP's cold start: import, build the measurement, apply it once to 2^20 counts.
OPENDP = r"""
import json, time
w0, c0 = time.perf_counter(), time.process_time()
import opendp.prelude as dp
dp.enable_features("contrib")
meas = (dp.vector_domain(dp.atom_domain(T=int)), dp.l1_distance(T=int)) >> dp.m.then_laplace(scale=2.0)
meas([0] * (1 << 20))
print(json.dumps({"cold": time.perf_counter() - w0, "cold_cpu": time.process_time() - c0}))
"""

FIELDS = ("import", "import_cpu", "cold", "cold_cpu", "warm", "warm_cpu", "cold_minflt")


def _run(code: str, root: Path, *args: str, python: str = sys.executable) -> dict:
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run([python, "-c", code, *args], capture_output=True, text=True, cwd=root,
                          env=env, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _has_opendp(python: str) -> bool:
    done = subprocess.run([python, "-c", "import opendp"], capture_output=True, check=False)
    return done.returncode == 0


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def case(name: str, roots: dict[str, Path], repeats: int, opendp: str | None) -> None:
    runs: dict[str, list[dict]] = {label: [] for label in roots}
    theirs: list[dict] = []
    for _ in range(repeats):  # interleaved: each repeat runs every checkout (and OpenDP) once
        for label, root in roots.items():
            runs[label].append(_run(CHILD, root, name))
        if opendp and name == "noise":
            theirs.append(_run(OPENDP, HERE, python=opendp))
    print(f"\n{name}: medians of {repeats} fresh processes (load {_load()})")
    print(f"{'checkout':>10}{'import s':>10}{'imp cpu':>9}{'cold s':>9}{'cold cpu':>10}{'warm s':>9}"
          f"{'warm cpu':>10}{'cold/warm':>11}{'minflt':>9}{'numba':>7}")
    for label, rs in runs.items():
        m = {k: _median(rs, k) for k in FIELDS}
        ratio = statistics.median(r["cold"] / r["warm"] for r in rs)
        numba = sum(r["numba"] for r in rs)
        print(f"{label:>10}{m['import']:>10.3f}{m['import_cpu']:>9.3f}{m['cold']:>9.3f}{m['cold_cpu']:>10.3f}"
              f"{m['warm']:>9.4f}{m['warm_cpu']:>10.4f}{ratio:>11.1f}{m['cold_minflt']:>9.0f}{numba:>5}/{len(rs)}")
    if name == "privtree":
        ratio = statistics.median(r["cold"] / r["warm"] for r in runs["this"])
        print(f"cold / warm {ratio:.1f} (target <= 3: {'met' if ratio <= 3 else 'MISSED'})")
    elif theirs:
        cold = _median(theirs, "cold")
        ours = _median(runs["this"], "cold")
        first = statistics.median(r["import"] + r["cold"] for r in runs["this"])
        verdict = "met" if ours / cold <= 0.02 else "MISSED"
        print(f"OpenDP make_laplace cold (its import included) {cold:.3f} s "
              f"(cpu {_median(theirs, 'cold_cpu'):.3f}); here cold {ours:.3f} s: {ours / cold:.3f}x "
              f"(target <= 0.02: {verdict}); with the import of polars_dp {first:.3f} s: {first / cold:.3f}x")
    else:
        print(skip_line([p for p in PEERS if p.module == "opendp"]))


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="5 repeats")
    ap.add_argument("--baseline", type=Path, default=None, help="another checkout of polars-dp to compare")
    ap.add_argument("--cases", default="privtree,noise")
    ap.add_argument("--opendp-python", default=sys.executable, help="an interpreter with opendp installed")
    args = ap.parse_args(argv)
    repeats = max(5, 5 if args.quick else args.repeats)
    roots = {"this": HERE}
    if args.baseline is not None:
        roots["baseline"] = args.baseline.resolve()
    opendp = args.opendp_python if _has_opendp(args.opendp_python) else None
    print(f"load average before: {_load()}; {os.cpu_count()} cores")
    for name in args.cases.split(","):
        case(name.strip(), roots, repeats, opendp)
    print(f"\nload average after: {_load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
