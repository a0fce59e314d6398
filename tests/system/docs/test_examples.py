"""Every script in examples/ runs as a user would run it (a fresh process, small data) and prints
what its docstring says a reader should look at."""

from __future__ import annotations

import ast
import importlib
import os
import subprocess
import sys
import types

import pytest

import polars_dp
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


#: What an example may import of polars-dp: the package and its documented public submodules
#: (``pdp.duckdb``, the bundled ``datasets``, the NOT-private references of ``evaluation``, and
#: the command line's ``main``); from each, only names of its ``__all__``.
PUBLIC = {"polars_dp", "polars_dp.cli", "polars_dp.datasets", "polars_dp.duckdb", "polars_dp.evaluation"}


def polars_dp_imports(source: str) -> list[tuple[str, str | None]]:
    """Every (module, name) an example imports from polars-dp (name None for ``import module``),
    and every submodule it reaches as an attribute of the package (``pdp.releases.io``)."""
    found: list[tuple[str, str | None]] = []
    aliases = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "polars_dp":
                    found.append((alias.name, None))
                    if alias.name == "polars_dp":
                        aliases.add(alias.asname or alias.name)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "polars_dp":
            found += [(str(node.module), alias.name) for alias in node.names]
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                and isinstance(getattr(polars_dp, node.attr, None), types.ModuleType)):
            found.append((f"polars_dp.{node.attr}", None))
    return found


def test_the_import_check_sees_internal_modules():
    source = ("import polars_dp as pdp\nfrom polars_dp.counting.frequency import frequency_matrix\n"
              "from polars_dp.evaluation import exact_range_count\npdp.releases.io.read_table\n")
    assert polars_dp_imports(source) == [
        ("polars_dp", None), ("polars_dp.counting.frequency", "frequency_matrix"),
        ("polars_dp.evaluation", "exact_range_count"), ("polars_dp.releases", None)]


@pytest.mark.parametrize("script", sorted(RUNS))
def test_example_imports_only_the_public_api(script):
    for module, name in polars_dp_imports((EXAMPLES / script).read_text()):
        assert module in PUBLIC, f"{script} imports the internal module {module}"
        if name is not None:
            public = importlib.import_module(module).__all__
            assert name in public, f"{script} imports {name} from {module}, which does not export it"


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
