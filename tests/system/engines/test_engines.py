"""Every input kind counts the same cells, raises the same errors and gives the same release.

Engines covered here: Polars (DataFrame, LazyFrame, pyarrow Table), Arrow streams
(RecordBatchReader in small batches, any ``__arrow_c_stream__`` object) and DuckDB relations.
Spark has its own module (test_spark.py) so that its start-up stays out of these tests.
"""

from __future__ import annotations

import inspect

import duckdb
import numpy as np
import polars as pl
import pytest

import polars_dp as pdp
from polars_dp.counting.frequency import frequency_matrix
from polars_dp.domains.box import as_box
from polars_dp.kernels.morton import MortonLayout, grid_coordinates, morton_codes, resolution_bits
from polars_dp.mechanisms.spatial_tree import grow_tree
from polars_dp.noise import make_rng
from tests.helpers.engines import ATTRS, KINDS, brute_force, inputs, points, table


@pytest.mark.parametrize("kind", KINDS)
def test_every_input_kind_counts_the_same_cells(kind):
    frame = table()
    expected = brute_force(frame, ATTRS)
    np.testing.assert_array_equal(frequency_matrix(inputs(frame)[kind], ATTRS), expected)


@pytest.mark.parametrize("kind", KINDS)
def test_empty_input(kind):
    got = frequency_matrix(inputs(table().clear())[kind], ATTRS)
    assert got.shape == tuple(a.n_cells for a in ATTRS) and not got.any()


def _error(data, attrs, **kw):
    with pytest.raises(pdp.DomainError) as info:
        frequency_matrix(data, attrs, **kw)
    return str(info.value)


@pytest.mark.parametrize("column", ["age", "score", "job", "k"])
def test_bad_rows_raise_the_same_error_in_every_engine(column):
    frame = table()
    late = pl.int_range(pl.len()) >= 1500  # in a late batch of the streams
    if column == "age":
        frame = frame.with_columns(pl.when(late).then(None).otherwise(pl.col("age")).alias("age"))
    elif column == "score":
        frame = frame.with_columns(pl.when(late).then(pl.col("score") * 1.5).otherwise(pl.col("score")))
        frame = frame.with_columns(pl.when(pl.int_range(pl.len()) == 1999).then(float("nan"))
                                   .otherwise(pl.col("score")).alias("score"))
    elif column == "job":
        frame = frame.with_columns(pl.when(late).then(pl.lit("zz")).otherwise(pl.col("job")).alias("job"))
    else:
        frame = frame.with_columns(pl.when(late).then(4).otherwise(pl.col("k")).cast(pl.Int32).alias("k"))
    messages = {kind: _error(data, ATTRS) for kind, data in inputs(frame).items()}
    assert len(set(messages.values())) == 1, messages
    assert repr(column) in messages["polars"]


@pytest.mark.parametrize("kind", KINDS)
def test_drop_and_clamp_match_polars(kind):
    frame = table().with_columns(
        pl.when(pl.col("age") > 45).then(None).otherwise(pl.col("age")).alias("age"),
        pl.when(pl.col("score") > 0.9).then(float("nan")).otherwise(pl.col("score") * 1.2).alias("score"),
        (pl.col("x") * 1.5 - 2).alias("x"),
    )
    expected = frequency_matrix(frame, ATTRS, nulls="drop", on_out_of_domain="clamp")
    got = frequency_matrix(inputs(frame)[kind], ATTRS, nulls="drop", on_out_of_domain="clamp")
    np.testing.assert_array_equal(got, expected)
    assert 0 < got.sum() < frame.height


@pytest.mark.parametrize("kind", ["polars", "lazy", "arrow_reader", "duckdb"])
def test_count_column_equals_the_individual_rows(kind):
    frame = table()
    grouped = frame.group_by([a.column for a in ATTRS]).len("n")
    expected = frequency_matrix(frame, ATTRS)
    np.testing.assert_array_equal(frequency_matrix(inputs(grouped)[kind], ATTRS, count_column="n"), expected)


@pytest.mark.parametrize("kind", ["polars", "arrow_reader", "duckdb"])
@pytest.mark.parametrize(("values", "match"), [
    ([1, -2, 3], "negative"), ([1, None, 3], "null"), ([1.0, 2.5, 3.0], "integer"),
])
def test_bad_counts_raise_domain_error_naming_the_column(kind, values, match):
    frame = pl.DataFrame({"age": [1, 2, 3], "n": values})
    with pytest.raises(pdp.DomainError, match=rf"count column 'n' .*{match}"):
        frequency_matrix(inputs(frame)[kind], [pdp.Ordinal("age", 0, 10)], count_column="n")


