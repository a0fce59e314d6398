"""The DuckDB macros answer ordinal and nominal range queries like the definition of bin
alignment (``tests/helpers/ranges.py``) and exactly like Python, for every align: counts,
the exact noise std (Haar and nominal factors from the explicit inverse map) and error texts."""

from __future__ import annotations

import re

import duckdb
import numpy as np
import polars as pl
import pytest

import polars_dp as pdp
from polars_dp.domains.sql import double_sql
from polars_dp.kernels.wavelets import coefficient_count, inverse
from tests.helpers.ranges import DOMAINS, expected_ranges, query_frame, random_queries

SCALE = 1.5
#: Axes of each domain the release treats as transformed (the rest: one unit coefficient per cell).
TRANSFORMED = {"partial": ["n", "t", "job"], "exact": ["u"]}


@pytest.fixture(scope="module", params=sorted(DOMAINS))
def case(request):
    attrs = DOMAINS[request.param]
    counts = np.random.default_rng(4).integers(0, 1000, size=tuple(a.n_cells for a in attrs)).astype(float)
    release = pdp.GridRelease(counts, attrs, mechanism="privelet", epsilon=1.0, neighbours="replace",
                              noise_scale=SCALE, params={"transformed": TRANSFORMED[request.param]})
    con = duckdb.connect()
    release.to_duckdb(con, "r")
    yield request.param, release, con
    con.close()


def explicit_factor(release: pdp.GridRelease, axis: int, start: int, stop: int) -> float:
    """Sum of squared weights of the unit noise terms in the range sum (explicit inverse map)."""
    a = release.attributes[axis]
    if a.column not in release.transformed:
        return float(stop - start)
    rows = inverse(np.eye(coefficient_count(a)), a, axis=1)  # cells of each unit coefficient
    return float((rows[:, start:stop].sum(axis=1) ** 2).sum())


def normal(text: str) -> str:
    """A message without its engine's spelling: the queried bounds (``4`` or ``4.0``) and quotes."""
    text = text.removeprefix("Invalid Input Error: ")
    return re.sub(r"=\([^)]*\)", "=(...)", text, count=1).replace("'", "")


def sql_error(con, frame: pl.DataFrame, align: str) -> str:
    con.register("one", frame.to_arrow())
    with pytest.raises(duckdb.Error) as error:
        con.execute(f"SELECT * FROM r_range_counts('one', align := '{align}')").fetchall()
    return normal(str(error.value))


def python_errors(release: pdp.GridRelease, query: dict, i: int, align: str) -> set[str]:
    """Python's message for each predicate of ``query`` that is an error on its own (SQL may
    report any of them first)."""
    out = set()
    for column, predicate in query.items():
        try:
            release.range_counts(query_frame(release.attributes, [{column: predicate}], ids=[i]), align=align)
        except pdp.QueryError as exc:
            out.add(normal(str(exc)))
    return out


@pytest.mark.parametrize("align", ["exact", "outer", "inner"])
def test_sql_ranges_follow_the_definition(case, align):
    _, release, con = case
    attrs = release.attributes
    queries = random_queries(attrs, 120, seed=29)
    wants = [expected_ranges(attrs, q, align) for q in queries]
    ok = [i for i, w in enumerate(wants) if not isinstance(w, str)]
    frame = query_frame(attrs, [queries[i] for i in ok], ids=ok)
    con.register("batch", frame.to_arrow())
    got = con.sql(f"SELECT id, count, std FROM r_range_counts('batch', align := '{align}')").fetchall()
    assert [row[0] for row in got] == ok
    python = release.range_counts(frame, std=True, align=align)
    for (i, count, std), py_count, py_std in zip(got, python["count"], python["std"], strict=True):
        starts, stops = wants[i]
        box = tuple(slice(s, t) for s, t in zip(starts, stops, strict=True))
        assert count == release.counts[box].sum(), (queries[i], align)            # integer counts: exact
        factors = [explicit_factor(release, k, s, t)
                   for k, (s, t) in enumerate(zip(starts, stops, strict=True))]
        assert std == pytest.approx(np.sqrt(2 * SCALE**2 * np.prod(factors)), rel=1e-9), (queries[i], align)
        assert (count, std) == (py_count, py_std), (queries[i], align)            # Python and SQL alike
    errors = [i for i, w in enumerate(wants) if isinstance(w, str)]
    assert bool(errors) == (align != "outer")
    for i in errors[:8]:
        text = sql_error(con, query_frame(attrs, [queries[i]], ids=[i]), align)
        assert text in python_errors(release, queries[i], i, align), (queries[i], align)  # one template


