"""Seeded simulated releases of level strategies with the exact discrete Laplace sampler: the
mean squared error of the least-squares answers matches the exact formula.

Bound from the math.  The noise of answer ``q`` is ``e_q = Σ_k c_qk Z_k`` over the independent
discrete Laplace draws ``Z_k`` (variance ``σ_k²``, fourth moment ``m4_k``), with ``c_qk = w_t
(A_t M⁺ q)_k`` for the draws of tuple ``t``.  The mean over ``Q`` queries of one release is the
quadratic form ``Zᵀ A Z``, ``A = CᵀC / Q``, of mean ``Σ_q V_q / Q`` and variance
``2 ‖Σ^½ A Σ^½‖_F² + Σ_k A_kk² (m4_k - 3 σ_k⁴)`` (exact for independent zero-mean ``Z``).
Releases are independent, so the mean over ``R`` of them has standard deviation
``sqrt(that / R)``; the test allows 4 of them (the seed is fixed).  The coefficients are built
from the block pyramid, and ``Σ_k c_qk² σ_k²`` must equal the closed-form variance too.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import polars_dp as pdp
from polars_dp.kernels import block_levels as BL
from polars_dp.kernels import level_budgets as LB
from polars_dp.kernels import level_inference as LI
from polars_dp.noise import noise_source
from polars_dp.noise.discrete import discrete_laplace

HIER = pdp.Hierarchy.from_dict({"g1": ["a", "b", "c", "d"], "g2": ["e", "f", "g", "h"]})

CASES = {
    "1d-1000": ([pdp.Ordinal("x", 0, 999)], [BL.bary_levels(1000, 2)], 200),
    "2d-48x40": ([pdp.Ordinal("x", 0, 47), pdp.Ordinal("y", 0, 39)],
                 [BL.bary_levels(48, 2), BL.divisor_levels(40)[0]], 120),
    "3d": ([pdp.Ordinal("a", 0, 20), pdp.Nominal("n", HIER), pdp.Ordinal("b", 0, 9)],
           [BL.bary_levels(21, 2), BL.nominal_levels(pdp.Nominal("n", HIER)), BL.divisor_levels(10)[0]], 120),
}


def dlap_moments(scale) -> tuple[float, float]:
    """Variance and fourth moment of the discrete Laplace of ``scale``, summed over its support."""
    q = math.exp(-1 / float(scale))
    y = np.arange(1, int(80 * float(scale)) + 80, dtype=np.float64)
    p = (1 - q) / (1 + q) * q**y  # P(Y = y) for y > 0 (and the same for -y)
    return float(2 * (p * y**2).sum()), float(2 * (p * y**4).sum())


def coefficients(strategy, starts, stops):
    """Per query, the coefficient of every draw (C, shape (Q, draws)) and every draw's moments."""
    axes = strategy.axes
    weights = strategy.weights
    nu = LI.inverse_eigenvalues(LI.eigenvalues(weights, axes))
    c = LI.projector_coefficients(nu)
    cells = BL.block_cells(axes)
    rows = []
    for s, t in zip(starts, stops, strict=True):
        q = np.zeros(tuple(ax.length for ax in axes))
        q[tuple(slice(a, ax.length if b >= ax.n else b) for a, b, ax in zip(s, t, axes, strict=True))] = 1.0
        u = BL.collapse({b: (c[b] / cells[b]) * v for b, v in BL.pyramid(q, axes).items()}, axes)  # M⁺ q
        sums = BL.pyramid(u, axes)
        rows.append(np.concatenate([weights[k] * sums[k].ravel() for k in strategy.measured]))
    var, m4 = [], []
    for k in strategy.measured:
        v, m = dlap_moments(strategy.scale(k))
        size = int(np.prod([ax.length // ax.sizes[level] for ax, level in zip(axes, k, strict=True)]))
        var.append(np.full(size, v)), m4.append(np.full(size, m))
    return np.array(rows), np.concatenate(var), np.concatenate(m4)


@pytest.mark.parametrize("name", CASES)
def test_mean_squared_error_matches_the_formula(name):
    attrs, levels, releases = CASES[name]
    workload = pdp.workload.random_ranges(attrs)
    strategy = LB.choose_strategy(attrs, workload, 0.5, 1, levels=levels).strategy
    assert len(strategy.measured) > 1
    rng = np.random.default_rng(11)
    sizes = tuple(a.n_cells for a in attrs)
    counts = rng.integers(0, 50, sizes)
    n_queries = 48
    starts = np.stack([rng.integers(0, n, n_queries) for n in sizes], axis=1)
    stops = np.stack([rng.integers(s + 1, n + 1) for s, n in zip(starts.T, sizes, strict=True)], axis=1)
    variance = strategy.range_variance(starts, stops)
    coef, sigma2, m4 = coefficients(strategy, starts, stops)
    np.testing.assert_allclose((coef**2) @ sigma2, variance, rtol=1e-9)  # two routes, one variance
    a_diag = (coef**2).sum(axis=0) / n_queries
    scaled = (coef * sigma2) @ coef.T / n_queries  # Σ^½ A Σ^½ has the Frobenius norm of C Σ Cᵀ / Q
    release_var = 2 * (scaled**2).sum() + (a_diag**2 * (m4 - 3 * sigma2**2)).sum()
    sd = math.sqrt(release_var / releases)

    truth = np.array([counts[tuple(slice(a, b) for a, b in zip(s, t, strict=True))].sum()
                      for s, t in zip(starts, stops, strict=True)])
    exact = strategy.measure(counts)
    weights = strategy.weights
    src = noise_source(2024)
    mse = np.empty(releases)
    for r in range(releases):
        noisy = {}
        for t, y in exact.items():
            scale = strategy.scale(t)
            noisy[t] = y + discrete_laplace(src, scale.numerator, scale.denominator, y.shape)
        estimate = LI.gls(noisy, weights, strategy.axes)
        answers = np.array([estimate[tuple(slice(a, b) for a, b in zip(s, t, strict=True))].sum()
                            for s, t in zip(starts, stops, strict=True)])
        mse[r] = np.mean((answers - truth) ** 2)
    assert abs(mse.mean() - variance.mean()) <= 4 * sd
    assert sd < 0.1 * variance.mean()  # the check is sharp: a 40% error in the formula fails it
    assert strategy.epsilon_spent <= strategy.epsilon == pytest.approx(0.5)
