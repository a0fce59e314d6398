"""The plain-SQL examples of the README and of ``polars-dp --help`` count what they say on a
binned domain (issue #38, 3): each statement runs on a release with exact counts over the
README's domain file and must give what the same statement gives on the rows themselves (each
row its own cell: ``count`` 1, its value as ``age``, ``age_lo`` and ``age_hi``).  Before bins
were labelled by their range, ``WHERE age BETWEEN 20 AND 30`` on bins of 5 counted ages 20-34."""

from __future__ import annotations

import re
import tomllib

import duckdb
import numpy as np
import polars as pl

import polars_dp as pdp
from polars_dp.counting.frequency import frequency_matrix
from tests.helpers import REPO
from tests.helpers.cli import run_cli

#: ``polars-dp sql FILE "SELECT ... FROM release ..."``: a plain-SQL example on the release table.
EXAMPLE = re.compile(r'polars-dp sql release\.parquet "(SELECT [^"]* FROM release WHERE [^"]*)"')


def readme_domain() -> list[pdp.Ordinal]:
    """The ordinal attributes of the README's domain file (its ``toml`` block)."""
    text = (REPO / "README.md").read_text()
    block = next(b for b in re.findall(r"```toml\n(.*?)```", text, re.S) if "[[attributes]]" in b)
    attributes = tomllib.loads(block)["attributes"]
    return [pdp.Ordinal(a["column"], a["lo"], a["hi"], width=a.get("width", 1))
            for a in attributes if a["kind"] == "ordinal"]


def check_example(sql: str) -> None:
    """``sql`` on an exact release over the README's domain equals ``sql`` on the rows."""
    attrs = readme_domain()
    assert any(a.width > 1 for a in attrs), "the README's domain file has a binned attribute"
    rng = np.random.default_rng(0)
    rows = pl.DataFrame({a.column: rng.integers(a.lo, a.hi + 1, 5000) for a in attrs})
    exact = pdp.GridRelease(frequency_matrix(rows, attrs), attrs, mechanism="none", epsilon=1.0,
                            neighbours="replace", noise_scale=1.0)
    con = duckdb.connect()
    exact.to_duckdb(con, "release")
    got = con.sql(sql).fetchall()
    truth = duckdb.connect()
    ends = [pl.col(a.column).alias(f"{a.column}_{side}") for a in attrs for side in ("lo", "hi")]
    cells = rows.with_columns(pl.lit(1.0).alias("count"), *ends)
    truth.register("release", cells.to_arrow())
    assert got == truth.sql(sql).fetchall(), sql


def test_the_help_sql_examples_count_what_they_say(capsys):
    examples = []
    for args in ([], ["sql"]):  # polars-dp --help and polars-dp sql --help
        code, out, _ = run_cli(capsys, *args, "--help")
        assert code == 0
        examples += EXAMPLE.findall(out)
    assert len(examples) == 2
    for sql in examples:
        check_example(sql)


def test_the_readme_sql_example_counts_what_it_says():
    examples = EXAMPLE.findall((REPO / "README.md").read_text())
    assert examples
    for sql in examples:
        check_example(sql)
