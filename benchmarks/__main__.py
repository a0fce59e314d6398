"""Run every benchmark module (``bench_*.py``) in this folder, one after the other.

``python -m benchmarks`` runs all; ``python -m benchmarks privelet`` runs those whose name
contains the word.  Each module prints its own table, with ratios against a baseline
measured in the same run.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    here = Path(__file__).parent
    mods = sorted(p.stem for p in here.glob("bench_*.py"))
    if argv:
        mods = [m for m in mods if any(a in m for a in argv)]
    for mod in mods:
        print(f"\n===== {mod} =====", flush=True)
        runpy.run_module(f"benchmarks.{mod}", run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
