"""Plans of the grid mechanisms (Basic, Privelet, Privelet+): every scale and error bar before data.

Calibration (the one place it is computed)
------------------------------------------
A frequency matrix has L1 sensitivity ``Delta = 2`` under ``replace`` (one row modified moves a
unit between two cells) and ``Delta = 1`` under ``add_remove``.  Basic adds ``Lap(Delta /
epsilon)`` to every cell.  Privelet adds ``Lap(lambda)`` to every unnormalised HN coefficient
with ``lambda = Delta rho / epsilon``, ``rho = prod over transformed axes of P(A)`` (Xiao et
al. 2010, Lemma 1, Theorem 2, Corollary 1; ``P(A) = 1 + ceil(log2 |A|)`` for an ordinal axis,
the hierarchy's height for a nominal one); an untransformed axis (Privelet+, Sec. VI) has
factor 1, and with none transformed Privelet is Basic (``rho = 1``).  With ``noise="exact"``
the scale is rounded up to the ``2^-20`` grid (:func:`polars_dp.noise.exact_scale`) and the
release spends ``epsilon_effective = Delta rho / lambda' <= epsilon``.

Error before data
-----------------
The noise is data independent: a range count's noise is a fixed linear combination of the
independent coefficient noises, with variance ``2 lambda^2 prod_axes f_axis`` (Theorem 3;
:mod:`polars_dp.kernels.wavelet_variance`) and the tail bound of
:mod:`polars_dp.kernels.tail_bounds` for its ``accuracy``.

Choosing the untransformed set
------------------------------
``untransformed="auto"`` is the paper's rule (``|A| <= P(A)^2 H(A)``).  ``untransformed=
"workload"`` with ``workload=queries`` minimises the mean expected squared error over those
queries: for a set ``S`` of transformed axes, ``E err^2 = 2 (Delta rho_S / epsilon)^2
prod_axes f_axis`` with ``f_axis`` the Haar / nominal factor on ``S`` and the cell count
elsewhere; every subset is scored when there are at most :data:`EXHAUSTIVE_MAX` attributes,
above that a greedy search starts from the better of Basic and the paper's rule and flips the
single axis that lowers the mean most until none does.  A declared workload
(:mod:`polars_dp.workload`) is scored without listing its queries: per Kronecker term the
mean is a product over axes of per-axis sums (:func:`declared_subset_errors`).  Public inputs
only.

Choosing the mechanism
----------------------
``strategy="workload"`` (Basic and Privelet take it, with ``workload=``) builds the plan of
``pdp.plan("auto", attributes, epsilon=..., workload=...)`` instead (:meth:`GridPlan.make`):
the least exact expected error among Basic, Privelet, every Privelet+ subset and the
hierarchical plan, whose release records its own mechanism.
"""

from __future__ import annotations

import ast
import functools
import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any, ClassVar, Literal, TypeAlias

import numpy as np
import polars as pl

from polars_dp.domains.attributes import Attribute, Nominal, as_attributes
from polars_dp.domains.queries import as_query_frame, predicate_ranges, query_ranges
from polars_dp.domains.workload import Workload as DeclaredWorkload
from polars_dp.domains.workload import queries as workload_queries
from polars_dp.errors import HierarchyError, ParameterError, QueryError
from polars_dp.kernels import wavelets as transforms
from polars_dp.kernels.wavelet_variance import axis_ranges, axis_workload_factor, range_variance_factor
from polars_dp.noise import (
    GRID_BITS,
    MAX_COUNT_SCALE,
    MAX_SCALE,
    Neighbours,
    check_neighbours,
    histogram_sensitivity,
    laplace_scale,
)
from polars_dp.plans.base import INPUTS, OMIT, Field, Plan, exact_fields, register_plan
from polars_dp.plans.lattice import check_wide, max_lattice_factor, needs_wide
from polars_dp.plans.noise_model import WaveletLaplace
from polars_dp.plans.options import NOISE, PRIVACY_UNIT, PROGRESS, ROW_OPTIONS, SEED, Option, bind_options

#: A workload of queries: a declared workload (:mod:`polars_dp.workload`) or a frame as
#: ``range_counts`` takes it (or ``None``).
Workload: TypeAlias = (DeclaredWorkload | pl.DataFrame | pl.LazyFrame | Mapping[str, Any]
                       | Sequence[Mapping[str, Any]] | None)
#: Up to this many attributes ``untransformed="workload"`` scores every subset.
EXHAUSTIVE_MAX = 12
#: ``epsilon_for`` looks no further than this epsilon.
EPSILON_CAP = 1e3


# ---------------------------------------------------------------------------- the paper's rules
def auto_untransformed(attribute: Attribute) -> bool:
    """The paper's Privelet+ rule (Sec. VI): leave ``A`` untransformed iff ``|A| <= P(A)^2 H(A)``."""
    p = transforms.generalized_sensitivity(attribute)
    return attribute.n_cells <= p * p * transforms.variance_factor_bound(attribute)


