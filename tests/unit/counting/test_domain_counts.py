from __future__ import annotations

import itertools

import numpy as np
import polars as pl
import pytest

import polars_dp as pdp
from polars_dp.counting import frequency
from polars_dp.counting.frequency import frequency_matrix
from polars_dp.domains import size


def cells(attribute, values, dtype=None):
    frame = pl.DataFrame({attribute.column: values}, schema={attribute.column: dtype} if dtype else None)
    return frame.select(attribute.index_expr(frame.schema[attribute.column])).to_series().to_list()


@pytest.mark.parametrize(
    ("lo", "hi", "width", "expected"),
    [(0, 100, 1, 101), (0, 100, 10, 11), (0, 99, 10, 10), (5, 5, 1, 1), (-3, 3, 2, 4),
     (0.0, 1.0, 0.1, 11), (0.0, 1.0, 0.25, 5), (0.0, 0.95, 0.1, 10)],
)
def test_ordinal_cell_count(lo, hi, width, expected):
    assert pdp.Ordinal("x", lo, hi, width).n_cells == expected


def test_ordinal_integer_binning_at_boundaries():
    a = pdp.Ordinal("age", 0, 100, width=10)
    assert cells(a, [0, 9, 10, 99, 100, -1, 101]) == [0, 0, 1, 9, 10, None, None]
    b = pdp.Ordinal("t", -3, 3, width=2)
    assert cells(b, [-3, -2, -1, 0, 3]) == [0, 0, 1, 1, 3]


def test_ordinal_float_binning_absorbs_decimal_rounding():
    a = pdp.Ordinal("x", 0.0, 1.0, width=0.1)
    # 0.3 / 0.1 = 2.9999999999999996 in binary floating point: it must still land in cell 3
    assert cells(a, [0.0, 0.05, 0.1, 0.3, 0.7, 0.99, 1.0]) == [0, 0, 1, 3, 7, 9, 10]
    assert cells(a, [float("nan"), -0.01, 1.0001, None], pl.Float64) == [None, None, None, None]
    np.testing.assert_array_equal(a.value_to_cell([0.0, 0.3, 1.0]), [0, 3, 10])
    np.testing.assert_allclose(a.cell_labels()[:4], [0.0, 0.1, 0.2, 0.3])


def test_ordinal_float_column_with_integer_domain():
    """An integer domain holds whole numbers: a fraction is outside it unless clamped (floored)."""
    a = pdp.Ordinal("x", 0, 10, width=5)
    assert cells(a, [0.0, 4.99, 5.0, 10.0, 10.5]) == [0, None, 1, 2, None]
    frame = pl.DataFrame({"x": [0.0, 4.99, 5.0, 10.0, 10.5, -1.5]})
    clamped = frame.select(a.index_expr(pl.Float64, clamp=True)).to_series().to_list()
    assert clamped == [0, 0, 1, 2, 2, 0]


def test_nominal_cells_follow_dfs_order_and_accept_categoricals():
    h = pdp.Hierarchy.from_dict({"g1": ["b", "a"], "g2": ["c"]})
    a = pdp.Nominal("n", h)
    assert cells(a, ["a", "b", "c", "zz", None]) == [1, 0, 2, None, None]
    assert cells(a, ["a", "c"], pl.Categorical) == [1, 2]
    ints = pdp.Nominal("k", categories=[3, 1, 2])
    assert cells(ints, [1, 2, 3, 4], pl.Int8) == [1, 2, 0, None]
    flags = pdp.Nominal("f", categories=[False, True])
    assert cells(flags, [True, False]) == [1, 0]


@pytest.mark.parametrize("n_leaves", [3, 40])  # comparisons (few leaves) and the Enum lookup
@pytest.mark.parametrize("kind", ["categorical", "enum_reordered", "enum_extra", "enum_missing"])
def test_categorical_and_enum_columns_get_the_cells_of_their_labels(n_leaves, kind):
    """A Categorical or Enum column is compared by label, not by its physical codes: an Enum
    whose categories are in another order, or hold values outside the domain, gives the same
    cells as the String column (unknown labels and nulls have no cell)."""
    leaves = [f"v{i}" for i in range(n_leaves)]
    a = pdp.Nominal("n", categories=leaves)
    values = [leaves[-1], "zz", None, leaves[0], leaves[1], leaves[-1]]
    dtype = {"categorical": pl.Categorical, "enum_reordered": pl.Enum(["zz", *reversed(leaves)]),
             "enum_extra": pl.Enum([*leaves, "zz"]),
             "enum_missing": pl.Enum([leaves[-1], "zz", leaves[0], leaves[1]])}[kind]  # no other leaf
    expected = [n_leaves - 1, None, None, 0, 1, n_leaves - 1]
    assert cells(a, values) == expected
    assert cells(a, values, dtype) == expected


