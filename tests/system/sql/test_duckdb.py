"""Range counts in DuckDB SQL: macros and plain SQL agree with Python; metadata; errors."""

from __future__ import annotations

import json

import duckdb
import numpy as np
import polars as pl
import pytest

import polars_dp as pdp
from polars_dp.evaluation.workloads import random_workload
from polars_dp.releases import sql_grid
from tests.helpers.domains import grid_attributes

RTOL = 1e-6


@pytest.fixture(scope="module")
def release() -> pdp.GridRelease:
    attrs = grid_attributes()
    counts = np.random.default_rng(8).normal(10.0, 4.0, size=tuple(a.n_cells for a in attrs))
    return pdp.GridRelease(counts, attrs, mechanism="basic", epsilon=1.0, neighbours="replace",
                           noise_scale=2.0, params={"sensitivity": 2})


@pytest.fixture(scope="module")
def con(release):
    con = duckdb.connect()
    release.to_duckdb(con, "rel")
    yield con
    con.close()


def close(a, b) -> bool:
    return np.allclose(a, b, rtol=RTOL, atol=RTOL)


def test_table_layout(con, release):
    """The user sees the release's columns; the macros read an internal table with cell, count and
    prefix only (the labels are derived from the cell number, never stored per cell)."""
    assert con.sql("SELECT * FROM rel").pl().equals(release.to_polars(), null_equal=True)
    table = con.sql("SELECT * FROM __pdp_rel_cells").pl()
    assert table.columns == ["cell", "count", "prefix"]
    assert table["cell"].to_list() == list(range(release.n_cells))        # sorted by cell
    assert close(table["count"].to_numpy(), release.counts.reshape(-1))
    inclusive = np.cumsum(np.cumsum(np.cumsum(np.cumsum(np.cumsum(release.counts, 0), 1), 2), 3), 4)
    assert close(table["prefix"].to_numpy(), inclusive.reshape(-1))
    assert "epsilon=1.0" in con.sql(
        "SELECT comment FROM duckdb_views() WHERE view_name = 'rel'").fetchall()[0][0]


def test_registration_streams_the_prefix_sums(monkeypatch):
    """Registering computes the prefix sums block by block (several batches), bit for bit those
    of the summed-area array, without caching an array the size of the counts on the release."""
    monkeypatch.setattr(sql_grid, "BATCH_CELLS", 1000)  # several blocks on a small grid
    attrs = grid_attributes()
    counts = np.random.default_rng(3).normal(10.0, 4.0, size=tuple(a.n_cells for a in attrs))
    fresh = pdp.GridRelease(counts, attrs, mechanism="basic", epsilon=1.0, neighbours="replace",
                            noise_scale=2.0, params={"sensitivity": 2})
    con = duckdb.connect()
    fresh.to_duckdb(con, "f")
    assert "_prefix_cache" not in vars(fresh)
    stored = con.sql("SELECT prefix FROM __pdp_f_cells ORDER BY cell").fetchnumpy()["prefix"]
    inclusive = fresh.prefix[(slice(1, None),) * len(attrs)].reshape(-1)
    assert np.array_equal(stored, inclusive)
    assert con.sql("SELECT * FROM f").pl().equals(fresh.to_polars(), null_equal=True)


def test_batch_macro_equals_python(con, release):
    queries = random_workload(release.attributes, 500, seed=21)
    con.register("workload", queries.to_arrow())
    got = con.sql("SELECT * FROM rel_range_counts('workload') ORDER BY id").pl()
    want = release.range_counts(queries, std=True)
    assert got["id"].to_list() == want["id"].to_list()
    assert close(got["count"].to_numpy(), want["count"].to_numpy())
    assert close(got["std"].to_numpy(), want["std"].to_numpy())


def test_batch_macro_with_missing_columns_and_typed_labels(con, release):
    con.execute("CREATE OR REPLACE TABLE few AS SELECT * FROM (VALUES "
                "(1, 4, true, 'Tech'), (2, NULL, NULL, NULL), (3, 29, false, 'agent')) "
                "AS t(id, age_hi, hisp, job)")
    got = con.sql("SELECT id, count, std FROM rel_range_counts(few, align := 'outer') ORDER BY id").fetchall()
    for (qid, count, std), preds in zip(got, [{"age": (None, 4), "hisp": True, "job": "Tech"}, {},
                                              {"age": (None, 29), "hisp": False, "job": "agent"}],
                                        strict=True):
        assert close(count, release.range_count(**preds, align="outer")), qid
        assert close(std, release.range_std(**preds, align="outer")), qid


