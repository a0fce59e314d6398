"""The count stage's batch paths: many streamed batches added in place, and a DuckDB aggregate
fetched as many Arrow record batches, give exactly the one-shot counts."""

from __future__ import annotations

import subprocess
import sys

import duckdb
import numpy as np
import polars as pl
import pytest

import polars_dp as pdp
import polars_dp.counting.engines.duckdb as duckdb_engine
import polars_dp.counting.engines.polars as polars_engine
from polars_dp.counting.frequency import frequency_matrix
from polars_dp.errors import DomainError
from tests.helpers import REPO


def _frame(n: int = 20_000) -> pl.DataFrame:
    rng = np.random.default_rng(8)
    return pl.DataFrame({"a": rng.integers(0, 30, n), "b": rng.choice(["x", "y", "z"], n),
                         "w": rng.integers(0, 5, n)})


ATTRS = [pdp.Ordinal("a", 0, 29), pdp.Nominal("b", categories=["x", "y", "z"])]


def _truth(frame: pl.DataFrame, weights: bool) -> np.ndarray:
    cell = frame["a"].to_numpy() * 3 + frame["b"].replace_strict({"x": 0, "y": 1, "z": 2}).to_numpy()
    return np.bincount(cell, weights=frame["w"].to_numpy() if weights else None, minlength=90).reshape(30, 3)


def _check(got: np.ndarray, frame: pl.DataFrame, weights: bool, integer: bool) -> None:
    assert got.dtype == (np.int64 if integer else np.float64)
    np.testing.assert_array_equal(got, _truth(frame, weights))


@pytest.mark.parametrize("integer", [False, True])
@pytest.mark.parametrize("weights", [False, True])
def test_many_streamed_batches_add_up_exactly(monkeypatch, weights, integer):
    monkeypatch.setattr(polars_engine, "BATCH_ROWS", 997)
    frame = _frame()
    got = frequency_matrix(frame.lazy(), ATTRS, count_column="w" if weights else None, integer=integer)
    _check(got, frame, weights, integer)


@pytest.mark.parametrize("integer", [False, True])
@pytest.mark.parametrize("weights", [False, True])
def test_duckdb_aggregate_in_record_batches(monkeypatch, weights, integer):
    monkeypatch.setattr(duckdb_engine, "FETCH_ROWS", 7)
    frame = _frame(200_000)
    con = duckdb.connect()
    con.register("t", frame.to_arrow())
    rel = con.sql("SELECT * FROM t")
    got = frequency_matrix(rel, ATTRS, count_column="w" if weights else None, integer=integer)
    _check(got, frame, weights, integer)


@pytest.mark.parametrize("weights", [False, True])
def test_integer_counts_of_one_frame_and_of_an_arrow_stream(weights):
    frame = _frame()
    for data in (frame, pl.DataFrame(frame).to_arrow().to_reader(max_chunksize=1001)):
        got = frequency_matrix(data, ATTRS, count_column="w" if weights else None, integer=True)
        _check(got, frame, weights, True)


def test_integer_counts_past_2_to_53_stay_exact():
    """int64 counts hold what float64 would round: 2^53 + 1 individuals in one cell."""
    frame = pl.DataFrame({"a": [0, 0], "b": ["x", "x"], "w": [2**53, 1]})
    got = frequency_matrix(frame, ATTRS, count_column="w", integer=True)
    assert int(got[0, 0]) == 2**53 + 1


def test_duckdb_negative_count_is_refused_from_any_batch(monkeypatch):
    monkeypatch.setattr(duckdb_engine, "FETCH_ROWS", 7)
    frame = _frame(5000).with_columns(pl.when(pl.int_range(pl.len()) == 4999).then(-1).otherwise(pl.col("w"))
                                      .alias("w"))
    con = duckdb.connect()
    con.register("t", frame.to_arrow())
    with pytest.raises(DomainError, match="negative"):
        frequency_matrix(con.sql("SELECT * FROM t"), ATTRS, count_column="w")


def test_duckdb_count_does_not_import_pandas():
    """A DuckDB relation's counts are fetched as Arrow batches and viewed in place: importing
    pandas on the first fetch cost 0.2-0.3 s of a fresh process's first release."""
    code = (
        "import sys, duckdb, polars_dp as pdp\n"
        "rel = duckdb.connect().sql('SELECT range % 7 AS a, range % 3 AS b FROM range(1000)')\n"
        "r = pdp.privelet(rel, [pdp.Ordinal('a', 0, 6), pdp.Ordinal('b', 0, 2)], epsilon=1.0,\n"
        "                 untransformed=['b'], seed=1)\n"
        "print(r.n_cells, 'pandas' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=REPO)
    assert out.stdout.split() == ["21", "False"]
