"""Per-tuple budgets of a level strategy, optimised for a declared workload from public inputs.

A strategy (:mod:`polars_dp.kernels.block_levels`) measures level tuple ``t`` with budget
``ε_t``: the integer counts of its blocks plus discrete Laplace noise of scale ``Δ / ε_t``.

Sensitivity.  Each tuple's blocks partition the (padded) domain, so one individual's row lies
in exactly one block of every tuple: adding or removing a row changes one count of each tuple
by 1 (L1 sensitivity ``Δ = 1`` under ``add_remove``); replacing a row moves a unit between at
most two blocks (``Δ = 2`` under ``replace``).  Measuring the tuples with ``ε_t`` each is
sequential composition: ``Σ_t ε_t = ε`` exactly (``Fraction``; :func:`split_budget`).  The exact
scale of tuple ``t`` is ``Δ / ε_t`` rounded up to the ``2^-20`` grid
(:func:`polars_dp.noise.exact_scale`), so it spends ``Δ / scale_t <= ε_t``.  (With a privacy
unit of ``k`` rows per person every count moves by up to ``k``: multiply ``Δ`` by ``k``.)

Budgets.  With precisions ``w_t = 1 / Var(DLap(Δ / ε_t)) ≈ ε_t² / (2 Δ²)`` (:func:`dlap_variance`,
finite and tending to 0 at any budget; capped where a budget of hundreds of ``Δ`` would take the
least squares out of the float range, :func:`capped_precisions`) the workload's mean
squared error is ``F(ε) = Σ_a C_a / μ_a(ε) / m`` (:mod:`polars_dp.kernels.level_inference`),
homogeneous of degree -2 in ``ε``.  It is not convex in ``ε``, so the optimiser (public
inputs only: the domain's levels, the workload's Gram statistics, ``ε`` and ``Δ``; no data)

1. solves the relaxation that is convex in ``w`` (minimise ``Σ_a C_a / μ_a(w)`` over the
   simplex ``Σ_t w_t = 1``, an A-optimal design problem) by multiplicative updates
   ``w_t ← w_t (g_t / F)^p``, ``g_t = S_t Σ_{a ≤ t} C_a / μ_a²`` (``p = 1`` when that lowers
   ``F``, else the monotone ``p = 1/2``), for at most :data:`RELAXATION_ITERATIONS` steps
   (it only seeds the next stage);
2. descends on the simplex of ``ε`` with multiplicative steps ``ε_t ← ε_t (ε_t g_t / F)^ρ``
   (the fixed point is the KKT condition), halving ``ρ`` whenever a step does not lower ``F``,
   from that seed (``ε ∝ √w`` and ``ε ∝ w``), from the uniform split, from hierarchy-like
   seeds (every ``k``-th level on each axis, the total excluded) and from :data:`RESTARTS`
   sparse seeds of a generator with a fixed seed (the budgets are a deterministic function of
   the public inputs), until a step gains at most :data:`DESCENT_TOLERANCE` of ``F``;
3. grows the support of the best few: a step never revives a tuple at zero budget (its
   gradient vanishes there), so an unmeasured tuple of largest ``g_t`` is given a fifth of
   the budget and the descent rerun, kept when it lowers ``F``;
4. keeps the best, rounds it to ``ε k_t / 2^20`` with integers ``Σ k_t = 2^20`` (largest
   remainders), and compares its exact error with the uniform split over every tuple: when it
   cannot improve on uniform, the uniform split is returned and :attr:`Budgets.note` says so.

Speed.  ``F`` and ``g`` cost one suffix and one prefix sum over the tuple lattice.  Every
descent of a stage runs in one batch (:func:`_descend_batch`: one evaluation per step gives
``F`` and ``g`` of every seed still moving; each seed follows the steps it would follow alone),
so a stage costs the steps of its slowest seed, not their sum.  The support-growth candidates
of all chains of a round race in one batch: once a candidate is below the error to beat, those
after it stop, and one still above it after :data:`INSERT_STEPS` steps is dropped.  The level
choice (:func:`choose_strategy`) grows only candidate chains whose seed descents end within
:data:`SCREEN_MARGIN` of the best error so far.  About 2,000 tuples take about 1.5 s of CPU
(the tests hold it under 5 s); ``python -m benchmarks.bench_strategies --optimiser`` prints
the times per workload.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from polars_dp.domains.attributes import Attribute
from polars_dp.domains.workload import Workload
from polars_dp.errors import ParameterError
from polars_dp.kernels.block_levels import (
    AxisLevels,
    block_cells,
    candidate_levels,
    pad,
    pyramid,
    tuple_shape,
)
from polars_dp.kernels.level_inference import (
    axis_detail_traces,
    eigenvalues,
    inverse_eigenvalues,
    mean_squared_error,
    range_variance,
    workload_costs,
)
from polars_dp.noise import exact_scale

#: At most this many level tuples (the product of the axes' level counts) per strategy.
MAX_TUPLES = 4096
#: Budgets are multiples of ``epsilon / BUDGET_GRID``.
BUDGET_GRID = 1 << 20
#: Iterations of each optimisation stage.
ITERATIONS = 600
#: Descents from sparse random seeds (a fixed generator: the budgets are a function of the inputs).
RESTARTS = 6
RESTART_SEED = 20180401
#: Support growth: candidates tried per round, and rounds.
INSERT_CANDIDATES = 6
INSERT_ROUNDS = 20
#: Support growth starts from this many of the best descents.
INSERT_FROM = 3
#: Support growth: the share of the budget a candidate tuple starts with.
INSERT_SHARE = 0.2
#: Early stopping: a descent stops when a step lowers the objective by at most this fraction.
DESCENT_TOLERANCE = 1e-10
#: The relaxation (a seed only) stops after this many steps, or after a step lowering its
#: objective by at most :data:`RELAXATION_TOLERANCE` of it.
RELAXATION_ITERATIONS = 100
RELAXATION_TOLERANCE = 1e-8
#: Support growth: a candidate still above the error to beat after this many steps is dropped
#: (None: every candidate descends to convergence; 60 gives the same budgets on every
#: workload of ``benchmarks/bench_strategies.py``).
INSERT_STEPS: int | None = 60
#: Level choice: a candidate chain whose seed descents (before support growth) end above the
#: best error so far by more than this fraction is not grown (None: every candidate is grown).
#: Support growth lowered the error of a chain by at most 3.2 % on the benchmark's census
#: workloads.
SCREEN_MARGIN: float | None = 0.05
#: Level choice: the seed descents that screen a candidate chain (every chain after the first)
#: stop once a step lowers the objective by at most this fraction; a chain kept continues them
#: at :data:`DESCENT_TOLERANCE` before support growth.  On the census random-range workload this
#: halves the level choice's CPU time (1.5 s to 0.75 s) with the same levels and budgets; every
#: RMSE of ``benchmarks/bench_strategies.py`` stays within 1e-6 of the unscreened value.
SCREEN_TOLERANCE = 1e-5


#: The largest eigenvalue ``μ_a = Σ_{t ≥ a} w_t S_t`` a level strategy's precisions may give
#: (:func:`capped_precisions`): below it ``ν = 1 / μ`` and ``ν²`` are normal floats and ``w² b²
#: S`` is finite, so the error bars of :mod:`polars_dp.plans.hierarchical` and the least
#: squares' weighted sums (counts below ``2^64``) neither overflow nor underflow.
MAX_EIGENVALUE = 2.0 ** 511


def dlap_variance(scale: Fraction | float) -> float:
    """Variance of the discrete Laplace of scale ``b``: ``2q / (1 - q)² = 1 / (2 sinh²(1 / 2b))``
    with ``q = e^(-1/b)``; it tends to 0 with ``b``.  The ``sinh`` form wherever ``sinh²`` is a
    finite float, else (``1 / 2b`` past about 355) the ``q`` form, which is then ``2q`` to
    rounding and underflows to 0 (past ``1 / b`` of about 745) rather than overflowing."""
    x = 0.5 / float(scale)
    try:
        return 0.5 / math.sinh(x) ** 2
    except OverflowError:
        q = math.exp(-2.0 * x)
        return 2.0 * q / (1.0 - q) ** 2


def precision(variance: float) -> float:
    """``1 / variance``: a tuple's precision (``inf`` where the variance underflowed to 0 or is
    too small for its reciprocal; :func:`capped_precisions` then caps it)."""
    return 1.0 / variance if variance > 0 else math.inf


def capped_precisions(weights: np.ndarray, axes: Sequence[AxisLevels]) -> np.ndarray:
    """The precisions ``weights`` (tuple-shaped) when ``μ_0 = Σ_t w_t S_t`` (every eigenvalue's
    bound) is at most :data:`MAX_EIGENVALUE` (``2^511``), else each capped at ``2^(511 - e)``
    with ``2^e >= Σ_t S_t``, which brings every ``μ`` below it.

    Only a tuple of a budget of hundreds of ``Δ`` comes near the cap (the discrete Laplace
    variance is about ``2 e^(-ε_t / Δ)`` at such scales: noise that is 0 except with a
    probability below ``2^(e - 511)``).  A capped tuple is weighted as if its variance were ``1 /
    cap``: the least squares stay unbiased (any positive weights do) and every error computed
    from the weights bounds the true one from above.  Public inputs only."""
    cells = block_cells(axes)
    with np.errstate(over="ignore"):
        top = float(np.sum(weights * cells))
    if top <= MAX_EIGENVALUE:
        return weights
    return np.minimum(weights, math.ldexp(MAX_EIGENVALUE, -math.frexp(float(cells.sum()))[1]))


def check_tuples(axes: Sequence[AxisLevels]) -> None:
    count = math.prod(tuple_shape(axes))
    if count > MAX_TUPLES:
        raise ParameterError(f"{count} level tuples exceed the cap of {MAX_TUPLES}; give fewer levels "
                             "per axis", parameter="levels")


# ---------------------------------------------------------------------------- objective
def _flat_sums(values: np.ndarray, shape: tuple[int, ...], suffix: bool) -> np.ndarray:
    """Suffix (``t >= a``) or prefix (``a <= t``) sums over the tuple lattice ``shape`` of flat
    rows (``values`` of shape ``(batch, prod(shape))``, axis 0 the batch), axis by axis with
    the summed axis leading (each level one vectorised add over every other index), then
    rotated to the end: after every axis the layout is back.  Sequential adds in a fixed
    order: the same bits on every machine (no BLAS)."""
    out = np.array(values.T, order="C")  # (*shape, batch), a copy: the adds are in place
    for n in shape:
        rows = out.reshape(n, -1)
        if suffix:
            for level in range(n - 2, -1, -1):
                rows[level] += rows[level + 1]
        else:
            for level in range(1, n):
                rows[level] += rows[level - 1]
        out = np.ascontiguousarray(rows.T)
    return out.reshape(values.shape)


class _Objective:
    """``F(ε) = Σ_a C_a / μ_a`` with ``μ = suffix sums of S ε²`` and its scaled gradient,
    evaluated together on a batch of points (one pass of lattice sums each way per batch)."""

    def __init__(self, costs: np.ndarray, cells: np.ndarray):
        self.positive_flat = (costs > 0).reshape(1, -1)
        self.all_positive = bool(self.positive_flat.all())
        self.shape = costs.shape
        self._flat = (cells.reshape(1, -1), costs.reshape(1, -1))

    def batch(self, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(F, g)`` at every point ``w`` (shape ``(batch, *tuples)``, or ``(batch, tuples)``
        flat): ``F = inf`` where the workload reaches a detail space with ``μ = 0``;
        ``g_t = S_t Σ_{a ≤ t} C_a / μ_a²`` (``-∂F/∂w_t``, capped at ``1e300``), shaped as ``w``."""
        flat = w.reshape(w.shape[0], -1)
        cells, costs = self._flat
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            nu = 1.0 / _flat_sums(flat * cells, self.shape, True)  # inf where μ = 0 (μ >= 0)
            # C ν is inf where C > 0 and μ = 0, so F is inf there
            cnu = costs * nu if self.all_positive else np.where(self.positive_flat, costs * nu, 0.0)
            f = cnu.sum(axis=1)
            term = np.minimum(cnu * nu, 1e300)
            if not self.all_positive:
                term = np.where(self.positive_flat, term, 0.0)
        return f, (cells * _flat_sums(term, self.shape, False)).reshape(w.shape)

    def value(self, w: np.ndarray) -> float:
        return float(self.batch(w[None])[0][0])

    def g(self, w: np.ndarray) -> np.ndarray:
        """``g_t = S_t Σ_{a ≤ t} C_a / μ_a²`` (``-∂F/∂w_t``)."""
        return self.batch(w[None])[1][0]


