"""Shared helpers of the test suite (no test module imports another; they import these).

``REPO`` is the checkout's root, found from this file, so a test at any depth locates the
README, ``examples/``, ``benchmarks/`` and ``tests/data`` the same way.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS_DATA = REPO / "tests" / "data"
SPECS = REPO / "examples" / "specs"
V0_1_0_FILES = sorted(TESTS_DATA.glob("v0_1_0_*.parquet"))  # releases written by polars-dp 0.1.0
