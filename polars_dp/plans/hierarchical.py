"""Plans of the hierarchical mechanism: level tuples with per-tuple budgets, before data.

Strategy (Qardaji, Yang, Li, VLDB 2013: hierarchies of equal fan-out with least squares;
McKenna et al., VLDB 2018: Kronecker strategies optimised for a declared workload).  Each axis
carries a chain of nested block levels (:mod:`polars_dp.kernels.block_levels`: level 0 the whole
axis, the last level the cells); a *level tuple* ``t`` picks one level per axis and measuring it
means the integer counts of its product blocks.

Calibration (the one place it is computed)
------------------------------------------
Each tuple's blocks partition the (padded) domain, so one row lies in exactly one block of every
tuple: its counts have L1 sensitivity ``Delta = 1`` under ``add_remove`` (one count moves by 1)
and ``Delta = 2`` under ``replace`` (a unit moves between at most two blocks), times ``k`` with a
privacy unit of ``k`` rows.  Tuple ``t`` gets ``epsilon_t = epsilon k_t / 2^20`` with integers
``k_t >= 0``, ``sum k_t = 2^20`` (exact rationals, :func:`~polars_dp.kernels.level_budgets.split_budget`),
and discrete Laplace noise of scale ``Delta / epsilon_t`` rounded up to the ``2^-20`` grid
(:func:`polars_dp.noise.exact_scale`); by sequential composition the release spends
``sum_t Delta / scale_t <= sum_t epsilon_t = epsilon``.  The budgets are uniform over every tuple
unless a ``workload`` is declared: then they (and, unless given, the levels) minimise the
workload's exact expected error (:func:`~polars_dp.kernels.level_budgets.choose_strategy`;
public inputs only, the data is never read), falling back to uniform when that does not improve
(:attr:`HierarchicalPlan.budget_note` says so).

Error before data
-----------------
The release is the least-squares estimate of the cells from every measured tuple
(:mod:`polars_dp.kernels.level_inference`): a box's noise variance is
``sum_a nu_a prod_i q_i^T P_{a_i} q_i`` in closed form, written once over ops in the release's
:class:`~polars_dp.plans.noise_model.LevelLaplace` noise model (Python and SQL).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any, ClassVar, TypeAlias

import numpy as np
import polars as pl

from polars_dp.domains.attributes import Attribute
from polars_dp.domains.queries import PASSTHROUGH, as_query_frame, query_ranges
from polars_dp.domains.workload import Workload as DeclaredWorkload
from polars_dp.errors import ParameterError, QueryError, ReleaseFormatError
from polars_dp.kernels.block_levels import AxisLevels, bary_levels, block_cells, candidate_levels, tuple_shape
from polars_dp.kernels.level_budgets import (
    BUDGET_GRID,
    LevelStrategy,
    capped_precisions,
    check_tuples,
    choose_strategy,
    dlap_variance,
    precision,
    split_budget,
)
from polars_dp.kernels.level_inference import (
    eigenvalues,
    inverse_eigenvalues,
    mean_squared_error,
    suffix_sums,
    workload_costs,
)
from polars_dp.noise import MAX_COUNT_SCALE, laplace_scale
from polars_dp.plans.base import INPUTS, OMIT, Field, register_plan
from polars_dp.plans.grid import (
    EPSILON_CAP,
    GRID_OPTIONS,
    GridPlan,
    check_accuracy_target,
    check_alpha,
    declared_workload,
)
from polars_dp.plans.noise_model import LevelLaplace
from polars_dp.plans.options import Option

#: Per-column levels: a ``b`` for the ``b``-ary chain, or the block sizes from the whole axis to 1.
Levels: TypeAlias = Mapping[str, int | Sequence[int]] | None
#: A declared workload (:mod:`polars_dp.workload`) or explicit queries (a frame as ``range_counts`` takes it).
LevelWorkload: TypeAlias = DeclaredWorkload | pl.DataFrame | pl.LazyFrame | None


def default_levels(attribute: Attribute) -> AxisLevels:
    """The levels an axis takes unless given: a nominal axis its hierarchy's equal-size levels;
    an ordinal one the binary chain on the axis padded to a power of two when its size is not
    one, else its finest divisor chain (ascending prime factors: binary for a power of two)."""
    options = candidate_levels(attribute)
    return options[-1] if len(options) > 1 and options[-1].padded else options[0]


def axis_levels(attribute: Attribute, spec: int | Sequence[int] | None) -> AxisLevels:
    """One axis's levels from ``spec``: ``None`` the default, an integer ``b >= 2`` the ``b``-ary
    chain (padded to a power of ``b``), or the block sizes themselves."""
    n = attribute.n_cells
    if spec is None:
        return default_levels(attribute)
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        return bary_levels(n, int(spec))
    try:
        sizes = tuple(int(s) for s in spec)  # type: ignore[union-attr]
    except (TypeError, ValueError):
        raise ParameterError(
            f"levels for {attribute.column!r} must be a branching factor b >= 2 or the block "
            f"sizes from the whole axis down to 1, got {spec!r}",
            parameter="levels",
        ) from None
    if not sizes:
        raise ParameterError(
            f"levels for {attribute.column!r} are empty; give the block sizes from the whole "
            f"axis ({n}) down to 1",
            parameter="levels",
        )
    return AxisLevels(n, sizes[0], sizes, "given")


def resolve_levels(attributes: Sequence[Attribute], levels: Levels) -> tuple[AxisLevels, ...]:
    """Every axis's levels: those ``levels`` names, the defaults elsewhere."""
    given = dict(levels or {})
    columns = [a.column for a in attributes]
    for name in given:
        if name not in columns:
            raise ParameterError(
                f"levels names {name!r}, which is not a declared attribute; declared: {columns}",
                parameter="levels",
            )
    return tuple(axis_levels(a, given.get(a.column)) for a in attributes)