def test_single_macro_follows_the_definition(case):
    """The single-query macro (literal parameters) answers like the batch macro."""
    _, release, con = case
    attrs = release.attributes
    for query in random_queries(attrs, 15, seed=5):
        want = expected_ranges(attrs, query, "outer")
        args = ["align := 'outer'"]
        for a in attrs:
            if a.column not in query:
                continue
            if isinstance(a, pdp.Nominal):
                args.append(f"{a.column} := '{query[a.column]}'")
                continue
            for side, value in zip(("lo", "hi"), query[a.column], strict=True):
                if value is not None:
                    args.append(f"{a.column}_{side} := {double_sql(value)}")
        (count, std), = con.execute(f"SELECT count, std FROM r_range_count({', '.join(args)})").fetchall()
        box = tuple(slice(s, t) for s, t in zip(*want, strict=True))
        assert count == release.counts[box].sum(), query
        assert std == release.range_std(**query, align="outer"), query


@pytest.mark.parametrize("align", ["exact", "outer", "inner"])
def test_sql_and_python_agree_on_decimal_widths(align):
    """Bins of 0.1 and 0.05 (edges not exact in binary, within FLOAT_TOLERANCE): the same
    answer or the same error in SQL and Python."""
    attrs = [pdp.Ordinal("score", 0.0, 1.0, width=0.1), pdp.Ordinal("p", 0.5, 2.0, width=0.05)]
    counts = np.random.default_rng(2).integers(0, 100, size=tuple(a.n_cells for a in attrs)).astype(float)
    release = pdp.GridRelease(counts, attrs, mechanism="privelet", epsilon=1.0, neighbours="replace",
                              noise_scale=SCALE, params={"transformed": ["p"]})
    con = duckdb.connect()
    release.to_duckdb(con, "r")
    rng = np.random.default_rng(7)
    grid = {"score": np.round(np.arange(0, 21) * 0.05, 2), "p": np.round(0.5 + np.arange(0, 61) * 0.025, 3)}
    queries = [{c: tuple(sorted(rng.choice(v, size=2))) for c, v in grid.items()} for _ in range(200)]
    ok, errors = [], []
    for i, query in enumerate(queries):
        try:
            release.range_counts(query_frame(attrs, [query]), align=align)
            ok.append(i)
        except pdp.QueryError:
            errors.append(i)
    frame = query_frame(attrs, [queries[i] for i in ok], ids=ok)
    con.register("batch", frame.to_arrow())
    got = con.sql(f"SELECT id, count, std FROM r_range_counts('batch', align := '{align}')").fetchall()
    want = release.range_counts(frame, std=True, align=align).select("id", "count", "std").rows()
    assert got == want and len(ok) >= 5
    assert bool(errors) == (align != "outer")
    for i in errors[:8]:
        text = sql_error(con, query_frame(attrs, [queries[i]], ids=[i]), align)
        assert text in python_errors(release, queries[i], i, align), queries[i]


@pytest.mark.parametrize("align", ["exact", "inner"])
def test_a_single_bin_edge_value_holds_no_whole_bin(align):
    """``t=(e_k, e_k)`` of a float domain is one value (of bin k's values it holds only its lower
    edge): no whole bin in Python and SQL alike (the SQL macro used to count bin k under exact)."""
    attrs = [pdp.Ordinal("t", 0.0, 2.0, width=0.5)]
    release = pdp.GridRelease(np.arange(5.0), attrs, mechanism="basic", epsilon=1.0, neighbours="replace",
                              noise_scale=SCALE)
    con = duckdb.connect()
    release.to_duckdb(con, "r")
    with pytest.raises(pdp.QueryError, match="contains no whole bin"):
        release.range_count(t=(0.5, 0.5), align=align)
    with pytest.raises(duckdb.Error, match="contains no whole bin"):
        con.execute(f"SELECT * FROM r_range_count(t_lo := 0.5, t_hi := 0.5, align := '{align}')").fetchall()
    assert con.execute("SELECT count FROM r_range_count(t_lo := 0.5, t_hi := 0.5, align := 'outer')"
                       ).fetchall() == [(release.range_count(t=(0.5, 0.5), align="outer"),)] == [(1.0,)]


def test_macros_answer_in_a_reopened_database(tmp_path):
    """The ranges, their error texts and the Haar std are plain SQL stored with the macros: a
    database file reopened answers without any Python function."""
    attrs = DOMAINS["partial"]
    counts = np.random.default_rng(9).integers(0, 50, size=tuple(a.n_cells for a in attrs)).astype(float)
    release = pdp.GridRelease(counts, attrs, mechanism="privelet", epsilon=1.0, neighbours="replace",
                              noise_scale=SCALE, params={"transformed": TRANSFORMED["partial"]})
    path = str(tmp_path / "release.duckdb")
    with duckdb.connect(path) as con:
        release.to_duckdb(con, "r")
    queries = random_queries(attrs, 50, seed=3)
    frame = query_frame(attrs, queries)
    with duckdb.connect(path) as con:
        con.register("batch", frame.to_arrow())
        got = con.sql("SELECT id, count, std FROM r_range_counts('batch', align := 'outer')").fetchall()
        with pytest.raises(duckdb.Error, match="contains no whole bin"):
            con.execute("SELECT count FROM r_range_count(t_lo := 1.0, t_hi := 1.0)").fetchall()
    assert got == release.range_counts(frame, std=True, align="outer").select("id", "count", "std").rows()