@pytest.mark.parametrize(("sql_args", "predicates"), [
    ("", {}),
    ("age_lo := 3, age_hi := 17", {"age": (3, 17)}),
    ("age_lo := 4, age_hi := 17, align := 'outer'", {"age": (4, 17), "align": "outer"}),
    ("age_lo := 4, age_hi := 17, align := 'inner'", {"age": (4, 17), "align": "inner"}),
    ("job := 'Sales', hisp := true", {"job": "Sales", "hisp": True}),
    ("zone := 4, score_lo := 0.2", {"zone": 4, "score": (0.2, None)}),
    ("zone := 4, score_lo := 0.25, align := 'inner'", {"zone": 4, "score": (0.25, None), "align": "inner"}),
    ("score_lo := 0.3, score_hi := 0.6", {"score": (0.3, 0.6)}),
    ("score_lo := 0.3, score_hi := 1.0", {"score": (0.3, 1.0)}),
    ("zone := 'north', job := 'cashier', age_hi := 8, score_lo := 0.5, score_hi := 0.8, hisp := false",
     {"zone": "north", "job": "cashier", "age": (None, 8), "score": (0.5, 0.8), "hisp": False}),
    ("zone := 'north', job := 'cashier', age_hi := 9, score_lo := 0.5, score_hi := 0.79, hisp := false, "
     "align := 'outer'", {"zone": "north", "job": "cashier", "age": (None, 9), "score": (0.5, 0.79),
                          "hisp": False, "align": "outer"}),
])
def test_single_macro_equals_python(con, release, sql_args, predicates):
    count, std = con.execute(f"SELECT count, std FROM rel_range_count({sql_args})").fetchall()[0]
    assert close(count, release.range_count(**predicates))
    assert close(std, release.range_std(**predicates))


@pytest.mark.parametrize(("sql_args", "predicates"), [
    ("age_lo := 4, age_hi := 17", {"age": (4, 17)}),
    ("age_hi := 9", {"age": (None, 9)}),
    ("score_lo := 0.25", {"score": (0.25, None)}),
    ("score_lo := 0.5, score_hi := 0.79", {"score": (0.5, 0.79)}),
    ("age_lo := 4, age_hi := 5, align := 'inner'", {"age": (4, 5), "align": "inner"}),
])
def test_unaligned_bounds_are_refused_in_sql_and_python_alike(con, release, sql_args, predicates):
    """Issue 12 case 4: a bound inside a bin is an error (not silently widened) naming the
    nearest aligned bounds; the SQL and Python messages name the same bounds."""
    with pytest.raises(pdp.QueryError) as py_error:
        release.range_count(**predicates)
    with pytest.raises(duckdb.Error) as sql_error:
        con.execute(f"SELECT * FROM rel_range_count({sql_args})").fetchall()
    py_text, sql_text = str(py_error.value), str(sql_error.value)
    for text in (py_text, sql_text):
        assert "does not fall on bin edges" in text or "contains no whole bin" in text
    aligned = py_text.partition("nearest aligned: ")[2].replace("'", "")
    if aligned:
        assert aligned in sql_text


def test_align_must_be_known_in_sql_and_python(con, release):
    with pytest.raises(duckdb.Error, match="align must be one of"):
        con.execute("SELECT * FROM rel_range_count(age_lo := 3, align := 'widest')").fetchall()
    with pytest.raises(pdp.ParameterError, match="align must be one of"):
        release.range_count(age=(3, 5), align="widest")


def test_batch_rows_come_in_id_order(con, release):
    """Small defect: name_range_counts returned rows in no particular order."""
    queries = random_workload(release.attributes, 300, seed=3).sample(fraction=1.0, shuffle=True, seed=1)
    con.register("shuffled", queries.to_arrow())
    got = con.sql("SELECT id FROM rel_range_counts('shuffled')").fetchall()
    assert [row[0] for row in got] == sorted(queries["id"].to_list())


def test_plain_sql_sum_equals_python(con, release):
    got = con.sql("SELECT sum(count) FROM rel WHERE age_lo >= 3 AND age_hi <= 14 AND job_sector = 'Sales' "
                  "AND job_family = 'Retail'").fetchall()[0][0]
    assert close(got, release.range_count(age=(3, 14), job="Retail"))
    got = con.sql("SELECT sum(count) FROM rel WHERE zone IN (1, 2) AND hisp").fetchall()[0][0]
    assert close(got, release.range_count(zone="north", hisp=True))


@pytest.mark.parametrize(("sql", "message"), [
    ("SELECT * FROM rel_range_count(job := 'Clerk')", "job: Clerk is not a label"),
    ("SELECT * FROM rel_range_count(age_lo := 30)", r"age_lo: 30(\.0)? is outside the declared domain"),
    ("SELECT * FROM rel_range_count(age_lo := 20, age_hi := 10)", "age: lo=20(.0)? > hi=10"),
    ("SELECT * FROM rel_range_count(score_hi := 1.5)", "score_hi: 1.5 is outside"),
    ("SELECT * FROM rel_range_count(age_lo := 'abc')", "age_lo: abc is not a number"),
    ("SELECT * FROM rel_range_count(job := 3)", "job: 3 is not a label"),
])
def test_bad_single_predicates_raise_in_sql(con, sql, message):
    with pytest.raises(duckdb.Error, match=message):
        con.execute(sql).fetchall()