def test_enum_without_any_leaf_has_no_cell_on_every_row():
    a = pdp.Nominal("n", categories=["a", "b"])
    assert cells(a, ["zz", None, "zz"], pl.Enum(["zz"])) == [None, None, None]


def test_nominal_type_mismatch_is_explained():
    with pytest.raises(pdp.ParameterError, match="categories are integers"):
        frequency_matrix(pl.DataFrame({"k": ["1"]}), [pdp.Nominal("k", categories=[1, 2])])
    with pytest.raises(pdp.ParameterError, match="mix types"):
        pdp.Nominal("k", categories=[1, "a"])


def brute_force(frame: pl.DataFrame, attrs) -> np.ndarray:
    """Count row by row with plain Python (test oracle only)."""
    out = np.zeros([a.n_cells for a in attrs])
    label_pos = [{v: i for i, v in enumerate(a.cell_labels())} if a.kind == "nominal" else None
                 for a in attrs]
    for row in frame.iter_rows():
        idx = []
        for a, pos, v in zip(attrs, label_pos, row, strict=True):
            idx.append(pos[v] if pos is not None else int(np.floor((v - a.lo) / a.width + 1e-9)))
        out[tuple(idx)] += 1
    return out


@pytest.mark.parametrize("lazy", [False, True])
def test_frequency_matrix_equals_brute_force(lazy):
    rng = np.random.default_rng(7)
    n = 3000
    h = pdp.Hierarchy.from_dict({"x": ["p", "q", "r"], "y": {"y1": ["s"], "y2": ["t", "u"]}})
    frame = pl.DataFrame({
        "age": rng.integers(0, 50, n),
        "job": rng.choice(list(h.leaves), n),
        "score": rng.uniform(-1.0, 1.0, n),
    })
    attrs = [pdp.Ordinal("age", 0, 49, width=7), pdp.Nominal("job", h), pdp.Ordinal("score", -1.0, 1.0, 0.25)]
    got = frequency_matrix(frame.lazy() if lazy else frame, attrs)
    assert got.shape == (8, 6, 9)
    assert got.sum() == n
    np.testing.assert_array_equal(got, brute_force(frame, attrs))


def test_frequency_matrix_accepts_arrow_and_empty_input():
    frame = pl.DataFrame({"a": [1, 2, 2]})
    attrs = [pdp.Ordinal("a", 0, 3)]
    np.testing.assert_array_equal(frequency_matrix(frame.to_arrow(), attrs), [0, 1, 2, 0])
    np.testing.assert_array_equal(frequency_matrix(frame.clear(), attrs), [0, 0, 0, 0])


def test_bad_rows_raise_domain_error_naming_column_and_value():
    attrs = [pdp.Ordinal("age", 0, 100), pdp.Nominal("g", categories=["f", "m"])]
    ok = {"age": [1, 2], "g": ["f", "m"]}
    with pytest.raises(pdp.DomainError, match=r"'age' has 1 value\(s\) outside .*\[0, 100\].*'150'"):
        frequency_matrix(pl.DataFrame({**ok, "age": [1, 150]}), attrs)
    with pytest.raises(pdp.DomainError, match=r"'g' has 1 value\(s\) outside .*'x'"):
        frequency_matrix(pl.DataFrame({**ok, "g": ["f", "x"]}), attrs)
    with pytest.raises(pdp.DomainError, match=r"'age' has 1 null"):
        frequency_matrix(pl.DataFrame({**ok, "age": [1, None]}), attrs)
    with pytest.raises(pdp.DomainError, match=r"'x' has 1 null or NaN"):
        frequency_matrix(pl.DataFrame({"x": [0.5, float("nan")]}), [pdp.Ordinal("x", 0.0, 1.0, 0.5)])


def test_opt_ins_drop_nulls_and_clamp_ordinals():
    frame = pl.DataFrame({"age": [-5, 3, None, 500], "x": [0.1, float("nan"), 0.2, 0.3]})
    attrs = [pdp.Ordinal("age", 0, 10), pdp.Ordinal("x", 0.0, 1.0, 0.5)]
    m = frequency_matrix(frame, attrs, nulls="drop", on_out_of_domain="clamp")
    assert m.sum() == 2  # rows 2 and 3 had a null / NaN
    assert m[0, 0] == 1 and m[10, 0] == 1
    got = frequency_matrix(pl.DataFrame({"g": ["f", "x"]}), [pdp.Nominal("g", categories=["f"])],
                           on_out_of_domain="clamp")  # no nearest category: the row is dropped
    np.testing.assert_array_equal(got, [1])


