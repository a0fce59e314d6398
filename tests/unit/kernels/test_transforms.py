"""Wavelet kernels: paper definitions, generalised sensitivity, round trips, exact variances."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from polars_dp import Hierarchy, Nominal, Ordinal
from polars_dp.errors import HierarchyError, ParameterError, QueryError
from polars_dp.kernels import wavelet_blocks as TB
from polars_dp.kernels import wavelet_variance as TV
from polars_dp.kernels import wavelets as T

HIERARCHIES = {
    "flat": Hierarchy.flat(["a", "b", "c", "d", "e"]),
    "uneven": Hierarchy.from_dict({"g1": ["a", "b", "c"], "g2": ["d", "e", "f", "g", "h"], "g3": ["i", "j"]}),
    "unbalanced": Hierarchy.from_dict(["solo", {"g": ["a", {"deep": ["x", "y", "z"]}]}, {"h": ["p", "q"]}]),
    "collapsed": Hierarchy.from_dict({"a": {"a1": ["x", "y"]}, "b": ["z", "w"], "c": {"c1": {"c2": ["v"]}}}),
    "two": Hierarchy.flat([0, 1]),
}
EXPECTED_HEIGHT = {"flat": 2, "uneven": 3, "unbalanced": 4, "collapsed": 3, "two": 2}


def census_occupation() -> Hierarchy:
    return Hierarchy.from_dict({f"g{i}": [f"o{i}_{j}" for j in range(64)] for i in range(8)})


def expected_p(a) -> int:
    """P(A) stated independently: 1 + ceil(log2 |A|) (ordinal) or the listed height (nominal)."""
    if isinstance(a, Nominal):
        return next(EXPECTED_HEIGHT[k] for k, h in HIERARCHIES.items() if h is a.hierarchy)
    return 1 + int(np.ceil(np.log2(a.n_cells)))


# ---------------------------------------------------------------- reference definitions (loops)
def paper_haar(x: np.ndarray) -> np.ndarray:
    """The paper's normalised Haar coefficients of a 2^l vector, level order (Sec. IV-A)."""
    p = x.size
    out = [x.mean()]
    w = p
    while w > 1:
        for a in range(0, p, w):
            out.append((x[a:a + w // 2].mean() - x[a + w // 2:a + w].mean()) / 2)
        w //= 2
    return np.array(out)


def paper_nominal(x: np.ndarray, h: Hierarchy) -> np.ndarray:
    """The paper's nominal coefficients: total, then leafsum - sibling mean (Sec. IV-B)."""
    ls = np.array([x[a:b].sum() for a, b in zip(h.node_start, h.node_stop, strict=True)])
    out = [ls[0]]
    for n in range(1, h.n_nodes):
        sibs = np.flatnonzero(h.node_parent == h.node_parent[n])
        out.append(ls[n] - ls[sibs].mean())
    return np.array(out)


def inverse_map(attribute) -> np.ndarray:
    """Rows: the cells produced by the inverse of each unit coefficient (explicit linear map)."""
    n = T.coefficient_count(attribute)
    return T.inverse(np.eye(n), attribute, axis=1)


def all_ranges(m: int) -> tuple[np.ndarray, np.ndarray]:
    s, t = np.triu_indices(m + 1, 1)
    return s, t


# ---------------------------------------------------------------- definitions and weights
def test_haar_weights_follow_the_paper_example():
    # Sec. IV-A: for m = 8, c0, c1, c2 and c4 have weights 8, 8, 4 and 2
    w = T.haar_weights(8)
    assert (w[0], w[1], w[2], w[4]) == (8, 8, 4, 2)
    assert w.size == 8


@pytest.mark.parametrize("m", [1, 2, 3, 4, 5, 7, 8, 13, 16])
def test_haar_forward_is_weighted_paper_transform(m):
    x = np.random.default_rng(m).integers(0, 20, m).astype(float)
    p = T.haar_padded_length(m)
    padded = np.zeros(p)
    padded[:m] = x
    np.testing.assert_allclose(T.haar_forward(x) / T.haar_weights(m), paper_haar(padded), atol=1e-12)


@pytest.mark.parametrize("name", sorted(HIERARCHIES))
def test_nominal_forward_is_weighted_paper_transform(name):
    h = HIERARCHIES[name]
    x = np.random.default_rng(1).integers(0, 20, h.n_leaves).astype(float)
    np.testing.assert_allclose(T.nominal_forward(x, h) / T.nominal_weights(h), paper_nominal(x, h),
                               atol=1e-12)


def test_nominal_weights_are_f_over_2f_minus_2():
    h = HIERARCHIES["uneven"]  # root fanout 3; groups of 3, 5, 2
    w = T.nominal_weights(h)
    assert w[0] == 1
    np.testing.assert_allclose(w[1:4], 3 / 4)
    np.testing.assert_allclose(w[4:7], 3 / 4)      # children of g1 (fanout 3)
    np.testing.assert_allclose(w[7:12], 5 / 8)     # children of g2 (fanout 5)
    np.testing.assert_allclose(w[12:14], 1.0)      # children of g3 (fanout 2)


# ---------------------------------------------------------------- generalised sensitivity
def weighted_l1_of_unit_changes(attribute) -> np.ndarray:
    """sum_c W(c) |delta c| for every unit change e_x, from the paper's normalised c."""
    m = attribute.n_cells
    delta_c = T.forward(np.eye(m), attribute, axis=1) / T.weights(attribute)
    return (T.weights(attribute) * np.abs(delta_c)).sum(axis=1)


@pytest.mark.parametrize("m", range(1, 65))
def test_haar_generalized_sensitivity_is_one_plus_log2_padded(m):
    l1 = weighted_l1_of_unit_changes(Ordinal("x", 0, m - 1))
    expected = expected_p(Ordinal("x", 0, m - 1))
    assert l1.max() == pytest.approx(expected, abs=1e-9)
    assert T.generalized_sensitivity(Ordinal("x", 0, m - 1)) == expected


@pytest.mark.parametrize("name", sorted(HIERARCHIES))
def test_nominal_generalized_sensitivity_is_height(name):
    h = HIERARCHIES[name]
    attr = Nominal("n", h)
    assert h.height == EXPECTED_HEIGHT[name]
    l1 = weighted_l1_of_unit_changes(attr)
    assert l1.max() == pytest.approx(h.height, abs=1e-9)
    assert T.generalized_sensitivity(attr) == h.height


def test_nominal_unbalanced_leaf_sensitivity_is_its_depth():
    h = HIERARCHIES["unbalanced"]
    attr = Nominal("n", h)
    l1 = weighted_l1_of_unit_changes(attr)
    assert l1[list(h.leaves).index("solo")] == pytest.approx(2)  # a leaf just below the root
    assert l1[list(h.leaves).index("x")] == pytest.approx(4)


def unit_change_coefficients(attrs, transformed) -> np.ndarray:
    """Row x: the unnormalised HN coefficients of the unit matrix e_x (flattened)."""
    shape = tuple(a.n_cells for a in attrs)
    n = int(np.prod(shape))
    x = np.eye(n).reshape(n, *shape)
    for axis, (a, t) in enumerate(zip(attrs, transformed, strict=True)):
        if t:
            x = T.forward(x, a, axis + 1)
    return x.reshape(n, -1)


def unit_change_l1_nd(attrs, transformed) -> np.ndarray:
    """Weighted L1 (= L1 of unnormalised coefficients) of every unit change of an n-d matrix."""
    return np.abs(unit_change_coefficients(attrs, transformed)).sum(axis=1)


HN_CASES = [
    ([Ordinal("a", 0, 7), Nominal("b", HIERARCHIES["uneven"])], [True, True]),
    ([Ordinal("a", 0, 4), Ordinal("b", 0, 2)], [True, True]),
    ([Nominal("a", HIERARCHIES["unbalanced"]), Ordinal("b", 0, 5)], [True, True]),
    ([Ordinal("a", 0, 5), Nominal("b", HIERARCHIES["flat"]), Ordinal("c", 0, 2)], [True, False, True]),
    ([Ordinal("a", 0, 3), Nominal("b", HIERARCHIES["collapsed"])], [False, True]),
    ([Ordinal("a", 0, 3), Ordinal("b", 0, 2)], [False, False]),
]


@pytest.mark.parametrize(("attrs", "transformed"), HN_CASES)
def test_hn_generalized_sensitivity_is_product_over_transformed_axes(attrs, transformed):
    rho = 1
    for a, t in zip(attrs, transformed, strict=True):
        if t:
            rho *= expected_p(a)
    l1 = unit_change_l1_nd(attrs, transformed)
    assert l1.max() == pytest.approx(rho, abs=1e-9)


@pytest.mark.parametrize(("attrs", "transformed"), HN_CASES[:4])
def test_replacing_a_row_changes_coefficients_by_at_most_two_rho(attrs, transformed):
    u = unit_change_coefficients(attrs, transformed)
    rho = np.abs(u).sum(axis=1).max()
    x, y = np.triu_indices(u.shape[0], 1)
    l1 = np.abs(u[y] - u[x]).sum(axis=1)  # M' = M - e_x + e_y
    assert l1.max() <= 2 * rho + 1e-9


# ---------------------------------------------------------------- round trips
@pytest.mark.parametrize("m", [1, 2, 3, 6, 8, 11, 33])
def test_haar_round_trip_along_each_axis(m):
    x = np.random.default_rng(m).integers(0, 50, (3, m, 5)).astype(float)
    for axis, arr in ((1, x), (0, np.moveaxis(x, 1, 0)), (2, np.moveaxis(x, 1, 2))):
        u = T.haar_forward(arr, axis)
        assert u.shape[axis] == T.haar_padded_length(m)
        np.testing.assert_allclose(T.haar_inverse(u, m, axis), arr, atol=1e-9)


@pytest.mark.parametrize("name", sorted(HIERARCHIES))
def test_nominal_round_trip(name):
    h = HIERARCHIES[name]
    x = np.random.default_rng(2).integers(0, 50, (4, h.n_leaves, 3)).astype(float)
    u = T.nominal_forward(x, h, axis=1)
    assert u.shape == (4, h.n_nodes, 3)
    np.testing.assert_allclose(T.nominal_inverse(u, h, axis=1), x, atol=1e-9)


def test_hn_round_trip_mixed_and_padded():
    attrs = [Ordinal("a", 0, 5), Nominal("b", HIERARCHIES["unbalanced"]), Ordinal("c", 0, 2)]
    x = np.random.default_rng(3).integers(0, 9, tuple(a.n_cells for a in attrs)).astype(float)
    for transformed in ([True, True, True], [False, True, True], [True, False, True]):
        u = T.hn_forward(x, attrs, transformed)
        np.testing.assert_allclose(TB.hn_inverse(u, attrs, transformed), x, atol=1e-9)


def test_nominal_inverse_subtracts_sibling_group_means():
    h = HIERARCHIES["uneven"]
    x = np.random.default_rng(4).integers(0, 9, h.n_leaves).astype(float)
    u = T.nominal_forward(x, h)
    shift = np.zeros(h.n_nodes)
    for p in np.unique(h.node_parent[1:]):  # a constant per sibling group is removed
        shift[h.node_parent == p] = 10.0 + p
    np.testing.assert_allclose(T.nominal_inverse(u + shift, h), x, atol=1e-9)
    shift[1] += 3.0  # not constant within the root's children: changes the answer
    assert not np.allclose(T.nominal_inverse(u + shift, h), x)


def test_single_leaf_hierarchy_cannot_be_transformed():
    with pytest.raises(HierarchyError, match="single leaf"):
        T.nominal_forward(np.ones(1), Hierarchy.flat(["only"]))


def test_shape_mismatch_is_reported():
    with pytest.raises(ParameterError, match="Haar coefficients"):
        T.haar_inverse(np.ones(5), 5)
    with pytest.raises(ParameterError, match="leaves"):
        T.nominal_forward(np.ones(3), HIERARCHIES["flat"])


# ---------------------------------------------------------------- exact variances
def explicit_factor(attribute, s: np.ndarray, t: np.ndarray) -> np.ndarray:
    r = inverse_map(attribute)
    cum = np.concatenate([np.zeros((r.shape[0], 1)), np.cumsum(r, axis=1)], axis=1)
    a = cum[:, t] - cum[:, s]  # weight of each unit-noise coefficient in each range sum
    return (a**2).sum(axis=0)


@pytest.mark.parametrize("m", [1, 2, 3, 5, 8, 12, 16, 21])
def test_haar_range_variance_factor_equals_explicit_map(m):
    attr = Ordinal("x", 0, m - 1)
    s, t = all_ranges(m)
    np.testing.assert_allclose(TV.range_variance_factor(attr, s, t), explicit_factor(attr, s, t),
                               rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", sorted(HIERARCHIES))
def test_nominal_range_variance_factor_equals_explicit_map(name):
    attr = Nominal("n", HIERARCHIES[name])
    s, t = all_ranges(attr.n_cells)
    np.testing.assert_allclose(TV.range_variance_factor(attr, s, t), explicit_factor(attr, s, t),
                               rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("m", [2, 3, 8, 16, 33, 64])
def test_haar_variance_within_eq4(m):
    # Eq. 4 / Lemma 3: Var <= (2 + log2 P) lambda^2, i.e. f = Var / (2 lambda^2) <= (2 + l) / 2
    attr = Ordinal("x", 0, m - 1)
    f = explicit_factor(attr, *all_ranges(m))
    assert f.max() <= (2 + T.haar_levels(m)) / 2 + 1e-12
    assert T.variance_factor_bound(attr) == (2 + T.haar_levels(m)) / 2


@pytest.mark.parametrize(("m", "worst"), [(8, 2.375), (16, 2.844), (64, 3.725)])
def test_haar_worst_range_matches_independent_check(m, worst):
    # worst range variance / lambda^2 from the spec's numerical verification (verify/ script)
    f = TV.range_variance_factor(Ordinal("x", 0, m - 1), *all_ranges(m))
    assert 2 * f.max() == pytest.approx(worst, abs=5e-4)


@pytest.mark.parametrize("name", sorted(HIERARCHIES))
def test_nominal_node_query_variance_within_eq6(name):
    # Eq. 6 / Lemma 5: a query for the leaves under one node has Var <= 8 lambda^2 (f <= 4)
    h = HIERARCHIES[name]
    f = explicit_factor(Nominal("n", h), h.node_start, h.node_stop)
    assert f.max() <= 4 + 1e-12


def test_census_occupation_node_variance_close_to_eq6():
    # the spec's check: 512 leaves, fanouts 8 x 64, worst node query 7.63 lambda^2 <= 8 lambda^2
    h = census_occupation()
    f = TV.range_variance_factor(Nominal("occ", h), h.node_start, h.node_stop)
    assert 2 * f.max() == pytest.approx(7.632, abs=1e-3)
    assert f.max() <= 4


def rectangle_factor_explicit(attrs, transformed) -> tuple[np.ndarray, list]:
    """Exact variance factor of every rectangle query from the explicit n-d inverse map."""
    coef = [T.coefficient_count(a) if t else a.n_cells for a, t in zip(attrs, transformed, strict=True)]
    n = int(np.prod(coef))
    r = np.eye(n).reshape(n, *coef)
    for axis in reversed(range(len(attrs))):
        if transformed[axis]:
            r = T.inverse(r, attrs[axis], axis + 1)
    rects = list(itertools.product(*(zip(*all_ranges(a.n_cells), strict=True) for a in attrs)))
    out = np.empty(len(rects))
    for i, rect in enumerate(rects):
        sel = (slice(None), *(slice(s, t) for s, t in rect))
        out[i] = (r[sel].reshape(n, -1).sum(axis=1) ** 2).sum()
    return out, rects


@pytest.mark.parametrize(("attrs", "transformed"), [
    ([Ordinal("a", 0, 4), Nominal("b", HIERARCHIES["uneven"])], [True, True]),
    ([Ordinal("a", 0, 5), Ordinal("b", 0, 3)], [True, True]),
    ([Ordinal("a", 0, 3), Nominal("b", HIERARCHIES["flat"])], [False, True]),
    ([Nominal("a", HIERARCHIES["unbalanced"]), Ordinal("b", 0, 6)], [True, False]),
])
def test_multidimensional_variance_factorises_and_is_within_theorem3_eq7(attrs, transformed):
    exact, rects = rectangle_factor_explicit(attrs, transformed)
    product = np.ones(len(rects))
    for axis, (a, t) in enumerate(zip(attrs, transformed, strict=True)):
        s = np.array([r[axis][0] for r in rects])
        e = np.array([r[axis][1] for r in rects])
        product *= TV.range_variance_factor(a, s, e) if t else (e - s)
    np.testing.assert_allclose(exact, product, rtol=1e-9)
    # Theorem 3 (all transformed) and Eq. 7 (Privelet+): f <= prod_{S_A} |A| * prod_{others} H(A),
    # stated for range queries: ordinal intervals and nominal node ranges
    node_ranges = [set(zip(a.hierarchy.node_start.tolist(), a.hierarchy.node_stop.tolist(), strict=True))
                   if isinstance(a, Nominal) and t else None for a, t in zip(attrs, transformed, strict=True)]
    keep = np.array([all(nr is None or r[k] in nr for k, nr in enumerate(node_ranges)) for r in rects])
    bound = 1.0
    for a, t in zip(attrs, transformed, strict=True):
        bound *= T.variance_factor_bound(a) if t else a.n_cells
    assert keep.any()
    assert exact[keep].max() <= bound + 1e-9


def test_range_variance_factor_rejects_bad_ranges():
    attr = Ordinal("x", 0, 9)
    with pytest.raises(QueryError, match="outside"):
        TV.range_variance_factor(attr, [0], [11])
    with pytest.raises(QueryError, match="empty"):
        TV.range_variance_factor(attr, [4], [4])


@pytest.mark.parametrize(("starts", "stops"), [([[0, 0]], [[5]]), ([[0]], [[5]]), ([[[0, 0]]], [[[5, 5]]])])
def test_axis_ranges_refuse_a_shape_other_than_one_column_per_attribute(starts, stops):
    """A wrong shape was an IndexError from inside the kernel (or a silent misread)."""
    attrs = [Ordinal("a", 0, 9), Ordinal("b", 0, 9)]
    with pytest.raises(QueryError, match=r"shape \(queries, 2\), one column per attribute \(a, b\)"):
        TV.axis_ranges(attrs, starts, stops)
    assert [r.starts.tolist() for r in TV.axis_ranges(attrs, [[0, 1]], [[5, 6]])] == [[0], [1]]