def test_bad_batch_predicate_names_query(con):
    con.execute("CREATE OR REPLACE TABLE bad AS SELECT * FROM (VALUES (1, 'Tech'), (2, 'Nope')) "
                "AS t(id, job)")
    with pytest.raises(duckdb.Error, match=r"job: Nope is not a label.*query id=2"):
        con.execute("SELECT * FROM rel_range_counts(bad)").fetchall()


def test_unknown_parameter_is_an_error(con):
    with pytest.raises(duckdb.Error, match="does not support the supplied arguments"):
        con.execute("SELECT * FROM rel_range_count(height := 3)").fetchall()


def test_metadata_round_trip(con, release):
    meta = dict(con.sql("SELECT key, value FROM rel_meta").fetchall())
    assert meta["mechanism"] == "basic" and json.loads(meta["epsilon"]) == 1.0
    back = pdp.duckdb.read_release(con, "rel")
    assert back == release
    table = pdp.duckdb.to_arrow(con, "rel")
    assert table.schema.metadata[b"polars_dp.neighbours"] == b"replace"
    with pytest.raises(pdp.ReleaseFormatError, match="not a polars-dp release"):
        pdp.duckdb.to_arrow(con, "nothing_here")


def test_bad_names_and_release_types(release):
    con = duckdb.connect()
    with pytest.raises(pdp.ParameterError, match="plain SQL identifier"):
        pdp.duckdb.register(con, "bad name; DROP TABLE x", release)
    with pytest.raises(pdp.ParameterError, match="GridRelease"):
        pdp.duckdb.register(con, "x", object())
    attrs = [pdp.Ordinal("cell", 0, 3)]
    r = pdp.GridRelease(np.zeros(4), attrs, mechanism="x", epsilon=1, neighbours="replace", noise_scale=1)
    with pytest.raises(pdp.ParameterError, match="'cell'"):
        r.to_duckdb(con, "x")
    assert con.sql("SHOW TABLES").fetchall() == []


@pytest.mark.parametrize("n_cells", [1, 2, 3, 7, 64, 100, 2049, 5000])
def test_sql_std_is_exact_for_every_transformed_axis_size(n_cells):
    """Issue 12 case 7: SQL std was NULL beyond ~2,047 cells of a transformed ordinal axis.
    The Haar variance factor is now computed in SQL per level; it equals Python's within 1e-9."""
    attrs = [pdp.Ordinal("x", 0, n_cells - 1), pdp.Nominal("g", categories=["a", "b", "c"])]
    counts = np.random.default_rng(n_cells).normal(5.0, 2.0, size=(n_cells, 3))
    wave = pdp.GridRelease(counts, attrs, mechanism="privelet", epsilon=1.0, neighbours="replace",
                           noise_scale=3.0, params={"transformed": ["x", "g"]})
    con = duckdb.connect()
    wave.to_duckdb(con, "wave")
    queries = random_workload(wave.attributes, 300, seed=5)
    con.register("workload", queries.to_arrow())
    got = con.sql("SELECT * FROM wave_range_counts('workload')").pl()
    want = wave.range_counts(queries, std=True)
    assert got["std"].null_count() == 0
    np.testing.assert_allclose(got["count"].to_numpy(), want["count"].to_numpy(), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(got["std"].to_numpy(), want["std"].to_numpy(), rtol=1e-9, atol=0)
    (_, std), = con.execute("SELECT count, std FROM wave_range_count(x_lo := 0)").fetchall()
    assert std == pytest.approx(wave.range_std(x=(0, None)), rel=1e-9)


def test_full_domain_query_from_a_polars_frame(release):
    con = duckdb.connect()
    release.to_duckdb(con, "r2")
    frame = pl.DataFrame({"id": [0], "age_lo": [0], "age_hi": [29]})
    con.register("one", frame.to_arrow())
    (qid, count, std), = con.sql("SELECT id, count, std FROM r2_range_counts('one')").fetchall()
    assert qid == 0 and close(count, release.range_count()) and close(std, release.range_std())


def test_fortran_ordered_counts_answer_as_in_python():
    """Cells are numbered in C order: a release built from a Fortran-ordered array holds the
    same cells, and DuckDB answers its ranges as Python does."""
    a, b = pdp.Ordinal("a", 0, 3), pdp.Ordinal("b", 0, 2)
    counts = np.arange(12.0).reshape(4, 3)
    release = pdp.GridRelease(np.asfortranarray(counts), (a, b), mechanism="basic", epsilon=1.0,
                              neighbours="replace", noise_scale=1.0)
    assert release.counts.flags.c_contiguous and np.array_equal(release.counts, counts)
    con = duckdb.connect()
    release.to_duckdb(con, "t")
    rows = con.sql("SELECT a, b, count FROM t ORDER BY a, b").fetchall()
    assert rows == [(i, j, counts[i, j]) for i in range(4) for j in range(3)]
    got = con.sql("SELECT count FROM t_range_count(a_lo := 2, a_hi := 3)").fetchall()[0][0]
    assert got == release.range_count(a=(2, 3)) == counts[2:4].sum()
