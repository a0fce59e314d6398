"""Range counts of two-level grids under the piecewise-linear density from per-slab prefix sums
(issue 41) against the sum over every cell of :func:`linear_fraction`."""

import itertools

import numpy as np
import pytest

from polars_dp.domains.box import as_box
from polars_dp.kernels.linear_density import linear_fraction
from polars_dp.kernels.linear_grid import linear_grid_correction


def two_level_cells(m1, m2, box):
    """Boxes of the sub-cells in the layout of ``linear_grid_correction``."""
    d = box.d
    w1 = box.width / m1
    lo, hi = [], []
    for c, top in enumerate(itertools.product(range(m1), repeat=d)):
        c_lo = box.lo + np.array(top) * w1
        w2 = w1 / m2[c]
        for sub in itertools.product(range(m2[c]), repeat=d):
            lo.append(c_lo + np.array(sub) * w2)
            hi.append(c_lo + (np.array(sub) + 1) * w2)
    return np.array(lo), np.array(hi)


@pytest.mark.parametrize(("d", "m1"), [(1, 1), (1, 4), (2, 1), (2, 3), (3, 2)])
def test_correction_is_the_linear_minus_the_uniform_share(d, m1):
    rng = np.random.default_rng(d * 10 + m1)
    box = as_box([f"c{j}" for j in range(d)], [(-1.0, 3.0)] * d)
    m2 = rng.integers(1, 5, m1**d) if m1 > 1 else np.array([5])
    lo, hi = two_level_cells(m1, m2, box)
    counts = rng.normal(20, 15, len(lo))
    beta = rng.uniform(-1, 1, (len(lo), d)) / d
    a, b = rng.uniform(-1, 3, (2, 200, d))
    q_lo, q_hi = np.minimum(a, b), np.maximum(a, b)
    q_lo[:10] = box.lo  # whole box and boxes ending on cell faces
    q_hi[:10] = box.hi
    q_hi[10:20] = hi[rng.integers(0, len(lo), 10)]
    q_lo[10:20] = np.minimum(q_lo[10:20], q_hi[10:20])
    got = linear_grid_correction(counts, beta, m1, m2, box, q_lo, q_hi)
    lin = linear_fraction(q_lo[:, None], q_hi[:, None], lo, hi, beta) @ counts
    uni = linear_fraction(q_lo[:, None], q_hi[:, None], lo, hi, np.zeros_like(beta)) @ counts
    np.testing.assert_allclose(got, lin - uni, rtol=1e-9, atol=1e-9 * np.abs(counts).sum())
    np.testing.assert_allclose(got[:10], 0.0, atol=1e-9 * np.abs(counts).sum())
    assert np.abs(got).max() > 1.0
