"""``polars-dp sql`` only reads the release: the database is locked once the release is registered
(no file, network, extension or setting), writing statements are refused, and several statements
show each result."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import polars_dp as pdp
from tests.helpers.cli import run_cli

RAW = pl.DataFrame({"age": [23, 35, 61, 47], "income": [10, 20, 30, 40]})


@pytest.fixture(scope="module")
def release_file(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("shell")
    rng = np.random.default_rng(5)
    frame = pl.DataFrame({"age": rng.integers(0, 100, 400), "city": rng.choice(["north", "south"], 400)})
    release = pdp.basic(frame, [pdp.Ordinal("age", 0, 99), pdp.Nominal("city", ["north", "south"])],
                        epsilon=1.0, seed=3)
    return release.write_parquet(folder / "r.parquet")


@pytest.fixture
def here(tmp_path, monkeypatch) -> Path:
    """A working directory holding raw data (what a query must not reach) and a file to protect."""
    monkeypatch.chdir(tmp_path)
    RAW.write_csv(tmp_path / "raw.csv")
    (tmp_path / "victim.txt").write_text("keep me\n")
    return tmp_path


def refused(capsys, release_file: Path, query: str, *names: str) -> str:
    """Exit code 2 and one error line naming ``names``."""
    code, out, err = run_cli(capsys, "sql", release_file, "--csv", query)
    assert code == 2, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("polars-dp sql: error: "), err
    assert out == ""
    for name in names:
        assert name in lines[0], (name, lines[0])
    return lines[0]


@pytest.mark.parametrize("query", [
    "SELECT count(*), avg(age) FROM read_csv('raw.csv')",
    "SELECT count(*) FROM 'raw.csv'",
    "SELECT content FROM read_text('/etc/passwd')",
    "SELECT file FROM glob('*')",
])
def test_a_query_cannot_read_files(query, release_file, here, capsys):
    refused(capsys, release_file, query, "reads only the registered release")


def test_copy_from_a_file_is_refused(release_file, here, capsys):
    refused(capsys, release_file, "CREATE TABLE t (age INT, income INT); COPY t FROM 'raw.csv' (HEADER); "
            "SELECT count(*) AS n FROM t", "COPY (statement 2)", "only reads")


def test_profiling_cannot_overwrite_a_file(release_file, here, capsys):
    refused(capsys, release_file, "PRAGMA enable_profiling='json'; SET profiling_output='victim.txt'; "
            "SELECT sum(count) FROM release", "locked")
    assert (here / "victim.txt").read_text() == "keep me\n"


def test_logging_cannot_write_files(release_file, here, capsys):
    before = sorted(p.name for p in here.iterdir())
    refused(capsys, release_file, f"CALL enable_logging(storage='file', storage_path='{here / 'logs'}'); "
            "SELECT sum(count) FROM release", "locked")
    assert sorted(p.name for p in here.iterdir()) == before


def test_no_extension_is_installed_or_loaded_and_no_setting_changes(release_file, here, capsys):
    code, out, err = run_cli(capsys, "sql", release_file, "--json",
                             "SELECT current_setting('enable_external_access') AS external, "
                             "current_setting('autoinstall_known_extensions') AS autoinstall, "
                             "current_setting('autoload_known_extensions') AS autoload, "
                             "current_setting('lock_configuration') AS locked")
    assert code == 0, err
    assert json.loads(out) == [{"external": False, "autoinstall": False, "autoload": False, "locked": True}]
    refused(capsys, release_file, "SET enable_external_access = true", "locked")


@pytest.mark.parametrize(("query", "word"), [
    ("DROP TABLE release", "DROP"),
    ("DROP VIEW release", "DROP"),
    ("UPDATE __pdp_release_cells SET count = count + 1000", "UPDATE"),
    ("DELETE FROM release_meta", "DELETE"),
    ("CREATE OR REPLACE VIEW release AS SELECT 1 AS count", "CREATE OR REPLACE"),
    ("PREPARE p AS DELETE FROM release_meta", "PREPARE"),
])
def test_a_write_is_refused_in_one_line(query, word, release_file, here, capsys):
    refused(capsys, release_file, query, f"{word} (statement 1)", "only reads")


def test_the_macros_answer_in_the_locked_shell(release_file, here, capsys):
    release = pdp.read_release(release_file)
    code, out, err = run_cli(capsys, "sql", release_file, "--json",
                             "SELECT * FROM release_range_count(age_lo := 20, age_hi := 30, city := 'north')")
    assert code == 0, err
    row = json.loads(out)[0]
    assert row["count"] == pytest.approx(release.range_count(age=(20, 30), city="north"))
    assert row["std"] == pytest.approx(release.range_std(age=(20, 30), city="north"))
    assert row["hi"] > row["count"] > row["lo"]  # lo / hi answer (plain SQL)


def test_every_statement_shows_its_result(release_file, here, capsys):
    release = pdp.read_release(release_file)
    code, out, err = run_cli(capsys, "sql", release_file,
                             "SELECT 17 AS first_answer; CREATE TABLE q AS SELECT 1 AS id, 20 AS age_lo; "
                             "SELECT round(count, 3) AS second_answer FROM release_range_counts('q')")
    assert code == 0, err
    assert "-- SELECT 17 AS first_answer" in out and "first_answer" in out and "17" in out
    assert "-- SELECT round(count, 3) AS second_answer FROM release_range_counts('q')" in out
    assert f"{round(release.range_count(age=(20, None)), 3)}" in out
    assert "CREATE TABLE" not in out  # a statement without rows shows nothing
    refused(capsys, release_file, "SELECT 1 AS a; SELECT 2 AS b", "2 statements return rows", "--csv")


def test_sql_label_errors_suggest_the_label(release_file, here, capsys):
    release = pdp.read_release(release_file)
    with pytest.raises(pdp.QueryError, match=r"did you mean 'north'\?") as python:
        release.range_count(city="North")
    line = refused(capsys, release_file, "SELECT * FROM release_range_count(city := 'North')",
                   "did you mean 'north'?")
    assert line.endswith(str(python.value).split(" is not a label of this hierarchy")[1])
    line = refused(capsys, release_file, "SELECT * FROM release_range_count(city := 'east')", "east")
    assert "did you mean" not in line
