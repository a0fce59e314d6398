"""The piecewise-linear density over a partition: face neighbours, slopes, and range counts of
partly covered cells (issue 41)."""

import itertools
from fractions import Fraction

import numpy as np
import pytest

from polars_dp.domains.box import as_box
from polars_dp.kernels.linear_density import (
    grid_face_neighbours,
    linear_fraction,
    linear_morton_sums,
    linear_slopes,
    morton_face_neighbours,
    two_level_face_neighbours,
)
from polars_dp.kernels.morton import MortonLayout, deinterleave, overlap_fraction
from polars_dp.kernels.spatial_sums import morton_tree_sums
from tests.helpers.morton import random_leaves


def regular_leaves(layout, depth):
    n = 1 << (depth * layout.split_bits)
    return np.arange(n, dtype=np.int64) << layout.shift(depth), np.full(n, depth, dtype=np.int64)


def brute_neighbours(lo, hi):
    """Per cell and dimension, the cell whose half-open box holds the point on the face's
    other side at the face centre (exact rationals; ``-1`` outside the box)."""
    n, d = len(lo), len(lo[0])
    lower = np.full((n, d), -1)
    upper = np.full((n, d), -1)
    for i, j in itertools.product(range(n), range(d)):
        centre = [(lo[i][t] + hi[i][t]) / 2 for t in range(d)]
        for out, face, side in ((upper, hi[i][j], 1), (lower, lo[i][j], -1)):
            for c in range(n):
                inside = all(lo[c][t] <= centre[t] < hi[c][t] for t in range(d) if t != j)
                touches = lo[c][j] == face if side > 0 else hi[c][j] == face
                if inside and touches:
                    out[i, j] = c
    return lower, upper