def transformable(attribute: Attribute) -> bool:
    """Whether the attribute can be transformed (a one-leaf hierarchy cannot)."""
    return not (isinstance(attribute, Nominal) and attribute.hierarchy.n_leaves < 2)


def resolve_untransformed(attributes: tuple[Attribute, ...],
                          untransformed: str | Attribute | Iterable[str | Attribute]
                          ) -> tuple[list[bool], bool]:
    """Per attribute: transformed or not; and whether the "auto" rule chose it."""
    if isinstance(untransformed, str) and untransformed == "auto":
        return [not auto_untransformed(a) for a in attributes], True
    one_word = isinstance(untransformed, str)
    if isinstance(untransformed, (str, Attribute)):
        untransformed = [untransformed]
    try:
        names = [u.column if isinstance(u, Attribute) else u for u in untransformed]
    except TypeError:
        raise ParameterError(
            f"untransformed must be 'auto', 'workload' or a list of column names, got {untransformed!r}",
            parameter="untransformed") from None
    columns = [a.column for a in attributes]
    for name in names:
        if name not in columns:
            rules = " (or one of the rules 'auto', 'workload')" if one_word else ""
            raise ParameterError(f"untransformed names {name!r}, which is not a declared attribute; "
                                 f"declared: {columns}{rules}", parameter="untransformed")
    return [a.column not in names for a in attributes], False


def privelet_rho(attributes: Sequence[Attribute], transformed: Sequence[bool]) -> int:
    """Generalised sensitivity ``prod over transformed axes of P(A)`` (Theorem 2, Corollary 1)."""
    rho = 1
    for a, t in zip(attributes, transformed, strict=True):
        if t:
            if not transformable(a):
                raise HierarchyError(
                    f"{a.column!r}: its hierarchy has a single leaf, so it cannot be transformed; "
                    "list it in untransformed=[...]"
                )
            rho *= transforms.generalized_sensitivity(a)
    return rho


def mechanism_name(transformed: Sequence[bool]) -> str:
    """``"privelet"`` when every attribute is transformed, else ``"privelet+"`` (``"basic"``: none)."""
    if not any(transformed):
        return "basic"
    return "privelet" if all(transformed) else "privelet+"


def privelet_scale(rho: int, epsilon: float, neighbours: str, noise: str = "float") -> float | Fraction:
    """``lambda = 2 rho / epsilon`` (replace, Lemma 1) or ``rho / epsilon`` (add_remove); for
    ``noise="exact"`` the exact rational rounded up to the ``2^-20`` grid."""
    return laplace_scale(histogram_sensitivity(neighbours) * rho, epsilon, noise)


# ---------------------------------------------------------------------------- workload choice
def _log_p(attributes: Sequence[Attribute]) -> np.ndarray:
    """``ln P(A)`` per attribute (0 for one that cannot be transformed)."""
    return np.log([float(transforms.generalized_sensitivity(a)) if transformable(a) else 1.0
                   for a in attributes])


