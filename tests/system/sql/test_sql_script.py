"""A release as a SQL script (``release.sql_script``, ``polars-dp sql --script``): run by the DuckDB
command-line client (no Python in that process) and by the Python ``duckdb`` module in a fresh
connection, it creates what ``to_duckdb`` creates, straight from the Parquet file, every macro
answers as Python does, and a different or edited file is refused."""

from __future__ import annotations

import importlib
import json
import math
import subprocess

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import polars_dp as pdp
from polars_dp.releases.sql_script import double_text
from tests.helpers.cli import run_cli
from tests.helpers.ranges import DOMAINS, query_frame, random_queries
from tests.helpers.sql import (
    CLI,
    grid_statements,
    max_diff,
    python_rows,
    small_tree_release,
    tree_and_sequence_cases,
)

#: The module (``polars_dp.releases.sql_script`` names the function the package exports).
script_module = importlib.import_module("polars_dp.releases.sql_script")

needs_cli = pytest.mark.skipif(CLI is None,
                               reason="the DuckDB command-line client (duckdb-cli) is not installed")


def _grid_frame(attrs, n: int, seed: int) -> pl.DataFrame:
    """``n`` rows drawn uniformly over the declared domain (test data)."""
    rng = np.random.default_rng(seed)
    cols = {}
    for a in attrs:
        labels = np.asarray(a.cell_labels(), dtype=object if isinstance(a, pdp.Nominal) else None)
        cols[a.column] = labels[rng.integers(0, len(labels), n)].tolist()
    return pl.DataFrame(cols)


def _cases() -> dict[str, tuple[pdp.Release, pl.DataFrame, list[str]]]:
    """Per release name: a release made by a mechanism (so that its file reads back), its batch
    of queries and the statements whose rows Python gives (those of ``test_plain_sql``)."""
    cases = {}
    grids = {"g": (DOMAINS["partial"], pdp.privelet),   # binned ordinal axes and a hierarchy, transformed
             "e": (DOMAINS["exact"], pdp.basic)}        # untransformed
    for i, (name, (attrs, mechanism)) in enumerate(grids.items()):
        release = mechanism(_grid_frame(attrs, 2_000, 30 + i), attrs, epsilon=1.0, seed=40 + i)
        frame = query_frame(attrs, random_queries(attrs, 60, seed=50 + i))
        cases[name] = (release, frame, grid_statements(name))
    cases.update(tree_and_sequence_cases())
    return cases


@pytest.fixture(scope="module")
def scripts(tmp_path_factory):
    """Per case: the release's file, its script (in a file too), its queries file; plus the
    statements and Python's answers."""
    folder = tmp_path_factory.mktemp("script")
    cases = _cases()
    out = {}
    for name, (release, frame, _) in cases.items():
        path = release.write_parquet(folder / f"{name}.parquet")
        text = release.sql_script(path, name)
        (folder / f"{name}.sql").write_text(text)
        frame.write_parquet(folder / f"{name}_q.parquet")
        out[name] = (release, path, text)
    sql = [s for _, _, statements in cases.values() for s in statements]
    want = [rows for name, (release, frame, _) in cases.items()
            for rows in python_rows(name, release, frame)]
    return folder, out, sql, want


def _load_queries(folder, names) -> str:
    return "\n".join(f"CREATE TABLE {n}_q AS SELECT * FROM read_parquet('{folder / f'{n}_q.parquet'}');"
                     for n in names)


def _objects(con) -> set[str]:
    return {r[0] for r in con.execute(
        "SELECT table_name FROM duckdb_tables() "
        "UNION ALL SELECT view_name FROM duckdb_views() WHERE NOT internal "
        "UNION ALL SELECT function_name FROM duckdb_functions() "
        "WHERE function_type = 'table_macro' AND NOT internal").fetchall()}


def test_the_script_creates_what_to_duckdb_creates(scripts):
    """Same objects, same column names and types, same rows (the prefix sums to rounding)."""
    _, out, _, _ = scripts
    for name, (release, _, text) in out.items():
        with duckdb.connect() as mine, duckdb.connect() as theirs:
            mine.execute(text)
            release.to_duckdb(theirs, name)
            assert _objects(mine) == _objects(theirs)
            for table in sorted(_objects(theirs) - {f"{name}_range_count", f"{name}_range_counts",
                                                    f"{name}_frequency", f"{name}_frequencies"}):
                a = mine.sql(f"SELECT * FROM {table}").to_arrow_table()
                b = theirs.sql(f"SELECT * FROM {table}").to_arrow_table()
                assert a.schema == b.schema, table
                assert a.num_rows == b.num_rows, table
                for column in b.column_names:
                    x, y = a.column(column).to_pylist(), b.column(column).to_pylist()
                    if pa.types.is_floating(b.schema.field(column).type):  # NULL read as NaN
                        x, y = (np.array([np.nan if v is None else v for v in z], float) for z in (x, y))
                        assert np.allclose(x, y, rtol=1e-12, atol=1e-9, equal_nan=True), (table, column)
                    else:
                        assert x == y, (table, column)
            assert pdp.duckdb.read_release(mine, name) == release


