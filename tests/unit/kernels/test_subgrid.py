"""Kernels of PrivTree leaves with noisy sub-grids: budget split, sub-grid sizes, sub-cells in
Morton order, consistent counts and their exact noise variance (issue 41)."""

import math
from fractions import Fraction

import numpy as np
import pytest

from polars_dp.domains.box import as_box
from polars_dp.errors import ParameterError
from polars_dp.kernels.morton import MortonLayout, grid_coordinates, morton_codes, overlap_fraction
from polars_dp.kernels.spatial_sums import child_boxes, morton_tree_sums
from polars_dp.kernels.subgrid import (
    TREE_SHARE,
    consistent_counts,
    subcell_bits,
    subcell_halvings,
    subcell_layout,
    subcells,
    subgrid_answer_variance,
    subgrid_budget,
    subgrid_fraction_sums,
)
from polars_dp.releases.tree_levels import noise_variance
from tests.helpers.morton import random_leaves


# ------------------------------------------------------------------ budget
@pytest.mark.parametrize("epsilon", [0.05, 0.4, 1.6, Fraction(1, 3)])
def test_budget_split_is_exact_and_sums_to_epsilon(epsilon):
    b = subgrid_budget(epsilon, "add_remove", tree_share=TREE_SHARE)
    eps = Fraction(epsilon)
    assert b.epsilon_tree == eps * Fraction(0.2)
    assert b.epsilon_leaf == (eps - b.epsilon_tree) * Fraction(0.5)
    assert b.epsilon_tree + b.epsilon_leaf + b.epsilon_sub == eps
    assert math.isclose(float(b.epsilon_leaf), 0.4 * float(eps)) and math.isclose(float(b.epsilon_sub),
                                                                                   0.4 * float(eps))
    assert (b.sensitivity, b.tree_group) == (1, 1)
    assert b.leaf_scale == 1 / b.epsilon_leaf and b.sub_scale == 1 / b.epsilon_sub


def test_budget_sensitivity_under_replace_and_privacy_units():
    r = subgrid_budget(1.0, "replace", tree_share=TREE_SHARE)
    assert (r.sensitivity, r.tree_group) == (2, 2)
    assert r.leaf_scale == 2 / r.epsilon_leaf
    u = subgrid_budget(1.0, "add_remove", unit_factor=3, tree_share=0.5, leaf_share=0.25)
    assert (u.sensitivity, u.tree_group) == (3, 3)
    assert u.epsilon_tree == Fraction(1, 2) and u.epsilon_leaf == Fraction(1, 8)
    assert u.epsilon_sub == Fraction(3, 8)


@pytest.mark.parametrize(("kwargs", "name"), [
    ({"tree_share": 0.0}, "tree_share"), ({"tree_share": 1.0}, "tree_share"),
    ({"leaf_share": -0.1}, "leaf_share"), ({"leaf_share": 1.5}, "leaf_share"),
    ({"neighbours": "swap"}, "neighbours"), ({"epsilon": 0.0}, "epsilon"),
    ({"unit_factor": 0}, "unit_factor"),
])
def test_budget_refuses_bad_options(kwargs, name):
    args = {"epsilon": 1.0, "neighbours": "add_remove", "tree_share": TREE_SHARE, **kwargs}
    with pytest.raises(ParameterError, match=name):
        subgrid_budget(args.pop("epsilon"), args.pop("neighbours"), **args)


# ------------------------------------------------------------------ sub-grid sizes
def reference_bits(v, depth, layout, eps, c2, cap):
    d = layout.d
    out = []
    for vi, di in zip(v, depth, strict=True):
        m = (max(vi, 0.0) * eps / c2) ** (2 * d / (d + 2)) if vi > 0 else 0.0
        k = round(math.log2(m)) if m > 1 else 0
        out.append(min(k, cap, layout.total_bits - di * layout.split_bits))
    return np.array(out)


