"""What a user sees of a registered release is a read-only view of its own columns; the macros read
internal tables that an UPDATE through the user's names cannot reach; ``attach`` rebuilds every
stored object from the verified release, trusting no stored macro or prefix sum."""

from __future__ import annotations

import duckdb
import numpy as np
import polars as pl
import pytest

import polars_dp as pdp
from tests.helpers.sql import small_sequence_release, small_tree_release


def _grid() -> pdp.Release:
    rng = np.random.default_rng(1)
    frame = pl.DataFrame({"age": rng.integers(0, 100, 3_000), "sex": rng.choice(["f", "m"], 3_000)})
    return pdp.basic(frame, [pdp.Ordinal("age", 0, 99), pdp.Nominal("sex", categories=["f", "m"])],
                     epsilon=1.0, seed=1)


MAKERS = {
    "grid": (_grid, "SELECT count FROM a_range_count(age_lo := 20, age_hi := 30)"),
    "spatial": (small_tree_release, "SELECT count FROM a_range_count(x_lo := 0.1, x_hi := 0.6)"),
    "sequence": (small_sequence_release, "SELECT count FROM a_frequency(['a', 'b'])"),
}


@pytest.fixture(scope="module", params=list(MAKERS))
def case(request):
    make, query = MAKERS[request.param]
    return make(), query


def test_select_star_shows_only_the_release_columns(case):
    release, _ = case
    con = duckdb.connect()
    release.to_duckdb(con, "a")
    shown = con.sql("SELECT * FROM a").arrow().read_all()
    assert shown.column_names == release.to_arrow().column_names  # no cell, prefix or leaf
    assert pl.from_arrow(shown).equals(release.to_polars())


@pytest.mark.parametrize("update", ["UPDATE a SET count = count + 1000",
                                    "DELETE FROM a",
                                    "INSERT INTO a SELECT * FROM a"])
def test_a_write_through_the_user_name_cannot_make_macros_and_table_disagree(case, update):
    release, query = case
    con = duckdb.connect()
    release.to_duckdb(con, "a")
    before = con.sql(query).fetchall()
    total = con.sql("SELECT sum(count) FROM a").fetchall()
    with pytest.raises(duckdb.Error):
        con.execute(update)
    assert con.sql(query).fetchall() == before
    assert con.sql("SELECT sum(count) FROM a").fetchall() == total
    assert pdp.duckdb.read_release(con, "a") == release


def test_the_grid_example_of_the_issue_cannot_drift():
    """``UPDATE a SET count = count + 1000 WHERE age = 25`` made the macros and ``sum(count)``
    disagree; now it fails, and both still give the release's answer."""
    release = _grid()
    con = duckdb.connect()
    release.to_duckdb(con, "a")
    with pytest.raises(duckdb.Error):
        con.execute("UPDATE a SET count = count + 1000 WHERE age = 25")
    macro = con.sql("SELECT count FROM a_range_count()").fetchall()[0][0]
    table = con.sql("SELECT sum(count) FROM a").fetchall()[0][0]
    assert macro == pytest.approx(table) and table == pytest.approx(release.range_count())
    for view in ("a_labels_sex",):  # what the macros look labels up in is read-only too
        with pytest.raises(duckdb.Error):
            con.execute(f"UPDATE {view} SET start = 0")
    assert con.sql("SELECT count FROM a_range_count(sex := 'm')").fetchall()[0][0] == pytest.approx(
        release.range_count(sex="m"))


def test_the_nodes_of_a_sequence_model_are_read_only():
    release = small_sequence_release()
    con = duckdb.connect()
    release.to_duckdb(con, "a")
    before = con.sql(MAKERS["sequence"][1]).fetchall()
    with pytest.raises(duckdb.Error):
        con.execute("UPDATE a_nodes SET total = total * 10")
    assert con.sql(MAKERS["sequence"][1]).fetchall() == before


SWAPS = {  # a stored macro answering something else: the exact count of a raw table, with std 0
    "grid": "CREATE OR REPLACE MACRO a_range_count(age_lo := NULL, age_hi := NULL, sex := NULL, "
            "align := 'exact', alpha := 0.05) AS TABLE SELECT 12345.0 AS count, 0.0 AS std, "
            "12345.0 AS lo, 12345.0 AS hi",
    "spatial": "CREATE OR REPLACE MACRO a_range_count(x_lo := NULL, x_hi := NULL, y_lo := NULL, "
               "y_hi := NULL, alpha := 0.05) AS TABLE SELECT 12345.0 AS count, 0.0 AS noise_std, "
               "12345.0 AS noise_lo, 12345.0 AS noise_hi",
    "sequence": "CREATE OR REPLACE MACRO a_frequency(string) AS TABLE SELECT 12345.0 AS count, 0.0 AS std",
}


def test_attach_recreates_a_swapped_macro_from_the_verified_release(case, tmp_path, request):
    release, query = case
    path = str(tmp_path / "releases.duckdb")
    with duckdb.connect(path) as con:
        release.to_duckdb(con, "a")
        before = con.sql(query).fetchall()
    with duckdb.connect(path) as con:
        con.execute(SWAPS[request.node.callspec.params["case"]])
        assert con.sql(query).fetchall() == [(12345.0,)]
    with duckdb.connect(path) as con:
        assert pdp.duckdb.attach(con, "a") == release
        assert con.sql(query).fetchall() == before


def test_attach_recomputes_the_prefix_sums(tmp_path):
    """The prefix column is not part of the release (nor of its checksum): attach rebuilds it."""
    release, query = MAKERS["grid"][0](), MAKERS["grid"][1]
    path = str(tmp_path / "releases.duckdb")
    with duckdb.connect(path) as con:
        release.to_duckdb(con, "a")
        before = con.sql(query).fetchall()
        con.execute("UPDATE __pdp_a_cells SET prefix = 2 * prefix")
        assert con.sql(query).fetchall() != before
    with duckdb.connect(path) as con:
        pdp.duckdb.attach(con, "a")
        assert con.sql(query).fetchall() == before


def test_attach_upgrades_a_database_written_before_internal_tables(tmp_path):
    """A file whose release table is a plain table with ``cell`` / ``prefix`` (and plain label
    tables) is read back from that table, verified, and registered anew behind views."""
    release, query = MAKERS["grid"][0](), MAKERS["grid"][1]
    path = str(tmp_path / "old.duckdb")
    with duckdb.connect(path) as con:
        release.to_duckdb(con, "a")
        before = con.sql(query).fetchall()
        # the former layout: the labels stored per cell beside cell and prefix, no per-axis tables
        con.execute("DROP VIEW a; CREATE TABLE a AS SELECT r.*, c.prefix FROM __pdp_a_rows AS r "
                    "JOIN __pdp_a_cells AS c USING (cell) ORDER BY cell; DROP VIEW __pdp_a_rows; "
                    "DROP TABLE __pdp_a_cells")
        for (axis,) in con.execute("SELECT table_name FROM duckdb_tables() "
                                   "WHERE table_name LIKE '__pdp_a_axis_%'").fetchall():
            con.execute(f"DROP TABLE {axis}")
        con.execute("DROP VIEW a_labels_sex; CREATE TABLE a_labels_sex AS SELECT * FROM __pdp_a_labels_sex "
                    "ORDER BY rowid; DROP TABLE __pdp_a_labels_sex")
    with duckdb.connect(path) as con:
        assert pdp.duckdb.attach(con, "a") == release
        assert con.sql("SELECT * FROM a").pl().equals(release.to_polars())
        assert con.sql(query).fetchall() == before
        with pytest.raises(duckdb.Error):
            con.execute("UPDATE a SET count = 0")