def subset_errors(attributes: Sequence[Attribute], starts: np.ndarray, stops: np.ndarray,
                  masks: np.ndarray, chunk: int = 1 << 22) -> np.ndarray:
    """Mean over the queries of ``rho_S^2 prod_axes f_axis`` per transformed set (rows of the
    boolean ``masks``): the mean expected squared error divided by ``2 (Delta / epsilon)^2``."""
    ft = np.empty(starts.shape)  # f transformed and untransformed, each (queries, d)
    fu = (stops - starts).astype(np.float64)
    for j, a in enumerate(attributes):
        ft[:, j] = range_variance_factor(a, starts[:, j], stops[:, j]) if transformable(a) else np.inf
    log_p = _log_p(attributes)
    masks = np.asarray(masks, dtype=bool)
    with np.errstate(divide="ignore"):
        lt, lu = np.log(ft), np.log(fu)
    delta = lt - lu  # (Q, d)
    base = lu.sum(axis=1)  # (Q,)
    out = np.zeros(masks.shape[0])
    m = masks.astype(np.float64)
    rho2 = 2.0 * (m @ log_p)
    step = max(1, chunk // max(1, masks.shape[0]))
    for i in range(0, starts.shape[0], step):
        with np.errstate(invalid="ignore"):
            logs = rho2[:, None] + base[None, i:i + step] + m @ delta[i:i + step].T
        logs = np.where(np.isnan(logs), np.inf, logs)
        out += np.exp(logs).sum(axis=1)
    return out / starts.shape[0]


def declared_subset_errors(attributes: Sequence[Attribute], workload: DeclaredWorkload
                           ) -> Callable[[np.ndarray], np.ndarray]:
    """``errors(masks)``: :func:`subset_errors` over a declared workload, its Kronecker terms from
    their per-axis sums (:func:`~polars_dp.kernels.wavelet_variance.axis_workload_factor`,
    computed once: a term's mean is the product over axes of per-axis sums), its explicit
    boxes query by query."""
    log_p = _log_p(attributes)
    terms = [(w, np.array([[axis_workload_factor(a, ax, False),
                            axis_workload_factor(a, ax, True) if transformable(a) else np.inf]
                           for a, ax in zip(attributes, axes, strict=True)]))
             for w, axes in workload.axis_terms(attributes)]
    boxes = workload.axis_boxes(attributes)

    def errors(masks: np.ndarray) -> np.ndarray:
        masks = np.asarray(masks, dtype=bool)
        out = np.zeros(masks.shape[0])
        rows = np.arange(len(attributes))
        for w, f in terms:
            out += w * np.prod(f[rows, masks.astype(np.int64)], axis=1)
        out *= np.exp(2.0 * (masks.astype(np.float64) @ log_p))
        for w, starts, stops in boxes:
            out += w * starts.shape[0] * subset_errors(attributes, starts, stops, masks)
        return out / workload.queries

    return errors


def workload_transformed(attributes: Sequence[Attribute], starts: np.ndarray | DeclaredWorkload,
                         stops: np.ndarray | None = None) -> list[bool]:
    """The transformed set minimising the mean expected squared error over the queries
    ``[starts, stops)``, or over a declared workload given as ``starts`` (exhaustive up to
    :data:`EXHAUSTIVE_MAX` attributes, else greedy; module docstring)."""
    if isinstance(starts, DeclaredWorkload):
        score = declared_subset_errors(attributes, starts)
    elif stops is None:
        raise ParameterError("workload_transformed needs stops with starts", parameter="workload")
    else:
        score = functools.partial(subset_errors, attributes, starts, stops)
    d = len(attributes)
    if d <= EXHAUSTIVE_MAX:
        masks = np.array(list(itertools.product([False, True], repeat=d)), dtype=bool).reshape(-1, d)
        return [bool(x) for x in masks[int(np.argmin(score(masks)))]]
    rule = np.array([not auto_untransformed(a) and transformable(a) for a in attributes])
    start = np.stack([np.zeros(d, dtype=bool), rule])
    errs = score(start)
    current, best = start[int(np.argmin(errs))].copy(), float(errs.min())
    while True:
        flips = np.repeat(current[None], d, axis=0)
        flips[np.arange(d), np.arange(d)] ^= True
        errs = score(flips)
        j = int(np.argmin(errs))
        if not errs[j] < best:
            return [bool(x) for x in current]
        current, best = flips[j], float(errs[j])


def declared_workload(attributes: Sequence[Attribute], workload: Any) -> DeclaredWorkload:
    """A declared workload (:mod:`polars_dp.workload`) checked against the attributes (every
    attribute it names declared, with the same declaration), or explicit queries (a frame as
    ``range_counts`` takes it) turned into one; one without a query is refused."""
    if not isinstance(workload, DeclaredWorkload):
        workload = workload_queries(attributes, workload)
    workload.axis_terms(attributes)
    if not workload.queries > 0:
        raise ParameterError("the workload has no query; give at least one", parameter="workload")
    return workload


#: The refusal of an ``alpha`` outside (0, 1), up to the value (Python and the SQL macros alike).
ALPHA_REFUSAL = ("alpha must lie strictly between 0 and 1 (the probability that an answer's noise "
                 "exceeds its accuracy, e.g. 0.05), got ")


def check_alpha(alpha: Any) -> float:
    """``alpha`` in (0, 1): the probability that an answer's noise exceeds its accuracy."""
    if (isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.integer, np.floating))
            or not 0.0 < float(alpha) < 1.0):
        raise ParameterError(f"{ALPHA_REFUSAL}{alpha!r}", parameter="alpha")
    return float(alpha)


def _workload_ranges(attributes: Sequence[Attribute], queries: Any, align: str = "exact"
                     ) -> tuple[pl.DataFrame, np.ndarray, np.ndarray]:
    frame = as_query_frame(queries)
    if frame.height == 0:
        raise QueryError("the workload has no queries; give at least one query row")
    if "id" not in frame.columns:
        frame = frame.with_row_index("id")
    starts, stops = query_ranges(attributes, frame, passthrough=("id",), align=align)
    return frame, starts, stops