@pytest.mark.parametrize(("d", "bits"), [(2, 31), (4, 15), (3, 4)])
def test_subcell_bits_follow_the_rule(d, bits):
    layout = MortonLayout(d, bits, 2)
    rng = np.random.default_rng(d)
    v = np.concatenate([rng.normal(0, 30, 200), rng.lognormal(5, 3, 200), [-5.0, 0.0, 1.0, 7.5, 1e200]])
    depth = rng.integers(0, layout.max_depth + 1, v.size)
    depth[-1] = layout.max_depth
    for eps, c2, cap in ((0.4, 3.0, 8), (0.05, 10.0, 3), (1.6, 0.5, layout.total_bits)):
        k = subcell_bits(v, depth, layout, epsilon_sub=eps, c2=c2, max_subcell_bits=cap)
        with np.errstate(over="ignore"):
            ref = reference_bits(v[:-1], depth[:-1], layout, eps, c2, cap)
        np.testing.assert_array_equal(k[:-1], ref)
        assert k[-1] == min(cap, layout.total_bits - layout.max_depth * 2)  # huge count: the cap
        assert k.dtype == np.int64 and k.min() >= 0


def test_subcell_bits_in_2d_give_ag_cell_count():
    layout = MortonLayout(2, 31, 2)
    # 2-D: M = v eps / c2 (AG's m^2): 300 points at eps 0.4, c2 3 -> 40 cells -> 2^5
    assert subcell_bits(np.array([300.0]), np.array([3]), layout, epsilon_sub=0.4)[0] == 5
    assert subcell_bits(np.array([7.4]), np.array([3]), layout, epsilon_sub=0.4)[0] == 0  # M < 1


@pytest.mark.parametrize(("c2", "cap", "name"), [
    (0.0, 8, "c2"), (-1.0, 8, "c2"), (3.0, -1, "max_subcell_bits"), (3.0, 63, "max_subcell_bits"),
    (3.0, 2.5, "max_subcell_bits")])
def test_subcell_options_refused(c2, cap, name):
    with pytest.raises(ParameterError, match=name):
        subcell_bits(np.array([1.0]), np.array([0]), MortonLayout(2, 31, 2), epsilon_sub=0.4, c2=c2,
                     max_subcell_bits=cap)


# ------------------------------------------------------------------ sub-cells
@pytest.mark.parametrize(("d", "s"), [(2, 2), (4, 2), (3, 1), (4, 4)])
def test_subcells_tile_each_leaf_in_morton_order(d, s):
    layout = MortonLayout(d, 6, s)
    box = as_box([f"c{j}" for j in range(d)], [(-1.0, 3.0)] * d)
    rng = np.random.default_rng(10 * d + s)
    starts, depth = random_leaves(layout, rng)
    left = layout.total_bits - depth * s
    k = np.minimum(rng.integers(0, 6, starts.size), left)
    cells = subcells(starts, depth, k, layout)
    bit = subcell_layout(layout)
    assert np.all(np.diff(cells.starts) > 0)
    np.testing.assert_array_equal(cells.starts[cells.offsets[:-1]], starts)
    np.testing.assert_array_equal(np.diff(cells.offsets), 2**k)
    ends = cells.starts + (np.int64(1) << bit.shift(cells.bit_depth))
    np.testing.assert_array_equal(ends[:-1], cells.starts[1:])  # contiguous code ranges
    assert ends[-1] == 1 << layout.total_bits
    # congruent boxes inside their leaf, volumes adding up to it
    lo, hi = bit.node_boxes(cells.starts, cells.bit_depth, box)
    leaf_lo, leaf_hi = layout.node_boxes(starts, depth, box)
    assert np.all(lo >= leaf_lo[cells.leaf] - 1e-12) and np.all(hi <= leaf_hi[cells.leaf] + 1e-12)
    width = hi - lo
    np.testing.assert_allclose(width, width[cells.offsets[:-1]][cells.leaf], rtol=1e-12)
    vol = np.bincount(cells.leaf, weights=np.prod(width, axis=1))
    np.testing.assert_allclose(vol, np.prod(leaf_hi - leaf_lo, axis=1), rtol=1e-12)
    # per-dimension halvings: 2^h sub-cells along j, sum h = k
    h = subcell_halvings(depth, k, layout)
    np.testing.assert_array_equal(h.sum(axis=1), k)
    np.testing.assert_allclose(np.ldexp(width, h[cells.leaf]), (leaf_hi - leaf_lo)[cells.leaf], rtol=1e-12)
    # a point lies in the sub-cell its Morton code falls in
    pts = [rng.uniform(-1, 3, 500) for _ in range(d)]
    codes = morton_codes(grid_coordinates(pts, box, layout.bits), layout.bits)
    at = np.searchsorted(cells.starts, codes, side="right") - 1
    p = np.stack(pts, axis=1)
    assert np.all((lo[at] <= p) & (p <= hi[at]))


