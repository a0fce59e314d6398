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
  privmap   ``pdp.privtree`` of 1e5 clustered 2-D points (half in a tight cluster) against the
            PrivTree of privmap (github.com/enesunal-m/privmap, numpy only:
            ``PrivTree(epsilon, BoundingBox(0, 1, 0, 1), fanout=4).build(points)``) on the same
            points at the same epsilon, each in its own fresh processes (its import timed apart,
            as ours), the two kinds interleaved.  privmap is an optional peer found by
            ``--privmap=DIR`` or ``$POLARS_DP_PRIVMAP`` (a checkout; skipped with one line
            otherwise).  Target: our cold <= 1.0x privmap's cold.

``--baseline DIR`` runs the same cases on another checkout of polars-dp (e.g. an export of an
older commit), each of its fresh processes interleaved with one of this checkout's, so that
before and after see the same machine.  Every figure is the median of ``--repeats`` (>= 5)
interleaved fresh processes; the load average is printed before and after.

    python -m benchmarks.bench_cold_start [--repeats 7] [--baseline DIR] [--cases privtree,noise,privmap]
                                          [--privmap=DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks.peers import PEERS, checkout, skip_line

HERE = Path(__file__).resolve().parent.parent

#: The end of every child: time ``call()`` cold then warm, count the cold call's page faults, print JSON.
TIMED = r"""flt0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
a = clocks(); call(); b = clocks()
flt1 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
call(); c = clocks()
print(json.dumps({"import": w1 - w0, "import_cpu": c1 - c0, "cold": b[0] - a[0], "cold_cpu": b[1] - a[1],
                  "warm": c[0] - b[0], "warm_cpu": c[1] - b[1], "cold_minflt": flt1 - flt0,
                  "numba": "numba" in sys.modules}))
"""

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
elif case == "clustered":
    import numpy as np, polars as pl
    POINTS
    df = pl.DataFrame({"x": points[:, 0], "y": points[:, 1]})
    def call():
        return pdp.privtree(df, ["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=EPSILON)
else:
    from polars_dp import noise as N
    def call():
        return N.discrete_laplace(N.noise_source(None), 2, 1, 1 << 20)
TIMED
"""

#: The points of the privmap case (both children): 1e5 in the unit square, half of them in a
#: tight cluster (sd 0.02 around (0.3, 0.4)), half uniform, as an (n, 2) float64 array.
POINTS = """rng = np.random.default_rng(0)
    n = 100_000
    points = np.column_stack([np.concatenate([np.clip(rng.normal(0.3 + 0.1 * j, 0.02, n // 2), 0, 1),
                                              rng.uniform(0, 1, n - n // 2)]) for j in range(2)])"""
EPSILON = 1.0
CHILD = CHILD.replace("TIMED", TIMED).replace("POINTS", POINTS).replace("EPSILON", repr(EPSILON))

#: privmap's child: imports its PrivTree (numpy included, timed), then builds the tree of the
#: same points cold then warm (``argv[1]``: the checkout).
PRIVMAP = r"""
import json, resource, sys, time
def clocks():
    return time.perf_counter(), time.process_time()
sys.path.insert(0, sys.argv[1] + "/backend")
w0, c0 = clocks()
from app.privacy.privtree import BoundingBox, PrivTree
import numpy as np
w1, c1 = clocks()
POINTS
def call():
    return PrivTree(EPSILON, BoundingBox(0.0, 1.0, 0.0, 1.0), fanout=4).build(points)
TIMED
"""
PRIVMAP = PRIVMAP.replace("TIMED", TIMED).replace("POINTS", POINTS.replace("\n    ", "\n"))
PRIVMAP = PRIVMAP.replace("EPSILON", repr(EPSILON))

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


def privmap_case(roots: dict[str, Path], repeats: int, where: Path | None) -> None:
    """Our first PrivTree release of the clustered points against privmap's first build, each
    in fresh processes, interleaved (the order alternating); ratios are medians of the pairs."""
    if where is None:
        print(f"\nprivmap: {skip_line([p for p in PEERS if p.module == 'privmap'])}")
        return
    runs: dict[str, list[dict]] = {label: [] for label in roots}
    theirs: list[dict] = []
    for i in range(repeats):
        mine = [(label, root) for label, root in roots.items()]
        jobs = [*mine, ("privmap", where)] if i % 2 == 0 else [("privmap", where), *mine]
        for label, root in jobs:
            if label == "privmap":
                theirs.append(_run(PRIVMAP, HERE, str(root)))
            else:
                runs[label].append(_run(CHILD, root, "clustered"))
    print(f"\nprivmap: PrivTree of 1e5 clustered 2-D points, epsilon {EPSILON}; medians of {repeats} "
          f"fresh processes of each, interleaved (load {_load()}; privmap at {where})")
    print(f"{'':>10}{'import s':>10}{'imp cpu':>9}{'cold s':>9}{'cold cpu':>10}{'warm s':>9}"
          f"{'warm cpu':>10}{'cold/warm':>11}{'minflt':>9}")
    for label, rs in [*runs.items(), ("privmap", theirs)]:
        m = {k: _median(rs, k) for k in FIELDS}
        ratio = statistics.median(r["cold"] / r["warm"] for r in rs)
        print(f"{label:>10}{m['import']:>10.3f}{m['import_cpu']:>9.3f}{m['cold']:>9.3f}{m['cold_cpu']:>10.3f}"
              f"{m['warm']:>9.4f}{m['warm_cpu']:>10.4f}{ratio:>11.1f}{m['cold_minflt']:>9.0f}")
    for label, rs in runs.items():
        def pair(key: str, rs: list[dict] = rs) -> float:  # the median over interleaved pairs
            return statistics.median(r[key] / t[key] for r, t in zip(rs, theirs, strict=True))
        cold = pair("cold")
        first = statistics.median((r["import"] + r["cold"]) / (t["import"] + t["cold"])
                                  for r, t in zip(rs, theirs, strict=True))
        print(f"{label}: cold / privmap's cold {cold:.3f}x (cpu {pair('cold_cpu'):.3f}x), target <= 1.0: "
              f"{'met' if cold <= 1.0 else 'MISSED'}; warm / privmap's warm {pair('warm'):.3f}x "
              f"(cpu {pair('warm_cpu'):.3f}x); import + cold / privmap's import + cold {first:.3f}x; "
              f"import {_median(rs, 'import'):.3f} s vs privmap's {_median(theirs, 'import'):.3f} s")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="5 repeats")
    ap.add_argument("--baseline", type=Path, default=None, help="another checkout of polars-dp to compare")
    ap.add_argument("--cases", default="privtree,noise,privmap")
    ap.add_argument("--privmap", default=None,
                    help="a checkout of github.com/enesunal-m/privmap (default: $POLARS_DP_PRIVMAP)")
    ap.add_argument("--opendp-python", default=sys.executable, help="an interpreter with opendp installed")
    args = ap.parse_args(argv)
    repeats = max(5, 5 if args.quick else args.repeats)
    roots = {"this": HERE}
    if args.baseline is not None:
        roots["baseline"] = args.baseline.resolve()
    opendp = args.opendp_python if _has_opendp(args.opendp_python) else None
    print(f"load average before: {_load()}; {os.cpu_count()} cores")
    privmap = next(p for p in PEERS if p.module == "privmap")
    where = checkout(privmap, args.privmap)
    if args.privmap is not None and where is None:
        print(f"--privmap {args.privmap}: no {privmap.marker} there")
        return 2
    for name in (c.strip() for c in args.cases.split(",")):
        if name == "privmap":
            privmap_case(roots, repeats, where)
        else:
            case(name, roots, repeats, opendp)
    print(f"\nload average after: {_load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
