"""Level-tuple strategies: least squares and its error against dense linear algebra, the
per-tuple sensitivity by enumeration, exact budgets, the optimiser and its fallback."""

from __future__ import annotations

import decimal
import itertools
import math
import time
from fractions import Fraction

import numpy as np
import pytest

import polars_dp as pdp
from polars_dp.errors import ParameterError
from polars_dp.kernels import block_levels as BL
from polars_dp.kernels import level_budgets as LB
from polars_dp.kernels import level_inference as LI
from polars_dp.noise import histogram_sensitivity

HIER = pdp.Hierarchy.from_dict({"g1": ["a", "b", "c"], "g2": ["d", "e", "f"]})


def block_matrix(axes, t) -> np.ndarray:
    """``A_t`` on the padded domain (rows: blocks, C order)."""
    out = np.ones((1, 1))
    for ax, level in zip(axes, t, strict=True):
        s = ax.sizes[level]
        a = np.kron(np.eye(ax.length // s), np.ones((1, s)))
        out = np.kron(out, a)
    return out


def dense_normal(axes, weights):
    m = sum(weights[t] * block_matrix(axes, t).T @ block_matrix(axes, t)
            for t in itertools.product(*(range(ax.count) for ax in axes)) if weights[t] > 0)
    return m


def fold_matrix(axes) -> np.ndarray:
    """``F``: padded cells -> real cells, the padding added to the last real cell."""
    out = np.ones((1, 1))
    for ax in axes:
        f = np.zeros((ax.n, ax.length))
        f[np.arange(ax.n), np.arange(ax.n)] = 1.0
        f[ax.n - 1, ax.n:] = 1.0
        out = np.kron(out, f)
    return out


CASES = {
    "1d-padded": [BL.bary_levels(6, 2)],
    "2d": [BL.AxisLevels(6, 6, (6, 3, 1)), BL.AxisLevels(4, 4, (4, 2, 1))],
    "3d-padded-nominal": [BL.bary_levels(5, 2), BL.nominal_levels(pdp.Nominal("n", HIER)),
                          BL.AxisLevels(3, 3, (3, 1))],
}


@pytest.mark.parametrize("name", CASES)
def test_gls_and_its_error_match_dense_least_squares(name):
    axes = CASES[name]
    rng = np.random.default_rng(7)
    shape = BL.tuple_shape(axes)
    weights = (0.25 + rng.random(shape)) * (rng.random(shape) < 0.5)
    weights[(-1,) * len(axes)] = 0.3  # the cells: every detail space identified
    x = rng.integers(0, 30, tuple(ax.n for ax in axes))
    xp = BL.pad(x, axes).ravel().astype(float)
    meas, rows, ys, ws = {}, [], [], []
    for t in itertools.product(*(range(c) for c in shape)):
        if weights[t] > 0:
            a = block_matrix(axes, t)
            y = a @ xp + rng.normal(size=a.shape[0])
            meas[t] = y.reshape([ax.length // ax.sizes[level] for ax, level in zip(axes, t, strict=True)])
            rows.append(a), ys.append(y), ws.append(np.full(a.shape[0], weights[t]))
    a, y, w = np.vstack(rows), np.concatenate(ys), np.concatenate(ws)
    m = a.T @ (w[:, None] * a)
    minv = np.linalg.inv(m)
    f = fold_matrix(axes)
    rhs = a.T @ (w * y)
    sol = np.linalg.solve(m, rhs)
    sol += np.linalg.solve(m, rhs - m @ sol)  # one step of iterative refinement
    want = f @ sol
    got = LI.gls(meas, weights, axes).ravel()
    assert np.abs(got - want).max() <= 1e-12 * np.abs(want).max()
    # the exact variance of every box, and of a workload, against q F M^-1 F^T q
    cov = f @ minv @ f.T
    nu = LI.inverse_eigenvalues(LI.eigenvalues(weights, axes))
    sizes = [ax.n for ax in axes]
    starts, stops = [], []
    for _ in range(12):
        lo, hi = [], []
        for n in sizes:
            s, t = sorted(rng.choice(n + 1, 2, replace=False))
            lo.append(s), hi.append(t)
        starts.append(lo), stops.append(hi)
    starts, stops = np.array(starts), np.array(stops)
    got_var = LI.range_variance(nu, axes, starts, stops)
    for s, t, v in zip(starts, stops, got_var, strict=True):
        q = np.zeros(sizes)
        q[tuple(slice(a, b) for a, b in zip(s, t, strict=True))] = 1.0
        assert v == pytest.approx(q.ravel() @ cov @ q.ravel(), rel=1e-10)
    attrs = [pdp.Ordinal(f"x{i}", 0, n - 1) for i, n in enumerate(sizes)]
    wl = pdp.workload.ranges(attrs) + 3 * pdp.workload.marginals(attrs, 1)
    costs, m_queries = LI.workload_costs(wl, attrs, axes)
    g = np.zeros((int(np.prod(sizes)),) * 2)
    for wt, per_axis in wl.axis_terms(attrs):
        term = np.ones((1, 1)) * wt
        for ax in per_axis:
            st, sp, ww = ax.intervals()
            gi = np.zeros((ax.n, ax.n))
            for s, t, u in zip(st, sp, ww, strict=True):
                q = np.zeros(ax.n)
                q[s:t] = 1
                gi += u * np.outer(q, q)
            term = np.kron(term, gi)
        g += term
    want_mse = np.trace(cov @ g) / wl.queries
    assert LI.mean_squared_error(nu, costs, m_queries) == pytest.approx(want_mse, rel=1e-10)


def test_unidentified_queries_have_infinite_variance():
    axes = [BL.AxisLevels(4, 4, (4, 2, 1))]
    weights = np.array([1.0, 1.0, 0.0])  # no cell level: single cells are not identified
    nu = LI.inverse_eigenvalues(LI.eigenvalues(weights, axes))
    v = LI.range_variance(nu, axes, np.array([[0], [0], [1]]), np.array([[2], [4], [2]]))
    assert np.isfinite(v[:2]).all() and v[2] == np.inf


def test_levels_must_nest_and_the_tuple_count_is_capped():
    with pytest.raises(ParameterError, match="do not nest"):
        BL.AxisLevels(12, 12, (12, 4, 3, 1))
    with pytest.raises(ParameterError, match="whole axis"):
        BL.AxisLevels(12, 12, (6, 3, 1))
    BL.AxisLevels(10, 16, (16, 4, 1))  # blocks need not divide the axis: padding, known zeros
    big = [BL.bary_levels(1 << 12, 2)] * 4
    with pytest.raises(ParameterError, match="exceed the cap"):
        LB.check_tuples(big)
    assert [ax.label for ax in BL.divisor_levels(1001)][:2] == ["7x11x13", "13x11x7"]
    assert BL.nominal_levels(pdp.Nominal("n", HIER)).sizes == (6, 3, 1)
    uneven = pdp.Hierarchy.from_dict({"g1": ["a", "b"], "g2": ["c", "d", "e"]})
    assert BL.nominal_levels(pdp.Nominal("u", uneven)).sizes == (5, 1)  # unequal groups skipped


@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
def test_every_tuple_has_the_stated_sensitivity_by_enumeration(neighbours):
    axes = [BL.bary_levels(3, 2), BL.AxisLevels(4, 4, (4, 2, 1))]
    delta = histogram_sensitivity(neighbours)
    shape = BL.tuple_shape(axes)
    strategy = LB.LevelStrategy(tuple(axes), LB.split_budget(np.ones(shape), 1.0), delta)
    x = np.random.default_rng(3).integers(0, 5, (3, 4))
    base = strategy.measure(x)
    cells = list(itertools.product(range(3), range(4)))
    changes = []
    for c in cells:
        if neighbours == "add_remove":
            for sign in (1, -1):
                y = x.copy()
                y[c] += sign
                changes.append(y)
        else:
            for c2 in cells:
                y = x.copy()
                y[c] -= 1
                y[c2] += 1
                changes.append(y)
    worst = {t: 0 for t in base}
    loss = Fraction(0)
    for y in changes:
        other = strategy.measure(y)
        total = Fraction(0)
        for t in base:
            moved = int(np.abs(other[t] - base[t]).sum())
            worst[t] = max(worst[t], moved)
            total += Fraction(moved) / strategy.scale(t)
        loss = max(loss, total)
    # never exceeded, and reached by every tuple (under replace, the one block of the whole
    # domain never moves: a replaced row stays in it)
    whole = (0,) * len(axes)
    assert all(v == delta for t, v in worst.items() if neighbours == "add_remove" or t != whole)
    assert worst[whole] == (1 if neighbours == "add_remove" else 0)
    assert strategy.epsilon == 1  # sequential composition: the budgets sum to epsilon exactly
    assert loss <= strategy.epsilon_spent <= strategy.epsilon


def test_budget_split_is_exact():
    shares = np.array([[0.1, 0.0], [np.pi, 1e-9]])
    eps = LB.split_budget(shares, Fraction(3, 7))
    assert sum(eps.flat) == Fraction(3, 7)
    assert eps[0, 1] == 0 and all(isinstance(e, Fraction) for e in eps.flat)
    with pytest.raises(ParameterError):
        LB.split_budget(np.zeros(3), 1.0)


def test_optimiser_improves_reads_only_public_inputs_and_falls_back():
    attrs = [pdp.Ordinal("x", 0, 63), pdp.Ordinal("y", 0, 63)]
    wl = pdp.workload.ranges(attrs)
    result = LB.choose_strategy(attrs, wl, 1.0, 1)
    assert result.optimised and result.error < result.uniform_error / 4
    assert result.strategy.epsilon == 1
    # the reported error is the exact one of the chosen strategy
    costs, m = LI.workload_costs(wl, attrs, result.strategy.axes)
    assert result.error == pytest.approx(result.strategy.mean_squared_error(costs, m))
    # one level tuple: nothing to optimise, the uniform split is kept and said so
    single = LB.choose_budgets((BL.AxisLevels(1, 1, (1,)),), np.ones(1), 1.0, 1.0, 1)
    assert not single.optimised and "could not improve" in single.note
    # about 2,000 tuples within 5 s of CPU
    axes = (BL.bary_levels(1 << 12, 2), BL.bary_levels(1 << 12, 2), BL.bary_levels(1 << 11, 2))
    assert 1500 <= np.prod(BL.tuple_shape(axes)) <= LB.MAX_TUPLES
    big = [pdp.Ordinal("a", 0, (1 << 12) - 1), pdp.Ordinal("b", 0, (1 << 12) - 1), pdp.Ordinal("c", 0, 2047)]
    costs, m = LI.workload_costs(pdp.workload.random_ranges(big), big, axes)
    start = time.process_time()
    out = LB.choose_budgets(axes, costs, m, 1.0, 1)
    assert time.process_time() - start < 5.0
    assert out.optimised


def _dlap_variance_reference(scale: Fraction) -> float:
    """``2q / (1 - q)²`` with ``q = e^(-1/b)`` in 60-digit decimals (no float range to leave)."""
    with decimal.localcontext() as ctx:
        ctx.prec = 60
        q = (-decimal.Decimal(scale.denominator) / decimal.Decimal(scale.numerator)).exp()
        return float(2 * q / (1 - q) ** 2)


@pytest.mark.parametrize("inverse", [0.001, 0.5, 1, 3, 50, 300, 709.5, 710.2, 711, 1000, 1500, 5000, 1e6])
def test_dlap_variance_is_the_closed_form_at_every_scale(inverse):
    """The variance is ``2q / (1 - q)²`` at every scale, tending to 0 (never an OverflowError
    where ``sinh(1 / 2b)²`` leaves the float range, past ``1 / b`` of about 710)."""
    scale = Fraction(1) / Fraction(inverse)
    got = LB.dlap_variance(scale)
    want = _dlap_variance_reference(scale)
    assert math.isfinite(got) and got >= 0.0
    if want > 1e-300:
        assert got == pytest.approx(want, rel=1e-12)
    else:  # past the float range: 0 or a subnormal, as the closed form rounds
        assert got <= 1e-300
    assert LB.dlap_variance(float(scale)) == got


def test_dlap_variance_keeps_the_sinh_form_wherever_it_is_finite():
    """Where ``1 / (2 sinh²(1 / 2b))`` is a finite float the variance is exactly that (the same
    bits as before the large-budget form existed); beyond, it keeps decreasing to 0."""
    previous = math.inf
    for inverse in [*np.linspace(1e-3, 709.0, 2001).tolist(), 709.5, 709.7]:  # 1 / 2b below 355
        value = LB.dlap_variance(1.0 / inverse)
        assert value == 0.5 / math.sinh(0.5 / (1.0 / inverse)) ** 2
        assert value <= previous
        previous = value
    for inverse in (711.0, 745.0, 746.0, 1e4, 1e300):
        value = LB.dlap_variance(1.0 / inverse)
        assert 0.0 <= value <= previous
        previous = value
    assert LB.dlap_variance(1e-4) == 0.0


def test_precisions_are_capped_only_past_the_float_range():
    """``1 / Var`` as computed before wherever every eigenvalue is at most ``2^511``; else each
    precision capped so that every eigenvalue is, and the error stays finite and positive."""
    axes = (BL.bary_levels(100, 2),)
    shape = BL.tuple_shape(axes)
    for eps, capped in [(1, False), (1000, False), (2500, False), (5000, True), (1e4, True), (1e9, True)]:
        strategy = LB.LevelStrategy(axes, LB.split_budget(np.ones(shape), eps), 1)
        w = strategy.weights
        halves = [0.5 / float(strategy.scale(t)) for t in strategy.measured]
        old = [1.0 / (0.5 / math.sinh(x) ** 2) if x < 355 else math.inf for x in halves]  # the former formula
        assert np.all(np.isfinite(w)) and np.all(w > 0)
        mu = LI.eigenvalues(w, axes)
        assert mu.max() <= LB.MAX_EIGENVALUE
        if not capped:
            assert w.tolist() == old
        else:
            assert np.all(w < np.asarray(old))
        nu = strategy.nu
        assert np.all(nu > 0) and np.all(nu * nu > 0)
        variance = strategy.range_variance(np.array([[0], [3]]), np.array([[100], [50]]))
        assert np.all(np.isfinite(variance)) and np.all(variance > 0)
    # a precision past any float (a variance that underflowed to 0) is capped too
    assert LB.precision(0.0) == math.inf and LB.precision(0.25) == 4.0
    w = LB.capped_precisions(np.array([math.inf] + [1.0] * (shape[0] - 1)), axes)
    assert np.all(np.isfinite(w)) and w[1:].tolist() == [1.0] * (shape[0] - 1)


def test_explicit_queries_cost_their_exact_mean_variance():
    attrs = [pdp.Ordinal("x", 0, 9), pdp.Nominal("n", HIER)]
    frame = pdp.random_workload(attrs, 300, seed=4)
    wl = pdp.workload.queries(attrs, frame) + 2 * pdp.workload.queries(attrs, frame.head(7))
    assert wl.queries == 300 + 14
    axes = [BL.bary_levels(10, 2), BL.nominal_levels(attrs[1])]
    strategy = LB.LevelStrategy(tuple(axes), LB.split_budget(np.ones(BL.tuple_shape(axes)), 1.0), 1)
    costs, m = LI.workload_costs(wl, attrs, axes)
    (_, lo, hi), (_, lo7, hi7) = wl.axis_boxes(attrs)
    per_query = strategy.range_variance(lo, hi)
    want = (per_query.sum() + 2 * per_query[:7].sum()) / m
    assert strategy.mean_squared_error(costs, m) == pytest.approx(want, rel=1e-12)
    assert np.array_equal(lo7, lo[:7]) and np.array_equal(hi7, hi[:7])
    with pytest.raises(ParameterError, match="no query"):
        pdp.workload.queries(attrs, frame.head(0))
    with pytest.raises(ParameterError, match="Kronecker"):
        pdp.workload.queries(attrs[:1], frame.select("id", "x_lo", "x_hi")) @ pdp.workload.identity(attrs[1])
