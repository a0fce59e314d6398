"""The first run: what `make demo` installs, and the licence the package declares."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from tests.helpers import REPO


def dry_run(target: str, tmp_path: Path) -> list[str]:
    """The commands ``make <target>`` would run for a fresh venv (nothing is run)."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    # run as a top-level make even under `make test` (a sub-make prints "Entering directory")
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    done = subprocess.run(["make", "--no-print-directory", "-n", target, f"VENV={tmp_path / 'venv'}"],
                          cwd=REPO, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_make_demo_installs_only_the_runtime_dependencies_in_one_announced_line(tmp_path):
    lines = dry_run("demo", tmp_path)
    installs = [line for line in lines if "pip install" in line]
    assert len(installs) == 1 and installs[0].rstrip().endswith("-e .")  # no extras
    announced = [line for line in lines if line.startswith("echo ")]
    assert len(announced) == 1
    for dependency in tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]:
        assert dependency.split(">")[0].split("=")[0] in announced[0]
    listed = announced[0].split("(", 1)[1].split(")", 1)[0].split(", ")
    assert "pyspark" not in listed and "pytest" not in listed and "matplotlib" not in listed
    assert lines[-1].endswith("-m polars_dp demo")


def test_make_test_keeps_the_extras(tmp_path):
    installs = [line for line in dry_run("test", tmp_path) if "pip install" in line]
    assert len(installs) == 1 and "'.[test,eval,spark,geo,fast]'" in installs[0]


def test_license_is_the_apache_2_text():
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["license"]
    assert declared == "Apache-2.0"
    text = (REPO / "LICENSE").read_text()
    assert text.strip().startswith("Apache License") and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text and "APPENDIX: How to apply the Apache License" in text
    # the canonical text from https://www.apache.org/licenses/LICENSE-2.0.txt, byte for byte
    assert hashlib.md5((REPO / "LICENSE").read_bytes()).hexdigest() == "3b83ef96387f14655fc854ddc3c6bd57"