def test_a_fresh_python_connection_answers_every_macro_as_python(scripts):
    folder, out, sql, want = scripts
    with duckdb.connect() as con:
        for _, _, text in out.values():
            con.execute(text)
        con.execute(_load_queries(folder, out))
        got = [[list(r) for r in con.execute(s).fetchall()] for s in sql]
    diff, where = max_diff(got, want)
    print(f"script, python duckdb: {sum(map(len, got))} rows, max relative |diff| {diff:.3g}")
    assert diff <= 1e-9, (sql[where[0]], where)


@needs_cli
def test_the_duckdb_cli_runs_the_script_and_answers_every_macro_as_python(scripts, tmp_path):
    """The scripts run by the command-line client (``.read`` and standard input), then every
    macro called from fresh client processes: no Python anywhere."""
    folder, out, sql, want = scripts
    database = tmp_path / "from_script.duckdb"
    names = list(out)
    first = subprocess.run([str(CLI), str(database), "-c", f".read {folder / f'{names[0]}.sql'}"],
                           capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr
    rest = "\n".join([*((folder / f"{n}.sql").read_text() for n in names[1:]), _load_queries(folder, names)])
    piped = subprocess.run([str(CLI), str(database)], input=rest, capture_output=True, text=True, timeout=600)
    assert piped.returncode == 0, piped.stderr
    got = []
    for statement in sql:
        result = subprocess.run([str(CLI), "-readonly", "-json", str(database), "-c", statement],
                                capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr
        got.append([list(r.values()) for r in json.loads(result.stdout or "[]")])
    diff, where = max_diff(got, want)
    print(f"script, duckdb CLI: {sum(map(len, got))} rows, max relative |diff| {diff:.3g}")
    assert diff <= 1e-9, (sql[where[0]], where)


def _edited(path, folder, name: str, how: str = "value"):
    """A copy of ``path`` with its metadata kept and one ``count`` changed by 1 (``how="value"``)
    or its first two rows swapped (``how="order"``)."""
    table = pq.read_table(path)
    if how == "value":
        counts = table.column("count").to_numpy().copy()
        counts[len(counts) // 2] += 1.0
        table = table.set_column(table.schema.get_field_index("count"), "count", pa.array(counts))
    else:
        table = table.take(pa.array([1, 0, *range(2, table.num_rows)]))
    edited = folder / f"{name}_{how}.parquet"
    pq.write_table(table, edited)
    return edited


@pytest.mark.parametrize("how", ["value", "order"])
@pytest.mark.parametrize("name", ["g", "t", "s"])
def test_an_edited_file_is_refused_and_nothing_is_created(scripts, tmp_path, name, how):
    _, out, _, _ = scripts
    release, path, text = out[name]
    edited = _edited(path, tmp_path, name, how)
    assert pq.read_schema(edited).metadata == pq.read_schema(path).metadata  # only a value differs
    checksum = release.export_metadata()["checksum"]
    with duckdb.connect() as con:
        with pytest.raises(duckdb.Error) as refused:
            con.execute(text.replace(str(path), str(edited)))
        assert str(edited) in str(refused.value) and checksum in str(refused.value)
        assert "values differ" in str(refused.value)
        con.execute("ROLLBACK")
        assert not _objects(con)


def test_another_release_s_file_is_refused_by_its_metadata(scripts):
    _, out, _, _ = scripts
    (_, path, text), (_, other, _) = out["g"], out["e"]
    with duckdb.connect() as con:
        with pytest.raises(duckdb.Error, match="its polars_dp metadata differs") as refused:
            con.execute(text.replace(str(path), str(other)))
        assert str(other) in str(refused.value)


@needs_cli
def test_the_cli_client_refuses_an_edited_file(scripts, tmp_path):
    _, out, _, _ = scripts
    release, path, text = out["g"]
    edited = _edited(path, tmp_path, "g")
    script = tmp_path / "g.sql"
    script.write_text(text.replace(str(path), str(edited)))
    database = tmp_path / "refused.duckdb"
    for how in ({"args": ["-c", f".read {script}"]}, {"args": [], "input": script.read_text()}):
        result = subprocess.run([str(CLI), str(database), *how["args"]], input=how.get("input"),
                                capture_output=True, text=True, timeout=600)
        assert result.returncode != 0
        assert f"{edited} is not the release this script was written for" in result.stderr
        assert release.export_metadata()["checksum"] in result.stderr
    with duckdb.connect(str(database), read_only=True) as con:
        assert not _objects(con)


def test_the_command_line_prints_the_same_script(scripts, capsys):
    _, out, _, _ = scripts
    for name, (_, path, text) in out.items():
        code, printed, err = run_cli(capsys, "sql", "--script", path, name)
        assert code == 0, err
        assert printed == text


def test_bad_input_is_refused_with_one_sentence(scripts, tmp_path, capsys):
    _, out, _, _ = scripts
    release, path, _ = out["g"]
    for bad in ("1g", "g; DROP TABLE x", ""):
        with pytest.raises(pdp.ParameterError, match="plain SQL identifier"):
            release.sql_script(path, bad)
    missing = tmp_path / "missing.parquet"
    with pytest.raises(pdp.ReleaseFormatError, match="not a readable Parquet file"):
        release.sql_script(missing, "g")
    plain = tmp_path / "plain.parquet"
    pl.DataFrame({"a": [1, 2]}).write_parquet(plain)
    with pytest.raises(pdp.ReleaseFormatError, match="not a polars-dp release"):
        release.sql_script(plain, "g")
    with pytest.raises(pdp.ReleaseFormatError, match="holds another release"):
        release.sql_script(out["e"][1], "g")
    code, printed, err = run_cli(capsys, "sql", "--script", path, "1g")
    assert code == 2 and not printed and len(err.strip().splitlines()) == 1
    code, printed, err = run_cli(capsys, "sql", "--script", plain, "g")
    assert code == 2 and not printed and "plain.parquet" in err


def test_counted_levels_answer_from_the_script_as_python(tmp_path):
    """A PrivTree with counted top levels: its inference tables travel in the script, and every
    macro (the exact ``noise_std`` of the inference included) answers as ``to_duckdb``'s."""
    release = small_tree_release(levels=2)
    path = release.write_parquet(tmp_path / "levels.parquet")
    statements = ["SELECT count, noise_std FROM t_range_count(x_lo := 0.1, x_hi := 0.6)",
                  "SELECT count, noise_std FROM t_range_count()"]
    with duckdb.connect() as mine, duckdb.connect() as theirs:
        mine.execute(release.sql_script(path, "t"))
        release.to_duckdb(theirs, "t")
        for table in ("__pdp_t_nodes", "__pdp_t_up"):
            query = f"SELECT * FROM {table}"
            assert mine.sql(query).fetchall() == theirs.sql(query).fetchall()
        for statement in statements:
            got, want = mine.sql(statement).fetchall(), theirs.sql(statement).fetchall()
            assert np.allclose(got, want, rtol=1e-12, atol=0) and want[0][1] is not None


def test_a_file_with_geometry_columns_reads_the_release_columns_only(tmp_path):
    """A 2-D spatial release written with GeoParquet columns: the script reads and checks the
    release's columns; the tables equal those of ``to_duckdb``."""
    release = small_tree_release()
    path = release.write_parquet(tmp_path / "geo.parquet", geometry=True)
    assert "geometry" in pq.read_schema(path).names
    with duckdb.connect() as mine, duckdb.connect() as theirs:
        mine.execute(release.sql_script(path, "t"))
        release.to_duckdb(theirs, "t")
        for table in ("t", "__pdp_t_cells", "t_meta"):
            query = f"SELECT * FROM {table}"
            assert mine.sql(query).fetchall() == theirs.sql(query).fetchall()


def test_the_text_of_a_double_names_it_alone():
    """The fingerprint's text of a double (integer digits for an integral value, else 17
    significant digits) reads back to that double, sign of zero included, and no two share one."""
    values = [0.0, -0.0, 1.0, -1.0, 3.0, 0.5, 0.1, 0.30000000000000004, 2.0**53 - 1, 2.0**53,
              2.0**53 + 2, -2.0**53, 1e300, 5e-324, -5e-324, float("inf"), float("-inf"), 12345678.5]
    with duckdb.connect() as con:
        rows = con.execute(f"SELECT v, {double_text('v')} FROM (SELECT unnest(?::DOUBLE[]) AS v)",
                           [values]).fetchall()
    assert len({text for _, text in rows}) == len(values)
    for value, text in rows:
        back = float(text)
        assert back == value and math.copysign(1.0, back) == math.copysign(1.0, value), (value, text)


def _grid_edit(path, folder, how: str):
    """A copy of the grid file ``path`` with its metadata kept: one ``count`` moved to the next
    double (``"ulp"``), a zero count made -0 (``"zero"``) or one label of a cell replaced by
    another label of its column (``"label"``)."""
    table = pq.read_table(path)
    counts = table.column("count").to_numpy().copy()
    if how == "label":
        column = "occupation" if "occupation" in table.column_names else table.column_names[0]
        labels = table.column(column).to_pylist()
        labels[len(labels) // 2] = next(v for v in labels if v != labels[len(labels) // 2])
        table = table.set_column(table.schema.get_field_index(column), column,
                                 pa.array(labels, table.schema.field(column).type))
    else:
        k = len(counts) // 2 if how == "ulp" else int(np.flatnonzero(counts == 0)[0])
        counts[k] = np.nextafter(counts[k], np.inf) if how == "ulp" else -0.0
        table = table.set_column(table.schema.get_field_index("count"), "count", pa.array(counts))
    edited = folder / f"{how}.parquet"
    pq.write_table(table, edited)
    return edited


@pytest.mark.parametrize("how", ["ulp", "zero", "label"])
@pytest.mark.parametrize("name", ["e", "g"])
def test_a_grid_file_edited_by_one_ulp_a_zero_s_sign_or_a_label_is_refused(scripts, tmp_path, name, how):
    """A basic grid's counts are integers (their chunks are fingerprinted as integer digits),
    a Privelet grid's are not; either way an edit by the smallest step, a -0 for a 0 and a label
    moved out of its cell are refused, and nothing is created."""
    _, out, _, _ = scripts
    release, path, text = out[name]
    counts = pq.read_table(path).column("count").to_numpy()
    if how == "zero" and not (counts == 0).any():
        pytest.skip("no zero count in this release")
    edited = _grid_edit(path, tmp_path, how)
    assert pq.read_schema(edited).metadata == pq.read_schema(path).metadata
    with duckdb.connect() as con:
        with pytest.raises(duckdb.Error, match="its values differ") as refused:
            con.execute(text.replace(str(path), str(edited)))
        assert release.export_metadata()["checksum"] in str(refused.value)
        if how == "label":
            assert "1 rows without their cell's labels" in str(refused.value)
        con.execute("ROLLBACK")
        assert not _objects(con)


@pytest.mark.parametrize("slab_cells", [1, 250])
@pytest.mark.parametrize("name", ["e", "g"])
def test_a_grid_built_slab_by_slab_equals_python(scripts, tmp_path, monkeypatch, name, slab_cells):
    """Slabs of one or five first-axis planes and fingerprint chunks of 16 rows (the census scale
    in small: many statements each): the cell table holds every cell in order with Python's
    prefix sums, and an edit of the file's last count (fingerprinted by the last statement) is
    refused with nothing created."""
    monkeypatch.setattr(script_module, "SLAB_CELLS", slab_cells)
    monkeypatch.setattr(script_module, "FINGERPRINT_ROWS", 16)
    _, out, _, _ = scripts
    release, path, _ = out[name]
    text = release.sql_script(path, name)
    planes = max(1, slab_cells // (release.n_cells // release.shape[0]))
    assert text.count("INSERT INTO") == -(-release.shape[0] // planes)
    assert text.count("= getvariable('__pdp_script_digests') ||") == -(-release.n_cells // 64)
    with duckdb.connect() as con:
        con.execute(text)
        cells = con.sql(f"SELECT cell, count, prefix FROM __pdp_{name}_cells").fetchnumpy()
    want = release.prefix[(slice(1, None),) * release.counts.ndim].reshape(-1)
    assert np.array_equal(cells["cell"], np.arange(release.n_cells))
    assert np.array_equal(cells["count"], release.counts.reshape(-1))
    assert np.allclose(cells["prefix"], want, rtol=1e-12, atol=1e-9)
    table = pq.read_table(path)
    counts = table.column("count").to_numpy().copy()
    counts[-1] += 1.0
    edited = tmp_path / f"{name}_last.parquet"
    pq.write_table(table.set_column(table.schema.get_field_index("count"), "count", pa.array(counts)), edited)
    with duckdb.connect() as con:
        with pytest.raises(duckdb.Error, match="its values differ"):
            con.execute(text.replace(str(path), str(edited)))
        con.execute("ROLLBACK")
        assert not _objects(con)