def test_unsupported_input_lists_the_accepted_kinds():
    with pytest.raises(pdp.ParameterError, match=r"unsupported input builtins.dict; expected .*DuckDB.*Spark"
                       ):
        pdp.basic({"a": [1]}, [pdp.Ordinal("a", 0, 1)], epsilon=1.0)


@pytest.mark.parametrize("kind", ["duckdb", "arrow_reader"])
def test_missing_column_is_column_not_found(kind):
    frame = pl.DataFrame({"a": [1, 2]})
    with pytest.raises(pdp.ColumnNotFoundError, match=r"'b' is not in the input"):
        pdp.basic(inputs(frame)[kind], [pdp.Ordinal("b", 0, 1)], epsilon=1.0)
    with pytest.raises(pdp.ColumnNotFoundError, match=r"'b' is not in the input"):
        pdp.privtree(inputs(frame)[kind], ["a", "b"], bounds=[(0, 1), (0, 1)], epsilon=1.0)


def test_duckdb_column_type_is_checked_like_polars():
    rel = duckdb.sql("SELECT 'a' AS g, 1.5::DOUBLE AS k")
    with pytest.raises(pdp.ParameterError, match="categories are integers"):
        frequency_matrix(rel, [pdp.Nominal("k", categories=[1, 2])])
    with pytest.raises(pdp.ParameterError, match="an Ordinal attribute needs numbers"):
        frequency_matrix(rel, [pdp.Ordinal("g", 0, 1)])


def _same_release(a, b) -> None:
    ta, tb = a.to_arrow(), b.to_arrow()
    assert ta.schema.equals(tb.schema)
    assert ta.equals(tb)


@pytest.mark.parametrize("kind", KINDS)
def test_same_seed_same_release_for_every_mechanism(kind):
    frame = table()
    grid_attrs = ATTRS[:3]
    pts = points()
    box = {"bounds": [(0, 1), (-1, 1)], "epsilon": 1.0, "seed": 11}
    cases = [
        (pdp.basic, frame, (grid_attrs,), {"epsilon": 1.0, "seed": 11}),
        (pdp.privelet, frame, (grid_attrs,), {"epsilon": 1.0, "seed": 11, "untransformed": ["job"]}),
        (pdp.privtree, pts, (["x", "y"],), box),
        (pdp.uniform_grid, pts, (["x", "y"],), box),
        (pdp.adaptive_grid, pts, (["x", "y"],), box),
        (pdp.privelet_grid, pts, (["x", "y"],), {**box, "bits": 4}),
    ]
    for mechanism, rows, args, kw in cases:
        _same_release(mechanism(inputs(rows)[kind], *args, **kw), mechanism(rows, *args, **kw))


def test_weighted_finest_cells_grow_the_same_tree_as_the_snapped_points():
    pts = points(5000)
    b = as_box(["x", "y"], [(0, 1), (-1, 1)])
    for bits in (resolution_bits(2), 6):
        layout = MortonLayout(2, bits, 2)
        cells = grid_coordinates([pts["x"].to_numpy(), pts["y"].to_numpy()], b, bits)
        codes = np.sort(morton_codes(cells, bits))
        unique, counts = np.unique(codes, return_counts=True)
        assert unique.size < codes.size or bits > 6
        for noise, delta in (("float", 2.0 * np.log(4)), ("exact", 2.8125)):  # exact: on the 2^-20 grid
            kw = {"lam": 2.0, "delta": delta, "theta": 0.0, "noise": noise}
            one = grow_tree(codes, None, layout, rng=make_rng(3), **kw)
            weighted = grow_tree(unique, counts, layout, rng=make_rng(3), **kw)
            for u, v in zip(one, weighted, strict=True):
                np.testing.assert_array_equal(u, v)
        assert one[2].sum() == pts.height