# ---------------------------------------------------------------------------- plans
#: The options every grid mechanism takes (attributes, epsilon, neighbours first).
GRID_OPTIONS = (
    Option("attributes", Attribute | Iterable[Attribute], check=as_attributes,
           doc="public declarations (:class:`~polars_dp.Ordinal`, :class:`~polars_dp.Nominal`), one "
               "axis of the frequency matrix each, in order."),
    Option("epsilon", float, kind="positive", doc="privacy budget, > 0."),
    Option("neighbours", Neighbours, "replace", check=check_neighbours,
           doc="``\"replace\"`` (one row modified: two cells change, ``Delta = 2``) or "
               "``\"add_remove\"`` (one row added or removed, ``Delta = 1``)."),
    SEED, *ROW_OPTIONS, NOISE, PROGRESS, PRIVACY_UNIT,
)
#: The queries a grid plan is chosen for (``strategy="workload"``, ``untransformed="workload"``).
WORKLOAD = Option("workload", Workload, None,
                  doc="the queries to choose for: a :mod:`polars_dp.workload` object (held implicitly) or a "
                      "query frame as ``range_counts`` takes it; used by ``strategy=\"workload\"`` (and "
                      "Privelet's ``untransformed=\"workload\"``).  Public inputs only.")
#: The choosers of :data:`STRATEGY` by value: ``"workload"`` is :func:`polars_dp.plans.auto.auto_plan`,
#: which sits above this module (it scores the hierarchical plan too) and registers itself on import.
CHOOSERS: dict[str, Callable[..., Plan]] = {}


def register_chooser(strategy: str, chooser: Callable[..., Plan]) -> None:
    """Attach the chooser of ``strategy=...`` (:func:`polars_dp.plans.auto.auto_plan`)."""
    CHOOSERS[strategy] = chooser


#: What ``strategy="workload"`` does, for every grid mechanism that takes it.
STRATEGY = Option(
    "strategy", Literal["workload"] | None, None,
    doc="``None``: this mechanism as its options say.  ``\"workload\"``: the grid plan of least exact "
        "expected error over ``workload``, chosen before any data among Basic, Privelet, every "
        "Privelet+ subset and the hierarchical plan optimised for it (exactly ``pdp.plan(\"auto\", "
        "attributes, epsilon=..., workload=...)`` with the same other options, "
        ":mod:`polars_dp.plans.auto`).  The release is that plan's: it records that plan's "
        "mechanism (``\"basic\"``, ``\"privelet\"``, ``\"privelet+\"`` or ``\"hierarchical\"``) "
        "and parameters, so it reads back and verifies as a release of that mechanism.")


def check_accuracy_target(accuracy: Any, over: str) -> None:
    """The target of ``epsilon_for``: a finite half-width > 0, met by every query (``over="max"``)
    or on average (``"mean"``)."""
    if isinstance(accuracy, bool) or not isinstance(accuracy, (int, float)) or not accuracy > 0 \
            or not math.isfinite(accuracy):
        raise ParameterError(f"accuracy must be a finite number > 0 (a half-width in counts), got "
                             f"{accuracy!r}", parameter="accuracy")
    if over not in ("max", "mean"):
        raise ParameterError(f"over must be 'max' or 'mean', got {over!r}", parameter="over")


