"""No single row can make a release fail once the row rules are declared.

One row of each kind of invalid value (null, NaN, +-inf, below and above the domain, a UInt64
``2^64 - 1``, an Int64 ``-2^63``, a fraction in an integer domain, a nominal value outside the
categories, a null, negative or huge count; for sequences a null sequence, a null symbol, a
symbol outside the alphabet and an over-long sequence) beside valid rows: with ``nulls="drop"``
and ``on_out_of_domain`` ``"drop"`` or ``"clamp"`` every mechanism family (grid, spatial,
sequence) releases from every input kind; without them each such row is a DomainError naming
its column, never an engine's error.
"""

from __future__ import annotations

import duckdb
import numpy as np
import polars as pl
import pytest

import polars_dp as pdp
from polars_dp.counting.aggregate import COUNT_BOUND
from polars_dp.counting.frequency import frequency_matrix
from polars_dp.counting.sequences import encode_sequences
from polars_dp.plans import spatial as spatial_plans
from tests.helpers.engines import KINDS, inputs

I64_MIN, U64_MAX = -(2**63), 2**64 - 1

#: One valid row, then (the bad column, its value) per row; the other columns stay valid.
GOOD = {"u": 1, "i": 1, "f": 1.0, "x": 0.5, "g": "a", "n": 1}
BAD = [("x", None), ("x", float("nan")), ("x", float("inf")), ("x", float("-inf")), ("x", -5.0),
       ("x", 7.0), ("u", U64_MAX), ("i", I64_MIN), ("f", 2.5), ("g", "zz"), ("g", None), ("n", None),
       ("n", -3), ("n", I64_MIN)]
SCHEMA = {"u": pl.UInt64, "i": pl.Int64, "f": pl.Float64, "x": pl.Float64, "g": pl.String, "n": pl.Int64}
ATTRS = [pdp.Ordinal("u", 0, 9), pdp.Ordinal("i", 0, 9), pdp.Ordinal("f", 0, 9),
         pdp.Ordinal("x", 0.0, 1.0, 0.25), pdp.Nominal("g", categories=["a", "b"])]


def _frame(bad: list[tuple[str, object]]) -> pl.DataFrame:
    rows = [dict(GOOD)] + [{**GOOD, column: value} for column, value in bad]
    return pl.DataFrame(rows, schema=SCHEMA)


def _points(bad: list[tuple[str, object]]) -> pl.DataFrame:
    """Spatial columns ``x`` (Float64) and ``u`` (UInt64) with the same bad rows."""
    frame = _frame(bad).with_columns(pl.col("u").cast(pl.UInt64))
    return frame.select("x", "u", "n")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("rule", ["drop", "clamp"])
def test_every_bad_row_is_dropped_or_clamped_in_every_engine(kind, rule):
    """The count of the rule, each row on its own: under "drop" only the valid rows count; under
    "clamp" ordinal values move to the nearest cell and the unknown category is dropped; a null
    count is dropped and a negative one counts 0."""
    frame = _frame(BAD)
    got = frequency_matrix(inputs(frame)[kind], ATTRS, nulls="drop", on_out_of_domain=rule, count_column="n")
    expected = np.zeros(got.shape)
    expected[1, 1, 1, 2, 0] = 1  # the valid row
    if rule == "clamp":
        expected[1, 1, 1, 4, 0] += 2  # +inf and 7.0: the last cell of x
        expected[1, 1, 1, 0, 0] += 2  # -inf and -5.0: the first cell
        expected[9, 1, 1, 2, 0] += 1  # UInt64 2^64 - 1: u's last cell
        expected[1, 0, 1, 2, 0] += 1  # Int64 -2^63: i's first cell
        expected[1, 1, 2, 2, 0] += 1  # 2.5 floored
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("bad", BAD, ids=[f"{c}={v!r}" for c, v in BAD])
def test_without_the_rules_each_bad_row_is_a_domain_error_naming_its_column_and_the_rule(kind, bad):
    frame = _frame([bad])
    with pytest.raises(pdp.DomainError, match=f"{bad[0]!r}.*(nulls|on_out_of_domain)='(drop|clamp)'"):
        frequency_matrix(inputs(frame)[kind], ATTRS, count_column="n")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mechanism", ["basic", "privelet"])
@pytest.mark.parametrize("rule", ["drop", "clamp"])
def test_grid_releases_succeed_with_the_rules(kind, mechanism, rule):
    data = inputs(_frame([*BAD, ("n", 2**62)]))[kind]
    rel = getattr(pdp, mechanism)(data, ATTRS, epsilon=1.0, seed=3, nulls="drop", on_out_of_domain=rule,
                                  count_column="n")
    assert rel.counts.shape == (10, 10, 10, 5, 2)


