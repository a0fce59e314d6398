"""Range counts over leaves with sub-grids from per-leaf summed-area arrays: the same answers as
the sub-cells one by one, uniform and linear (issue 41)."""

import numpy as np
import pytest

from polars_dp.domains.box import as_box
from polars_dp.kernels.linear_density import linear_morton_sums, linear_slopes, morton_face_neighbours
from polars_dp.kernels.morton import MortonLayout
from polars_dp.kernels.spatial_sums import morton_tree_sums
from polars_dp.kernels.subgrid import consistent_counts, subcell_halvings, subcell_layout, subcells
from polars_dp.kernels.subgrid_sums import morton_to_c_order, subgrid_prefix, subgrid_tree_sums
from tests.helpers.morton import random_leaves as _random_leaves


def test_morton_to_c_order_is_a_permutation_matching_the_box_order():
    layout = MortonLayout(3, 6, 2)
    box = as_box(["a", "b", "c"], [(0.0, 1.0)] * 3)
    for k, depth in ((5, 1), (4, 2), (0, 3)):
        pos, sides = morton_to_c_order(k, depth * 2 % 3, 3)
        assert sorted(pos.tolist()) == list(range(1 << k))
        halvings = subcell_halvings(np.array([depth]), np.array([k]), layout)[0]
        np.testing.assert_array_equal(sides, 2**halvings)
        cells = subcells(np.array([0]), np.array([depth]), np.array([k]), layout)
        lo, _ = subcell_layout(layout).node_boxes(cells.starts, cells.bit_depth, box)
        c_order = np.lexsort(tuple(lo[:, j] for j in reversed(range(3))))  # C order of the boxes
        np.testing.assert_array_equal(pos[c_order], np.arange(1 << k))


@pytest.mark.parametrize(("d", "s"), [(1, 1), (2, 2), (3, 2), (4, 2)])
def test_subgrid_sums_equal_the_sub_cells_one_by_one(d, s):
    layout = MortonLayout(d, 8, s)
    box = as_box([f"c{j}" for j in range(d)], [(-2.0, 2.0)] * d)
    rng = np.random.default_rng(d)
    starts, depth = random_leaves(layout, rng, 12 if d < 4 else 5)
    k = np.minimum(rng.integers(0, 7, starts.size), layout.total_bits - depth * s)
    cells = subcells(starts, depth, k, layout)
    v = rng.normal(100, 40, starts.size)
    u = rng.normal(100 / 2.0 ** k[cells.leaf], 5)
    v_star, x = consistent_counts(v, u, cells.offsets, 3.0, 2.0)
    bit = subcell_layout(layout)
    s_lo, s_hi = bit.node_boxes(cells.starts, cells.bit_depth, box)
    lower, upper = morton_face_neighbours(cells.starts, cells.bit_depth, bit)
    beta = linear_slopes(s_lo, s_hi, x, lower, upper)
    lo, hi = layout.node_boxes(starts, depth, box)
    a, b = rng.uniform(-2.3, 2.3, (2, 150, d))
    q_lo, q_hi = np.minimum(a, b), np.maximum(a, b)
    uniform = subgrid_prefix(depth, k, x, layout)
    got = subgrid_tree_sums(starts, v_star, lo, hi, uniform, layout, box, q_lo, q_hi)
    flat = morton_tree_sums(cells.starts, x, bit, box, q_lo, q_hi)
    np.testing.assert_allclose(got, flat, rtol=1e-9, atol=1e-8)
    sloped = subgrid_prefix(depth, k, np.vstack([x, (x[:, None] * beta).T]), layout)
    got = subgrid_tree_sums(starts, v_star, lo, hi, sloped, layout, box, q_lo, q_hi, linear=True)
    want = linear_morton_sums(cells.starts, x, s_lo, s_hi, beta, bit, box, q_lo, q_hi)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-8)
    assert np.max(np.abs(want - flat)) > 1e-3


def random_leaves(layout, rng, n_splits, max_depth=4):
    """A random Morton partition, at most ``max_depth`` deep (the sub-grid tests' default)."""
    return _random_leaves(layout, rng, n_splits, max_depth)