def _relaxation(obj: _Objective, start: np.ndarray) -> np.ndarray:
    """Minimise ``F(w)`` over ``Σ w = 1`` (convex): multiplicative updates ``w (g / F)^p``,
    ``p = 1`` when that lowers ``F``, else the monotone ``p = 1/2`` (both trial points
    evaluated in one batch)."""
    w = start / start.sum()
    f_all, g_all = obj.batch(w[None])
    f, g = float(f_all[0]), g_all[0]
    powers = np.array([1.0, 0.5]).reshape((2,) + (1,) * w.ndim)
    for _ in range(RELAXATION_ITERATIONS):
        trial = w * (g / f) ** powers
        trial /= trial.sum(axis=tuple(range(1, trial.ndim)), keepdims=True)
        f_trial, g_trial = obj.batch(trial)
        k = 0 if f_trial[0] < f else 1
        if not f_trial[k] < f:
            break
        done = f - f_trial[k] <= RELAXATION_TOLERANCE * f
        w, f, g = trial[k], float(f_trial[k]), g_trial[k]
        if done:
            break
    return w


def _descend_batch(obj: _Objective, seeds: np.ndarray, limits: np.ndarray | int = ITERATIONS,
                   tolerance: float = DESCENT_TOLERANCE, race: tuple[np.ndarray, np.ndarray] | None = None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Minimise ``F(ε²)`` over ``Σ ε = 1`` from every seed (axis 0) at once: multiplicative
    steps ``ε_t (ε_t g_t / F)^ρ`` with ``ρ`` grown by 1.5 (at most 1) after a step that lowers
    ``F`` and halved after one that does not; a descent stops after ``limits`` steps, when a
    step lowers ``F`` by at most ``tolerance · F`` or when ``ρ < 1e-6``.  Each seed follows
    exactly the steps it would follow alone; one evaluation per step gives ``F`` and ``g``.

    ``race = (groups, targets)``: seeds are candidates in groups (consecutive rows, in order of
    preference) and only the first of each group ending below its target matters, so once a
    row is below its target (``F`` only decreases) the rows after it in its group stop; with
    :data:`INSERT_STEPS` set, a row still above its target after that many steps stops too."""
    count = seeds.shape[0]
    out = seeds.reshape(count, -1) / seeds.reshape(count, -1).sum(axis=1, keepdims=True)
    out_f, g = obj.batch(out * out)
    limits = np.broadcast_to(np.asarray(limits), (count,))
    if race is not None:
        groups, targets = race
        teams = [np.flatnonzero(groups == group) for group in np.unique(groups)]
    # the rows still moving, compacted whenever some stop: their ids, ε, F, g and ρ
    ids = np.flatnonzero(np.isfinite(out_f) & (limits > 0))  # an infinite start never moves
    eps, f, g, rho = out[ids], out_f[ids], g[ids], np.full(ids.size, 0.5)
    step = 0
    while ids.size:
        factor = np.maximum(eps * g / f[:, None], 1e-300)  # the ratio is 1 on the support at a KKT point
        partial = rho < 1.0  # x ** 1 = x: the power only where ρ < 1
        if partial.all():
            factor = np.power(factor, rho[:, None])
        elif partial.any():
            factor[partial] = np.power(factor[partial], rho[partial, None])
        new = eps * factor
        new[eps < 1e-12] = 0.0
        new /= new.sum(axis=1, keepdims=True)
        f_new, g_new = obj.batch(new * new)
        better = f_new < f
        stop = better & (f - f_new <= tolerance * f)
        eps = np.where(better[:, None], new, eps)
        g = np.where(better[:, None], g_new, g)
        f = np.where(better, f_new, f)
        rho = np.where(better, np.minimum(1.0, rho * 1.5), rho / 2)
        step += 1
        stop |= (rho < 1e-6) | (limits[ids] <= step)
        if race is not None:
            out_f[ids] = f
            below = out_f < targets
            late = np.zeros(count, dtype=bool)
            for members in teams:
                hit = members[below[members]]
                if hit.size:
                    late[members[members > hit[0]]] = True
            if INSERT_STEPS is not None and step >= INSERT_STEPS:
                late |= ~below
            stop |= late[ids]
        if stop.any():
            out[ids[stop]], out_f[ids[stop]] = eps[stop], f[stop]
            keep = ~stop
            ids, eps, f, g, rho = ids[keep], eps[keep], f[keep], g[keep], rho[keep]
    return out.reshape(seeds.shape), out_f


def _insert(obj: _Objective, chains: list[tuple[np.ndarray, float]]) -> list[tuple[np.ndarray, float]]:
    """Grow the supports: for each chain, give an unmeasured tuple of largest ``g_t`` a fifth of
    the budget and descend again; keep the first of :data:`INSERT_CANDIDATES` (by ``g_t``) that
    lowers ``F``; repeat while one does, at most :data:`INSERT_ROUNDS` times.  The candidates of
    every chain in a round descend in one batch."""
    chains = list(chains)
    growing = [True] * len(chains)
    for _ in range(INSERT_ROUNDS):
        seeds: list[np.ndarray] = []
        owner: list[int] = []
        for c, (eps, _) in enumerate(chains):
            if not growing[c]:
                continue
            g = obj.g(eps * eps)
            order = np.argsort(np.where(eps > 0, -np.inf, g), axis=None, kind="stable")[::-1]
            for flat in order[:INSERT_CANDIDATES]:
                if eps.flat[flat] > 0:  # every tuple already measured
                    break
                seed = (1.0 - INSERT_SHARE) * eps
                seed.flat[flat] += INSERT_SHARE
                seeds.append(seed)
                owner.append(c)
            growing[c] = owner[-1:] == [c]
        if not seeds:
            break
        owners = np.asarray(owner)
        targets = np.array([chains[c][1] * (1 - 1e-9) for c in owner])
        found, values = _descend_batch(obj, np.stack(seeds), race=(owners, targets))
        for c in np.unique(owners):
            f = chains[c][1]
            for k in np.flatnonzero(owners == c):
                if values[k] < f * (1 - 1e-9):
                    chains[c] = (found[k], float(values[k]))
                    break
            else:
                growing[c] = False
    return chains


def _spaced_seeds(axes: Sequence[AxisLevels]) -> list[np.ndarray]:
    """Hierarchy-like seeds: on every axis the cells and every ``k``-th level above them (the
    total excluded), all combinations across the axes, for ``k = 1, 2, ...``."""
    out = []
    for k in range(1, max(ax.count for ax in axes)):
        seed = np.ones(())
        for ax in axes:
            pick = np.zeros(ax.count)
            pick[ax.count - 1:0:-k] = 1.0
            if ax.count == 1:
                pick[0] = 1.0
            seed = np.multiply.outer(seed, pick)
        out.append(seed)
    return out


def optimise_shares(costs: np.ndarray, axes: Sequence[AxisLevels]) -> np.ndarray:
    """Budget shares ``ε_t / ε`` (tuple-shaped, summing to 1) minimising the workload error
    (module docstring, steps 1-2; then support growth by :func:`_insert` and
    :data:`RESTARTS` descents from sparse seeds of a fixed public generator).  Public inputs
    only, deterministic."""
    return _grow(_seed_descents(costs, axes))


@dataclass
class _Descents:
    """The first stage of :func:`optimise_shares`: the descents from every seed, best first."""

    obj: _Objective
    uniform: np.ndarray
    uniform_f: float
    found: list[tuple[float, np.ndarray]]

    @property
    def best_f(self) -> float:
        return min([self.uniform_f] + [f for f, _ in self.found[:1]])


def _seed_descents(costs: np.ndarray, axes: Sequence[AxisLevels], tolerance: float = DESCENT_TOLERANCE
                   ) -> _Descents:
    check_tuples(axes)
    obj = _Objective(np.maximum(costs, 0.0), block_cells(axes))
    uniform = np.ones(tuple_shape(axes))
    w = _relaxation(obj, uniform)
    uniform = uniform / uniform.sum()
    seeds = [np.sqrt(w), w, uniform, *_spaced_seeds(axes)]
    rng = np.random.default_rng(RESTART_SEED)
    seeds += [rng.random(uniform.shape) ** 4 for _ in range(RESTARTS)]
    usable = [i for i, s in enumerate(seeds) if np.all(np.isfinite(s)) and s.sum() > 0]
    limits = np.array([ITERATIONS if i < len(seeds) - RESTARTS else ITERATIONS // 3 for i in usable])
    found_eps, found_f = _descend_batch(obj, np.stack([seeds[i] for i in usable]), limits, tolerance)
    found = sorted((float(f), i, k) for k, (i, f) in enumerate(zip(usable, found_f, strict=True))
                   if math.isfinite(f))
    return _Descents(obj, uniform, obj.value(uniform**2), [(f, found_eps[k]) for f, _, k in found])


def _refined(start: _Descents) -> _Descents:
    """The descents of ``start`` continued at :data:`DESCENT_TOLERANCE` (from where a looser
    tolerance stopped them), best first."""
    eps, values = _descend_batch(start.obj, np.stack([e for _, e in start.found]))
    found = sorted((float(f), k) for k, f in enumerate(values) if math.isfinite(f))
    return _Descents(start.obj, start.uniform, start.uniform_f, [(f, eps[k]) for f, k in found])


def _grow(start: _Descents) -> np.ndarray:
    """The uniform split or a grown chain, whichever is first of the least error."""
    chains = _insert(start.obj, [(eps, f) for f, eps in start.found[:INSERT_FROM]])
    return min([(start.uniform, start.uniform_f), *chains], key=lambda chain: chain[1])[0]


def split_budget(shares: np.ndarray, epsilon: float | Fraction) -> np.ndarray:
    """``ε_t = ε k_t / 2^20`` (object array of ``Fraction``) with integers ``k_t >= 0``,
    ``Σ k_t = 2^20`` (largest remainders), so ``Σ_t ε_t = ε`` exactly."""
    shares = np.asarray(shares, dtype=np.float64)
    if np.any(shares < 0) or not shares.sum() > 0:
        raise ParameterError("budget shares must be >= 0 with a positive sum", parameter="budgets")
    raw = shares / shares.sum() * BUDGET_GRID
    k = np.floor(raw).astype(np.int64)
    short = BUDGET_GRID - int(k.sum())
    if short:
        order = np.argsort(-(raw - k), axis=None, kind="stable")[:short]
        np.add.at(k.reshape(-1), order, 1)
    eps = Fraction(epsilon)
    out = np.empty(shares.shape, dtype=object)
    for idx, kk in np.ndenumerate(k):
        out[idx] = eps * Fraction(int(kk), BUDGET_GRID)
    return out


# ---------------------------------------------------------------------------- the strategy
@dataclass(frozen=True)
class LevelStrategy:
    """Level tuples measured with exact budgets (module docstring).

    ``axes``: the levels per axis; ``epsilons``: ``ε_t`` per tuple (object array of
    ``Fraction``, tuple-shaped, ``0``: not measured); ``sensitivity``: ``Δ`` of one tuple's
    counts (1 under add/remove-one, 2 under replace-one, :func:`polars_dp.noise.histogram_sensitivity`)."""

    axes: tuple[AxisLevels, ...]
    epsilons: np.ndarray
    sensitivity: int

    @property
    def measured(self) -> list[tuple[int, ...]]:
        return [t for t, e in np.ndenumerate(self.epsilons) if e > 0]

    @property
    def epsilon(self) -> Fraction:
        """``Σ_t ε_t`` (exact)."""
        return sum((Fraction(e) for e in self.epsilons.flat), Fraction(0))

    def scale(self, t: tuple[int, ...]) -> Fraction:
        """Exact scale of tuple ``t``: ``Δ / ε_t`` rounded up to the ``2^-20`` grid."""
        return exact_scale(self.sensitivity, self.epsilons[t])

    @property
    def epsilon_spent(self) -> Fraction:
        """``Σ_t Δ / scale_t <= Σ_t ε_t`` (exact)."""
        return sum((Fraction(self.sensitivity) / self.scale(t) for t in self.measured), Fraction(0))

    @property
    def weights(self) -> np.ndarray:
        """Precision ``1 / Var`` of each tuple's noise (exact discrete Laplace variance), capped
        where it must be (:func:`capped_precisions`)."""
        out = np.zeros(self.epsilons.shape)
        for t in self.measured:
            out[t] = precision(dlap_variance(self.scale(t)))
        return capped_precisions(out, self.axes)

    @property
    def nu(self) -> np.ndarray:
        return inverse_eigenvalues(eigenvalues(self.weights, self.axes))

    def measure(self, counts: np.ndarray) -> dict[tuple[int, ...], np.ndarray]:
        """The exact integer block counts of every measured tuple (no noise: the caller adds
        ``DLap(scale(t))`` to each)."""
        counts = np.asarray(counts)
        if counts.dtype.kind not in "iu":
            raise ParameterError("counts must be integers (exact counts per cell)", parameter="counts")
        sums = pyramid(pad(counts.astype(np.int64), self.axes), self.axes)
        return {t: sums[t] for t in self.measured}

    def range_variance(self, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
        return range_variance(self.nu, self.axes, starts, stops)

    def mean_squared_error(self, costs: np.ndarray, queries: float) -> float:
        return mean_squared_error(self.nu, costs, queries)


@dataclass(frozen=True)
class Budgets:
    """The optimiser's outcome: the strategy, its exact mean squared error over the workload,
    that of the uniform split, whether the optimised split was kept and a note."""

    strategy: LevelStrategy
    error: float
    uniform_error: float
    optimised: bool
    note: str


def choose_budgets(axes: Sequence[AxisLevels], costs: np.ndarray, queries: float, epsilon: float | Fraction,
                   sensitivity: int) -> Budgets:
    """Optimised budgets for a workload with costs ``C``
    (:func:`polars_dp.kernels.level_inference.workload_costs`),
    or the uniform split over every tuple when the optimiser cannot improve on it."""
    axes = tuple(axes)
    return _budgets(axes, costs, queries, epsilon, sensitivity, optimise_shares(costs, axes))


def _budgets(axes: tuple[AxisLevels, ...], costs: np.ndarray, queries: float, epsilon: float | Fraction,
             sensitivity: int, shares: np.ndarray) -> Budgets:
    uniform = LevelStrategy(axes, split_budget(np.ones(tuple_shape(axes)), epsilon), sensitivity)
    uniform_error = uniform.mean_squared_error(costs, queries)
    chosen = LevelStrategy(axes, split_budget(shares, epsilon), sensitivity)
    error = chosen.mean_squared_error(costs, queries)
    if not error < uniform_error:
        return Budgets(uniform, uniform_error, uniform_error, False,
                       "the budget optimisation could not improve on the uniform split; uniform kept")
    return Budgets(chosen, error, uniform_error, True, f"budgets optimised for the workload: "
                   f"{len(chosen.measured)} of {chosen.epsilons.size} level tuples measured")


def choose_strategy(attributes: Sequence[Attribute], workload: Workload, epsilon: float | Fraction,
                    sensitivity: int, levels: Sequence[AxisLevels] | None = None, passes: int = 2) -> Budgets:
    """Levels and budgets for ``workload``: each axis's chain picked among
    :func:`polars_dp.kernels.block_levels.candidate_levels` (coordinate search, ``passes``
    rounds) unless ``levels`` are given, then :func:`choose_budgets`.  Public inputs only."""
    attrs = tuple(attributes)
    if levels is not None:
        axes = tuple(levels)
        if len(axes) != len(attrs) or any(ax.n != a.n_cells for ax, a in zip(axes, attrs, strict=True)):
            raise ParameterError("give one AxisLevels per attribute, over its number of cells",
                                 parameter="levels")
        costs, m = workload_costs(workload, attrs, axes)
        return choose_budgets(axes, costs, m, epsilon, sensitivity)
    options = [candidate_levels(a) for a in attrs]
    current = [opts[-1] if len(opts) > 1 and opts[-1].padded else opts[0] for opts in options]
    # The chains are compared at epsilon = Delta = 1: the optimal shares of a chain do not depend
    # on the scale (the continuous error is (2 Delta^2 / epsilon^2) sum_t c_t / share_t^2), so the
    # levels chosen do not either; only the chosen chain's budgets are made at the given epsilon.
    memo: dict[tuple[int, ...], tuple[Budgets, np.ndarray, float, np.ndarray] | None] = {}
    scale = 2.0  # Var(Lap(1/ε_t)) = 2/ε_t² at ε = Δ = 1
    terms = workload.axis_terms(attrs)
    boxes = bool(workload.axis_boxes(attrs))
    traces: dict[tuple[int, int, int], np.ndarray] = {}

    def costs_of(pick: Sequence[AxisLevels], key: tuple[int, ...]) -> tuple[np.ndarray, float]:
        """:func:`~polars_dp.kernels.level_inference.workload_costs` with each axis's detail
        traces computed once per chain across the candidates (explicit boxes: recomputed)."""
        if boxes:
            return workload_costs(workload, attrs, pick)
        costs = np.zeros(tuple_shape(pick))
        for k, (weight, per_axis) in enumerate(terms):
            term = np.full((), weight)
            for i, (ax_w, ax) in enumerate(zip(per_axis, pick, strict=True)):
                if (k, i, key[i]) not in traces:
                    traces[(k, i, key[i])] = axis_detail_traces(ax_w, ax)
                term = np.multiply.outer(term, traces[(k, i, key[i])])
            costs += term
        return costs, workload.queries

    def evaluate(pick: Sequence[AxisLevels], bound: float = math.inf
                 ) -> tuple[Budgets, np.ndarray, float, np.ndarray] | None:
        """The budgets of ``pick``, or None when its seed descents (stopped at
        :data:`SCREEN_TOLERANCE`) stay above ``bound`` by more than :data:`SCREEN_MARGIN` (it is
        then not expected to improve on the best so far)."""
        key = tuple(options[i].index(ax) for i, ax in enumerate(pick))
        if key not in memo:
            costs, m = costs_of(pick, key)
            margin = SCREEN_MARGIN
            screened = margin is not None and math.isfinite(bound)  # the first chain is never screened
            first = _seed_descents(costs, tuple(pick), SCREEN_TOLERANCE if screened else DESCENT_TOLERANCE)
            if margin is not None and screened and first.best_f * scale / m > bound * (1 + margin):
                memo[key] = None
            else:
                if screened and SCREEN_TOLERANCE != DESCENT_TOLERANCE:
                    first = _refined(first)
                shares = _grow(first)
                memo[key] = (_budgets(tuple(pick), costs, m, Fraction(1), 1, shares), costs, m, shares)
        return memo[key]

    found = evaluate(current)
    assert found is not None
    best = found[0]
    for _ in range(passes):
        changed = False
        for i, opts in enumerate(options):
            for ax in opts:
                if ax is current[i]:
                    continue
                trial = [*current[:i], ax, *current[i + 1:]]
                if math.prod(c.count for c in trial) > MAX_TUPLES:
                    continue
                result = evaluate(trial, best.error)
                if result is not None and result[0].error < best.error:
                    found, best, current, changed = result, result[0], trial, True
        if not changed:
            break
    _, costs, m, shares = found
    return _budgets(tuple(current), costs, m, epsilon, sensitivity, shares)


__all__ = ["BUDGET_GRID", "ITERATIONS", "MAX_EIGENVALUE", "MAX_TUPLES", "Budgets", "LevelStrategy",
           "capped_precisions", "check_tuples", "choose_budgets", "choose_strategy", "dlap_variance",
           "optimise_shares", "precision", "split_budget"]