#: UG and AG are given a public ``n``: their grid side follows N, and a count of 2^53 would ask
#: for a grid larger than memory (AG's second level follows its noisy cell counts: see
#: :func:`test_adaptive_grid_cells_saturate`).
SPATIAL = {"privtree": {}, "uniform_grid": {"n": 20}, "adaptive_grid": {"n": 20},
           "privelet_grid": {"bits": 3}}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mechanism", list(SPATIAL))
@pytest.mark.parametrize("rule", ["drop", "clamp"])
def test_spatial_releases_succeed_with_the_rules(kind, mechanism, rule):
    huge = [("n", 2**62)] if mechanism != "adaptive_grid" else []
    bad = [b for b in BAD if b[0] in ("x", "u", "n")] + huge
    rel = getattr(pdp, mechanism)(inputs(_points(bad))[kind], ["x", "u"], bounds=[(0.0, 1.0), (0.0, 9.0)],
                                  epsilon=1.0, seed=3, nulls="drop", on_out_of_domain=rule, count_column="n",
                                  **SPATIAL[mechanism])
    assert rel.count.size >= 1


#: A valid sequence, then a null sequence, a null symbol, a symbol outside the alphabet and an
#: over-long sequence (truncated by the public rule, never refused).
SEQUENCES = [["a", "b"], None, ["a", None], ["a", "X"], ["a"] * 500]
SEQUENCE_KINDS = ["polars", "lazy", "arrow_table"]


def _sequences(rows: list) -> dict:
    frame = pl.DataFrame({"s": rows}, schema={"s": pl.List(pl.String)})
    return {"polars": frame, "lazy": frame.lazy(), "arrow_table": frame.to_arrow()}


@pytest.mark.parametrize("kind", SEQUENCE_KINDS)
@pytest.mark.parametrize("mechanism", ["privtree_sequences", "ngram_sequences"])
def test_sequence_releases_succeed_with_the_rules(kind, mechanism):
    rel = getattr(pdp, mechanism)(_sequences(SEQUENCES)[kind], "s", alphabet="ab", max_length=4, epsilon=1.0,
                                  seed=3, nulls="drop", on_out_of_domain="drop")
    assert rel.alphabet == ("a", "b")


@pytest.mark.parametrize("kind", SEQUENCE_KINDS)
@pytest.mark.parametrize("bad", SEQUENCES[1:4], ids=["null sequence", "null symbol", "outside"])
def test_sequence_bad_rows_without_the_rules_are_domain_errors_naming_the_rule(kind, bad):
    with pytest.raises(pdp.DomainError, match="'s'.*(nulls|on_out_of_domain)='drop'"):
        pdp.ngram_sequences(_sequences([SEQUENCES[0], bad])[kind], "s", alphabet="ab", max_length=4,
                            epsilon=1.0, seed=3)


def test_sequence_rules_drop_whole_sequences_and_only_them():
    """Each rule drops the sequences it names (judged on their first max_length symbols) and
    nothing else: the same encoded positions as the valid sequences alone."""
    rows = [*SEQUENCES, ["b", "a", "b", "a", "X"]]  # an X past max_length is never read
    got = encode_sequences(_sequences(rows)["polars"], "s", alphabet="ab", max_length=4, nulls="drop",
                           on_out_of_domain="drop")
    want = encode_sequences(_sequences([rows[0], rows[4], rows[5]])["polars"], "s", alphabet="ab",
                            max_length=4)
    assert got.n_sequences == 3
    np.testing.assert_array_equal(got.next_symbol, want.next_symbol)
    nulls_only = encode_sequences(_sequences(rows[:3])["polars"], "s", alphabet="ab", max_length=4,
                                  nulls="drop")
    assert nulls_only.n_sequences == 1
    with pytest.raises(pdp.DomainError, match="nulls='drop'"):
        encode_sequences(_sequences(rows[:4])["polars"], "s", alphabet="ab", max_length=4,
                         on_out_of_domain="drop")


@pytest.mark.parametrize("kind", KINDS)
def test_a_huge_count_releases_the_saturated_cell(kind):
    """Basic and Privelet: a count past int64 in total gives 2^53 (plus noise), never a wrapped value."""
    frame = pl.DataFrame({"g": ["a", "a", "a", "b"], "n": [2**62, 2**62, 2**62, 5]})
    attrs = [pdp.Nominal("g", categories=["a", "b"])]
    for mechanism in (pdp.basic, pdp.privelet):
        rel = mechanism(inputs(frame)[kind], attrs, epsilon=1.0, seed=3, count_column="n")
        assert abs(rel.counts[0] - COUNT_BOUND) < 100 and abs(rel.counts[1] - 5) < 100