def test_subcells_with_whole_levels_are_the_tree_s_own_children():
    layout = MortonLayout(2, 8, 2)
    box = as_box(["x", "y"], [(0.0, 1.0), (0.0, 2.0)])
    starts = np.array([0, 1 << 14, 2 << 14, 3 << 14], dtype=np.int64)  # the root's four children
    depth = np.ones(4, dtype=np.int64)
    cells = subcells(starts, depth, np.full(4, 4), layout)  # two more tree levels
    lo, hi = layout.node_boxes(starts, depth, box)
    prefix = starts >> layout.shift(1)
    for level in (1, 2):
        prefix, lo, hi = child_boxes(layout, level, prefix, lo, hi, np.arange(4, dtype=np.int64))
    np.testing.assert_array_equal(prefix << layout.shift(3), cells.starts)
    s_lo, s_hi = subcell_layout(layout).node_boxes(cells.starts, cells.bit_depth, box)
    np.testing.assert_allclose(s_lo, lo)
    np.testing.assert_allclose(s_hi, hi)


def test_subcells_refuse_more_bits_than_the_leaf_has():
    layout = MortonLayout(2, 3, 2)
    with pytest.raises(ParameterError, match="sub-cell bits"):
        subcells(np.array([0]), np.array([2]), np.array([3]), layout)


# ------------------------------------------------------------------ consistency
def dense_wls(v, u, offsets, var_leaf, var_sub):
    """The weighted least-squares estimate of the sub-cell counts given every observation, by the
    normal equations of the dense design matrix."""
    n_sub, n_leaf = u.size, v.size
    a = np.vstack([np.eye(n_sub), np.zeros((n_leaf, n_sub))])
    for i in range(n_leaf):
        a[n_sub + i, offsets[i]:offsets[i + 1]] = 1.0
    sub_weight = np.repeat(np.broadcast_to(1 / np.asarray(var_sub, dtype=float), n_leaf), np.diff(offsets))
    weights = np.concatenate([sub_weight, np.broadcast_to(1 / np.asarray(var_leaf, dtype=float), n_leaf)])
    y = np.concatenate([u, v])
    x = np.linalg.solve(a.T @ (weights[:, None] * a), a.T @ (weights * y))
    return x


@pytest.mark.parametrize("case", range(6))
def test_consistent_counts_are_the_weighted_least_squares_solution(case):
    rng = np.random.default_rng(case)
    n_leaf = int(rng.integers(1, 7))
    m = 2 ** rng.integers(0, 5, n_leaf)
    offsets = np.concatenate([[0], np.cumsum(m)])
    v = rng.normal(100, 30, n_leaf).round()
    u = rng.normal(10, 8, offsets[-1]).round()
    var_leaf = noise_variance(1 / float(rng.uniform(0.02, 1.0)), "exact")
    var_sub = noise_variance(1 / float(rng.uniform(0.02, 1.0)), "exact")
    if case % 2:  # one variance per leaf
        var_leaf = var_leaf * rng.uniform(0.5, 2.0, n_leaf)
        var_sub = var_sub * rng.uniform(0.5, 2.0, n_leaf)
    v_star, x = consistent_counts(v, u, offsets, var_leaf, var_sub)
    np.testing.assert_allclose(x, dense_wls(v, u, offsets, var_leaf, var_sub), rtol=1e-12, atol=1e-12)
    leaf = np.repeat(np.arange(n_leaf), m)
    np.testing.assert_allclose(np.bincount(leaf, weights=x), v_star, rtol=1e-14, atol=1e-12)


def test_consistent_counts_weight_the_measurements_by_their_variances():
    offsets = np.array([0, 4, 5])
    v, u = np.array([40.0, 7.0]), np.array([5.0, 5.0, 5.0, 5.0, 3.0])
    # equal variances, M = 4: w = 4/5, v* = 0.8 * 40 + 0.2 * 20 = 36; M = 1: mean of 7 and 3
    v_star, x = consistent_counts(v, u, offsets, 1.0, 1.0)
    np.testing.assert_allclose(v_star, [36.0, 5.0])
    np.testing.assert_allclose(x, [9.0, 9.0, 9.0, 9.0, 5.0])
    with pytest.raises(ParameterError, match="offsets"):
        consistent_counts(v, u, np.array([0, 5, 5]), 1.0, 1.0)