def test_privtree_resolution_and_count_column():
    pts = points()
    coarse = pdp.privtree(pts, ["x", "y"], bounds=[(0, 1), (-1, 1)], epsilon=1.0, seed=2, resolution=5)
    assert coarse.params["resolution_bits"] == 5 and coarse.depth.max() <= 5
    grouped = pts.group_by(["x", "y"]).len("n")
    _same_release(pdp.privtree(grouped, ["x", "y"], bounds=[(0, 1), (-1, 1)], epsilon=1.0, seed=2,
                               count_column="n"),
                  pdp.privtree(pts, ["x", "y"], bounds=[(0, 1), (-1, 1)], epsilon=1.0, seed=2))
    with pytest.raises(pdp.ParameterError, match="resolution"):
        pdp.privtree(pts, ["x", "y"], bounds=[(0, 1), (-1, 1)], epsilon=1.0, resolution=40)


def test_spatial_errors_match_across_engines():
    pts = points().with_columns(pl.when(pl.col("x") > 0.9).then(1.5).otherwise(pl.col("x")).alias("x"))
    messages = set()
    for data in inputs(pts).values():
        with pytest.raises(pdp.DomainError, match=r"'x' has \d+ value\(s\) outside the declared bounds") as e:
            pdp.privtree(data, ["x", "y"], bounds=[(0, 1), (-1, 1)], epsilon=1.0)
        messages.add(str(e.value))
    assert len(messages) == 1


@pytest.mark.parametrize("mechanism", [pdp.privtree, pdp.uniform_grid, pdp.adaptive_grid, pdp.privelet_grid])
@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
def test_count_column_gives_the_release_of_the_individual_points(mechanism, neighbours):
    pts = pl.concat([points(1500), points(1500).head(400)])  # repeated points
    grouped = pts.group_by(["x", "y"]).len("n")
    assert grouped.height < pts.height
    kw = {"bounds": [(0, 1), (-1, 1)], "epsilon": 1.0, "seed": 8, "neighbours": neighbours}
    rel = duckdb.connect().from_arrow(grouped.to_arrow())
    _same_release(mechanism(rel, ["x", "y"], count_column="n", **kw), mechanism(pts, ["x", "y"], **kw))
    with pytest.raises(pdp.DomainError, match="count column 'n' has a negative count"):
        mechanism(grouped.with_columns(pl.col("n").cast(pl.Int64) - 2), ["x", "y"], count_column="n", **kw)


@pytest.mark.parametrize("kind", ["duckdb", "arrow_reader"])
@pytest.mark.parametrize(("attribute", "values"), [
    (pdp.Ordinal("v", 0.0, 1.0, width=0.1), [0.0, 0.05, 0.1, 0.3, 0.7, 0.99, 1.0, 0.6000000000000001]),
    (pdp.Ordinal("v", 0, 10, width=5), [0.0, 4.0, 5.0, 10.0]),            # integer domain, float column
    (pdp.Ordinal("v", -3, 3, width=2), [-3, -2, -1, 0, 3]),                # exact integer arithmetic
    (pdp.Ordinal("v", -1e6, 1e6, width=1e6 / 7), [-1e6, 0.0, 1e6 / 7, 3e6 / 7, 1e6]),
    (pdp.Nominal("v", categories=[True, False]), [False, True, True]),
    (pdp.Nominal("v", categories=[-5, 100, 7]), [7, -5, 100]),
])
def test_sql_cells_equal_polars_cells_at_bin_boundaries(kind, attribute, values):
    frame = pl.DataFrame({"v": values})
    np.testing.assert_array_equal(frequency_matrix(inputs(frame)[kind], [attribute]),
                                  frequency_matrix(frame, [attribute]))


def test_namespace_exposes_the_new_options():
    assert "count_column" in inspect.signature(pl.DataFrame({"a": [1]}).dp.basic).parameters
    assert "resolution" in inspect.signature(pl.DataFrame({"a": [1]}).dp.privtree).parameters


def test_sparse_accumulator_keeps_one_unweighted_piece_raw_and_merges_mixed_pieces():
    """One unweighted piece: its keys sorted, repeats kept, counts None (PrivTree reads them as
    one point per key).  Several pieces, weighted or not: sorted unique keys, summed counts."""
    from polars_dp.counting.aggregate import Accumulator

    keys = np.array([9, 3, 3, 7, 9, 9])
    acc = Accumulator(16, dense=False)
    acc.add(keys)
    ordered, counts = acc.sparse()
    assert ordered.tolist() == [3, 3, 7, 9, 9, 9] and counts is None
    acc.add(np.array([7, 1]), np.array([2.0, 5.0]))
    acc.add(np.array([3]))
    u, c = acc.sparse()
    assert u.tolist() == [1, 3, 7, 9] and c.tolist() == [5, 3, 3, 3] and c.dtype == np.int64