@pytest.mark.parametrize("kind", KINDS)
def test_a_huge_count_in_a_spatial_release_saturates(kind):
    """PrivTree's finest cells and every spatial mechanism's cells: 2^53, not -9.2e18."""
    frame = pl.DataFrame({"x": [0.1, 0.1, 0.1, 0.9], "y": [0.1, 0.1, 0.1, 0.9],
                          "n": [2**62, 2**62, 2**62, 5]})
    for mechanism, extra in SPATIAL.items():
        if mechanism == "adaptive_grid":
            continue
        rel = getattr(pdp, mechanism)(inputs(frame)[kind], ["x", "y"], bounds=[(0.0, 1.0), (0.0, 1.0)],
                                      epsilon=1.0, seed=3, count_column="n", **extra)
        total = float(np.sum(rel.count))
        assert abs(total - COUNT_BOUND) < COUNT_BOUND * 1e-6, mechanism


@pytest.mark.parametrize("kind", KINDS)
def test_adaptive_grid_cells_saturate(kind):
    """AG's two levels of weighted cells: 2^53 (a small epsilon keeps its second level small)."""
    frame = pl.DataFrame({"x": [0.1, 0.1, 0.1, 0.9], "n": [2**62, 2**62, 2**62, 5]})
    rel = pdp.adaptive_grid(inputs(frame)[kind], ["x"], bounds=[(0.0, 1.0)], epsilon=1e-6, n=20, seed=3,
                            count_column="n")
    assert abs(float(np.sum(rel.count)) - COUNT_BOUND) < COUNT_BOUND * 1e-5


@pytest.mark.parametrize("kind", KINDS)
def test_integer_categories_read_a_uint64_past_int64_as_outside(kind):
    """Nominal integer categories: 2^64 - 1 is an unknown category (DomainError, or dropped), never
    a cast error."""
    frame = pl.DataFrame({"k": pl.Series([1, 2, U64_MAX], dtype=pl.UInt64)})
    attrs = [pdp.Nominal("k", categories=[1, 2])]
    with pytest.raises(pdp.DomainError, match="'k'.*on_out_of_domain='drop'"):
        frequency_matrix(inputs(frame)[kind], attrs)
    got = frequency_matrix(inputs(frame)[kind], attrs, on_out_of_domain="drop")
    np.testing.assert_array_equal(got, [1, 1])


def test_duckdb_hugeint_counts_and_values_past_int64_are_read_without_a_cast_error():
    rel = duckdb.connect().sql("SELECT * FROM (VALUES (1, -(CAST(2 AS HUGEINT) << 100), 1), "
                               "(2, CAST(2 AS HUGEINT) << 100, CAST(2 AS HUGEINT) << 70)) AS t(a, n, k)")
    attrs = [pdp.Ordinal("a", 0, 3)]
    with pytest.raises(pdp.DomainError, match="'n' has a negative count"):
        frequency_matrix(rel, attrs, count_column="n")
    got = frequency_matrix(rel, attrs, count_column="n", on_out_of_domain="drop")
    np.testing.assert_array_equal(got, [0, 0, COUNT_BOUND, 0])
    with pytest.raises(pdp.DomainError, match="'k' has 1 value"):
        frequency_matrix(rel, [pdp.Ordinal("k", 0, 3)])
    np.testing.assert_array_equal(frequency_matrix(rel, [pdp.Ordinal("k", 0, 3)], on_out_of_domain="clamp"),
                                  [0, 1, 0, 1])


def test_one_heavy_row_cannot_ask_for_a_grid_past_the_public_cap(monkeypatch):
    """UG without ``n`` and AG size their grids from noisy counts, so one row of weight 2^62 asked
    for a grid larger than any memory (DomainTooLargeError); the public cap ``MAX_GRID_CELLS``
    (here made small) bounds both levels whatever the data, and below it the rule is unchanged."""
    monkeypatch.setattr(spatial_plans, "MAX_GRID_CELLS", 4096)
    frame = pl.DataFrame({"x": [0.1, 0.5, 0.9], "y": [0.1, 0.5, 0.9], "n": [2**62, 1, 1]})
    args = {"bounds": [(0.0, 1.0), (0.0, 1.0)], "epsilon": 1.0, "seed": 3, "count_column": "n"}
    ug = pdp.uniform_grid(frame, ["x", "y"], **args)
    assert ug.params["m"] == 64 and ug.count.size == 4096
    ag = pdp.adaptive_grid(frame, ["x", "y"], n=3, **args)
    assert sum(m**2 for m in ag.layout["m2"]) <= 4096 and ag.count.size <= 4096
    assert spatial_plans.grid_side(1e3, 1.0, 10.0, 2) == 10  # ceil(sqrt(100)): below the cap
