"""Counting in row slices: the numpy affine rule gives the Polars expressions' cells, and the
counts are the same whatever the slice size (engines, row rules and errors unchanged)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import polars as pl
import pytest

import polars_dp as pdp
import polars_dp.counting.engines.polars as polars_engine
from polars_dp.counting import slices
from polars_dp.counting.frequency import frequency_matrix
from polars_dp.counting.spec import CountSpec
from polars_dp.errors import DomainError
from tests.helpers import REPO

DTYPES = [pl.Int8, pl.Int16, pl.Int32, pl.Int64, pl.UInt8, pl.UInt16, pl.UInt32]
AXES = [pdp.Ordinal("x", 0, 99), pdp.Ordinal("x", -3, 3, width=2), pdp.Ordinal("x", 5, 40, width=7),
        pdp.Ordinal("x", 0, 100_000), pdp.Ordinal("x", -(2**40), 2**40, width=2**37),
        pdp.Ordinal("x", 2**62, 2**62 + 9), pdp.Nominal("x", categories=list(range(-4, 6))),
        pdp.Nominal("x", categories=list(range(200, 260)))]


def _candidates(dtype: pl.DataType) -> pl.Series:
    """Values of ``dtype`` in and around every domain of :data:`AXES`, its extremes included."""
    info = np.iinfo(pl.Series([], dtype=dtype).to_numpy().dtype)
    raw = [info.min, info.max, info.min + 1, info.max - 1, *range(-12, 120), 199, 200, 259, 260,
           99_999, 100_000, 100_001, 2**62 - 1, 2**62, 2**62 + 9, 2**62 + 10, 2**40, 2**40 + 1,
           -(2**40), -(2**40) - 1]
    return pl.Series("x", sorted({v for v in raw if info.min <= v <= info.max}), dtype=dtype)


def _affine(axis, dtype, clamp):
    spec = CountSpec.make([axis], on_out_of_domain="clamp" if clamp else "raise")
    rule = slices.affine_axes(spec, [dtype])
    assert rule is not None
    return rule


@pytest.mark.parametrize("clamp", [False, True])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("axis", AXES, ids=lambda a: a.domain_text())
def test_affine_rule_gives_the_cells_of_the_polars_expression(axis, dtype, clamp):
    """Row by row: where the expression gives a cell the numpy rule gives the same one, and a
    row without a cell (outside, no clamp) makes the rule refuse its slice."""
    if clamp and axis.kind == "nominal":  # clamp drops unknown categories: a row rule, not affine
        assert slices.affine_axes(CountSpec.make([axis], on_out_of_domain="clamp"), [dtype]) is None
        return
    values = _candidates(dtype)
    want = pl.DataFrame({"x": values}).select(axis.index_expr(dtype, clamp=clamp)).to_series()
    rule = _affine(axis, dtype, clamp)
    x = values.to_numpy()
    inside = want.is_not_null().to_numpy()
    out, scratch = np.empty(int(inside.sum()), np.int64), np.empty(int(inside.sum()), np.int64)
    assert slices.affine_keys([x[inside]], rule, clamp, out, scratch)
    assert out.tolist() == want.drop_nulls().to_list()
    one, tmp = np.empty(1, np.int64), np.empty(1, np.int64)
    for v in x[~inside]:
        assert not slices.affine_keys([np.array([v], dtype=x.dtype)], rule, clamp, one, tmp), v
    assert clamp is False or inside.all()


def test_affine_rule_only_for_narrow_integer_columns_and_plain_counts():
    """Floats, strings, UInt64, non-contiguous leaves, row rules that drop rows, count columns
    and other keys take the Polars expressions."""
    ordinal, letters = pdp.Ordinal("x", 0, 9), pdp.Nominal("x", categories=["a", "b"])
    assert slices.affine_axes(CountSpec.make([ordinal]), [pl.Int32]) is not None
    for spec, dtype in [(CountSpec.make([ordinal]), pl.Float64), (CountSpec.make([ordinal]), pl.UInt64),
                        (CountSpec.make([letters]), pl.String),
                        (CountSpec.make([pdp.Nominal("x", categories=[1, 3])]), pl.Int64),
                        (CountSpec.make([pdp.Nominal("x", categories=[2, 1])]), pl.Int64),
                        (CountSpec.make([pdp.Ordinal("x", 0.0, 9.0)]), pl.Int64),
                        (CountSpec.make([ordinal], nulls="drop"), pl.Int64),
                        (CountSpec.make([ordinal], on_out_of_domain="drop"), pl.Int64),
                        (CountSpec.make([ordinal], count_column="w"), pl.Int64),
                        (CountSpec.make([ordinal], key=lambda idx: idx[0]), pl.Int64),
                        (CountSpec.make([pdp.Ordinal("x", -(2**63), 2**63 - 1, width=2**62)]), pl.Int64)]:
        assert slices.affine_axes(spec, [dtype]) is None


def test_slice_rows_is_a_public_power_of_two():
    for k in range(1, 9):
        rows = slices.slice_rows(k)
        assert rows >= 4096 and rows & (rows - 1) == 0
        assert rows * 8 * (k + 1) <= max(slices.SLICE_BYTES, 4096 * 8 * (k + 1))


def _frame(n: int, seed: int = 4) -> pl.DataFrame:
    """Three integer columns of mixed types, several chunks (slices cross chunk boundaries), and
    a string and a float column for the expression path."""
    rng = np.random.default_rng(seed)
    parts = []
    for size in (n // 3, n // 5, n - n // 3 - n // 5):
        parts.append(pl.DataFrame({
            "age": pl.Series(rng.integers(0, 100, size), dtype=pl.Int16),
            "code": pl.Series(rng.integers(10, 14, size), dtype=pl.UInt8),
            "t": pl.Series(rng.integers(-50, 51, size), dtype=pl.Int64),
            "s": rng.choice(["p", "q", "r"], size),
            "f": rng.uniform(0, 10, size)}))
    return pl.concat(parts, rechunk=False)


AFFINE = [pdp.Ordinal("age", 0, 99, width=10), pdp.Nominal("code", categories=[10, 11, 12, 13]),
          pdp.Ordinal("t", -50, 50, width=3)]
MIXED = [pdp.Ordinal("age", 0, 99, width=10), pdp.Nominal("s", categories=["p", "q", "r"]),
         pdp.Ordinal("f", 0.0, 10.0, width=0.5)]


def _truth(frame: pl.DataFrame) -> np.ndarray:
    """The affine counts by hand: numpy on the columns, no library code."""
    age = frame["age"].to_numpy().astype(np.int64) // 10
    code = frame["code"].to_numpy().astype(np.int64) - 10
    t = (frame["t"].to_numpy() + 50) // 3
    return np.bincount((age * 4 + code) * 34 + t, minlength=10 * 4 * 34).reshape(10, 4, 34)


@pytest.mark.parametrize("integer", [False, True])
def test_counts_are_the_same_whatever_the_slice_size(monkeypatch, integer):
    frame = _frame(30_011)
    want = _truth(frame)
    seen = []
    for rows in (61, 4096, 30_010, 30_011, 1 << 20):
        monkeypatch.setattr(polars_engine, "slice_rows", lambda k, rows=rows: rows)
        for data in (frame, frame.lazy()):
            got = frequency_matrix(data, AFFINE, integer=integer)
            assert got.dtype == (np.int64 if integer else np.float64)
            np.testing.assert_array_equal(got, want)
        seen.append(got)
    assert all(np.array_equal(seen[0], s) for s in seen)


@pytest.mark.parametrize("rule", ["drop", "clamp"])
def test_expression_slices_count_the_same_rows_whatever_their_size(monkeypatch, rule):
    """The Polars expressions on slices of any size count what they count on the whole frame
    at once, row rules included; without the rules the nulls are refused from any slice."""
    i = pl.int_range(pl.len())
    frame = _frame(20_003).with_columns(
        pl.when(i % 101 == 0).then(None).when(i % 89 == 0).then(12.5).otherwise(pl.col("f")).alias("f"),
        pl.when(i % 97 == 0).then(pl.lit("zz")).otherwise(pl.col("s")).alias("s"))
    whole = frame.select([a.index_expr(frame.schema[a.column], clamp=rule == "clamp").alias(a.column)
                          for a in MIXED]).drop_nulls().to_numpy()
    want = np.zeros((10, 3, 21))
    np.add.at(want, tuple(whole.T), 1)
    for rows in (257, 4096, 1 << 18):
        monkeypatch.setattr(polars_engine, "EXPRESSION_SLICE_ROWS", rows)
        got = frequency_matrix(frame, MIXED, nulls="drop", on_out_of_domain=rule)
        np.testing.assert_array_equal(got, want)
        with pytest.raises(DomainError, match="column 's' has 207 value"):
            frequency_matrix(frame, MIXED)


@pytest.mark.parametrize("where", [0, 4095, 4096, 29_999])
@pytest.mark.parametrize("bad", ["null", "outside"])
def test_a_row_without_a_cell_in_any_slice_raises_the_same_error(monkeypatch, where, bad):
    """A null or an out-of-domain value, in the first, a middle or the last slice, raises the
    DomainError of the expression path (the same message, the same example value)."""
    frame = _frame(30_000)
    value = None if bad == "null" else 140
    frame = frame.with_columns(pl.when(pl.int_range(pl.len()) == where).then(pl.lit(value, pl.Int16))
                               .otherwise(pl.col("age")).alias("age"))
    monkeypatch.setattr(polars_engine, "slice_rows", lambda k: 4096)
    messages = []
    for affine in (True, False):
        if not affine:
            monkeypatch.setattr(polars_engine, "affine_axes", lambda spec, dtypes: None)
        for data in (frame, frame.lazy()):
            with pytest.raises(DomainError) as err:
                frequency_matrix(data, AFFINE)
            messages.append(str(err.value))
    assert len(set(messages)) == 1
    assert ("null" in messages[0]) if bad == "null" else ("140" in messages[0])


def test_clamp_moves_every_value_to_its_nearest_cell_in_slices(monkeypatch):
    frame = _frame(9_000).with_columns((pl.col("t") * 3).alias("t"))  # -150..150: mostly outside
    monkeypatch.setattr(polars_engine, "slice_rows", lambda k: 1000)
    got = frequency_matrix(frame, AFFINE, on_out_of_domain="clamp")
    want = _truth(frame.with_columns(pl.col("t").clip(-50, 50)))
    np.testing.assert_array_equal(got, want)


def test_a_large_frame_is_counted_without_a_cell_column_of_all_its_rows():
    """A 1e7-row count grows the peak memory by well under the 80 MB a cell column of all rows
    would take (it took 3 such columns when the cells were one Polars expression)."""
    code = (
        "import resource, numpy as np, polars as pl, polars_dp as pdp\n"
        "from polars_dp.counting.frequency import frequency_matrix\n"
        "n = 10_000_000\n"
        "df = pl.DataFrame({'a': np.arange(n) % 100, 'b': np.arange(n) % 1000})\n"
        "attrs = [pdp.Ordinal('a', 0, 99), pdp.Ordinal('b', 0, 999)]\n"
        "frequency_matrix(df.head(1000), attrs)\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "counts = frequency_matrix(df, attrs)\n"
        "grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before\n"
        "print(int(counts.sum()), grown * 1024)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    total, grown = map(int, out.stdout.split())
    assert total == 10_000_000
    assert grown < 20 * 2**20


def test_key_buffers_are_kept_for_the_next_count_and_lent_to_one_counter_at_a_time():
    """A second count reuses the mapped buffers of the first (no fresh pages per release); a
    counter running while another holds them gets its own, and both count right."""
    with slices.key_buffers(1000) as first:
        with slices.key_buffers(1000) as nested:
            assert nested[0] is not first[0] and nested[1] is not first[1]
    with slices.key_buffers(500) as again:
        assert again[0] is nested[0] or again[0] is first[0]
    with slices.key_buffers(4000) as larger:
        assert larger[0].size >= 4000 and larger[1].size >= 4000
    attrs = [pdp.Ordinal("a", 0, 9), pdp.Ordinal("b", 0, 9)]
    rng = np.random.default_rng(3)
    frames = [pl.DataFrame({"a": rng.integers(0, 10, n), "b": rng.integers(0, 10, n)}) for n in (5000, 300)]
    spec = CountSpec.make(attrs)
    rule = slices.affine_axes(spec, [pl.Int64, pl.Int64])
    assert rule is not None
    outer = slices.affine_counter(frames[0], rule, False, 4096)
    got = np.bincount(next(outer), minlength=100)  # the first counter holds its buffers ...
    inner = sum(np.bincount(c, minlength=100) for c in slices.affine_counter(frames[1], rule, False, 4096))
    got += sum(np.bincount(c, minlength=100) for c in outer)  # ... while a second one counts
    for frame, counts in zip(frames, (got, inner), strict=True):
        want = np.bincount(frame["a"].to_numpy() * 10 + frame["b"].to_numpy(), minlength=100)
        assert np.array_equal(counts, want)
