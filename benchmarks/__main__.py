"""Run every benchmark module (``bench_*.py``) in this folder, one after the other.

``python -m benchmarks`` runs all; ``python -m benchmarks privelet`` runs those whose name
contains the word; options such as ``--quick`` are passed on to every module.  Each module
runs in its own process (so peak-memory readings do not mix) and prints its own table, with
ratios against a baseline measured in the same run.  Optional peers that are not installed
(:mod:`benchmarks.peers`) are named in one line first; the modules skip their columns.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from benchmarks.peers import missing, skip_line


def main(argv: list[str]) -> int:
    here = Path(__file__).parent
    words = [a for a in argv if not a.startswith("-")]
    options = [a for a in argv if a.startswith("-")]
    mods = sorted(p.stem for p in here.glob("bench_*.py"))
    if words:
        mods = [m for m in mods if any(w in m for w in words)]
    line = skip_line([p for p in missing() if any(b in mods for b in p.benchmarks)])
    if line:
        print(line, flush=True)
    failed = []
    for mod in mods:
        print(f"\n===== {mod} =====", flush=True)
        done = subprocess.run([sys.executable, "-m", f"benchmarks.{mod}", *options], cwd=here.parent,
                              check=False)
        if done.returncode:
            failed.append(mod)
    if failed:
        print(f"\nfailed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