class GridPlan(Plan):
    """A Basic / Privelet / Privelet+ release before data: ``transformed`` axes, ``rho``,
    ``sensitivity``, ``scale`` (exact rational or float), ``noise_scale`` (float) and the
    error of any range count (:meth:`range_std`, :meth:`accuracy`)."""

    positional = ("attributes",)
    shape = "grid"
    data_independent = True
    unknown_before_data = "nothing: the noise law of every answer is known before the data"
    #: Bytes per cell of the arrays a release of this kind works on (the counts and what the
    #: noise and the inference build beside them).
    bytes_per_cell: ClassVar[int] = 24
    _transformed: list[bool]
    _auto: bool | str = False

    def working_size(self) -> dict[str, Any]:
        """The frequency matrix of the declared attributes, :attr:`bytes_per_cell` per cell."""
        attrs = self.options["attributes"]
        return {"shape": tuple(a.n_cells for a in attrs), "bytes_per_cell": self.bytes_per_cell,
                "attributes": attrs}

    @classmethod
    def make(cls, *args: Any, **options: Any) -> Plan:
        """The plan these arguments describe: ``cls(*args, **options)``, or with
        ``strategy="workload"`` the least-error grid plan over ``workload`` (:data:`STRATEGY`),
        every option checked against ``cls``'s table first."""
        given = dict(zip(cls.positional, args, strict=False))
        if len(args) > len(cls.positional) or any(k in options for k in given) \
                or options.get("strategy") != "workload":
            return cls(*args, **options)
        given.update(options)
        bound = bind_options(cls.name, cls.options_table, given)
        if bound.get("untransformed", ()) != ():
            raise ParameterError("strategy='workload' chooses the untransformed set itself (with the "
                                 "mechanism); drop untransformed=", parameter="untransformed")
        if bound["workload"] is None:
            raise ParameterError("strategy='workload' needs workload= (a pdp.workload object or a query "
                                 "frame): the choice minimises its expected error", parameter="workload")
        rest = {k: v for k, v in given.items()
                if k not in ("attributes", "epsilon", "workload", "strategy", "untransformed")}
        return CHOOSERS["workload"](bound["attributes"], epsilon=bound["epsilon"], workload=bound["workload"],
                                    **rest)

    def _check_strategy(self) -> None:
        """Refuse ``strategy="workload"`` on a plan built directly (:meth:`make` builds it)."""
        if self.options.get("strategy") == "workload":
            raise ParameterError(
                f"strategy='workload' chooses among several mechanisms: build the plan with "
                f"pdp.plan({self.name!r}, ..., strategy='workload') or pdp.plan('auto', ...), not "
                f"{type(self).__name__}(...)", parameter="strategy")

    def _calibrate(self) -> None:
        self.attributes: tuple[Attribute, ...] = self.options["attributes"]
        self.transformed_mask = list(self._transformed)
        self.rho = privelet_rho(self.attributes, self.transformed_mask)
        self.sensitivity = self.count_sensitivity
        self.scale: float | Fraction = laplace_scale(self.sensitivity * self.rho, self.epsilon, self.noise)
        self.noise_scale = float(self.scale)

    @property
    def scale_cap(self) -> Fraction:
        """The largest exact scale this plan's noise can take (public): see :meth:`exact_draws`."""
        _, drawn, limit = self.exact_draws()[0]
        return Fraction(limit) * Fraction(self.scale) / drawn

    # ------------------------------------------------------------------ facts
    @property
    def nominal_scale(self) -> float:
        """``Delta rho / epsilon`` before any rounding."""
        return self.sensitivity * self.rho / self.epsilon

    @property
    def transformed(self) -> tuple[str, ...]:
        return tuple(a.column for a, t in zip(self.attributes, self.transformed_mask, strict=True) if t)

    @property
    def untransformed(self) -> tuple[str, ...]:
        return tuple(a.column for a, t in zip(self.attributes, self.transformed_mask, strict=True) if not t)

    @property
    def release_mechanism(self) -> str:
        return mechanism_name(self.transformed_mask)

    @property
    def strategy_name(self) -> str:
        """``Basic``, ``Privelet`` or ``Privelet+ TuT`` (``T``: a transformed axis, ``u`` not)."""
        name = mechanism_name(self.transformed_mask).capitalize()
        axes = "".join("T" if t else "u" for t in self.transformed_mask)
        return f"{name} {axes}" if name == "Privelet+" else name

    @property
    def epsilon_effective(self) -> float:
        return float(self.epsilon_spent)

    def _exact_spent(self) -> Fraction:
        """``Delta rho / lambda'``: one (discrete) Laplace mechanism on the coefficients."""
        return Fraction(self.sensitivity * self.rho) / Fraction(self.scale)

    @property
    def noise_model(self) -> WaveletLaplace:
        return WaveletLaplace(self.noise_scale, self.transformed)

    @property
    def coefficients(self) -> int:
        return int(math.prod(float(transforms.coefficient_count(a) if t else a.n_cells)
                             for a, t in zip(self.attributes, self.transformed_mask, strict=True)))

    @property
    def noisy_values(self) -> int:
        return self.coefficients

    # ------------------------------------------------------------------ error before data
    def range_variance(self, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
        """Noise variance ``2 lambda^2 prod_axes f_axis`` of the half-open cell ranges
        ``[starts, stops)`` (shape (queries, d)): :meth:`~polars_dp.plans.noise_model.NoiseModel.
        variance` of the plan's noise model."""
        return self.noise_model.range_variance(axis_ranges(self.attributes, starts, stops))

    def range_accuracy(self, starts: np.ndarray, stops: np.ndarray, alpha: float = 0.05) -> np.ndarray:
        """Half-width ``a`` with ``P(|noise| > a) <= alpha`` per cell range (the noise model's
        :meth:`~polars_dp.plans.noise_model.NoiseModel.half_width`)."""
        alpha = check_alpha(alpha)
        return self.noise_model.range_accuracy(axis_ranges(self.attributes, starts, stops), alpha, self.noise)

    def workload_error(self, workload: Any) -> float:
        """Expected mean squared error of this plan's answers over ``workload`` (a declared
        workload or a query frame), before any data: per Kronecker term, the product over axes
        of the summed variance factors of its intervals (:meth:`range_variance` factorises over
        axes, so the sum over a product of interval families is the product of per-axis sums),
        each from the axis's Gram statistics without listing an interval
        (:func:`~polars_dp.kernels.wavelet_variance.axis_workload_factor`), times ``2
        lambda^2``; explicit queries one by one.  Exact noise: the continuous
        Laplace variance, an upper bound (the plan's own error bars)."""
        declared = declared_workload(self.attributes, workload)
        total = 0.0
        unit = 2.0 * self.noise_scale**2
        for weight, axes in declared.axis_terms(self.attributes):
            product = unit * weight
            for ax, a, t in zip(axes, self.attributes, self.transformed_mask, strict=True):
                product *= axis_workload_factor(a, ax, t)
            total += product
        for weight, starts, stops in declared.axis_boxes(self.attributes):
            total += weight * float(self.range_variance(starts, stops).sum())
        return total / declared.queries

    def range_std(self, *, align: str = "exact", **predicates: Any) -> float:
        """Noise standard deviation of the range count ``predicates`` would answer (as
        :meth:`polars_dp.GridRelease.range_count` takes them), before any data."""
        starts, stops = predicate_ranges(self.attributes, predicates, align)
        return float(np.sqrt(self.range_variance(starts[None], stops[None])[0]))

    def accuracy(self, queries: Any, alpha: float = 0.05, *, align: str = "exact") -> pl.DataFrame:
        """``id``, ``std`` and ``accuracy`` per query: the answer's noise exceeds ``accuracy``
        with probability at most ``alpha`` (:mod:`polars_dp.kernels.tail_bounds`).  ``queries``
        as :meth:`polars_dp.GridRelease.range_counts` takes them (an ``id`` column is added
        when absent: the row number)."""
        alpha = check_alpha(alpha)
        frame, starts, stops = _workload_ranges(self.attributes, queries, align)
        return pl.DataFrame({"id": frame["id"], "std": np.sqrt(self.range_variance(starts, stops)),
                             "accuracy": self.range_accuracy(starts, stops, alpha)})

    def with_options(self, **changes: Any) -> GridPlan:
        """The same plan with some options changed."""
        args, kwargs = self.arguments()
        return type(self)(*args, **{**kwargs, **changes})

    def epsilon_for(self, queries: Any, *, accuracy: float, alpha: float = 0.05, over: str = "max",
                    align: str = "exact") -> float:
        """The smallest epsilon (on the ``2^-20`` scale grid for exact noise) whose plan gives
        every query (``over="max"``) or the queries on average (``over="mean"``) an
        ``accuracy`` at most the target; refuses when even :data:`EPSILON_CAP` does not."""
        alpha = check_alpha(alpha)
        check_accuracy_target(accuracy, over)
        _, starts, stops = _workload_ranges(self.attributes, queries, align)
        reduce = np.max if over == "max" else np.mean

        def metric(plan: GridPlan) -> float:
            return float(reduce(plan.range_accuracy(starts, stops, alpha)))

        cap = self.with_options(epsilon=EPSILON_CAP)
        if metric(cap) > accuracy:
            raise ParameterError(
                f"no epsilon up to {EPSILON_CAP:g} gives {over} accuracy <= {accuracy:g} at alpha={alpha:g} "
                f"(epsilon={EPSILON_CAP:g} gives {metric(cap):.4g}); relax the target or coarsen the domain",
                parameter="accuracy")
        sens = self.sensitivity * self.rho
        # accuracy is proportional to the scale for continuous noise: a first guess
        unit = self.with_options(epsilon=float(sens), noise="float")  # scale 1
        lam = accuracy / metric(unit)
        if self.noise == "float":
            eps = sens / lam
            while metric(self.with_options(epsilon=eps)) > accuracy:
                eps = math.nextafter(eps, math.inf)
            return eps
        step = Fraction(1, 1 << GRID_BITS)

        def eps_of(k: int) -> float:
            eps = float(Fraction(sens) / (k * step))
            while laplace_scale(sens, eps, "exact") > k * step:
                eps = math.nextafter(eps, math.inf)
            return eps

        top = math.floor(self.scale_cap / step)  # larger scales cannot be drawn

        def ok(k: int) -> bool:
            return k <= top and metric(self.with_options(epsilon=eps_of(k))) <= accuracy

        lo = int(Fraction(cap.scale) / step)  # feasible: the cap's scale, checked above
        hi = max(lo + 1, 4 * math.ceil(Fraction(lam) / step) + 2)
        while ok(hi):
            lo, hi = hi, 2 * hi
        while hi - lo > 1:  # the largest feasible scale on the grid: the smallest epsilon
            mid = (lo + hi) // 2
            if ok(mid):
                lo = mid
            else:
                hi = mid
        return eps_of(lo)


@register_plan
class BasicPlan(GridPlan):
    """Basic: i.i.d. (discrete) Laplace ``Delta / epsilon`` on every cell."""

    name = "basic"
    bytes_per_cell = 16
    options_table = (*GRID_OPTIONS[:2], WORKLOAD, STRATEGY, *GRID_OPTIONS[2:])
    release_mechanisms = ("basic",)
    papers: ClassVar[Mapping[str, str]] = {
        "basic": "Dwork, McSherry, Nissim, Smith, TCC 2006 (the Laplace histogram; Privelet's baseline)",
    }
    record_fields = (Field("sensitivity", lambda p, d: p.sensitivity),
                     exact_fields("", lambda p: p.sensitivity, lambda p: p.scale), INPUTS)

    def _calibrate(self) -> None:
        self._check_strategy()
        if self.options["workload"] is not None:
            raise ParameterError("workload= is used only with strategy='workload'", parameter="workload")
        self._transformed = [False] * len(self.options["attributes"])
        super()._calibrate()

    def exact_draws(self) -> list[tuple[str, Fraction, int]]:
        """One ``DLap(lambda')`` per cell, added to the float64 counts."""
        return [("cell noise", Fraction(self.scale), MAX_COUNT_SCALE)]


#: How the wavelet coefficients are noised, per noise kind (the ``coefficients`` entry).
_COEFFICIENTS = {"float": "unnormalised (W*c) with i.i.d. Lap(noise_scale)",
                 "exact": "lattice D*W*c (D = prod 2(f-1) over nominal axes) with DLap(D*noise_scale)"}


@register_plan
class PriveletPlan(GridPlan):
    """Privelet / Privelet+: ``Lap(Delta rho / epsilon)`` per HN coefficient."""

    name = "privelet"
    options_table = (
        *GRID_OPTIONS[:2],
        Option("untransformed", str | Attribute | Iterable[str | Attribute], (),
               doc="columns left untransformed (Privelet+, Sec. VI; the others get the Haar transform, "
                   "zero padded to a power of two, if ordinal, the nominal transform over their "
                   "hierarchy if nominal), or ``\"auto\"`` for the paper's "
                   "rule ``|A| <= P(A)^2 H(A)``, or ``\"workload\"`` for the set minimising the mean "
                   "expected squared error over ``workload``; a single string other than those names "
                   "one column.  The choice depends on public inputs only."),
        WORKLOAD, STRATEGY,
        *GRID_OPTIONS[2:])
    release_mechanisms = ("privelet", "privelet+", "basic")
    papers: ClassVar[Mapping[str, str]] = {
        "privelet": "Xiao, Wang, Gehrke, Differential Privacy via Wavelet Transforms, ICDE 2010",
        "privelet+": "Xiao, Wang, Gehrke, Differential Privacy via Wavelet Transforms, ICDE 2010 (Sec. VI)",
        "basic": "Dwork, McSherry, Nissim, Smith, TCC 2006 (the Laplace histogram; Privelet's baseline)",
    }
    record_fields = (
        Field("rho", lambda p, d: p.rho),
        Field("sensitivity", lambda p, d: p.sensitivity),
        Field("transformed", lambda p, d: list(p.transformed)),
        Field("untransformed", lambda p, d: list(p.untransformed)),
        Field("untransformed_auto", lambda p, d: p._auto is True),
        Field("coefficients", lambda p, d: _COEFFICIENTS[p.noise]),
        exact_fields("", lambda p: p.sensitivity * p.rho, lambda p: p.scale),
        INPUTS,
        Field("untransformed_choice", lambda p, d: "workload" if p._auto == "workload" else OMIT),
        Field("note", lambda p, d: OMIT if any(p.transformed_mask) else
              f"untransformed={p.options.get('untransformed')!r} left every attribute untransformed: "
              "this is Basic"),
    )

    @classmethod
    def options_from_record(cls, params: Any) -> dict[str, Any]:
        """``untransformed`` as given: the option the note quotes, ``"auto"``, or the recorded
        columns (``"workload"`` is restored by :meth:`restored`: the workload is not recorded)."""
        option: Any = params["untransformed"]
        note = params.get("note")
        if note is not None:
            head = note.split(" left every attribute", 1)[0] if isinstance(note, str) else ""
            try:
                option = ast.literal_eval(head.removeprefix("untransformed=")) if head != note else None
            except (ValueError, SyntaxError):
                option = None
            if option is None:
                raise ParameterError(f"the note {note!r} quotes no untransformed= option", parameter="note")
        elif params.get("untransformed_auto") is True:
            option = "auto"
        if option == "workload":
            option = params["untransformed"]
        return {"untransformed": option}

    @classmethod
    def transformed_axes(cls, params: Mapping[str, Any]) -> tuple[str, ...]:
        return tuple(params.get("transformed", ()))

    @classmethod
    def note(cls, params: Mapping[str, Any]) -> str | None:
        return params.get("note")

    def restored(self, params: Any) -> PriveletPlan:
        """The plan of a record whose untransformed set was chosen for a workload (which the
        record does not hold): the recorded set, marked as that choice."""
        if params.get("untransformed_choice") == "workload":
            self._auto = "workload"
            self.options["untransformed"] = "workload"
        return self

    def _calibrate(self) -> None:
        self._check_strategy()
        attrs = self.options["attributes"]
        untransformed, workload = self.options["untransformed"], self.options["workload"]
        if isinstance(untransformed, str) and untransformed == "workload":
            if workload is None:
                raise ParameterError("untransformed='workload' needs workload= (a pdp.workload object or "
                                     "a query frame as range_counts takes it)", parameter="workload")
            if isinstance(workload, DeclaredWorkload):
                chosen = workload_transformed(attrs, declared_workload(attrs, workload))
            else:
                _, starts, stops = _workload_ranges(attrs, workload)
                chosen = workload_transformed(attrs, starts, stops)
            self._transformed, self._auto = chosen, "workload"
        else:
            if workload is not None:
                raise ParameterError("workload= is used only with untransformed='workload' or "
                                     "strategy='workload'", parameter="workload")
            self._transformed, self._auto = resolve_untransformed(attrs, untransformed)
        super()._calibrate()
        if self.noise == "exact" and needs_wide(self.attributes, self.transformed_mask):
            check_wide(self.attributes, self.transformed_mask)

    def exact_draws(self) -> list[tuple[str, Fraction, int]]:
        """``DLap(D lambda')`` per lattice coefficient, int64 draws; the largest ``D`` decides."""
        factor = max_lattice_factor(self.attributes, self.transformed_mask)
        part = "coefficient noise" if factor == 1 else f"lattice noise D x lambda', D up to {factor}"
        return [(part, factor * Fraction(self.scale), MAX_SCALE)]


# ---------------------------------------------------------------------------- compare
def compare(plans: Sequence[GridPlan], queries: Any, *, align: str = "exact") -> pl.DataFrame:
    """Expected squared error of each plan over ``queries``, before any data: one row per plan
    (``index`` its position in ``plans``, ``plan`` its strategy's name, e.g. ``Privelet+ uuTT``,
    which two plans may share; ``mechanism``, ``epsilon``,
    ``neighbours``) with ``rmse`` (the root of ``mean``), ``mean`` and ``max`` (the expected
    squared error, i.e. the noise variance, of the queries) and ``q1`` .. ``q5`` (its mean over
    each fifth of the queries by coverage, the share of the domain's cells a query spans; ``q5``
    the widest).  With a declared workload (:mod:`polars_dp.workload`, held implicitly) one row
    per plan with its ``rmse`` and ``mean`` squared error (:meth:`GridPlan.workload_error`),
    best first."""
    plans = list(plans)
    if not plans:
        raise ParameterError("compare needs at least one plan", parameter="plans")
    if isinstance(queries, DeclaredWorkload):
        rows = []
        for i, p in enumerate(plans):
            if not isinstance(p, GridPlan):
                raise ParameterError(f"compare takes grid plans, got {p!r}", parameter="plans")
            mse = p.workload_error(queries)
            rows.append({"index": i, "plan": p.strategy_name, "mechanism": p.release_mechanism,
                         "epsilon": p.epsilon, "rmse": math.sqrt(mse), "mean": mse})
        return pl.DataFrame(rows).sort("rmse", maintain_order=True)
    for p in plans:
        if not isinstance(p, GridPlan):
            raise ParameterError(f"compare takes grid plans (basic, privelet), got {p!r}", parameter="plans")
        if p.attributes != plans[0].attributes:
            raise ParameterError("compare needs plans over the same attributes", parameter="plans")
    _, starts, stops = _workload_ranges(plans[0].attributes, queries, align)
    cells = np.array([a.n_cells for a in plans[0].attributes], dtype=np.float64)
    coverage = np.exp(np.log((stops - starts) / cells).sum(axis=1))
    order = np.argsort(coverage, kind="stable")
    fifths = np.array_split(order, 5)
    rows = []
    for i, p in enumerate(plans):
        err = p.range_variance(starts, stops)
        row: dict[str, Any] = {"index": i, "plan": p.strategy_name, "mechanism": p.release_mechanism,
                               "epsilon": p.epsilon, "neighbours": p.neighbours,
                               "transformed": list(p.transformed),
                               "rmse": math.sqrt(float(err.mean())), "mean": float(err.mean()),
                               "max": float(err.max())}
        for k, idx in enumerate(fifths, start=1):
            row[f"q{k}"] = float(err[idx].mean()) if idx.size else float("nan")
        rows.append(row)
    return pl.DataFrame(rows).with_columns(pl.col("transformed").cast(pl.List(pl.String)))  # the names


__all__ = ["ALPHA_REFUSAL", "CHOOSERS", "EPSILON_CAP", "EXHAUSTIVE_MAX", "GRID_OPTIONS", "STRATEGY",
           "WORKLOAD", "check_accuracy_target",
           "declared_workload", "declared_subset_errors", "register_chooser", "BasicPlan",
           "GridPlan",
           "PriveletPlan",
           "auto_untransformed", "check_alpha", "compare", "mechanism_name", "privelet_rho", "privelet_scale",
           "resolve_untransformed", "subset_errors", "transformable", "workload_transformed", "Workload"]
