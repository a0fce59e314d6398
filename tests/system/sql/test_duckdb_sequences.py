"""SequenceRelease in DuckDB: node tables, frequency macros equal to Python, round trip, errors."""

import itertools

import duckdb
import numpy as np
import polars as pl
import pytest

import polars_dp as pdp


@pytest.fixture(scope="module", params=["privtree", "ngram"])
def model(request):
    df = pl.DataFrame({"s": ["abcab", "ba", "ccc", "a", "abab", "cabba"] * 80})
    if request.param == "privtree":
        return df.dp.privtree_sequences("s", alphabet="abc", max_length=5, epsilon=3.0, seed=1)
    return df.dp.ngram_sequences("s", alphabet="abc", max_length=5, epsilon=3.0, height=3, seed=1)


def test_sql_frequencies_equal_python(model):
    con = duckdb.connect()
    model.to_duckdb(con, "seq")
    queries = [list(t) for k in range(1, 6) for t in itertools.product("abc", repeat=k)]
    con.register("qs", pl.DataFrame({"id": range(len(queries)), "string": queries}).to_arrow())
    got = con.sql("SELECT * FROM seq_frequencies('qs') ORDER BY id").pl()
    want, std = model.frequencies(queries, std=True)
    assert got["id"].to_list() == list(range(len(queries)))
    np.testing.assert_allclose(got["count"].to_numpy(), want, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(got["std"].to_numpy(), std, rtol=1e-9, atol=1e-9)
    count, sd = con.sql("SELECT count, std FROM seq_frequency(['c', 'a', 'b'])").fetchall()[0]
    f, s = model.frequencies(["cab"], std=True)
    assert count == pytest.approx(f[0], rel=1e-9, abs=1e-9) and sd == pytest.approx(s[0], rel=1e-9)
    # plain SQL on the node table: the root's row per symbol
    root = con.sql("SELECT count FROM seq WHERE node = 0 AND next_symbol = 'a'").fetchall()[0][0]
    assert root == pytest.approx(model.hist[0, 0])


def test_int_alphabet_and_errors():
    lf = pl.LazyFrame({"p": [[1, 2, 3], [3, 3], [2]] * 50}, schema={"p": pl.List(pl.UInt8)})
    m = lf.dp.privtree_sequences("p", alphabet=range(1, 4), max_length=3, epsilon=1.0, seed=0)
    con = duckdb.connect()
    m.to_duckdb(con, "pages")
    assert con.sql("SELECT count FROM pages_frequency([3, 3])").fetchall()[0][0] == pytest.approx(
        m.frequency([3, 3]), rel=1e-9, abs=1e-9)
    with pytest.raises(duckdb.Error, match="outside the alphabet"):
        con.sql("SELECT * FROM pages_frequency([1, 7])").fetchall()
    with pytest.raises(duckdb.Error, match="empty string"):
        con.sql("SELECT * FROM pages_frequency([]::BIGINT[])").fetchall()
    with pytest.raises(pdp.ParameterError, match="would overwrite"):
        m.to_duckdb(con, "pages")
    m.to_duckdb(con, "pages", replace=True)
    with pytest.raises(pdp.ParameterError, match="plain SQL identifier"):
        m.to_duckdb(con, "bad name")


def test_round_trip_through_duckdb(model):
    con = duckdb.connect()
    pdp.duckdb.register(con, "seq", model)
    back = pdp.duckdb.read_release(con, "seq")
    assert isinstance(back, pdp.SequenceRelease) and back == model


@pytest.fixture(scope="module")
def sparse_model():
    """A PST at a small epsilon: a shallow tree, so many strings are extrapolated."""
    df = pl.DataFrame({"s": ["abcab", "ba", "ccc", "a", "abab", "cabba"] * 80})
    return df.dp.privtree_sequences("s", alphabet="abc", max_length=5, epsilon=0.3, seed=1)


def test_sql_says_which_estimates_are_extrapolated(model, sparse_model):
    """The macros' ``extrapolated`` column is Python's (frequency_table), strings longer than
    max_length (here 5) count 0 with std 0, and a text string is one symbol per character."""
    _same_answers_as_python(model)
    assert 0 < _same_answers_as_python(sparse_model) < 3 + 9 + 27 + 81 + 243


def _same_answers_as_python(model) -> int:
    """Checks one model; returns how many of its strings of length <= max_length are extrapolated."""
    con = duckdb.connect()
    model.to_duckdb(con, "seq")
    queries = ["".join(t) for k in range(1, 8) for t in itertools.product("abc", repeat=k)]
    con.register("qs", pl.DataFrame({"id": range(len(queries)), "string": queries}).to_arrow())
    got = con.sql("SELECT * FROM seq_frequencies('qs') ORDER BY id").pl()
    want = model.frequency_table(queries)
    assert got.columns == ["id", "count", "std", "extrapolated"]
    assert got["extrapolated"].to_list() == want["extrapolated"].to_list()
    np.testing.assert_allclose(got["count"].to_numpy(), want["count"].to_numpy(), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(got["std"].to_numpy(), want["std"].to_numpy(), rtol=1e-9, atol=1e-9)
    too_long = np.array([len(q) > model.max_length for q in queries])
    assert (got["count"].to_numpy()[too_long] == 0).all() and (got["std"].to_numpy()[too_long] == 0).all()
    for text in ("ab", "cab", "a" * 30):
        row = con.sql(f"SELECT count, std, extrapolated FROM seq_frequency('{text}')").fetchall()
        assert row == con.sql(f"SELECT * FROM seq_frequency({list(text)!r})").fetchall()
        assert row[0][0] == pytest.approx(model.frequency(text), rel=1e-9, abs=1e-9)
    return int(want["extrapolated"].sum())
