"""Every macro answers in plain SQL: a ``.duckdb`` file registered with ``to_duckdb`` and
reopened in a process that never imports polars_dp (the ``duckdb`` Python module, and the DuckDB
command-line client when installed) answers every grid, spatial and sequence macro call as
Python does, ``lo`` / ``hi`` and ``noise_lo`` / ``noise_hi`` included."""

from __future__ import annotations

import json
import subprocess
import sys

import duckdb
import numpy as np
import polars as pl
import pytest

import polars_dp as pdp
from tests.helpers.ranges import DOMAINS, query_frame, random_queries
from tests.helpers.sql import (
    CLI,
    grid_statements,
    max_diff,
    python_rows,
    tree_and_sequence_cases,
)


def _grid(attrs, transformed, seed, noise="exact"):
    counts = np.random.default_rng(seed).integers(0, 50, size=tuple(a.n_cells for a in attrs)).astype(float)
    return pdp.GridRelease(counts, attrs, mechanism="privelet", epsilon=1.0, neighbours="replace",
                           noise_scale=1.5, noise=noise, params={"transformed": transformed})


def _cases() -> dict[str, tuple[pdp.Release, pl.DataFrame, list[str]]]:
    """Per release name: the release, its batch of queries and the SQL whose rows Python gives."""
    cases = {}
    wide = [pdp.Ordinal("a", 0, 255), pdp.Ordinal("b", 0, 255), pdp.Ordinal("c", 0, 15)]
    grids = {"g": (DOMAINS["partial"], ["n", "t", "job"], "exact"),       # terms listed
             "e": (DOMAINS["exact"], ["u"], "float"),                     # untransformed axes
             "w": (wide, ["a", "b", "c"], "exact")}                       # too many terms: chord bound
    for i, (name, (attrs, transformed, noise)) in enumerate(grids.items()):
        release = _grid(attrs, transformed, 10 + i, noise)
        frame = query_frame(attrs, random_queries(attrs, 60, seed=20 + i)) if name != "w" else pl.DataFrame(
            {"id": range(60), **{f"{a.column}_{s}": np.sort(np.random.default_rng(5).integers(
                a.lo, a.hi + 1, (60, 2)), axis=1)[:, j] for a in attrs for j, s in enumerate(("lo", "hi"))}})
        cases[name] = (release, frame, grid_statements(name))
    cases.update(tree_and_sequence_cases())
    return cases


@pytest.fixture(scope="module")
def database(tmp_path_factory):
    """A database file holding every case's release and queries, and Python's answers."""
    path = tmp_path_factory.mktemp("plain") / "releases.duckdb"
    cases = _cases()
    # written in the oldest storage format this DuckDB offers, so that older clients read it too
    with duckdb.connect(str(path), config={"storage_compatibility_version": "v1.5.0"}) as con:
        for name, (release, frame, _) in cases.items():
            release.to_duckdb(con, name)
            con.register("__q", frame.to_arrow())
            con.execute(f"CREATE TABLE {name}_q AS SELECT * FROM __q")
            con.unregister("__q")
    sql = [s for _, _, statements in cases.values() for s in statements]
    want = [rows for name, (release, frame, _) in cases.items()
            for rows in python_rows(name, release, frame)]
    return path, sql, want


#: Runs in a fresh interpreter: plain duckdb, the statements from argv, JSON rows on stdout.
PLAIN = """
import json, sys, duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
con.execute("SET enable_progress_bar = false")
out = [[list(r) for r in con.sql(s).fetchall()] for s in json.loads(sys.argv[2])]
assert not any(m.startswith("polars_dp") for m in sys.modules), "polars_dp was imported"
print(json.dumps(out))
"""


def test_a_reopened_file_answers_every_macro_without_python_functions(database):
    path, sql, want = database
    env = {"PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-I", "-c", PLAIN, str(path), json.dumps(sql)],
                            capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr
    got = json.loads(result.stdout)
    assert len(got) == len(want) == len(sql)
    diff, where = max_diff(got, want)
    print(f"plain duckdb: {sum(map(len, got))} rows, max relative |diff| {diff:.3g}")
    assert diff <= 1e-9, (sql[where[0]], where)


@pytest.mark.skipif(CLI is None, reason="the DuckDB command-line client (duckdb-cli) is not installed")
def test_the_duckdb_cli_answers_every_macro_as_python(database):
    """Every macro, the batch ones (their table named by a string) included."""
    path, sql, want = database
    got = []
    for statement in sql:
        result = subprocess.run([str(CLI), "-readonly", "-json", str(path), "-c", statement],
                                capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr
        rows = json.loads(result.stdout or "[]")
        got.append([list(r.values()) for r in rows])
    diff, where = max_diff(got, want)
    print(f"duckdb CLI: {sum(map(len, got))} rows, max relative |diff| {diff:.3g}")
    assert diff <= 1e-9, (sql[where[0]], where)


def test_alpha_outside_the_unit_interval_is_an_sql_error_with_the_python_sentence(database):
    path, _, _ = database
    with pytest.raises(pdp.ParameterError) as python:
        _cases()["g"][0].accuracy(pl.DataFrame({"id": [0]}), 1.5)
    sentence = str(python.value)
    with duckdb.connect(str(path), read_only=True) as con:
        for statement in ("SELECT * FROM g_range_count(alpha := 1.5)",
                          "SELECT * FROM t_range_count(alpha := 1.5)"):
            with pytest.raises(duckdb.Error) as sql:
                con.sql(statement).fetchall()
            assert sentence in str(sql.value)
