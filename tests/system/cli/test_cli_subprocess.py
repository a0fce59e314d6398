"""The command line as a user runs it: ``python -m polars_dp`` in a fresh interpreter."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import polars as pl
import pytest

import polars_dp as pdp
from polars_dp.cli.spec import load_spec
from tests.helpers.cli import REPO, SPECS, data_for, png_size, run_subprocess


def test_release_query_plot_as_subprocesses(tmp_path):
    spec = SPECS / "basic.toml"
    data_for(load_spec(spec), 2000, seed=5).write_csv(tmp_path / "people.csv")
    done = run_subprocess("release", "people.csv", "--spec", spec, "-o", "people.parquet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "wrote people.parquet" in done.stdout and "656 cells" in done.stdout
    release = pdp.read_release(tmp_path / "people.parquet")

    done = run_subprocess("query", "people.parquet", "--where", "age=30..39", "--where", "gender=male",
                          "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["count"] == pytest.approx(release.counts[12:22, 1].sum())

    done = run_subprocess("plot", "people.parquet", "-o", "age.png", "--x", "age", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert png_size(tmp_path / "age.png") == (800, 600)


def test_bad_input_as_a_subprocess(tmp_path):
    pl.DataFrame({"age": [20, 30]}).write_parquet(tmp_path / "people.parquet")
    (tmp_path / "domain.toml").write_text('mechanism = "basic"\nepsilon = 1\n[[attributes]]\ncolumn = "age"\n'
                                          'kind = "ordinal"\nlo = 90\nhi = 10\n')
    done = run_subprocess("release", "people.parquet", "--spec", "domain.toml", "-o", "out.parquet",
                          cwd=tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == ("polars-dp release: error: domain.toml:7: attributes[1].hi: hi = 10 is below "
                           "lo = 90; swap them\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["domain.toml", "people.parquet"]


def test_sigterm_while_writing_leaves_no_temporary_file(tmp_path):
    """Small defect: a SIGTERM during `release` left the hidden temporary file beside the output."""
    pl.DataFrame({"age": [20, 30, 40]}).write_parquet(tmp_path / "people.parquet")
    (tmp_path / "domain.toml").write_text('mechanism = "basic"\nepsilon = 1\n[[attributes]]\ncolumn = "age"\n'
                                          'kind = "ordinal"\nlo = 0\nhi = 99\n')
    script = (
        "import os, signal, sys, pyarrow.parquet as pq\n"
        "from polars_dp.cli import main\n"
        "class TerminatedWriter(pq.ParquetWriter):\n"
        "    def close(self):\n"
        "        super().close()  # the temporary file exists and is complete\n"
        "        os.kill(os.getpid(), signal.SIGTERM)\n"
        "pq.ParquetWriter = TerminatedWriter\n"
        "sys.exit(main(['release', 'people.parquet', '--spec', 'domain.toml', '-o', 'out.parquet', '-q']))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120)
    assert done.returncode == 128 + signal.SIGTERM, done.stderr
    assert "terminated" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["domain.toml", "people.parquet"]