def _check_levels(value: Any) -> Any:
    if value is not None and not isinstance(value, Mapping):
        raise ParameterError(
            f"levels must map column names to a branching factor or block sizes (such as "
            f"{{'age': 16}} or {{'age': [128, 16, 1]}}), got {value!r}",
            parameter="levels",
        )
    return value


@register_plan
class HierarchicalPlan(GridPlan):
    """Level tuples with exact per-tuple budgets, least squares after the noise (module doc).

    ``strategy`` the levels and budgets (:class:`~polars_dp.kernels.level_budgets.LevelStrategy`),
    ``budget_choice`` ``"uniform"`` (no workload), ``"workload"`` (optimised) or ``"uniform_kept"``
    (the optimisation could not improve on uniform), ``budget_note`` what that means."""

    name = "hierarchical"
    bytes_per_cell = 16
    options_table = (
        *GRID_OPTIONS[:3],
        Option(
            "levels",
            Levels,
            None,
            check=_check_levels,
            doc="per column, the nested block levels: a branching factor ``b`` (the ``b``-ary chain, "
            "the axis padded to a power of ``b`` with known zeros) or the block sizes from the "
            "whole (padded) axis down to 1, each dividing the one above; other columns take the "
            "default (a nominal axis its hierarchy's equal-size levels, an ordinal one its binary "
            "chain).  Public inputs only.",
        ),
        Option(
            "workload",
            LevelWorkload,
            None,
            doc="the queries to optimise for: a :mod:`polars_dp.workload` object or a query frame "
            "as ``range_counts`` takes it; the level tuples' budgets (and the levels not given) "
            "then minimise its exact expected error.  ``None``: the same budget for every tuple.",
        ),
        *GRID_OPTIONS[3:],
    )
    release_mechanisms = ("hierarchical",)
    papers: ClassVar[Mapping[str, str]] = {
        "hierarchical": "Qardaji, Yang, Li, Understanding Hierarchical Methods for Differentially Private "
                        "Histograms, VLDB 2013; McKenna, Miklau, Hay, Machanavajjhala, Optimizing Error of "
                        "High-Dimensional Statistical Queries under Differential Privacy (HDMM), VLDB 2018",
    }
    record_fields = (
        Field("sensitivity", lambda p, d: p.sensitivity),
        Field(
            "levels",
            lambda p, d: {a.column: list(ax.sizes) for a, ax in zip(p.attributes, p.axes, strict=True)},
        ),
        Field("noisy_values", lambda p, d: p.noisy_values),  # the levels' blocks: edits of levels show
        Field("budgets", lambda p, d: p.budget_choice),
        Field("budget_units", lambda p, d: [int(k) for k in p.budget_units.reshape(-1)]),
        Field("budget_note", lambda p, d: p.budget_note or OMIT),  # a function of the budgets
        Field(
            "exact",
            lambda p, d: p._exact_record(),
            scale=True,
            keys=("noise_scales_exact", "epsilon_effective"),
        ),
        INPUTS,
    )

    @classmethod
    def options_from_record(cls, params: Any) -> dict[str, Any]:
        """The recorded levels (the workload is not recorded: :meth:`restored` sets its budgets)."""
        levels = params["levels"]
        if not isinstance(levels, Mapping):
            raise ParameterError(f"levels must be a mapping, got {levels!r}", parameter="levels")
        return {"levels": dict(levels)}

    def restored(self, params: Any) -> HierarchicalPlan:
        """The plan of a record whose budgets were chosen for a workload (which the record does
        not hold): the recorded budgets, checked (non-negative integers summing to ``2^20``, one
        per level tuple), marked as that choice."""
        choice = params.get("budgets")
        if choice == "uniform_kept":
            self.budget_choice = choice
        if choice != "workload":
            return self
        units = params.get("budget_units")
        shape = tuple_shape(self.axes)
        if (
            not isinstance(units, list)
            or len(units) != math.prod(shape)
            or not all(isinstance(k, int) and not isinstance(k, bool) and k >= 0 for k in units)
            or sum(units) != BUDGET_GRID
        ):
            raise ReleaseFormatError(
                f"release metadata field 'params.budget_units' must hold {math.prod(shape)} "
                f"non-negative integers summing to {BUDGET_GRID}: the file was edited"
            )
        self._set_strategy(np.asarray(units, dtype=np.int64).reshape(shape), "workload", check=True)
        return self

    # ------------------------------------------------------------------ calibration
    def _calibrate(self) -> None:
        attrs = self.options["attributes"]
        self._transformed = [False] * len(attrs)
        super()._calibrate()  # sensitivity; scale = Delta / epsilon: the whole budget on one tuple
        workload = self.options["workload"]
        levels = self.options["levels"]
        eps = Fraction(self.epsilon)
        if workload is None:
            self.axes = resolve_levels(attrs, levels)
            check_tuples(self.axes)
            self._set_strategy(_units(split_budget(np.ones(tuple_shape(self.axes)), eps), eps), "uniform")
            return
        declared = declared_workload(attrs, workload)
        given = None if levels is None else resolve_levels(attrs, levels)
        if given is not None:
            check_tuples(given)
        chosen = choose_strategy(attrs, declared, eps, self.sensitivity, levels=given)
        self.axes = chosen.strategy.axes
        self._set_strategy(
            _units(chosen.strategy.epsilons, eps), "workload" if chosen.optimised else "uniform_kept"
        )

    def _set_strategy(self, units: np.ndarray, choice: str, *, check: bool = False) -> None:
        """Budgets ``k_t / 2^20``; ``check``: refuse an exact scale past what its draws may hold."""
        eps = Fraction(self.epsilon)
        epsilons = np.empty(units.shape, dtype=object)
        for idx, k in np.ndenumerate(units):
            epsilons[idx] = eps * Fraction(int(k), BUDGET_GRID)
        self.budget_units = units
        self.strategy = LevelStrategy(tuple(self.axes), epsilons, self.sensitivity)
        self.budget_choice = choice
        self.__dict__.pop("noise_model", None)
        if check and self.noise == "exact":
            self._check_draws()

    @property
    def budget_note(self) -> str:
        """What the budgets are: optimised for the workload (how many tuples measured), or the
        uniform split kept because the optimisation could not improve on it ("" when uniform
        because no workload was declared)."""
        if self.budget_choice == "workload":
            return (
                f"budgets optimised for the workload: {len(self.measured)} of {self.budget_units.size} "
                "level tuples measured"
            )
        if self.budget_choice == "uniform_kept":
            return "the budget optimisation could not improve on the uniform split; uniform kept"
        return ""

    @property
    def release_mechanism(self) -> str:
        return "hierarchical"

    @property
    def strategy_name(self) -> str:
        return "Hierarchical " + " x ".join("/".join(map(str, ax.sizes)) for ax in self.axes)

    # ------------------------------------------------------------------ scales
    @property
    def measured(self) -> list[tuple[int, ...]]:
        """The level tuples with a budget, in C order (the order their noise is drawn)."""
        return self.strategy.measured

    def tuple_scale(self, t: tuple[int, ...]) -> float | Fraction:
        """Scale of tuple ``t``'s noise: ``Delta / epsilon_t`` (exact: on the ``2^-20`` grid)."""
        return laplace_scale(self.sensitivity, self.strategy.epsilons[t], self.noise)

    def _exact_record(self) -> dict[str, Any]:
        if self.noise != "exact":
            return {}
        scales = [Fraction(self.tuple_scale(t)) for t in self.measured]
        return {
            "noise_scales_exact": [f"{s.numerator}/{s.denominator}" for s in scales],
            "epsilon_effective": float(self._exact_spent()),
        }

    def _exact_spent(self) -> Fraction:
        """``sum_t Delta / scale_t`` over the measured tuples (sequential composition)."""
        return sum(
            (Fraction(self.sensitivity) / Fraction(self.tuple_scale(t)) for t in self.measured), Fraction(0)
        )

    def exact_draws(self) -> list[tuple[str, Fraction, int]]:
        """One ``DLap(scale_t)`` per block of each measured tuple, added to its integer counts; the
        smallest budget decides the largest scale."""
        if not hasattr(self, "strategy"):
            return []
        return [("block noise", max(Fraction(self.tuple_scale(t)) for t in self.measured), MAX_COUNT_SCALE)]

    @property
    def weights(self) -> np.ndarray:
        """Precision ``1 / Var`` of each tuple's noise (0: not measured): the exact discrete
        Laplace variance, or ``2 b^2`` for float noise; capped where a budget of hundreds of
        ``Delta`` would take the error bars out of the float range
        (:func:`~polars_dp.kernels.level_budgets.capped_precisions`: they then bound the true
        ones from above)."""
        out = np.zeros(tuple_shape(self.axes))
        for t in self.measured:
            s = self.tuple_scale(t)
            out[t] = precision(dlap_variance(s) if self.noise == "exact" else 2.0 * float(s) ** 2)
        return capped_precisions(out, self.axes)

    @functools.cached_property
    def noise_model(self) -> LevelLaplace:  # type: ignore[override]
        """The error bars of every box (:class:`~polars_dp.plans.noise_model.LevelLaplace`)."""
        from_cells = block_cells(self.axes)
        w = self.weights
        scales = np.zeros(w.shape)
        for t in self.measured:
            scales[t] = float(self.tuple_scale(t))
        nu = inverse_eigenvalues(eigenvalues(w, self.axes))
        kappa = nu * nu * suffix_sums(w * w * scales * scales * from_cells)
        bound = float(np.max(scales * w * np.sqrt(from_cells)))
        return LevelLaplace(
            tuple(tuple(ax.sizes) for ax in self.axes),
            tuple(ax.n for ax in self.axes),
            tuple(float(x) for x in nu.reshape(-1)),
            tuple(float(x) for x in kappa.reshape(-1)),
            bound,
        )

    @property
    def coefficients(self) -> int:
        return int(
            sum(
                math.prod(ax.length // ax.sizes[i] for ax, i in zip(self.axes, t, strict=True))
                for t in self.measured
            )
        )

    def workload_error(self, workload: Any) -> float:
        """Exact expected mean squared error of this plan over ``workload`` (before data)."""
        declared = declared_workload(self.attributes, workload)
        costs, m = workload_costs(declared, self.attributes, self.axes)
        return mean_squared_error(np.asarray(self.noise_model.nu).reshape(tuple_shape(self.axes)), costs, m)

    def at_epsilon(self, epsilon: float) -> HierarchicalPlan:
        """The same strategy (levels and budget shares ``k_t / 2^20``) at another ``epsilon``: each
        tuple's scale becomes ``Delta 2^20 / (epsilon k_t)`` (exact: rounded up to the ``2^-20``
        grid).  The optimiser is not rerun."""
        args, kwargs = self.arguments()
        kwargs.update(epsilon=epsilon, workload=None,
                      levels={a.column: list(ax.sizes)
                              for a, ax in zip(self.attributes, self.axes, strict=True)})
        plan = HierarchicalPlan(*args, **kwargs)
        plan.axes = self.axes
        plan._set_strategy(self.budget_units, self.budget_choice, check=True)
        return plan

    def epsilon_for(
        self, queries: Any, *, accuracy: float, alpha: float = 0.05, over: str = "max", align: str = "exact"
    ) -> float:
        """The smallest epsilon at which this plan's strategy (its levels and budget shares, kept
        fixed: :meth:`at_epsilon`) gives every query (``over="max"``) or the queries on average
        (``over="mean"``) an ``accuracy`` at most the target; refuses when even
        :data:`~polars_dp.plans.grid.EPSILON_CAP` does not.

        Why it exists: with the shares fixed, every tuple's scale is ``Delta 2^20 / (epsilon
        k_t)``, so the noise of every answer (a fixed linear combination of the tuples' noises,
        the least-squares weights depending on the scales' ratios only) is ``1 / epsilon`` times
        the noise at ``epsilon = 1``, and so is its half-width: for float noise ``accuracy`` is
        exactly ``c / epsilon``, a first guess.  Exact noise rounds each scale up to the
        ``2^-20`` grid and has the discrete Laplace law, so the answer is then found by
        bisection on the float epsilon (the half-width does not increase with epsilon).  The
        optimiser is not rerun: at the returned epsilon a fresh optimisation for a workload
        (its error is ``1 / epsilon^2`` times that at 1 for continuous noise, the same
        minimiser) gives the same shares up to the exact-noise rounding."""
        alpha = check_alpha(alpha)
        check_accuracy_target(accuracy, over)
        frame = as_query_frame(queries)
        if frame.height == 0:
            raise QueryError("the workload has no queries; give at least one query row")
        starts, stops = query_ranges(self.attributes, frame, passthrough=PASSTHROUGH, align=align)
        reduce = np.max if over == "max" else np.mean

        def metric(eps: float) -> float:
            try:
                plan = self.at_epsilon(eps)
            except ParameterError:  # a scale past what the samples may hold: too small an epsilon
                return math.inf
            return float(reduce(plan.range_accuracy(starts, stops, alpha)))

        top = metric(EPSILON_CAP)
        if not top <= accuracy:
            raise ParameterError(
                f"no epsilon up to {EPSILON_CAP:g} gives {over} accuracy <= {accuracy:g} at alpha={alpha:g} "
                f"with this plan's levels and budget shares (epsilon={EPSILON_CAP:g} gives {top:.4g}); "
                "relax the target, coarsen the domain or choose other levels", parameter="accuracy")
        unit = metric(1.0)
        hi = min(EPSILON_CAP, unit / accuracy) if math.isfinite(unit) else EPSILON_CAP
        factor = 1.0 + 1e-6
        while not metric(hi) <= accuracy:  # a feasible epsilon at or above the guess
            hi, factor = min(EPSILON_CAP, hi * factor), factor * factor
        lo, factor = hi / (1.0 + 1e-6), 1.0 + 1e-6
        while metric(lo) <= accuracy:  # an infeasible one below
            hi, lo, factor = lo, lo / factor, factor * factor
        while math.nextafter(lo, math.inf) < hi:  # bisection (geometric while far apart)
            mid = math.sqrt(lo) * math.sqrt(hi) if hi > 2.0 * lo else lo + (hi - lo) / 2
            if not lo < mid < hi:
                break
            if metric(mid) <= accuracy:
                hi = mid
            else:
                lo = mid
        return hi

    def __repr__(self) -> str:
        return super().__repr__().replace("workload=Workload(", "workload=<Workload ")


def _units(epsilons: np.ndarray, epsilon: Fraction) -> np.ndarray:
    """``k_t = epsilon_t 2^20 / epsilon`` (integers: the budgets are on that grid)."""
    out = np.zeros(epsilons.shape, dtype=np.int64)
    for idx, e in np.ndenumerate(epsilons):
        k = Fraction(e) * BUDGET_GRID / epsilon
        if k.denominator != 1:
            raise AssertionError(f"budget {e} is not on the 2^-20 grid of epsilon")
        out[idx] = int(k)
    return out


__all__ = [
    "HierarchicalPlan",
    "LevelWorkload",
    "Levels",
    "axis_levels",
    "default_levels",
    "resolve_levels",
]
