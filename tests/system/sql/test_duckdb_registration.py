"""One registration flow (``releases.sql.register``) for the three release types: the same
refusal of existing objects, the same ``replace`` (tables, views, scalar or table macros and
Python functions all dropped and created afresh), one transaction."""

from __future__ import annotations

import duckdb
import numpy as np
import polars as pl
import pytest

import polars_dp as pdp
from polars_dp.releases.sql import Registration, register
from tests.helpers.sql import small_sequence_release, small_tree_release


def _grid() -> pdp.Release:
    frame = pl.DataFrame({"a": np.random.default_rng(1).integers(0, 10, 500),
                          "s": np.random.default_rng(2).choice(["f", "m"], 500)})
    return pdp.privelet(frame, [pdp.Ordinal("a", 0, 9), pdp.Nominal("s", categories=["f", "m"])],
                        epsilon=1.0, seed=1)


MAKERS = {
    "grid": (_grid, "r_range_count", "SELECT count FROM r_range_count()"),
    "spatial": (small_tree_release, "r_range_count", "SELECT count FROM r_range_count()"),
    "spatial_levels": (lambda: small_tree_release(levels=2), "r_range_count",
                       "SELECT count FROM r_range_count()"),
    "sequence": (small_sequence_release, "r_frequency", "SELECT count FROM r_frequency(['a'])"),
}


@pytest.fixture(scope="module", params=list(MAKERS))
def case(request):
    make, macro, query = MAKERS[request.param]
    return make(), macro, query


@pytest.mark.parametrize("existing", ["CREATE MACRO {m}(a) AS a + 1",
                                      "CREATE MACRO {m}(a) AS TABLE SELECT a AS one",
                                      "CREATE VIEW r AS SELECT 1 AS one",
                                      "CREATE TABLE r_meta (note VARCHAR)"])
def test_replace_overwrites_every_kind_of_object_for_every_type(case, existing):
    release, macro, query = case
    con = duckdb.connect()
    con.execute(existing.format(m=macro))
    with pytest.raises(pdp.ParameterError, match="would overwrite .*pass replace=True"):
        release.to_duckdb(con, "r")
    release.to_duckdb(con, "r", replace=True)
    assert con.sql(query).fetchall()[0][0] is not None
    assert pdp.duckdb.read_release(con, "r") == release
    release.to_duckdb(con, "r", replace=True)  # again: its own tables, macros and functions
    assert pdp.duckdb.read_release(con, "r") == release


