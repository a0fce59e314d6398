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


@pytest.fixture(scope="module")
def int_connections(tmp_path_factory):
    """A model over the integers 1..3, registered by ``to_duckdb`` and by its SQL script (a fresh
    connection reading the Parquet file)."""
    m = pl.DataFrame({"w": [[1, 2], [2, 3]] * 20}).dp.privtree_sequences(
        "w", alphabet=range(1, 4), max_length=3, epsilon=1e4, seed=0)
    registered = duckdb.connect()
    m.to_duckdb(registered, "m")
    scripted = duckdb.connect()
    path = m.write_parquet(tmp_path_factory.mktemp("seqsym") / "m.parquet")
    scripted.execute(m.sql_script(path, "m"))
    return m, {"to_duckdb": registered, "script": scripted}


def _duckdb_message(con, sql: str) -> str:
    with pytest.raises(duckdb.Error) as info:
        con.sql(sql).fetchall()
    return str(info.value).removeprefix("Invalid Input Error: ")


@pytest.mark.parametrize(("sql", "python"), [
    ("[1.5]", [1.5]),                        # was rounded to [2] (Python truncated to [1])
    ("[1.5, 2.9]", [1.5, 2.9]),              # was the count of [2, 3]
    ("[2.7::DOUBLE, 3.2::DOUBLE]", [2.7, 3.2]),
    ("[true]", [True]),
    ("['2']", ["2"]),
    ("[1, NULL]", [1, None]),
    ("[4, 2]", [4, 2]),
])
def test_sql_refuses_what_python_refuses_with_its_sentence(int_connections, sql, python):
    m, connections = int_connections
    with pytest.raises(pdp.QueryError) as info:
        m.frequency(python)
    for con in connections.values():
        assert _duckdb_message(con, f"SELECT * FROM m_frequency({sql})") == str(info.value)


def test_sql_answers_integral_floats_as_python_does(int_connections):
    m, connections = int_connections
    want = m.frequency_table([[2, 3], [1, 2.0], [3]]).select("count", "std", "extrapolated").rows()
    for con in connections.values():
        for sql in ("[2, 3]", "[2.0, 3.0]", "[2.0::DOUBLE, 3::UTINYINT]", "[2, 3]::INTEGER[2]"):
            assert con.sql(f"SELECT * FROM m_frequency({sql})").fetchall() == want[:1]
        floats = pl.DataFrame({"id": [0, 1, 2], "string": [[2.0, 3.0], [1.0, 2.0], [3.0]]})
        con.register("qs", floats.to_arrow())
        got = con.sql("SELECT count, std, extrapolated FROM m_frequencies('qs') ORDER BY id").fetchall()
        assert got == want
        con.register("bad", pl.DataFrame({"id": [0, 7], "string": [[2.0, 3.0], [2.5, 3.0]]}).to_arrow())
        with pytest.raises(pdp.QueryError) as info:
            m.frequencies([[2.0, 3.0], [2.5, 3.0]])
        assert _duckdb_message(con, "SELECT * FROM m_frequencies('bad')") == f"{info.value} (query id=7)"


def test_a_text_alphabet_refuses_other_kinds_in_sql(model):
    con = duckdb.connect()
    model.to_duckdb(con, "seq")
    for sql, python in (("[1]", [1]), ("[true]", [True]), ("['z', 'a', 'q']", ["z", "a", "q"])):
        with pytest.raises(pdp.QueryError) as info:
            model.frequency(python)
        assert _duckdb_message(con, f"SELECT * FROM seq_frequency({sql})") == str(info.value)


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