@pytest.mark.parametrize(("d", "s"), [(2, 2), (2, 1), (3, 2), (4, 4)])
def test_morton_face_neighbours_follow_the_face_centre_rule(d, s):
    layout = MortonLayout(d, 4, s)
    rng = np.random.default_rng(d * 10 + s)
    starts, depth = random_leaves(layout, rng, 15 if d < 4 else 4, max_depth=max(2, 6 // s))
    coords = np.stack(deinterleave(starts, d, layout.bits), axis=1)
    size = 2 ** (layout.bits - layout.halvings(depth))
    lo = [[Fraction(int(x)) for x in row] for row in coords]
    hi = [[Fraction(int(x)) for x in row] for row in coords + size]
    lower, upper = morton_face_neighbours(starts, depth, layout)
    b_lower, b_upper = brute_neighbours(lo, hi)
    np.testing.assert_array_equal(lower, b_lower)
    np.testing.assert_array_equal(upper, b_upper)


def test_grid_face_neighbours_in_c_order():
    lower, upper = grid_face_neighbours((3, 4))
    assert lower[5].tolist() == [1, 4] and upper[5].tolist() == [9, 6]
    assert lower[0].tolist() == [-1, -1] and upper[11].tolist() == [-1, -1]
    lo = [[Fraction(i), Fraction(j)] for i in range(3) for j in range(4)]
    hi = [[Fraction(i + 1), Fraction(j + 1)] for i in range(3) for j in range(4)]
    b_lower, b_upper = brute_neighbours(lo, hi)
    np.testing.assert_array_equal(lower, b_lower)
    np.testing.assert_array_equal(upper, b_upper)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_two_level_face_neighbours_follow_the_face_centre_rule(d):
    m1 = 2 if d == 3 else 3
    rng = np.random.default_rng(d)
    m2 = rng.integers(1, 5 if d < 3 else 4, m1**d)
    lo, hi = [], []
    for c in range(m1**d):
        top = np.unravel_index(c, (m1,) * d)
        m = int(m2[c])
        for local in range(m**d):
            sub = np.unravel_index(local, (m,) * d)
            lo.append([top[t] + Fraction(int(sub[t]), m) for t in range(d)])
            hi.append([top[t] + Fraction(int(sub[t]) + 1, m) for t in range(d)])
    lower, upper = two_level_face_neighbours(m1, m2, d)
    b_lower, b_upper = brute_neighbours(lo, hi)
    np.testing.assert_array_equal(lower, b_lower)
    np.testing.assert_array_equal(upper, b_upper)


def morton_cells(layout, box, starts, depth, counts):
    lo, hi = layout.node_boxes(starts, depth, box)
    lower, upper = morton_face_neighbours(starts, depth, layout)
    return lo, hi, linear_slopes(lo, hi, counts, lower, upper)


def corners(d):
    return np.array(list(itertools.product((-0.5, 0.5), repeat=d)))


@pytest.mark.parametrize("d", [2, 4])
def test_slopes_keep_the_density_non_negative_and_counts_whole(d):
    layout = MortonLayout(d, 8, 2)
    box = as_box([f"c{j}" for j in range(d)], [(0.0, 1.0)] * d)
    rng = np.random.default_rng(d)
    starts, depth = random_leaves(layout, rng, 60)
    counts = rng.normal(20, 30, starts.size).round()  # noisy: some negative
    lo, hi, beta = morton_cells(layout, box, starts, depth, counts)
    assert np.all(0.5 * np.abs(beta).sum(axis=1) <= 1 + 1e-12)
    assert np.all(1.0 + beta @ corners(d).T >= -1e-12)
    assert np.all(beta[counts <= 0] == 0)
    assert np.any(0.5 * np.abs(beta).sum(axis=1) > 0.99)  # the scaling did bind somewhere
    np.testing.assert_allclose(linear_fraction(lo, hi, lo, hi, beta), 1.0, rtol=1e-12)
    wide = linear_fraction(box.lo - 1.0, box.hi + 1.0, lo, hi, beta)
    np.testing.assert_allclose(wide, 1.0, rtol=1e-12)


def test_slopes_vanish_where_the_neighbours_agree():
    layout = MortonLayout(2, 8, 2)
    box = as_box(["x", "y"], [(0.0, 1.0), (0.0, 1.0)])
    starts, depth = regular_leaves(layout, 3)  # an 8 x 8 grid
    lo, hi = layout.node_boxes(starts, depth, box)
    centre = 0.5 * (lo + hi)
    # density 5 + 3 x: neighbours along y agree; along x the slope is the gradient
    counts = (5 + 3 * centre[:, 0]) * np.prod(hi - lo, axis=1)
    _, _, beta = morton_cells(layout, box, starts, depth, counts)
    np.testing.assert_allclose(beta[:, 1], 0.0, atol=1e-12)
    np.testing.assert_allclose(beta[:, 0], 3 * (hi - lo)[:, 0] / (5 + 3 * centre[:, 0]), rtol=1e-9)
    _, _, flat = morton_cells(layout, box, starts, depth, np.full(starts.size, 7.0))
    assert np.all(flat == 0)


def linear_truth(a, b, q_lo, q_hi, box):
    """Exact count of density ``a + b . x`` over the query box clipped to ``box``."""
    lo, hi = np.maximum(q_lo, box.lo), np.minimum(q_hi, box.hi)
    length = np.clip(hi - lo, 0.0, None)
    return np.prod(length, axis=1) * (a + (0.5 * (lo + hi)) @ b)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_a_linear_density_on_a_regular_grid_is_answered_exactly(d):
    layout = MortonLayout(d, 10, 1)
    box = as_box([f"c{j}" for j in range(d)], [(-1.0, 1.0)] * d)
    starts, depth = regular_leaves(layout, 3 * d)  # 8 cells per axis
    lo, hi = layout.node_boxes(starts, depth, box)
    rng = np.random.default_rng(d)
    grad = rng.uniform(-1000, 1000, d)
    a = np.abs(grad).sum() + 50  # positive on the whole box
    counts = linear_truth(a, grad, lo, hi, box)
    lower, upper = morton_face_neighbours(starts, depth, layout)
    beta = linear_slopes(lo, hi, counts, lower, upper)
    x, y = rng.uniform(-1.2, 1.2, (2, 200, d))
    q_lo, q_hi = np.minimum(x, y), np.maximum(x, y)
    truth = linear_truth(a, grad, q_lo, q_hi, box)
    got = linear_morton_sums(starts, counts, lo, hi, beta, layout, box, q_lo, q_hi)
    np.testing.assert_allclose(got, truth, rtol=1e-9, atol=1e-7)
    uniform = morton_tree_sums(starts, counts, layout, box, q_lo, q_hi)
    assert np.max(np.abs(uniform - truth)) > 0.1  # the uniformity assumption is not exact here
    # the same cells indexed as a regular grid (C order) give the same slopes
    order = np.lexsort(tuple(np.round(lo[:, j] * 8).astype(int) for j in reversed(range(d))))
    g_lower, g_upper = grid_face_neighbours((8,) * d)
    g_beta = linear_slopes(lo[order], hi[order], counts[order], g_lower, g_upper)
    np.testing.assert_allclose(g_beta, beta[order], rtol=1e-12, atol=1e-15)


def test_a_linear_density_on_cells_of_varying_widths_is_exact_in_one_dimension():
    """In 1-D the central difference over centre distances is the exact gradient whatever the widths."""
    layout = MortonLayout(1, 12, 1)
    box = as_box(["x"], [(0.0, 3.0)])
    rng = np.random.default_rng(4)
    starts, depth = random_leaves(layout, rng, 25, max_depth=9)
    lo, hi = layout.node_boxes(starts, depth, box)
    assert np.unique(depth).size > 3
    grad = np.array([-20.0])
    counts = linear_truth(70.0, grad, lo, hi, box)
    lower, upper = morton_face_neighbours(starts, depth, layout)
    beta = linear_slopes(lo, hi, counts, lower, upper)
    x, y = rng.uniform(-0.5, 3.5, (2, 100, 1))
    q_lo, q_hi = np.minimum(x, y), np.maximum(x, y)
    got = linear_morton_sums(starts, counts, lo, hi, beta, layout, box, q_lo, q_hi)
    np.testing.assert_allclose(got, linear_truth(70.0, grad, q_lo, q_hi, box), rtol=1e-9, atol=1e-9)


def test_linear_answers_agree_with_numerical_integration():
    d, n_grid = 2, 4096
    layout = MortonLayout(d, 8, 2)
    box = as_box(["x", "y"], [(0.0, 4.0), (0.0, 1.0)])
    rng = np.random.default_rng(5)
    starts, depth = random_leaves(layout, rng, 30)
    counts = rng.poisson(40, starts.size).astype(float)
    lo, hi, beta = morton_cells(layout, box, starts, depth, counts)
    x, y = rng.uniform(-0.2, 1.2, (2, 12, d)) * box.width
    q_lo, q_hi = np.minimum(x, y), np.maximum(x, y)
    # the midpoint rule on an n_grid^d product grid of each cell, the query read as an indicator of
    # the sample points; the density 1 + sum_j beta_j t_j is a sum of one-dimensional terms, so the
    # sum over the product grid is prod_j A_j + sum_j beta_j B_j prod_(k != j) A_k
    t = (np.arange(n_grid) + 0.5) / n_grid - 0.5
    pts = (0.5 * (lo + hi))[None, :, :, None] + t * (hi - lo)[None, :, :, None]  # (1, cells, d, n)
    ind = (pts >= q_lo[:, None, :, None]) & (pts <= q_hi[:, None, :, None])  # (queries, cells, d, n)
    a_sum = ind.mean(axis=-1)
    b_sum = (ind * t).mean(axis=-1)
    share = np.prod(a_sum, axis=-1)
    for j in range(d):
        share = share + beta[None, :, j] * b_sum[..., j] * np.prod(np.delete(a_sum, j, axis=-1), axis=-1)
    numeric = share @ counts
    got = linear_morton_sums(starts, counts, lo, hi, beta, layout, box, q_lo, q_hi)
    # a query face crossing a cell misclassifies at most one row of n_grid^(d-1) samples, each of at
    # most 2 count / n_grid^d (the density is at most twice the cell's mean): 4 d count / n_grid per cell
    frac = overlap_fraction(q_lo[:, None], q_hi[:, None], lo[None], hi[None])
    crossing = (frac > 0) & (frac < 1)
    tol = crossing @ (4 * d * counts / n_grid) + 1e-9
    assert np.all(np.abs(got - numeric) <= tol)
    uniform = morton_tree_sums(starts, counts, layout, box, q_lo, q_hi)
    assert np.sum(np.abs(uniform - numeric) > tol) >= 3  # the bound separates the two densities


def test_linear_sums_reduce_to_uniform_and_are_additive():
    layout = MortonLayout(3, 8, 2)
    box = as_box(["a", "b", "c"], [(0.0, 1.0)] * 3)
    rng = np.random.default_rng(11)
    starts, depth = random_leaves(layout, rng, 40)
    counts = rng.normal(50, 20, starts.size)
    lo, hi, beta = morton_cells(layout, box, starts, depth, counts)
    x, y = rng.uniform(0, 1, (2, 100, 3))
    q_lo, q_hi = np.minimum(x, y), np.maximum(x, y)
    flat = linear_morton_sums(starts, counts, lo, hi, np.zeros_like(beta), layout, box, q_lo, q_hi)
    np.testing.assert_allclose(flat, morton_tree_sums(starts, counts, layout, box, q_lo, q_hi), rtol=1e-9)
    np.testing.assert_allclose(linear_fraction(q_lo[:, None], q_hi[:, None], lo, hi, 0 * beta),
                               overlap_fraction(q_lo[:, None], q_hi[:, None], lo, hi), rtol=1e-12, atol=1e-15)
    whole = linear_morton_sums(starts, counts, lo, hi, beta, layout, box, box.lo[None], box.hi[None])
    np.testing.assert_allclose(whole, counts.sum(), rtol=1e-12)
    cut = rng.uniform(q_lo[:, 0], q_hi[:, 0])
    left_hi, right_lo = q_hi.copy(), q_lo.copy()
    left_hi[:, 0], right_lo[:, 0] = cut, cut
    halves = (linear_morton_sums(starts, counts, lo, hi, beta, layout, box, q_lo, left_hi)
              + linear_morton_sums(starts, counts, lo, hi, beta, layout, box, right_lo, q_hi))
    whole = linear_morton_sums(starts, counts, lo, hi, beta, layout, box, q_lo, q_hi)
    np.testing.assert_allclose(halves, whole, rtol=1e-9)
