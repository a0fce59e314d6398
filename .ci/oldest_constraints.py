"""The oldest versions pyproject.toml declares, as pip constraints (``name==lower``), one a line.

``make test-oldest`` installs with these constraints, so the lower bounds are written once, in
pyproject.toml.  Every runtime dependency must be declared ``name>=lower,<upper``.

    python .ci/oldest_constraints.py            # print the constraints
    python .ci/oldest_constraints.py --check    # exit 1 unless this interpreter has exactly them
"""

from __future__ import annotations

import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
BOUNDED = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*>=\s*([0-9][0-9A-Za-z.]*)\s*,\s*<\s*([0-9][0-9A-Za-z.]*)\s*$")


def lower_bounds(pyproject: Path = PYPROJECT) -> dict[str, str]:
    """``{name: lower}`` of every runtime dependency; refuses one without both bounds."""
    bounds = {}
    for requirement in tomllib.loads(pyproject.read_text())["project"]["dependencies"]:
        match = BOUNDED.match(requirement)
        if match is None:
            raise SystemExit(f"{pyproject}: declare {requirement!r} as 'name>=lower,<upper'.")
        bounds[match.group(1)] = match.group(2)
    return bounds


def release(version: str) -> tuple[int, ...]:
    """``"1.30"`` and ``"1.30.0"`` → ``(1, 30)``: the numeric release, trailing zeros dropped."""
    parts = [int(part) for part in re.findall(r"\d+", version.split("+")[0])[:3]]
    while parts and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def main(argv: list[str]) -> int:
    bounds = lower_bounds()
    if argv == ["--check"]:
        wrong = [f"{name} {metadata.version(name)} (expected {lower})" for name, lower in bounds.items()
                 if release(metadata.version(name)) != release(lower)]
        if wrong:
            print("not the oldest declared versions: " + ", ".join(wrong), file=sys.stderr)
            return 1
        print("oldest declared versions: " + ", ".join(f"{n} {v}" for n, v in bounds.items()))
        return 0
    if argv:
        print(__doc__, file=sys.stderr)
        return 2
    for name, lower in bounds.items():
        print(f"{name}=={lower}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