def test_clamp_in_a_mixed_table_clamps_ordinals_and_drops_unknown_categories():
    attrs = [pdp.Ordinal("age", 0, 10), pdp.Nominal("g", categories=["f", "m"])]
    frame = pl.DataFrame({"age": [-5, 3, 500, 500], "g": ["f", "m", "m", "x"]})
    m = frequency_matrix(frame, attrs, on_out_of_domain="clamp")
    assert m[0, 0] == 1 and m[3, 1] == 1 and m[10, 1] == 1 and m.sum() == 3
    with pytest.raises(pdp.DomainError, match=r"'g' has 1 value\(s\) outside .*'x'.*on_out_of_domain='drop'"):
        frequency_matrix(pl.DataFrame({"age": [5], "g": ["x"]}), attrs)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: pdp.Ordinal("a", 0, 10, width=0), "width .* must be > 0"),
        (lambda: pdp.Ordinal("a", 0, 10, width=-1), "width .* must be > 0"),
        (lambda: pdp.Ordinal("a", 10, 0), "hi < lo"),
        (lambda: pdp.Ordinal("a", 0, float("inf")), "finite"),
        (lambda: pdp.Ordinal("a", "0", 10), "must be a number"),
        (lambda: pdp.Ordinal("a", 0.0, 1e300, 1e-300), "too many cells"),
        (lambda: pdp.Nominal("a"), "exactly one of"),
        (lambda: pdp.Nominal("a", categories="abc"), "not a string"),
    ],
)
def test_bad_declarations(make, match):
    with pytest.raises(pdp.ParameterError, match=match):
        make()


def test_missing_column_and_repeated_attribute():
    frame = pl.DataFrame({"a": [1]})
    with pytest.raises(pdp.ColumnNotFoundError, match=r"'b' is not in the input; available columns: \['a'\]"):
        frequency_matrix(frame, [pdp.Ordinal("b", 0, 1)])
    with pytest.raises(pdp.ParameterError, match="declared twice"):
        frequency_matrix(frame, [pdp.Ordinal("a", 0, 1), pdp.Ordinal("a", 0, 1)])
    with pytest.raises(pdp.ParameterError, match="not an attribute declaration"):
        frequency_matrix(frame, ["a"])


def test_domain_too_large_is_refused_before_allocating():
    attrs = [pdp.Ordinal(c, 0, 99_999) for c in "abcd"]  # 1e20 cells
    with pytest.raises(pdp.DomainTooLargeError, match=r"100,000,000,000,000,000,000 cells"):
        frequency_matrix(pl.DataFrame({c: [0] for c in "abcd"}), attrs)
    # one rule, shared with the plans' workloads (polars_dp.domains.size), re-exported here
    assert frequency.check_domain_size is size.check_domain_size


def test_all_cells_enumerated_in_c_order():
    attrs = [pdp.Ordinal("a", 0, 2), pdp.Ordinal("b", 0, 3)]
    rows = list(itertools.product(range(3), range(4)))
    frame = pl.DataFrame(rows, schema=["a", "b"], orient="row")
    weights = np.arange(12)
    frame = frame.select(pl.all().repeat_by(pl.Series(weights)).explode())
    np.testing.assert_array_equal(frequency_matrix(frame, attrs).reshape(-1), weights)


def test_column_types_are_the_schemas_for_the_columns_read():
    from polars_dp.counting.engines.polars import column_types
    from polars_dp.counting.spec import CountSpec
    frame = pl.DataFrame({"a": [1], "b": ["x"], "w": pl.Series([2], dtype=pl.UInt16), "z": [0.5]})
    spec = CountSpec.make([pdp.Ordinal("a", 0, 1), pdp.Nominal("b", categories=["x"])], count_column="w")
    assert column_types(frame, spec) == {c: frame.schema[c] for c in ("a", "b", "w")}
    missing = CountSpec.make([pdp.Ordinal("a", 0, 1)], count_column="n")
    with pytest.raises(pdp.ColumnNotFoundError, match=r"'n' is not in the input; available columns: "
                                                      r"\['a', 'b', 'w', 'z'\]"):
        column_types(frame, missing)
