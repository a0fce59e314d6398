"""The interval half-width's minimum over the public grid of theta, found by a search on the
sign of the step (``expressions.grid_min``), and its SQL rendering (no per-term lambda where
the terms are not listed, a bounded number of grid evaluations)."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

import polars_dp as pdp
from polars_dp.domains import expressions
from polars_dp.domains.expressions import NUMPY, SQL, Sql, grid_min
from polars_dp.kernels import tail_bounds
from polars_dp.kernels.wavelet_variance import range_weights
from polars_dp.plans.noise_model import IndependentLaplace, WaveletLaplace
from polars_dp.releases.sql_grid import _Axis, accuracy_sql

GRID = np.r_[tail_bounds._U_GRID, 1.0]


def _full_grid_width(weights: np.ndarray, scale: float, alpha: float, noise: str) -> np.ndarray:
    """Step 4 of the tail bound with every term listed and every grid point evaluated (the
    definition, written directly): ``M (log C + min_theta (log(2/alpha) + Psi_rest) / theta)``."""
    beta = np.sort(weights, axis=1)[:, ::-1] * scale
    m = beta[:, 0]
    rel = beta[:, 1:] / m[:, None]
    log_c = math.log(0.5 if noise != "exact" else 1.0 / (1.0 + math.exp(-1.0 / scale)))
    best = np.full(len(m), np.inf)
    for th in GRID:
        y = np.minimum((th * rel) ** 2, 1.0)
        with np.errstate(divide="ignore"):
            psi = np.where(y > 0, -np.log1p(-y), 0.0).sum(axis=1)
        best = np.minimum(best, (math.log(2 / alpha) + psi) / th)
    return m * (log_c + best)


@pytest.mark.parametrize("noise", ["exact", "float"])
@pytest.mark.parametrize("alpha", [0.01, 0.05, 0.3])
def test_search_finds_the_grid_minimum(noise, alpha):
    attrs = [pdp.Ordinal("a", 0, 60), pdp.Nominal("g", categories=["x", "y", "z"])]
    rng = np.random.default_rng(5)
    s = np.sort(rng.integers(0, 61, (400, 2)), axis=1)
    starts, stops = s[:, 0], s[:, 1] + 1
    terms = [
        range_weights(attrs[0], starts, stops, True),
        range_weights(attrs[1], np.zeros(400, np.int64), np.full(400, 2), True),
    ]
    got = tail_bounds.laplace_sum_accuracy(terms, 1.3, alpha, noise)
    product = (terms[0][0][:, :, None] * terms[1][0][:, None, :]).reshape(400, -1)
    several = (product > 0).sum(axis=1) > 1  # one term: the exact law (step 5) instead
    want = _full_grid_width(product, 1.3, alpha, noise)
    assert np.all(got[several] <= want[several] * (1 + 1e-12))
    assert np.all(got[several] >= want[several] * (1 - 1e-12))


def test_search_evaluates_few_grid_points():
    calls = []

    def fn(theta):
        calls.append(theta)
        return (3.0 + 40.0 * -np.log1p(-np.minimum(theta * theta * 0.2, 0.99))) / theta

    got = grid_min(NUMPY, GRID, fn)
    assert len(calls) <= 2 * math.ceil(math.log2(len(GRID))) + 1
    assert got == min(fn(float(g)) for g in GRID)


def test_search_returns_a_grid_value_for_any_function():
    values = np.random.default_rng(2).random(len(GRID))  # not quasi-convex
    got = grid_min(NUMPY, GRID, lambda th: values[np.searchsorted(GRID, th)])
    assert got in values


def _release(mechanism):
    attrs = [pdp.Ordinal("a", 0, 30), pdp.Nominal("g", categories=["x", "y"]), pdp.Ordinal("b", 0, 20)]
    rng = np.random.default_rng(1)
    frame = pl.DataFrame(
        {"a": rng.integers(0, 31, 500), "g": rng.choice(["x", "y"], 500), "b": rng.integers(0, 21, 500)}
    )
    return getattr(frame.dp, mechanism)(attrs, epsilon=1.0, seed=3)


@pytest.mark.parametrize("mechanism", ["basic", "privelet"])
def test_accuracy_sql_has_no_per_term_lambda_and_few_points(mechanism):
    release = _release(mechanism)
    axes = [_Axis(release, "t", k) for k in range(3)]
    relation, variance, expression = accuracy_sql(release, axes)
    text = relation + variance + expression
    assert isinstance(release.noise_model, (IndependentLaplace, WaveletLaplace))
    # the grid of theta is never walked point by point in a lambda
    assert "list_transform([CAST(CAST(" not in text
    if mechanism == "basic":  # no listed axis: no list function at all
        assert "list_transform" not in text and "list_sum" not in text
    # each search evaluates at most 2 ceil(log2 n) + 1 points of the grid
    searches = 1 if mechanism == "basic" else 2
    assert text.count("AS DOUBLE[])[") <= searches * (2 * math.ceil(math.log2(len(GRID))) + 1)


def test_staged_lets_share_projections():
    def build():
        a = SQL.let(Sql("x") + 1)
        b = SQL.let(Sql("y") + 2)  # independent of a: same projection
        return SQL.let(a + b)  # reads both: the next one

    relation, expression = SQL.staged(build, "box")
    assert relation.count("SELECT") == 2
    assert str(expression) == "__let2"


def test_staged_lets_take_the_first_projection_they_can():
    def build():
        a = SQL.let(Sql("x") + 1)
        b = SQL.let(a * 2)
        c = SQL.let(Sql("y") + 3)  # reads nothing: beside a, not after b
        return SQL.let(c * 2) + b

    relation, _ = SQL.staged(build, "box")
    assert relation.count("SELECT") == 2


def test_a_value_let_twice_is_one_column():
    def build():
        a = SQL.let(Sql("x") * Sql("x") + 1)
        return a + SQL.let(Sql("x") * Sql("x") + 1)

    relation, expression = SQL.staged(build, "box")
    assert relation.count(" AS __let") == 1
    assert str(expression) == "(__let0 + __let0)"


@pytest.mark.parametrize("n", [2, 3, 5, 15, 16])
def test_top_two_without_a_list_is_the_list_functions(n):
    x = np.random.default_rng(n).integers(0, 4, (2000, n)) / 4.0  # many ties
    top, second = expressions.top_two(NUMPY, [x[:, i] for i in range(n)])
    assert np.array_equal(top, NUMPY.lmax(x))
    assert np.array_equal(second, NUMPY.lsecond(x, NUMPY.lmax(x)))
    text = " ".join(map(str, expressions.top_two(SQL, [Sql(f"w{i}") for i in range(n)])))
    assert "CASE" not in text and "list_" not in text


def test_privelet_chord_sql_reads_no_list_and_each_factor_once():
    attrs = [pdp.Ordinal("a", 0, 60), pdp.Nominal("g", categories=list("xyz")), pdp.Ordinal("b", 0, 60),
             pdp.Ordinal("c", 0, 60)]
    rng = np.random.default_rng(1)
    frame = pl.DataFrame({"a": rng.integers(0, 61, 300), "g": rng.choice(list("xyz"), 300),
                          "b": rng.integers(0, 61, 300), "c": rng.integers(0, 61, 300)})
    release = frame.dp.privelet(attrs, epsilon=1.0, seed=3)
    axes = [_Axis(release, "t", k) for k in range(4)]
    assert not tail_bounds.lists_terms([ax.width(True) for ax in axes])  # the chord bound
    relation, variance, expression = accuracy_sql(release, axes)
    text = relation + variance + expression
    # the largest / second largest weights come from scalars and the label's row, not from lists
    assert "list_" not in text and "box.w1" not in text and "[CAST(" not in text
    # each Haar axis's level terms are computed once, for the variance and the half-width alike
    one_term = "(CASE WHEN ((box.s0 // 64) = ((box.e0 - 1) // 64)) THEN 0 ELSE"
    assert text.count(one_term) == 1
