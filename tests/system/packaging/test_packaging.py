"""The first run: what `make demo` installs, and the licence the package declares."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from tests.helpers import REPO


def dry_run(target: str, tmp_path: Path, *variables: str) -> list[str]:
    """The commands ``make <target>`` would run for a fresh venv (nothing is run)."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    # run as a top-level make even under `make test` (a sub-make prints "Entering directory")
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    command = ["make", "--no-print-directory", "-n", target, f"VENV={tmp_path / 'venv'}", *variables]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60, env=env)
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


# ---- versions: every runtime dependency bounded; `make test-oldest` runs on the lower bounds ----

def runtime_requirements() -> list[Requirement]:
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    return [Requirement(dependency) for dependency in declared]


def test_every_runtime_dependency_has_a_lower_and_an_upper_bound():
    for requirement in runtime_requirements():
        operators = sorted(spec.operator for spec in requirement.specifier)
        assert operators == ["<", ">="], f"{requirement}: declare 'name>=lower,<upper'"
        bound = {spec.operator: Version(spec.version) for spec in requirement.specifier}
        # the upper bound is a major release past the lower one (the next major not tested)
        assert bound["<"].release[1:] in ((), (0,)) and bound["<"].major > bound[">="].major, requirement


def constraints_of(script: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)


def test_the_oldest_constraints_are_exactly_the_declared_lower_bounds():
    done = constraints_of(REPO / ".ci" / "oldest_constraints.py")
    assert done.returncode == 0, done.stderr
    expected = [f"{requirement.name}=={spec.version}" for requirement in runtime_requirements()
                for spec in requirement.specifier if spec.operator == ">="]
    assert done.stdout.splitlines() == expected


def test_a_dependency_without_an_upper_bound_is_refused(tmp_path):
    (tmp_path / ".ci").mkdir()
    shutil.copy(REPO / ".ci" / "oldest_constraints.py", tmp_path / ".ci")
    (tmp_path / "pyproject.toml").write_text('[project]\ndependencies = ["polars>=1.34", "numpy>=1.26,<3"]\n')
    done = constraints_of(tmp_path / ".ci" / "oldest_constraints.py")
    assert done.returncode != 0 and "'polars>=1.34'" in done.stderr and not done.stdout


def test_ci_runs_the_short_suite_on_the_oldest_versions_after_the_full_suite(tmp_path):
    venv = tmp_path / "venv-oldest"
    lines = dry_run("test-oldest", tmp_path, f"OLDEST={venv}")
    assert any(f".ci/oldest_constraints.py > {venv}/constraints.txt" in line for line in lines)
    installs = [line for line in lines if "pip install" in line or line.lstrip().startswith("-c ")]
    assert any(f"-c {venv}/constraints.txt -e '.[test]'" in line for line in installs)
    assert lines[-2].endswith(f"{venv}/bin/python .ci/oldest_constraints.py --check")
    suite = lines[-1].split(" -m pytest ", 1)[1].split()
    paths = [p for p in suite if p.startswith("tests/")]
    assert paths and all((REPO / p).exists() for p in paths)  # no path pytest would not find
    steps = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()]
    assert steps.index("make test") < steps.index("make test-oldest")
