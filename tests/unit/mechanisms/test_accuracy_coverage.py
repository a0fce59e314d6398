"""Coverage of ``accuracy`` by simulation: many seeded releases' noise, drawn at once.

The releases are noise only (counts 0) and are drawn through the mechanisms' own samplers in
one call: an extra untransformed attribute of ``R`` cells holds ``R`` independent releases
(an untransformed axis leaves ``rho`` and the noise law of every slice unchanged, Privelet
Corollary 1).  For each query the share of releases whose noise lies in ``[-a, a]`` must be at
least ``1 - alpha`` within a binomial bound, and for ranges of at least 100 cells ``a`` must
be at most 1.5 times the empirical ``1 - alpha`` quantile of ``|noise|``.  ``2 std`` in place of
the bound fails the coverage check (last test), so the check has teeth.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import polars_dp as pdp
from polars_dp.mechanisms.laplace_histogram import add_cell_noise
from polars_dp.mechanisms.wavelet_lattice import add_wavelet_noise_exact
from polars_dp.noise import noise_source

R = 10_000
ALPHAS = (0.05, 0.01)
Z = 3.0  # one-sided binomial bound, fixed seeds


def _hierarchy():
    return pdp.Hierarchy.from_dict({"office": ["clerk", "typist", "manager"], "field": ["driver", "farmer"],
                                    "other": ["none"]})


def _case(name):
    one = [pdp.Ordinal("x", 0, 255)]
    three = [pdp.Ordinal("a", 0, 15), pdp.Ordinal("b", 0, 7), pdp.Nominal("c", _hierarchy())]
    return {
        "basic-1d": ("basic", one, {}),
        "privelet-1d": ("privelet", one, {}),
        "basic-3d": ("basic", three, {}),
        "privelet-3d": ("privelet", three, {}),
        "privelet+-3d": ("privelet", three, {"untransformed": ["b"]}),
    }[name]


#: (starts, stops) per case shape: single cells and wide ranges.
QUERIES = {
    1: (np.array([[5], [200], [0], [10], [37], [0]]), np.array([[6], [201], [256], [150], [240], [128]])),
    3: (np.array([[3, 2, 0], [15, 7, 5], [0, 0, 0], [2, 1, 0], [0, 0, 3], [5, 0, 1]]),
        np.array([[4, 3, 1], [16, 8, 6], [16, 8, 6], [14, 7, 5], [16, 8, 5], [13, 8, 4]])),
}


@pytest.fixture(scope="module", params=["basic-1d", "privelet-1d", "basic-3d", "privelet-3d", "privelet+-3d"])
def simulated(request):
    mechanism, attrs, opts = _case(request.param)
    plan = pdp.plan(mechanism, attrs, epsilon=1.0, **opts)
    reps = pdp.Ordinal("rep", 0, R - 1)
    counts = np.zeros((*(a.n_cells for a in attrs), R))
    src = noise_source(20240 + len(request.param))
    if mechanism == "basic":
        add_cell_noise(counts, plan.scale, src, "exact")
    else:
        add_wavelet_noise_exact(counts, [*attrs, reps], [*plan.transformed_mask, False], plan.scale, src)
    starts, stops = QUERIES[len(attrs)]
    noise = np.stack([counts[tuple(slice(s, t) for s, t in zip(st, sp, strict=True))]
                      .sum(axis=tuple(range(len(attrs)))) for st, sp in zip(starts, stops, strict=True)])
    return plan, starts, stops, noise


def _coverage_ok(noise, half_width, alpha):
    # the float inverse transform rounds the lattice noise by ~1e-13: a value exactly on the
    # bound (an integer, for a single discrete Laplace term) must not count as outside
    inside = (np.abs(noise) <= half_width[:, None] * (1 + 1e-9) + 1e-9).mean(axis=1)
    return inside >= 1 - alpha - Z * math.sqrt(alpha * (1 - alpha) / R), inside


@pytest.mark.parametrize("alpha", ALPHAS)
def test_accuracy_covers(simulated, alpha):
    plan, starts, stops, noise = simulated
    acc = plan.range_accuracy(starts, stops, alpha)
    ok, inside = _coverage_ok(noise, acc, alpha)
    assert ok.all(), f"coverage {inside} below 1 - {alpha}"


@pytest.mark.parametrize("alpha", ALPHAS)
def test_accuracy_is_tight_on_wide_ranges(simulated, alpha):
    plan, starts, stops, noise = simulated
    acc = plan.range_accuracy(starts, stops, alpha)
    cells = np.prod(stops - starts, axis=1)
    quantile = np.quantile(np.abs(noise), 1 - alpha, axis=1)
    wide = cells >= 100
    assert wide.any()
    ratio = acc[wide] / quantile[wide]
    assert (ratio <= 1.5).all(), f"accuracy / empirical quantile = {ratio}"
    assert (ratio >= 0.9).all()  # and not below the quantile (sanity of the simulation)


def test_the_simulated_variance_is_the_plans(simulated):
    plan, starts, stops, noise = simulated
    var = plan.range_variance(starts, stops)
    # exact noise has variance 2q/(1-q)^2 < 2 lambda^2 per unit: the plan's is an upper bound, close
    assert np.all(noise.var(axis=1) <= var * (1 + 5 * math.sqrt(2 / R) * 2))
    assert np.all(noise.var(axis=1) >= var * 0.9)


def test_two_std_would_fail_the_coverage_check(simulated):
    """Replacing the bound by ``2 std`` breaks coverage at alpha = 0.01 in every case."""
    plan, starts, stops, noise = simulated
    ok, _ = _coverage_ok(noise, 2 * np.sqrt(plan.range_variance(starts, stops)), 0.01)
    assert not ok.all()