def linear_map(offsets, var_leaf, var_sub):
    """Columns: the consistent sub-cell counts for each unit observation (u_1..u_M, v)."""
    n = offsets[-1]
    cols = []
    for i in range(n + 1):
        y = np.zeros(n + 1)
        y[i] = 1.0
        cols.append(consistent_counts(y[n:], y[:n], offsets, var_leaf, var_sub)[1])
    return np.stack(cols, axis=1)


@pytest.mark.parametrize("m", [1, 4, 32])
def test_answer_variance_is_exact_for_the_linear_estimate(m):
    rng = np.random.default_rng(m)
    offsets = np.array([0, m])
    var_leaf, var_sub = noise_variance(2.5, "exact"), noise_variance(2.5, "exact")
    coef = linear_map(offsets, var_leaf, var_sub)
    noise_var = np.concatenate([np.full(m, var_sub), [var_leaf]])
    for f in (rng.uniform(0, 1, m), np.ones(m), (rng.uniform(0, 1, m) > 0.5).astype(float)):
        exact = np.sum((f @ coef) ** 2 * noise_var)
        got = subgrid_answer_variance(f.sum(), (f**2).sum(), np.array(m), var_leaf, var_sub)
        np.testing.assert_allclose(got, exact, rtol=1e-12)
    full = subgrid_answer_variance(float(m), float(m), np.array(m), var_leaf, var_sub)
    np.testing.assert_allclose(full, 1 / (1 / var_leaf + 1 / (m * var_sub)), rtol=1e-12)


@pytest.mark.parametrize("d", [1, 2, 4])
def test_fraction_sums_match_the_sub_cells_one_by_one(d):
    rng = np.random.default_rng(d)
    layout = MortonLayout(d, 8, min(d, 2))
    box = as_box([f"c{j}" for j in range(d)], [(0.0, 1.0)] * d)
    starts, depth = random_leaves(layout, rng, 12)
    k = np.minimum(rng.integers(0, 7, starts.size), layout.total_bits - depth * layout.split_bits)
    cells = subcells(starts, depth, k, layout)
    s_lo, s_hi = subcell_layout(layout).node_boxes(cells.starts, cells.bit_depth, box)
    leaf_lo, leaf_hi = layout.node_boxes(starts, depth, box)
    h = subcell_halvings(depth, k, layout)
    a, b = rng.uniform(-0.1, 1.1, (2, 30, d))
    q_lo, q_hi = np.minimum(a, b), np.maximum(a, b)
    f = overlap_fraction(q_lo[:, None], q_hi[:, None], s_lo[None], s_hi[None])  # (queries, sub-cells)
    f_sum = np.stack([np.bincount(cells.leaf, weights=row, minlength=starts.size) for row in f])
    q_sum = np.stack([np.bincount(cells.leaf, weights=row**2, minlength=starts.size) for row in f])
    got_f, got_q = subgrid_fraction_sums(q_lo[:, None], q_hi[:, None], leaf_lo[None], leaf_hi[None], h[None])
    np.testing.assert_allclose(got_f, f_sum, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got_q, q_sum, rtol=1e-10, atol=1e-12)


def test_range_counts_over_consistent_sub_cells_keep_the_leaf_totals():
    """A query made of whole leaves gets the consistent leaf counts, answered over sub-cells."""
    rng = np.random.default_rng(3)
    layout = MortonLayout(2, 10, 2)
    box = as_box(["x", "y"], [(0.0, 1.0), (0.0, 1.0)])
    starts, depth = random_leaves(layout, rng, 10)
    v = rng.normal(200, 20, starts.size)
    k = subcell_bits(v, depth, layout, epsilon_sub=0.4)
    cells = subcells(starts, depth, k, layout)
    u = rng.normal(200 / 2.0 ** k[cells.leaf], 3)
    v_star, x = consistent_counts(v, u, cells.offsets, 2.0, 2.0)
    leaf_lo, leaf_hi = layout.node_boxes(starts, depth, box)
    got = morton_tree_sums(cells.starts, x, subcell_layout(layout), box, leaf_lo, leaf_hi)
    np.testing.assert_allclose(got, v_star, rtol=1e-9)
