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
from polars_dp.counting import engines
from polars_dp.counting.aggregate import Accumulator
from polars_dp.counting.frequency import frequency_matrix
from polars_dp.counting.spec import CountSpec
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


#: Cell (0, x): 2^62 + 2^62 + 2^62 + 5 (wraps past int64); (1, y): 2^53 - 2 + 1 (exact below the
#: bound); (2, z): one UInt64 row of 2^64 - 1; (3, x): 2^53 + 1 (one past the bound).
HUGE = pl.DataFrame({"a": [0, 0, 0, 0, 1, 1, 2, 3, 3], "b": ["x", "x", "x", "x", "y", "y", "z", "x", "x"],
                     "w": pl.Series([2**62, 2**62, 2**62, 5, 2**53 - 2, 1, 2**64 - 1, 2**53, 1],
                                    dtype=pl.UInt64)})


def _huge_inputs() -> dict:
    table = HUGE.to_arrow()
    return {"polars": HUGE, "lazy": HUGE.lazy(), "arrow_reader": table.to_reader(max_chunksize=2),
            "duckdb": duckdb.connect().from_arrow(table)}


@pytest.mark.parametrize("kind", ["polars", "lazy", "arrow_reader", "duckdb"])
@pytest.mark.parametrize("integer", [False, True])
def test_every_cell_count_saturates_at_2_to_53_and_never_wraps(kind, integer):
    """The public rule min(sum, 2^53) per cell, in every engine, dense float64 and exact int64."""
    got = frequency_matrix(_huge_inputs()[kind], ATTRS, count_column="w", integer=integer)
    expected = np.zeros((30, 3))
    expected[0, 0] = expected[2, 2] = expected[3, 0] = 2**53
    expected[1, 1] = 2**53 - 1
    assert got.dtype == (np.int64 if integer else np.float64)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("kind", ["polars", "lazy", "arrow_reader", "duckdb"])
def test_sparse_cell_counts_saturate_at_2_to_53(kind):
    """PrivTree's finest cells: the same rule on the sparse (key, count) aggregate."""
    spec = CountSpec.make(ATTRS, count_column="w")
    keys, counts = engines.count(_huge_inputs()[kind], spec, dense=False)
    assert counts is not None
    assert dict(zip(keys.tolist(), counts.tolist(), strict=True)) == {0: 2**53, 4: 2**53 - 1, 8: 2**53,
                                                                      9: 2**53}


def test_summed_pieces_saturate_and_stay_exact_below_the_bound():
    """Float64 sums of capped weights: exact below 2^53, at least 2^53 past it (any order)."""
    acc = Accumulator(3, dense=False)
    for _ in range(3000):  # 3000 x 2^53 would wrap int64 thirty-fold
        acc.add(np.array([0, 1]), np.array([2**53, 1]))
    keys, counts = acc.sparse()
    assert keys.tolist() == [0, 1] and counts.tolist() == [2**53, 3000]


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
