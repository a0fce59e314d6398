"""Every script in examples/ runs as a user would run it (a fresh process, small data) and prints
what its docstring says a reader should look at."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.helpers import REPO

ROOT = REPO
EXAMPLES = ROOT / "examples"

#: Script -> (arguments that keep it fast, lines its output must contain).
RUNS = {
    "census_privelet.py": (["--rows", "20000"], ["privelet+", "± std", "women in the public sector"]),
    "spatial_privtree.py": (["--points", "8000"], ["leaves per depth", "noise_std", "GeoParquet leaves"]),
    "sequences.py": (["--sequences", "2000"], ["top 8 strings", "noise std", "synthetic sessions"]),
    "arrow_exchange.py": ([], ["replacement scan", "pl.DataFrame(release)", "keeps the metadata",
                               "scan_release"]),
    "cli_domain_file.py": (["--rows", "5000"], ["$ polars-dp release", "$ polars-dp info", "±",
                                                "$ polars-dp sql"]),
    "sql_range_counts.py": ([], ["epsilon", "± std", "branch_department"]),
}


def test_every_example_is_run_here():
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(RUNS)


@pytest.mark.parametrize("script", sorted(RUNS))
def test_example_runs(script, tmp_path):
    args, expected = RUNS[script]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    if script != "sql_range_counts.py":  # the older example takes no options
        args = [*args, "--out", str(tmp_path)]
    done = subprocess.run([sys.executable, str(EXAMPLES / script), *args], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    for text in expected:
        assert text in done.stdout, f"{script}: {text!r} not in its output:\n{done.stdout[-2000:]}"
    if script == "spatial_privtree.py":
        assert (tmp_path / "privtree_leaves.parquet").exists()
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            assert "no plot" in done.stdout
        else:
            assert (tmp_path / "privtree_leaves.png").stat().st_size > 0
