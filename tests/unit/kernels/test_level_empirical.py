"""Seeded simulated releases of level strategies with the exact discrete Laplace sampler: the
mean squared error of the least-squares answers matches the exact formula.

Bound: an answer's error ``e = Σ_k c_k Z_k`` is a weighted sum of independent discrete Laplace
variables (excess kurtosis at most 3, Laplace's), so ``E e⁴ <= 3 V² + 3 Σ c_k⁴ σ_k⁴ <= 6 V²``
and ``sd(e²) <= √5 V``.  The mean over the queries of one release has a standard deviation of
at most the mean of the ``√5 V_q`` (triangle inequality), and the releases are independent:
the mean over ``R`` releases lies within ``4 √5 mean(V) / √R`` of ``mean(V)`` except with
probability below 1/16 (Chebyshev), and far less in practice; the seed is fixed.
"""

from __future__ import annotations

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
    "1d-1000": ([pdp.Ordinal("x", 0, 999)], [BL.bary_levels(1000, 2)], 300),
    "2d-48x40": ([pdp.Ordinal("x", 0, 47), pdp.Ordinal("y", 0, 39)],
                 [BL.bary_levels(48, 2), BL.divisor_levels(40)[0]], 200),
    "3d": ([pdp.Ordinal("a", 0, 20), pdp.Nominal("n", HIER), pdp.Ordinal("b", 0, 9)],
           [BL.bary_levels(21, 2), BL.nominal_levels(pdp.Nominal("n", HIER)), BL.divisor_levels(10)[0]], 200),
}


@pytest.mark.parametrize("name", CASES)
def test_mean_squared_error_matches_the_formula(name):
    attrs, levels, releases = CASES[name]
    workload = pdp.workload.random_ranges(attrs)
    strategy = LB.choose_strategy(attrs, workload, 0.5, 1, levels=levels).strategy
    assert len(strategy.measured) > 1
    rng = np.random.default_rng(11)
    sizes = tuple(a.n_cells for a in attrs)
    counts = rng.integers(0, 50, sizes)
    queries = 64
    starts = np.stack([rng.integers(0, n, queries) for n in sizes], axis=1)
    stops = np.stack([rng.integers(s + 1, n + 1) for s, n in zip(starts.T, sizes, strict=True)], axis=1)
    variance = strategy.range_variance(starts, stops)
    assert np.all(np.isfinite(variance))
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
    bound = 4 * np.sqrt(5) * variance.mean() / np.sqrt(releases)
    assert abs(mse.mean() - variance.mean()) <= bound
    assert strategy.epsilon_spent <= strategy.epsilon == pytest.approx(0.5)
