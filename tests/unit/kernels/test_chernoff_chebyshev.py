"""The leaf-sum half-width (tail bounds, steps 1-3 and 6): valid, and no wider than Chebyshev's
``sqrt(2 V / alpha)`` when only a bound on the largest magnitude is known (spatial leaves:
weights at most 1), where the Chernoff bound alone stays near ``M log(2/alpha)``."""

from __future__ import annotations

import math

import duckdb
import numpy as np
import pytest

from polars_dp.domains.expressions import NUMPY, SQL, Sql
from polars_dp.kernels.tail_bounds import chernoff_accuracy, chernoff_half_width

SCALE = 3.0


@pytest.mark.parametrize("alpha", [0.05, 0.01])
@pytest.mark.parametrize("weight", [1e-3, 0.01, 0.1, 0.5, 1.0])
def test_one_term_is_covered_and_at_most_chebyshev(weight, alpha):
    half = chernoff_accuracy(np.array([(SCALE * weight) ** 2]), SCALE, alpha)[0]
    exact = weight * SCALE * math.log(1 / alpha)  # P(|w Lap(b)| > a) = exp(-a / (w b))
    assert half >= exact
    assert half <= math.sqrt(2 * (SCALE * weight) ** 2 / alpha) * (1 + 1e-12)
    if weight <= 0.01:  # a sliver of a leaf: Chebyshev's, far below the Chernoff bound's M log(2/alpha)
        assert half == pytest.approx(math.sqrt(2 / alpha) * SCALE * weight, rel=1e-12)
        assert half < 0.1 * SCALE * math.log(2 / alpha)


@pytest.mark.parametrize("alpha", [0.05, 0.2])
def test_simulated_sums_of_small_weights_exceed_it_at_most_alpha_of_the_time(alpha):
    """Sums of Laplace leaves with weights <= 1 (the bound told only M = b): the half-width is
    exceeded in at most alpha of 200,000 draws, allowing 4 binomial standard errors."""
    rng = np.random.default_rng(12)
    draws = 200_000
    for weights in (np.array([0.02]), np.array([0.3, 0.05, 0.05]), rng.uniform(0, 0.1, 40)):
        v = float(np.sum((SCALE * weights) ** 2))
        half = chernoff_accuracy(np.array([v]), SCALE, alpha)[0]
        noise = rng.laplace(0.0, SCALE, (draws, weights.size)) @ weights
        exceed = float(np.mean(np.abs(noise) > half))
        assert exceed <= alpha + 4 * math.sqrt(alpha * (1 - alpha) / draws)


def test_sql_renders_the_same_half_width():
    units = np.array([1e-4, 0.09, 1.0, 9.0, 400.0])
    log_term = math.log(2 / 0.05)
    want = np.asarray(chernoff_half_width(NUMPY, units, SCALE, log_term), dtype=np.float64)
    con = duckdb.connect()
    rendered = [chernoff_half_width(SQL, Sql(repr(float(u))), SCALE, log_term) for u in units]
    got = [con.sql(f"SELECT {r}").fetchall()[0][0] for r in rendered]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert chernoff_half_width(NUMPY, np.array([0.0]), SCALE, log_term)[0] == 0.0