def test_a_leftover_python_function_is_refused_unless_replace(case):
    release, _, query = case
    con = duckdb.connect()
    release.to_duckdb(con, "r")
    names = [row[0] for row in con.execute(
        "SELECT function_name FROM duckdb_functions() WHERE function_name LIKE '__pdp_%_r'").fetchall()]
    for row in con.execute("SELECT function_name, function_type FROM duckdb_functions() "
                           "WHERE function_name LIKE 'r_%' AND function_type = 'table_macro'").fetchall():
        con.execute(f'DROP MACRO TABLE "{row[0]}"')
    views = {row[0] for row in con.execute(
        "SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
    for view in ("r", "r_nodes", "r_labels_s", "__pdp_r_rows", "__pdp_r_cells"):
        if view in views:  # an in-memory grid's cell table is a view of its compressed store
            con.execute(f'DROP VIEW "{view}"')
    axes = [row[0] for row in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE table_name LIKE '__pdp_r_axis_%'").fetchall()]
    for table in ("__pdp_r_cells", "r_meta", "__pdp_r_nodes", "__pdp_r_up", "__pdp_r_labels_s", *axes):
        con.execute(f'DROP TABLE IF EXISTS "{table}"')
    if not names:  # this type registers no Python function: nothing is left over
        release.to_duckdb(con, "r")
        return
    with pytest.raises(pdp.ParameterError, match=f"DuckDB function '{names[0]}' exists.*replace=True"):
        release.to_duckdb(con, "r")
    assert con.sql("SHOW TABLES").fetchall() == []  # the transaction was rolled back
    release.to_duckdb(con, "r", replace=True)
    assert con.sql(query).fetchall()[0][0] is not None


def test_a_failed_statement_leaves_nothing_behind():
    con = duckdb.connect()
    parts = Registration(tables=["t", "t_meta"], macros=["t_m"],
                         sources={"__src": pl.DataFrame({"a": [1, 2]}).to_arrow()},
                         statements=["CREATE TABLE t AS SELECT * FROM __src",
                                     "CREATE TABLE t_meta AS SELECT no_such_column FROM __src"])
    with pytest.raises(duckdb.Error, match="no_such_column"):
        register(con, "t", parts)
    assert con.sql("SHOW TABLES").fetchall() == []
    with pytest.raises(duckdb.Error):
        con.sql("SELECT * FROM __src").fetchall()  # the transient source is gone too
    parts.statements[1] = "CREATE TABLE t_meta AS SELECT a FROM __src"
    assert register(con, "t", parts).fetchall() == [(1,), (2,)]


BOX_ANSWER = "SELECT count, noise_std, noise_lo, noise_hi FROM r_range_count(x_lo := 0.1, x_hi := 0.6)"
FULL_ANSWERS = {
    "grid": "SELECT count, std, lo, hi FROM r_range_count(a_lo := 2, a_hi := 7)",
    "spatial": BOX_ANSWER,
    "spatial_levels": BOX_ANSWER,
    "sequence": "SELECT count FROM r_frequency(['a', 'b'])",
}


def test_attach_makes_a_reopened_database_answer_as_before(case, tmp_path, request):
    """Tables and macros live in the file and call no Python function: a reopened file answers
    everything before ``pdd.attach`` (which re-verifies and registers again) and after, as before."""
    release, _, _ = case
    query = FULL_ANSWERS[request.node.callspec.params["case"]]
    path = str(tmp_path / "releases.duckdb")
    with duckdb.connect(path) as con:
        release.to_duckdb(con, "r")
        before = con.sql(query).fetchall()
    with duckdb.connect(path) as con:
        assert con.sql(query).fetchall() == before
        assert pdp.duckdb.attach(con, "r") == release
        assert con.sql(query).fetchall() == before
        pdp.duckdb.attach(con, "r")  # idempotent
        assert con.sql(query).fetchall() == before


def test_a_reversed_box_is_refused_in_sql_with_the_shared_text():
    release = MAKERS["spatial"][0]()
    con = duckdb.connect()
    release.to_duckdb(con, "t")
    with pytest.raises(duckdb.Error, match=r"x: lo=0\.7 > hi=0\.2; the range is empty$"):
        con.sql("SELECT * FROM t_range_count(x_lo := 0.7, x_hi := 0.2)").fetchall()
    con.register("b", pl.DataFrame({"id": [5], "y_lo": [0.9], "y_hi": [0.1]}).to_arrow())
    with pytest.raises(duckdb.Error, match=r"y: lo=0\.9 > hi=0\.1; the range is empty \(query id=5\)"):
        con.sql("SELECT * FROM t_range_counts('b')").fetchall()


def _stores(con) -> list[str]:
    return [row[0] for row in con.execute(
        "SELECT database_name FROM duckdb_databases() WHERE database_name LIKE '__pdp_%_store%'").fetchall()]


def test_an_in_memory_grid_keeps_its_cells_compressed():
    """In an in-memory connection the cell table lives in an attached compressed in-memory
    database (the user's names are unchanged): its columns are stored compressed, a replace
    leaves one such database, a refused one none, and the release reads back equal."""
    release = pdp.basic(pl.DataFrame({"a": np.arange(20_000) % 1000}), [pdp.Ordinal("a", 0, 999)],
                        epsilon=1.0, seed=3)
    con = duckdb.connect()
    release.to_duckdb(con, "r")
    [store] = _stores(con)
    methods = {row[0]: row[1] for row in con.execute(
        "SELECT column_name, compression FROM pragma_storage_info(?)",
        [f'"{store}".main.__pdp_r_cells']).fetchall()}
    assert set(methods) == {"cell", "count", "prefix"}
    assert all(m.lower() != "uncompressed" for m in methods.values()), methods
    assert pdp.duckdb.read_release(con, "r") == release
    release.to_duckdb(con, "r", replace=True)
    [new] = _stores(con)  # the replaced one is detached
    assert new != store
    store = new
    assert con.sql("SELECT count(*) FROM r").fetchall() == [(1000,)]
    with pytest.raises(pdp.ParameterError, match="replace=True"):  # refused before building a store
        release.to_duckdb(con, "r")
    assert _stores(con) == [store]

