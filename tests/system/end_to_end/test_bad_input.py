"""Catalogue of bad inputs: each one through the Python API, DuckDB SQL and the command line.

For every case: the error type (a typed ``polars_dp`` error in Python, a DuckDB error raised by
the macro's ``error()`` in SQL, exit code 2 on the command line), a message of one sentence
that names what to fix, and no file left behind in the working directory.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pytest

import polars_dp as pdp
from tests.helpers import TESTS_DATA
from tests.helpers.cli import SPECS, run_cli


# ---------------------------------------------------------------------- helpers
def one_sentence(message: str, *names: str) -> str:
    """Assert ``message`` is one line, one sentence (no ``. Next`` inside), naming ``names``."""
    message = message.strip()
    assert message and "\n" not in message, f"not one line: {message!r}"
    assert not re.search(r"[a-z0-9)\]]\. [A-Z]", message), f"more than one sentence: {message!r}"
    for name in names:
        assert name in message, f"{name!r} is not named in {message!r}"
    return message


def sql_error(con: duckdb.DuckDBPyConnection, query: str, *names: str) -> str:
    """The message of the DuckDB error ``query`` raises (the macro's ``error(...)`` text)."""
    with pytest.raises(duckdb.Error) as info:
        con.execute(query).fetchall()
    text = str(info.value)
    assert text.startswith("Invalid Input Error: "), text  # raised by error(), not a binder error
    return one_sentence(text.removeprefix("Invalid Input Error: "), *names)


def cli_error(capsys, cwd: Path, *args: str, names: tuple[str, ...] = ()) -> str:
    """Run the command line in ``cwd``: exit code 2, one line on stderr, no new file in ``cwd``."""
    before = set(p.name for p in cwd.iterdir())
    code, out, err = run_cli(capsys, *args)
    assert code == 2, (code, out, err)
    assert set(p.name for p in cwd.iterdir()) == before, "a file was left behind"
    errors = [line for line in err.splitlines() if line.startswith("polars-dp ") and ": error: " in line]
    assert len(errors) == 1 and err.endswith(errors[0] + "\n"), err  # stage lines, then one error line
    return one_sentence(errors[0].split(": error: ", 1)[1], *names)


@pytest.fixture
def in_tmp(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


# ---------------------------------------------------------------------- releases
@pytest.fixture(scope="module")
def grid() -> pdp.GridRelease:
    rng = np.random.default_rng(3)
    df = pl.DataFrame({"age": rng.integers(0, 100, 500), "sex": rng.choice(["f", "m"], 500)})
    attrs = [pdp.Ordinal("age", 0, 99, width=10), pdp.Nominal("sex", categories=["f", "m"])]
    return pdp.basic(df, attrs, epsilon=1.0, seed=1)


@pytest.fixture(scope="module")
def tree() -> pdp.SpatialRelease:
    rng = np.random.default_rng(4)
    df = pl.DataFrame({"x": rng.uniform(0, 10, 2000), "y": rng.uniform(0, 10, 2000)})
    return df.dp.privtree(["x", "y"], bounds=[(0.0, 10.0), (0.0, 10.0)], epsilon=1.0, seed=2)


@pytest.fixture(scope="module")
def seq() -> pdp.SequenceRelease:
    df = pl.DataFrame({"s": ["abcab", "ba", "ccc", "a", "abab", "cabba"] * 40})
    return df.dp.privtree_sequences("s", alphabet="abc", max_length=5, epsilon=3.0, seed=1)


@pytest.fixture(scope="module")
def files(tmp_path_factory, grid, tree, seq) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("releases")
    out = {}
    for name, release in (("grid", grid), ("tree", tree), ("seq", seq)):
        out[name] = folder / f"{name}.parquet"
        release.write_parquet(out[name])
    return out


@pytest.fixture(scope="module")
def con(grid, tree, seq) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    grid.to_duckdb(con, "g")
    tree.to_duckdb(con, "t")
    seq.to_duckdb(con, "s")
    return con


def register(con: duckdb.DuckDBPyConnection, name: str, frame: pl.DataFrame) -> None:
    con.register(name, frame.to_arrow())


# ---------------------------------------------------------------------- 1. unknown query columns
def test_unknown_query_column_grid(grid, con, files, capsys, in_tmp):
    queries = pl.DataFrame({"id": [1, 2], "age_lo": [0, 10], "sexx": ["f", "m"]})
    with pytest.raises(pdp.QueryError) as info:
        grid.range_counts(queries)
    one_sentence(str(info.value), "'sexx'")
    register(con, "bad_cols", queries)
    sql_error(con, "SELECT * FROM g_range_counts('bad_cols')", "'sexx'", "age_lo", "sex")
    queries.write_csv(in_tmp / "q.csv")
    cli_error(capsys, in_tmp, "query", files["grid"], "--queries", "q.csv", names=("'sexx'",))


def test_unknown_query_column_tree(tree, con, files, capsys, in_tmp):
    queries = pl.DataFrame({"id": [1], "x_lo": [1.0], "lon_lo": [2.0]})
    with pytest.raises(pdp.QueryError) as info:
        tree.range_counts(queries)
    one_sentence(str(info.value), "'lon_lo'")
    register(con, "bad_box", queries)
    sql_error(con, "SELECT * FROM t_range_counts('bad_box')", "'lon_lo'", "x_lo", "y_hi")
    queries.write_csv(in_tmp / "q.csv")
    cli_error(capsys, in_tmp, "query", files["tree"], "--queries", "q.csv", names=("'lon_lo'",))


def test_unknown_column_in_sequence_queries(con):
    register(con, "bad_seq", pl.DataFrame({"id": [1], "string": [["a"]], "strng": [["b"]]}))
    sql_error(con, "SELECT * FROM s_frequencies('bad_seq')", "'strng'", "string")


def test_sql_case_of_a_known_column_does_not_matter(con, grid):
    con.execute("CREATE OR REPLACE TEMP TABLE upper_q AS SELECT 1 AS ID, 10 AS AGE_LO, 'f' AS SEX")
    (qid, count, *_), = con.execute("SELECT * FROM g_range_counts('upper_q')").fetchall()
    assert qid == 1 and count == pytest.approx(grid.range_count(age=(10, None), sex="f"))


# ---------------------------------------------------------------------- 2. duplicate / null ids
ID_CASES = {"duplicate": ([1, 1, 2], "query id 1 appears 2 times"),
            "null": ([None, 1, 2], "1 query row(s) have a")}


@pytest.mark.parametrize("case", ID_CASES)
def test_repeated_or_null_ids_grid_and_tree(case, grid, tree, con, files, capsys, in_tmp):
    ids, said = ID_CASES[case]
    cases = ((grid, "g", {"age_lo": [0, 10, 20]}), (tree, "t", {"x_lo": [0.0, 1.0, 2.0]}))
    for release, table, cols in cases:
        queries = pl.DataFrame({"id": ids, **cols})
        with pytest.raises(pdp.QueryError) as info:
            release.range_counts(queries)
        one_sentence(str(info.value), said, "own id")
        register(con, f"ids_{case}", queries)
        sql_error(con, f"SELECT * FROM {table}_range_counts('ids_{case}')", said, "own id")
        queries.write_csv(in_tmp / "q.csv")
        cli_error(capsys, in_tmp, "query", files["grid" if table == "g" else "tree"], "--queries", "q.csv",
                  names=(said,))
        (in_tmp / "q.csv").unlink()


@pytest.mark.parametrize("case", ID_CASES)
def test_repeated_or_null_ids_sequences(case, con, files, capsys, in_tmp):
    ids, said = ID_CASES[case]
    queries = pl.DataFrame({"id": ids, "string": [["a"], ["a", "b"], ["c"]]})
    register(con, f"seq_ids_{case}", queries)
    sql_error(con, f"SELECT * FROM s_frequencies('seq_ids_{case}')", said, "own id")
    queries.with_columns(pl.col("string").list.join(" ")).write_csv(in_tmp / "q.csv")
    cli_error(capsys, in_tmp, "query", files["seq"], "--queries", "q.csv", names=(said,))


def test_sql_queries_without_id(con):
    register(con, "no_id", pl.DataFrame({"age_lo": [0]}))
    sql_error(con, "SELECT * FROM g_range_counts('no_id')", "no id column")


def test_distinct_ids_any_order_still_answer(grid, con):
    queries = pl.DataFrame({"id": [3, 1, 2], "age_lo": [0, 10, 20]})
    register(con, "fine", queries)
    got = con.execute("SELECT id, count FROM g_range_counts('fine')").fetchall()
    want = grid.range_counts(queries).sort("id")
    assert [r[0] for r in got] == [1, 2, 3]
    np.testing.assert_allclose([r[1] for r in got], want["count"].to_numpy(), rtol=1e-9)


# ---------------------------------------------------------------------- 3. integer vs float domains
LAT_POINTS = [44.2, 44.7, 45.3, 45.9]
LAT_SPEC = """mechanism = "basic"
epsilon = 1.0
[[attributes]]
column = "lat"
kind = "ordinal"
lo = 44
hi = 46
"""


def test_fractions_in_an_integer_domain_are_refused(capsys, in_tmp):
    df = pl.DataFrame({"lat": LAT_POINTS})
    integer = pdp.Ordinal("lat", 44, 46)
    for source in (df, df.lazy(), df.to_arrow(), duckdb.sql("SELECT unnest([44.0, 45.5]) AS lat")):
        with pytest.raises(pdp.DomainError) as info:
            pdp.basic(source, [integer], epsilon=1.0, seed=1)
        one_sentence(str(info.value), "'lat'", "whole numbers", "Ordinal('lat', 44.0, 46.0",
                     "on_out_of_domain='clamp'")
    df.write_csv(in_tmp / "lat.csv")
    (in_tmp / "lat.toml").write_text(LAT_SPEC)
    cli_error(capsys, in_tmp, "release", "lat.csv", "--spec", "lat.toml", "-o", "out.parquet",
              names=("'lat'", "whole numbers", "on_out_of_domain"))


def test_integral_floats_and_the_clamp_opt_in_count_as_before():
    integer = pdp.Ordinal("lat", 44, 46)
    whole = pdp.basic(pl.DataFrame({"lat": [44.0, 45.0, 45.0, 46.0]}), [integer], epsilon=1.0, seed=1)
    ints = pdp.basic(pl.DataFrame({"lat": [44, 45, 45, 46]}), [integer], epsilon=1.0, seed=1)
    np.testing.assert_array_equal(whole.counts, ints.counts)
    clamped = pdp.basic(pl.DataFrame({"lat": LAT_POINTS}), [integer], epsilon=1.0, seed=1,
                        on_out_of_domain="clamp")
    floored = pdp.basic(pl.DataFrame({"lat": [44, 44, 45, 45]}), [integer], epsilon=1.0, seed=1)
    np.testing.assert_array_equal(clamped.counts, floored.counts)


def test_float_domain_bins_end_at_their_upper_edge():
    """One rule: a query counts the bins all of whose values lie in [lo, hi]."""
    df = pl.DataFrame({"lat": LAT_POINTS})
    release = pdp.basic(df, [pdp.Ordinal("lat", 44.0, 46.0, width=1.0)], epsilon=1e9, seed=1)
    assert release.range_count(lat=(44.0, 45.0)) == pytest.approx(2, abs=1e-3)  # [44, 45)
    assert release.range_count(lat=(44.0, 46.0)) == pytest.approx(4, abs=1e-3)
    integer = pdp.basic(pl.DataFrame({"lat": [44, 44, 45, 45]}), [pdp.Ordinal("lat", 44, 46)],
                        epsilon=1e9, seed=1)
    assert integer.range_count(lat=(44.0, 45.0)) == pytest.approx(4, abs=1e-3)  # the integers 44, 45


def test_non_integral_query_bound_in_an_integer_domain_needs_align(grid, con, files, capsys, in_tmp):
    with pytest.raises(pdp.QueryError) as info:
        grid.range_count(age=(20.5, 39))
    one_sentence(str(info.value), "age=(20.5, 39)", "align='outer'")
    sql_error(con, "SELECT * FROM g_range_count(age_lo := 20.5, age_hi := 39)", "age=(20.5, 39", "outer")
    cli_error(capsys, in_tmp, "query", files["grid"], "--where", "age=20.5..39", names=("align",))
    assert grid.range_count(age=(20.5, 39), align="outer") == pytest.approx(grid.range_count(age=(20, 39)))


@pytest.fixture(scope="module")
def lat() -> pdp.GridRelease:
    a = pdp.Ordinal("lat", 44.0, 46.0, width=1.0)
    return pdp.GridRelease(np.array([1.0, 2.0, 3.0]), (a,), mechanism="basic", epsilon=1.0,
                           neighbours="replace", noise_scale=2.0, params={"sensitivity": 2})


@pytest.mark.parametrize(("lo", "hi", "want"), [(44.2, 44.7, 1.0), (45.0, 45.0, 2.0), (44.0, 44.0, 1.0),
                                                (46.0, 46.0, 3.0), (44.5, 45.0, 1.0)])
def test_outer_inside_one_float_bin_is_that_bin(lat, lo, hi, want, tmp_path, capsys):
    assert lat.range_count(lat=(lo, hi), align="outer") == want
    con = duckdb.connect()
    lat.to_duckdb(con, "r")
    assert con.sql(f"SELECT count FROM r_range_count(lat_lo := {lo}, lat_hi := {hi}, align := 'outer')"
                   ).fetchall() == [(want,)]
    con.register("qs", pl.DataFrame({"id": [1], "lat_lo": [lo], "lat_hi": [hi]}).to_arrow())
    assert con.sql("SELECT count FROM r_range_counts('qs', align := 'outer')").fetchall() == [(want,)]
    lat.write_parquet(tmp_path / "lat.parquet")
    code, out, _ = run_cli(capsys, "query", tmp_path / "lat.parquet", "--where", f"lat={lo}..{hi}",
                           "--align", "outer")
    assert code == 0 and float(out) == want


# ---------------------------------------------------------------------- 4. symbol types
SEQ_SPEC = """mechanism = "privtree_sequences"
epsilon = 1.0
column = "s"
alphabet = "abc"
max_length = 5
"""


def test_integer_symbols_with_a_text_alphabet(capsys, in_tmp):
    df = pl.DataFrame({"s": [[1, 2], [2, 3]]})
    for source in (df, df.lazy(), df.to_arrow()):  # (sequences are not counted in DuckDB)
        with pytest.raises(pdp.DomainError) as info:
            pdp.privtree_sequences(source, "s", alphabet="abc", max_length=5, epsilon=1.0, seed=1)
        one_sentence(str(info.value), "'s'", "List(Int", "['a', 'b', 'c']", "cast the column")
    with pytest.raises(pdp.DomainError, match="not integers"):
        pdp.privtree_sequences(pl.DataFrame({"s": [["a"]]}), "s", alphabet=[1, 2], max_length=5, epsilon=1.0)
    df.write_parquet(in_tmp / "s.parquet")
    (in_tmp / "s.toml").write_text(SEQ_SPEC)
    cli_error(capsys, in_tmp, "release", "s.parquet", "--spec", "s.toml", "-o", "out.parquet",
              names=("'s'", "List(Int64)"))


# ---------------------------------------------------------------------- 9. messages that hide the fix
def test_out_of_alphabet_messages_say_the_alphabet_is_cut(con, files, capsys, in_tmp):
    alphabet = "abcdefghijklmnopqrstuvwxyz"
    df = pl.DataFrame({"s": ["abc", "cab"] * 20})
    model = pdp.privtree_sequences(df, "s", alphabet=alphabet, max_length=4, epsilon=1.0, seed=1)
    cut = "['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', ..., 'z'] (26 symbols)"
    with pytest.raises(pdp.QueryError) as info:
        model.frequencies(["a1"])
    one_sentence(str(info.value), cut, "'1'")
    with pytest.raises(pdp.DomainError) as info:
        pdp.privtree_sequences(pl.DataFrame({"s": ["ab1"]}), "s", alphabet=alphabet, max_length=4,
                               epsilon=1.0)
    one_sentence(str(info.value), cut, "'1'", "'s'")
    sql_error(con, "SELECT * FROM s_frequency(['a', 'x'])", "['a', 'b', 'c']", "'x'", "query only symbols")
    cli_error(capsys, in_tmp, "query", files["seq"], "--frequency", "ax", names=("'x'",))


def test_ngram_domain_too_large_suggests_a_lower_height():
    df = pl.DataFrame({"s": ["abc"] * 5})
    with pytest.raises(pdp.DomainTooLargeError) as info:
        pdp.ngram_sequences(df, "s", alphabet="abcdefghijklmnopqrstuvwxyz", max_length=30, height=20,
                            epsilon=1.0)
    message = one_sentence(str(info.value), "height 20", "lower height")
    assert not re.search(r"\d{16}", message), message  # no 28-digit numbers
    assert "coarser bins" not in message


def test_header_only_csv_and_file_without_columns(capsys, in_tmp):
    spec = SPECS / "basic.toml"
    (in_tmp / "header.csv").write_text("age,gender,education\n")
    cli_error(capsys, in_tmp, "release", "header.csv", "--spec", spec, "-o", "out.parquet",
              names=("header.csv", "no rows"))
    pl.DataFrame().write_parquet(in_tmp / "nothing.parquet")
    cli_error(capsys, in_tmp, "release", "nothing.parquet", "--spec", spec, "-o", "out.parquet",
              names=("no columns", "age, gender, education"))


# ---------------------------------------------------------------------- 5. outputs too large to draw
@pytest.fixture
def small_machine(monkeypatch):
    """A machine with 1 GiB, so that the refusals do not depend on the test machine's memory."""
    monkeypatch.setattr("polars_dp.releases.sampling.total_memory_bytes", lambda: 1 << 30)


def test_samples_and_random_boxes_too_large_are_refused_before_allocating(grid, tree, seq, small_machine):
    import resource
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for draw, what in ((lambda: grid.sample(10**9), "synthetic rows"),
                       (lambda: tree.sample(10**9), "synthetic rows"),
                       (lambda: seq.sample(10**8), "synthetic sequences"),
                       (lambda: pdp.random_boxes(["x", "y"], [(0, 1), (0, 1)], 10**9), "random boxes")):
        with pytest.raises(pdp.DomainTooLargeError) as info:
            draw()
        one_sentence(str(info.value), what, "1.0 GiB", "at most")
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000  # kB: nothing drawn
    fit = int(str(info.value).split("at most ")[1].split(" ")[0].replace(",", ""))
    assert 10**6 < fit < 10**9
    assert grid.sample(1000, seed=1).height == 1000 and seq.sample(1000, seed=1).height == 1000


# ---------------------------------------------------------------------- 6. the CLI reaches what the API does
def test_cli_sql_registers_sequence_macros(seq, files, capsys, in_tmp):
    code, out, err = run_cli(capsys, "sql", files["seq"], "--json",
                             "SELECT * FROM release_frequency(['a', 'b'])")
    assert code == 0, err
    (row,) = __import__("json").loads(out)
    counts, stds = seq.frequencies([["a", "b"]], std=True)
    assert row["count"] == pytest.approx(counts[0]) and row["std"] == pytest.approx(stds[0])
    code, out, _ = run_cli(capsys, "sql", files["seq"], "--csv", "SELECT count(*) AS n FROM release_nodes")
    assert code == 0 and int(out.splitlines()[1]) == seq.n_nodes


def test_cli_query_std_for_sequences(seq, files, capsys, in_tmp):
    import json
    counts, stds = seq.frequencies([["a", "b"], ["c"]], std=True)
    code, out, err = run_cli(capsys, "query", files["seq"], "--frequency", "ab", "--frequency", "c",
                             "--std", "--json")
    assert code == 0, err
    rows = json.loads(out)
    assert [r["count"] for r in rows] == pytest.approx(list(counts))
    assert [r["std"] for r in rows] == pytest.approx(list(stds))
    pl.DataFrame({"id": [1, 2], "string": ["a b", "c"]}).write_csv(in_tmp / "q.csv")
    code, out, _ = run_cli(capsys, "query", files["seq"], "--queries", "q.csv", "--std", "--json")
    got = json.loads(out)
    want = seq.frequencies([["a", "b"], ["c"]], std=True)[1]
    assert code == 0 and [r["std"] for r in got] == pytest.approx(list(want))
    cli_error(capsys, in_tmp, "query", files["seq"], "--top-k", "3", "--std", names=("--std", "--frequency"))


# ---------------------------------------------------------------------- 7. one convention for a missing std
def test_missing_std_is_none_and_json_null(grid, tree, tmp_path, capsys):
    import json
    post = grid.postprocess("nonnegative")
    assert post.range_std(age=(0, 9)) is None
    assert post.range_counts(pl.DataFrame({"age_lo": [0]}), std=True)["std"].to_list() == [None]
    assert tree.postprocess("nonnegative").range_std(x=(0.0, 5.0)) is None
    post.write_parquet(tmp_path / "post.parquet")
    code, out, _ = run_cli(capsys, "query", tmp_path / "post.parquet", "--where", "age=0..9", "--std",
                           "--json")
    assert code == 0 and json.loads(out)["std"] is None  # valid JSON: null, not NaN
    code, out, _ = run_cli(capsys, "query", tmp_path / "post.parquet", "--where", "age=0..9", "--std")
    assert code == 0 and "no std" in out and "nan" not in out.lower()


# ---------------------------------------------------------------------- 8. wrong macro arguments
def test_cli_sql_wrong_argument_shows_the_signature(files, capsys, in_tmp):
    message = cli_error(capsys, in_tmp, "sql", files["grid"],
                        "SELECT * FROM release_range_count(agee_lo := 3)",
                        names=("release_range_count(age_lo := NULL, age_hi := NULL, sex := NULL",))
    assert "explicit type casts" not in message
    cli_error(capsys, in_tmp, "sql", files["tree"], "SELECT * FROM release_range_count(lon_lo := 3)",
              names=("release_range_count(x_lo := NULL, x_hi := NULL, y_lo := NULL, y_hi := NULL, "
                     "alpha := 0.05)",))


# ---------------------------------------------------------------------- 14. sql only reads
@pytest.mark.parametrize("statement", ["COPY (SELECT * FROM release) TO 'out.csv'",
                                       "SELECT 1; COPY release TO 'out.parquet'",
                                       "EXPORT DATABASE 'dump'", "ATTACH 'other.db'", "INSTALL spatial"])
def test_cli_sql_refuses_statements_that_write(statement, files, capsys, in_tmp):
    cli_error(capsys, in_tmp, "sql", files["grid"], statement, names=("only reads", "-o FILE"))


def test_cli_sql_may_read_a_query_file(grid, files, capsys, in_tmp):
    pl.DataFrame({"id": [1], "age_lo": [10]}).write_csv(in_tmp / "q.csv")
    code, out, err = run_cli(capsys, "sql", files["grid"], "--csv", "--queries", "q.csv",
                             "SELECT count FROM release_range_counts('queries')")
    assert code == 0, err
    assert float(out.splitlines()[1]) == pytest.approx(grid.range_count(age=(10, None)))
    code, out, _ = run_cli(capsys, "sql", "--help")
    assert "only reads" in " ".join(out.split()) and "--queries FILE" in out


# ---------------------------------------------------------------------- 15. range_variance is in cells
def test_range_variance_takes_half_open_cell_ranges(grid):
    """``age=(20, 39)`` is cells [2, 4) of bins of 10; ``sex='m'`` is cell [1, 2)."""
    var = grid.range_variance([[2, 1]], [[4, 2]])[0]
    assert var == pytest.approx(grid.range_std(age=(20, 39), sex="m") ** 2)
    assert "half-open" in grid.range_variance.__doc__ and "cell" in grid.range_variance.__doc__


# ---------------------------------------------------------------------- sealed files, write errors and
# ---------------------------------------------------------------------- command-line messages (#38)
#: Directories that take no new file, even for root: /sys refuses (permission denied), /proc has no
#: such file (the error named the hidden temporary file before).
UNWRITABLE = [f"{d}/release.parquet" for d in ("/sys", "/proc") if Path(d).is_dir()]


@pytest.mark.parametrize("target", UNWRITABLE)
def test_write_parquet_where_no_file_can_be_created_is_a_typed_error(grid, target):
    with pytest.raises(pdp.ReleaseWriteError) as info:
        grid.write_parquet(target)
    assert isinstance(info.value, OSError) and info.value.filename == target
    message = one_sentence(str(info.value), repr(target), "writable directory")
    assert ".release.parquet." not in message  # never the hidden temporary file


def test_write_parquet_under_a_file_is_a_typed_error(grid, in_tmp):
    (in_tmp / "plain").write_text("x")
    with pytest.raises(pdp.ReleaseWriteError) as info:
        grid.write_parquet(in_tmp / "plain" / "r.parquet")
    one_sentence(str(info.value), "plain/r.parquet", "not a directory")
    assert sorted(p.name for p in in_tmp.iterdir()) == ["plain"]


@pytest.mark.parametrize("target", UNWRITABLE)
def test_cli_release_refuses_an_unwritable_output_before_reading_data(target, capsys, in_tmp):
    """Exit 2, one line naming the output, and no data read or noise drawn (no stage message)."""
    pl.DataFrame({"lat": [44, 45, 46]}).write_csv(in_tmp / "lat.csv")
    (in_tmp / "lat.toml").write_text(LAT_SPEC)
    cli_error(capsys, in_tmp, "release", "lat.csv", "--spec", "lat.toml", "-o", target, names=(repr(target),))
    code, _, err = run_cli(capsys, "release", "lat.csv", "--spec", "lat.toml", "-o", target)
    assert code == 2 and "releasing" not in err and "writing" not in err


@pytest.mark.parametrize("command", [("info",), ("query",), ("sql", "SELECT sum(count) FROM release")])
def test_cli_reads_a_release_without_checksum_only_with_unverified(command, capsys, in_tmp):
    legacy = TESTS_DATA / "v0_1_0_basic.parquet"
    cli_error(capsys, in_tmp, command[0], str(legacy), *command[1:],
              names=("no checksum", "--unverified", "v0_1_0_basic.parquet"))
    code, _, err = run_cli(capsys, command[0], str(legacy), *command[1:], "--unverified")
    assert code == 0 and "is unverified" in err


def test_cli_info_says_a_release_is_unverified(capsys):
    legacy = TESTS_DATA / "v0_1_0_basic.parquet"
    code, out, _ = run_cli(capsys, "info", str(legacy), "--unverified")
    assert code == 0 and "verified     NO" in out and "seeded       unknown" in out
    code, out, _ = run_cli(capsys, "info", str(legacy), "--unverified", "--json")
    assert code == 0 and '"verified": false' in out and '"seeded": null' in out


@pytest.mark.parametrize(("where", "meant"), [("age=..3", "age=0..3"), ("age=3..", "age=3..99"),
                                              ("age=7", "age=7..7")])
def test_cli_open_ranges_say_what_they_mean_not_none(where, meant, files, capsys, in_tmp):
    message = cli_error(capsys, in_tmp, "query", files["grid"], "--where", where,
                        names=(meant, "does not fall on bin edges", "--align outer"))
    assert "None" not in message and "align='" not in message


def test_cli_sequence_query_file_with_a_null_string_names_the_row(files, capsys, in_tmp):
    """Was ``error (AttributeError): 'NoneType' object has no attribute 'strip'``."""
    pl.DataFrame({"string": ["ab", None]}).write_parquet(in_tmp / "q.parquet")
    message = cli_error(capsys, in_tmp, "query", files["seq"], "--queries", "q.parquet",
                        names=("'q.parquet'", "row 2", "null"))
    assert "NoneType" not in message
    pl.DataFrame({"string": ["ab", ""]}).write_parquet(in_tmp / "q.parquet")
    cli_error(capsys, in_tmp, "query", files["seq"], "--queries", "q.parquet",
              names=("--queries 'q.parquet': string ''", "at least one symbol"))
# ---------------------------------------------------------------------- sequence releases (#38)
def test_text_query_string_on_an_integer_alphabet(con, capsys, in_tmp):
    """A text is one symbol per character only where the alphabet holds text: on an integer
    alphabet ``"12"`` would be ambiguous (1, 2 or 12), so Python, SQL and the CLI refuse it."""
    df = pl.DataFrame({"s": [[1, 2, 12], [12, 2]] * 50})
    model = pdp.ngram_sequences(df, "s", alphabet=[1, 2, 12], max_length=4, epsilon=1.0, height=2, seed=1)
    with pytest.raises(pdp.QueryError) as info:
        model.frequency("12")
    one_sentence(str(info.value), "integers", "list of symbols")
    model.to_duckdb(con, "ints")
    sql_error(con, "SELECT * FROM ints_frequency('12')", "integers", "list of symbols")
    register(con, "int_texts", pl.DataFrame({"id": [7], "string": ["12"]}))
    sql_error(con, "SELECT * FROM ints_frequencies('int_texts')", "integers", "id=7")
    model.write_parquet(in_tmp / "ints.parquet")
    cli_error(capsys, in_tmp, "query", "ints.parquet", "--frequency", "1 x", names=("'x'", "integers"))


@pytest.mark.parametrize("option", ["--x", "--y"])
def test_plot_axes_on_a_sequence_release(option, files, capsys, in_tmp):
    """``plot --x`` was ignored on a sequence model: refused, one line, exit 2, no figure."""
    pytest.importorskip("matplotlib")
    cli_error(capsys, in_tmp, "plot", files["seq"], "-o", "top.png", option, "a",
              names=(option, "grid and spatial", "--top-k"))
# ---------------------------------------------------------------- sealed grid and spatial releases (#38)
@pytest.mark.parametrize("mechanism", ["privtree", "uniform_grid", "adaptive_grid", "privelet_grid"])
def test_a_box_extent_that_overflows_is_refused_before_the_data_is_read(mechanism, capsys, in_tmp):
    """``hi - lo`` = inf used to release NaN / inf leaves answering 0.0 to every query."""
    unread = pl.scan_parquet(in_tmp / "not_written_yet.parquet")  # reading it would fail
    with pytest.raises(pdp.ParameterError) as info:
        getattr(pdp, mechanism)(unread, ["x", "y"], bounds=[(-1e308, 1e308), (0, 1)], epsilon=1.0)
    one_sentence(str(info.value), "'x'", "hi - lo", "narrower bounds")
    pl.DataFrame({"x": [0.0], "y": [0.5]}).write_parquet(in_tmp / "p.parquet")
    (in_tmp / "p.toml").write_text(f'mechanism = "{mechanism}"\nepsilon = 1.0\n'
                                   "bounds = {x = [-1e308, 1e308], y = [0, 1]}\n")
    cli_error(capsys, in_tmp, "release", "p.parquet", "--spec", "p.toml", "-o", "out.parquet",
              names=("hi - lo",))


def test_a_spatial_query_outside_the_bounds_is_refused_as_a_grid_query_is(tree, grid, files, capsys, in_tmp):
    """One rule: a bound outside the declared domain is a QueryError naming the column and the
    domain (spatial boxes used to be clipped silently)."""
    with pytest.raises(pdp.QueryError) as info:
        grid.range_count(age=(-10, 30))
    one_sentence(str(info.value), "age", "-10", "[0, 99]")
    with pytest.raises(pdp.QueryError) as info:
        tree.range_count(x=(-5.0, 3.0))
    one_sentence(str(info.value), "x_lo", "-5.0", "[0.0, 10.0]")
    with pytest.raises(pdp.QueryError) as info:
        tree.range_counts(pl.DataFrame({"id": [7, 8], "y_hi": [5.0, 10.5]}), std=True)
    one_sentence(str(info.value), "y_hi", "10.5", "[0.0, 10.0]", "id=8")
    assert tree.range_count(x=(0.0, 10.0)) == pytest.approx(tree.range_count())  # the bounds themselves
    cli_error(capsys, in_tmp, "query", files["tree"], "--where", "x=-5..3", names=("x_lo", "[0.0, 10.0]"))


@pytest.mark.parametrize("mechanism", ["adaptive_grid", "privelet_grid"])
def test_no_error_bar_is_null_everywhere_for_correlated_leaves(mechanism, capsys, tmp_path):
    """AG / Privelet* state no error bar: std and the interval are None in Python, NULL in SQL
    and absent on the command line (they raised in Python and the CLI), as for a post-processed
    grid."""
    rng = np.random.default_rng(5)
    df = pl.DataFrame({"x": rng.uniform(0, 10, 2000), "y": rng.uniform(0, 10, 2000)})
    release = getattr(pdp, mechanism)(df, ["x", "y"], bounds=[(0, 10), (0, 10)], epsilon=1.0, seed=2)
    row = release.range_counts(pl.DataFrame({"id": [1], "x_hi": [4.0]}), alpha=0.05).row(0, named=True)
    assert row["noise_std"] is None and row["noise_lo"] is None and row["noise_hi"] is None
    assert release.range_std(x=(0, 4)) is None and release.range_noise_interval(x=(0, 4)) == (None, None)
    con = duckdb.connect()
    release.to_duckdb(con, "r")
    sql = con.sql("SELECT count, noise_std, noise_lo, noise_hi FROM r_range_count(x_hi := 4)").fetchall()
    assert sql[0][1:] == (None, None, None) and sql[0][0] == pytest.approx(row["count"])
    grid_post = pdp.basic(pl.DataFrame({"a": [1, 2, 3]}), [pdp.Ordinal("a", 0, 9)], epsilon=1.0, seed=1)
    assert grid_post.postprocess("nonnegative").range_std(a=(0, 4)) is None  # the same rule
    release.write_parquet(tmp_path / "r.parquet")
    code, out, err = run_cli(capsys, "query", tmp_path / "r.parquet", "--where", "x=0..4", "--std",
                             "--alpha", "0.05", "--json")
    assert code == 0, err
    answer = pl.read_ndjson(out.encode()).row(0, named=True)
    assert answer["std"] is None and answer["noise_lo"] is None and answer["noise_hi"] is None
    assert answer["count"] == pytest.approx(row["count"])
# ---------------------------------------------------------------------- budget and plans: before the data
class _Untouched:
    """Private data that fails the test on any access."""

    def __getattr__(self, name):
        raise AssertionError(f"the private data was touched ({name})")


def test_budget_refusals_are_one_sentence_and_read_nothing():
    import functools

    attrs = [pdp.Ordinal("age", 0, 99, width=10)]
    acct = pdp.Accountant(total=1.0)
    cases = [
        (lambda: acct.run(functools.partial(pdp.basic, seed=3), _Untouched(), attrs, epsilon=0.1), ("seed",)),
        (lambda: acct.run(functools.partial(pdp.basic, noise="float"), _Untouched(), attrs, epsilon=0.1),
         ("noise='float'", "allow_float=True")),
        (lambda: acct.run(lambda f, **k: pdp.basic(f, attrs, **k), _Untouched(), epsilon=0.1),
         ("cannot see the plan", "charge(epsilon, label)")),
        (lambda: acct.run(pdp.basic, _Untouched(), attrs, epsilon=2.0**-50),
         ("exceeds 2^45", "raise epsilon")),
        (lambda: pdp.Accountant(total="0.1.2"), ("total", "'0.3'")),
    ]
    for call, names in cases:
        with pytest.raises(pdp.ParameterError) as info:
            call()
        one_sentence(str(info.value), *names)
    assert acct.spent == 0 and acct.ledger == []
    acct = pdp.Accountant(total=0.3)
    acct.run(pl.DataFrame({"age": [30]}).dp.basic, attrs, epsilon=0.1)
    with pytest.raises(pdp.BudgetExceededError) as info:
        acct.run(pl.DataFrame({"age": [30]}).dp.basic, attrs, epsilon=0.2)
    one_sentence(str(info.value), "Fraction", "total='0.3'")


def test_cli_scale_past_its_limit_is_refused_by_the_plan(capsys, in_tmp):
    spec = (SPECS / "basic.toml").read_text().replace("epsilon = 1.0", "epsilon = 1e-20")
    (in_tmp / "tiny.toml").write_text(spec)
    (in_tmp / "d.csv").write_text("age,gender,education\n500,male,school\n")  # out of domain: if read
    cli_error(capsys, in_tmp, "release", "d.csv", "--spec", "tiny.toml", "-o", "out.parquet",
              names=("exceeds 2^45", "raise epsilon"))
# ---------------------------------------------------------------------- the SQL surface and scanning
@pytest.mark.parametrize(("statement", "names"), [
    ("DROP TABLE release", ("DROP (statement 1)", "only reads")),
    ("SELECT 1; UPDATE release SET count = 0", ("UPDATE (statement 2)", "only reads")),
    ("SELECT count(*) FROM read_csv('data.csv')", ("Permission Error", "reads only the registered release")),
    ("SET profiling_output = 'x.txt'", ("locked", "reads only the registered release")),
])
def test_cli_sql_locked_shell_refuses_in_one_line(statement, names, files, capsys, in_tmp):
    pl.DataFrame({"age": [1, 2]}).write_csv(in_tmp / "data.csv")
    cli_error(capsys, in_tmp, "sql", files["grid"], statement, names=names)


def test_cli_sql_several_results_and_one_output_are_refused(files, capsys, in_tmp):
    cli_error(capsys, in_tmp, "sql", files["grid"], "--json", "SELECT 1 AS a; SELECT 2 AS b",
              names=("2 statements return rows", "--json"))


def test_sql_label_error_suggests_the_label(grid, con, files, capsys, in_tmp):
    with pytest.raises(pdp.QueryError, match=r"did you mean 'm'\?"):
        grid.range_count(sex="M")
    sql_error(con, "SELECT * FROM g_range_count(sex := 'M')", "sex", "did you mean 'm'?")
    cli_error(capsys, in_tmp, "sql", files["grid"], "SELECT * FROM release_range_count(sex := 'M')",
              names=("did you mean 'm'?",))


def test_scan_of_a_file_edited_in_place_is_refused(grid, files, tmp_path):
    path = grid.write_parquet(tmp_path / "g.parquet")
    lf = pdp.scan_release(path)
    data = bytearray(path.read_bytes())
    stat = path.stat()
    value = np.float64(grid.counts.reshape(-1)[0]).tobytes()
    at = data.index(value, 4)  # the first count, stored PLAIN
    data[at:at + 8] = np.float64(grid.counts.reshape(-1)[0] + 1e6).tobytes()
    with open(path, "r+b") as fh:
        fh.write(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    with pytest.raises((pdp.ReleaseFormatError, pl.exceptions.PolarsError)) as info:
        lf.select(pl.col("count").sum()).collect()
    one_sentence(str(info.value).splitlines()[-1].strip(), "changed after scan_release verified it")
# ---------------------------------------------------------------------- input rules (no row fails a release)
ROW_SPEC = """mechanism = "basic"
epsilon = 1.0
[[attributes]]
column = "age"
kind = "ordinal"
lo = 0
hi = 9
[[attributes]]
column = "g"
kind = "nominal"
categories = ["a", "b"]
[options]
count_column = "n"
"""

#: One valid row, then a UInt64 2^64 - 1, an unknown category, a null count and a negative count.
ROW_CASES = [("age", 2**64 - 1, "on_out_of_domain='clamp'"), ("g", "zz", "on_out_of_domain='drop'"),
             ("n", None, "nulls='drop'"), ("n", -3, "on_out_of_domain='drop'")]


def _row_frame(column: str | None = None, value: object = None) -> pl.DataFrame:
    rows = [{"age": 1, "g": "a", "n": 2}] + ([{"age": 1, "g": "a", "n": 2, column: value}] if column else [])
    return pl.DataFrame(rows, schema={"age": pl.UInt64, "g": pl.String, "n": pl.Int64})


@pytest.mark.parametrize(("column", "value", "rule"), ROW_CASES, ids=[f"{c}={v!r}" for c, v, _ in ROW_CASES])
def test_one_bad_row_is_a_domain_error_naming_the_column_and_the_rule(column, value, rule, capsys, in_tmp):
    df = _row_frame(column, value)
    for source in (df, df.lazy(), df.to_arrow(), duckdb.connect().from_arrow(df.to_arrow())):
        with pytest.raises(pdp.DomainError) as info:
            pdp.basic(source, [pdp.Ordinal("age", 0, 9), pdp.Nominal("g", categories=["a", "b"])],
                      epsilon=1.0, seed=1, count_column="n")
        one_sentence(str(info.value), repr(column), rule)
    df.write_parquet(in_tmp / "rows.parquet")
    (in_tmp / "rows.toml").write_text(ROW_SPEC)
    cli_error(capsys, in_tmp, "release", "rows.parquet", "--spec", "rows.toml", "-o", "out.parquet",
              names=(repr(column), rule.split("=")[0]))


@pytest.mark.parametrize("rule", ["drop", "clamp"])
def test_with_the_row_rules_every_bad_row_releases(rule, capsys, in_tmp):
    """API and command line: the rows above together, declared rules, a release (no error)."""
    df = pl.concat([_row_frame(c, v) for c, v, _ in ROW_CASES])
    attrs = [pdp.Ordinal("age", 0, 9), pdp.Nominal("g", categories=["a", "b"])]
    release = pdp.basic(df, attrs, epsilon=1e9, seed=1, count_column="n", nulls="drop",
                        on_out_of_domain=rule)
    kept = 4 * 2 + (2 if rule == "clamp" else 0)  # the valid rows, and the UInt64 one clamped to 9
    assert release.counts.sum() == pytest.approx(kept, abs=1e-3)
    df.write_parquet(in_tmp / "rows.parquet")
    (in_tmp / "rows.toml").write_text(ROW_SPEC + f'nulls = "drop"\non_out_of_domain = "{rule}"\n')
    code, _, err = run_cli(capsys, "release", "rows.parquet", "--spec", "rows.toml", "-o", "out.parquet")
    assert code == 0, err


def test_sequences_drop_null_and_out_of_alphabet_sequences_when_asked(capsys, in_tmp):
    df = pl.DataFrame({"s": ["abc", None, "aXb", "c" * 50]})
    with pytest.raises(pdp.DomainError) as info:
        pdp.privtree_sequences(df.drop_nulls(), "s", alphabet="abc", max_length=5, epsilon=1.0, seed=1)
    one_sentence(str(info.value), "'s'", "on_out_of_domain='drop'")
    with pytest.raises(pdp.ParameterError, match="on_out_of_domain must be one of \\('raise', 'drop'\\)"):
        pdp.privtree_sequences(df, "s", alphabet="abc", max_length=5, epsilon=1.0, on_out_of_domain="clamp")
    release = pdp.privtree_sequences(df, "s", alphabet="abc", max_length=5, epsilon=1.0, seed=1, nulls="drop",
                                     on_out_of_domain="drop")
    assert release.max_length == 5
    df.write_parquet(in_tmp / "s.parquet")
    (in_tmp / "s.toml").write_text(SEQ_SPEC + '[options]\nnulls = "drop"\non_out_of_domain = "drop"\n')
    code, _, err = run_cli(capsys, "release", "s.parquet", "--spec", "s.toml", "-o", "out.parquet")
    assert code == 0, err


def test_cli_domain_errors_say_where_each_row_rule_goes_in_the_domain_file(capsys, in_tmp):
    """Every rule the library's message offers (``'clamp'`` and ``'drop'``) is spelled as a
    domain-file line, for grid and spatial releases alike."""
    pl.DataFrame({"age": [1, 200], "g": ["a", "b"], "n": [1, 1]}).write_parquet(in_tmp / "rows.parquet")
    (in_tmp / "rows.toml").write_text(ROW_SPEC)
    code, _, err = run_cli(capsys, "release", "rows.parquet", "--spec", "rows.toml", "-o", "out.parquet")
    assert code == 2 and 'add on_out_of_domain = "clamp" or on_out_of_domain = "drop" under [options]' in err
    pl.DataFrame({"x": [0.5, 2.0], "y": [0.5, 0.5]}).write_parquet(in_tmp / "pts.parquet")
    (in_tmp / "pts.toml").write_text('mechanism = "privtree"\nepsilon = 1.0\n'
                                      "bounds = {x = [0, 1], y = [0, 1]}\n")
    code, _, err = run_cli(capsys, "release", "pts.parquet", "--spec", "pts.toml", "-o", "out.parquet")
    assert code == 2 and "'drop' (drops the row)" in err and 'on_out_of_domain = "drop"' in err


# ---------------------------------------------------------------------- budget ledger and release card
def _ledger_with_one_charge(path: Path) -> Path:
    plan = pdp.plan("basic", [pdp.Ordinal("a", 0, 9)], epsilon=0.5, neighbours="replace")
    pdp.Accountant(total=1.0, ledger=pdp.Ledger(path), dataset="people").charge_plan(plan)
    return path


def test_an_edited_ledger_is_refused_in_one_sentence(capsys, in_tmp):
    path = _ledger_with_one_charge(in_tmp / "budget.ledger")
    path.write_bytes(path.read_bytes().replace(b'"label":"basic"', b'"label":"other"'))
    with pytest.raises(pdp.LedgerError) as info:
        pdp.Ledger(path)
    one_sentence(str(info.value), "line 3", "edited", "restore it from a copy")
    cli_error(capsys, in_tmp, "ledger", path, names=("line 3", "edited"))


def test_a_ledger_of_another_total_or_no_ledger_is_refused_in_one_sentence(capsys, in_tmp):
    path = _ledger_with_one_charge(in_tmp / "budget.ledger")
    with pytest.raises(pdp.LedgerError) as info:
        pdp.Accountant(total=2.0, ledger=pdp.Ledger(path), dataset="people")
    one_sentence(str(info.value), "fixes the total of dataset 'people' at 1", "give that total")
    (in_tmp / "notes.txt").write_text("not a ledger\n")
    with pytest.raises(pdp.LedgerError) as info:
        pdp.Ledger(in_tmp / "notes.txt")
    one_sentence(str(info.value), "is not a polars-dp ledger")
    people = pl.DataFrame({"age": [20], "gender": ["male"], "education": ["school"]})
    people.write_parquet(in_tmp / "p.parquet")
    release = ("release", "p.parquet", "--spec", SPECS / "basic.toml", "-o", "r.parquet",
               "--dataset", "people", "--total", "2")
    cli_error(capsys, in_tmp, *release, "--ledger", path, names=("fixes the total", "'people'"))
    cli_error(capsys, in_tmp, *release, "--ledger", "notes.txt", names=("not a polars-dp ledger",))


def test_a_seeded_release_has_a_card_marked_not_for_publication():
    release = pdp.basic(pl.DataFrame({"a": [1]}), [pdp.Ordinal("a", 0, 9)], epsilon=1.0, seed=1)
    card = release.card()
    assert card["not_for_publication"] and card["not_for_publication_reasons"][0].startswith("seeded")
# ---------------------------------------------------------------------------- privacy unit
UNIT_SPEC = """mechanism = "basic"
epsilon = 1.0
[privacy_unit]
id_column = "{ident}"
max_per = {k}
[[attributes]]
column = "a"
kind = "ordinal"
lo = 0
hi = 7
"""


def _unit_rows() -> pl.DataFrame:
    return pl.DataFrame({"person": [1, 1, 1, None, 2], "a": [1, 2, 3, 4, 5]})


@pytest.mark.parametrize("k", [0, -2, 1.5, "3", True])
def test_privacy_unit_max_per_must_be_an_integer_of_at_least_one(k, capsys, in_tmp):
    with pytest.raises(pdp.ParameterError) as info:
        pdp.basic(_unit_rows(), [pdp.Ordinal("a", 0, 7)], epsilon=1.0,
                  privacy_unit=pdp.Rows(max_per=k, id_column="person"))
    one_sentence(str(info.value), "max_per")
    _unit_rows().write_parquet(in_tmp / "rows.parquet")
    (in_tmp / "unit.toml").write_text(UNIT_SPEC.format(ident="person", k=repr(k).replace("'", '"').lower()))
    cli_error(capsys, in_tmp, "release", "rows.parquet", "--spec", "unit.toml", "-o", "out.parquet",
              names=("max_per",))


def test_privacy_unit_identifier_missing_or_null(capsys, in_tmp):
    """A missing id column is a ColumnNotFoundError, a null identifier a DomainError (in every
    engine the count runs in), or its rows dropped under ``nulls="drop"``; Spark is refused."""
    df, attrs = _unit_rows(), [pdp.Ordinal("a", 0, 7)]
    for source in (df, df.lazy(), df.to_arrow(), duckdb.connect().from_arrow(df.to_arrow())):
        with pytest.raises(pdp.ColumnNotFoundError) as missing:
            pdp.basic(source, attrs, epsilon=1.0, privacy_unit=pdp.Rows(max_per=2, id_column="who"))
        one_sentence(str(missing.value), "'who'")
        with pytest.raises(pdp.DomainError) as null:
            pdp.basic(source, attrs, epsilon=1.0, privacy_unit=pdp.Rows(max_per=2, id_column="person"))
        one_sentence(str(null.value), "'person'", "nulls='drop'")
    kept = pdp.basic(df, attrs, epsilon=1e9, seed=1, nulls="drop",
                     privacy_unit=pdp.Rows(max_per=2, id_column="person"))
    assert kept.counts.sum() == pytest.approx(3, abs=1e-3)  # person 1 keeps 2, person 2 its 1
    df.write_parquet(in_tmp / "rows.parquet")
    (in_tmp / "unit.toml").write_text(UNIT_SPEC.format(ident="who", k=2))
    cli_error(capsys, in_tmp, "release", "rows.parquet", "--spec", "unit.toml", "-o", "out.parquet",
              names=("'who'",))
    (in_tmp / "unit.toml").write_text(UNIT_SPEC.format(ident="person", k=2))
    cli_error(capsys, in_tmp, "release", "rows.parquet", "--spec", "unit.toml", "-o", "out.parquet",
              names=("'person'",))


# --- error bars in plain SQL (lo / hi and noise_lo / noise_hi without Python functions) ---

@pytest.mark.parametrize("alpha", ["1.5", "0", "-0.1"])
def test_sql_alpha_outside_the_unit_interval_is_an_sql_error_with_the_python_sentence(grid, con, alpha):
    with pytest.raises(pdp.ParameterError) as python:
        grid.accuracy(pl.DataFrame({"id": [0]}), float(alpha))
    sentence = str(python.value).rsplit("got ", 1)[0]
    for macro in ("g_range_count", "t_range_count"):
        text = sql_error(con, f"SELECT * FROM {macro}(alpha := {alpha})", "alpha must lie strictly between")
        assert text.startswith(sentence), text
