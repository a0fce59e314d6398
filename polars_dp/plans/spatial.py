"""Plans of the spatial and sequence mechanisms: parameters and budget split before the data.

PrivTree, AG and the sequence trees decide their structure from the data, so their plans
hold the validated parameters, the budget split and the scales that are public, and say in
``unknown_before_data`` which part of the error only the data decides.  UG is data
independent once ``n`` is public; Privelet* (a fixed ``2^bits`` grid) always is.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any, ClassVar, Literal, TypeAlias

import numpy as np

from polars_dp.domains.alphabet import check_alphabet
from polars_dp.domains.attributes import Ordinal
from polars_dp.domains.box import as_box
from polars_dp.errors import ParameterError, ReleaseFormatError
from polars_dp.kernels import subgrid
from polars_dp.kernels.morton import MortonLayout, check_fanout, resolution_bits
from polars_dp.kernels.pst import check_max_nodes
from polars_dp.noise import (
    MAX_COUNT_SCALE,
    Neighbours,
    check_neighbours,
    laplace_scale,
    noise_params,
)
from polars_dp.params import Nulls, OnOutOfAlphabet, check_int
from polars_dp.plans.base import INPUTS, OMIT, Field, Plan, exact_fields, register_plan
from polars_dp.plans.grid import PriveletPlan
from polars_dp.plans.noise_model import Correlated, IndependentLaplace, NoiseModel, WaveletLaplace
from polars_dp.plans.options import NOISE, PRIVACY_UNIT, PROGRESS, ROW_OPTIONS, SEED, Option
from polars_dp.plans.privtree_levels import check_levels, split_count_budget
from polars_dp.plans.privtree_scales import (
    check_decisions,
    check_theta,
    decisions_epsilon,
    grid_theta,
    privtree_delta,
    privtree_lambda,
    privtree_sequence_params,
)

#: Public bounds of the points: one ``(lo, hi)`` per column, or a mapping column -> pair.
Bounds: TypeAlias = Sequence[tuple[float, float]] | Mapping[str, tuple[float, float]]
#: The keywords after the neighbour relation that the grids share.
_ROWS = (SEED, *ROW_OPTIONS, NOISE, PROGRESS, PRIVACY_UNIT)
_POINTS = (
    Option("columns", str | Sequence[str],
           doc="1 to 8 numeric columns, the coordinates of the private points."),
    Option("bounds", Bounds,
           doc="one public ``(lo, hi)`` per column (or a mapping column -> pair); never derive bounds "
               "from the data."),
    Option("epsilon", float, kind="positive", doc="total privacy budget, > 0."),
)
_NEIGHBOURS = Option("neighbours", Neighbours, "add_remove", check=check_neighbours,
                     doc="``\"add_remove\"`` (one point added or removed, the papers' relation) or "
                         "``\"replace\"`` (one point modified: group privacy, factor 2).")


def _spent(sensitivity: int, scale: float | Fraction) -> Fraction:
    """``Delta / b`` exactly: what a (discrete) Laplace mechanism of scale ``b`` spends."""
    return Fraction(sensitivity) / Fraction(scale)


class _CountsPlan(Plan):
    """A plan whose exact noise is (discrete) Laplace on vectors of counts held in float64
    (:meth:`_counts`), beside, for PrivTree, split decisions that draw exact Bernoulli events at
    any scale (:meth:`_decisions_spent`)."""

    def _counts(self) -> list[tuple[str, int, float | Fraction]]:
        """``(part, L1 sensitivity Delta, scale b)`` of every noisy count vector (subclasses)."""
        return []

    def _decisions_spent(self) -> Fraction:
        return Fraction(0)

    def exact_draws(self) -> list[tuple[str, Fraction, int]]:
        return [(part, Fraction(b), MAX_COUNT_SCALE) for part, _, b in self._counts()]

    def _exact_spent(self) -> Fraction:
        """The decisions' epsilon and ``Delta / b`` of every count vector."""
        return sum((_spent(k, b) for _, k, b in self._counts()), self._decisions_spent())


#: The most cells a UG grid, or the second level of an AG grid, may have: a public cap, so that a
#: grid sized from a noisy count (one row of weight near 2^53 makes it huge) never asks for more
#: memory than a public bound (2^26 cells, 4 GiB at 64 bytes a cell), whatever the data.
MAX_GRID_CELLS = 2**26


def max_side(d: int, cells: int | None = None) -> int:
    """The largest ``m`` with ``m^d <= cells`` (default :data:`MAX_GRID_CELLS`; at least 1)."""
    cells = MAX_GRID_CELLS if cells is None else cells
    m = max(1, int(cells ** (1.0 / d)))
    while m**d > cells and m > 1:
        m -= 1
    while (m + 1) ** d <= cells:
        m += 1
    return m


def grid_side(n: float, epsilon: float, c: float, d: int) -> int:
    """UG's cells per side ``ceil((n eps / c)^(2/(d+2)))``, at least 1 and at most
    :func:`max_side` (Qardaji et al.; ``n`` public or noisy: a public rule applied to a public or
    released number)."""
    wanted = (max(n, 0.0) * epsilon / c) ** (2.0 / (d + 2))
    return max(1, min(math.ceil(wanted) if math.isfinite(wanted) else max_side(d), max_side(d)))


def split_budget(epsilon: float | Fraction, share: float, noise: str
                 ) -> tuple[float | Fraction, float | Fraction]:
    """``(share * epsilon, epsilon - share * epsilon)``, exact rationals for exact noise."""
    if noise == "exact":
        first = Fraction(epsilon) * Fraction(share)
        return first, Fraction(epsilon) - first
    return epsilon * share, epsilon * (1 - share)


class PointsPlan(_CountsPlan):
    positional = ("columns",)
    shape = "points"
    #: Why the leaf counts of this plan's releases are not independent (their ``Correlated``
    #: noise model), when they are not.
    correlation = ""

    def _calibrate(self) -> None:
        self.box = as_box(self.options["columns"], self.options["bounds"])
        self.sensitivity = self.count_sensitivity

    @property
    def release_noise_model(self) -> NoiseModel:
        """The noise model a release of this plan records (before any post-processing)."""
        model = Correlated(self.correlation) if self.correlation else self.noise_model
        assert model is not None  # a plan without an independent model states its correlation
        return model

    def layout_entries(self, data: Any) -> dict[str, Any]:
        """What a release's ``layout`` entry states of this plan (its kind, and the sides or bits
        the plan decides; ``data``: the record's values only the data decides)."""
        raise NotImplementedError


#: Dimensions from which PrivTree's default fanout is 4 rather than ``2^d``.
FANOUT_4_FROM = 4


def privtree_fanout(d: int) -> int:
    """PrivTree's default fanout in ``d`` dimensions (public): ``2^d`` (every dimension halved per
    level, the paper's quadtree) up to 3 dimensions, 4 (two dimensions halved per level,
    round-robin) from :data:`FANOUT_4_FROM`.  In 4-D a split of a point mass into 16 children
    makes 15 mostly empty ones, each paying the depth-independent bias; fanout 4 gave a lower
    mean relative error in all 18 (epsilon, box size) cells of the PrivTree paper's 4-D flights
    experiment, by 14-56 % (``docs/results/spatial.md``, fanout section)."""
    return 4 if d >= FANOUT_4_FROM else 2**d


class _PrivTreeBase(PointsPlan):
    """PrivTree's tree over a Morton layout of the box: what PrivTree and its sub-grid variant share."""

    epsilon_tree: float | Fraction
    layout: MortonLayout

    def _tree_layout(self, default_fanout: int) -> MortonLayout:
        """The tree's layout from the ``fanout`` (``default_fanout`` when None) and ``resolution`` options."""
        fanout = self.options["fanout"]
        split_bits = check_fanout(default_fanout if fanout is None else fanout, self.box.d)
        top = resolution_bits(self.box.d)
        bits = top if self.options["resolution"] is None else check_int(self.options["resolution"],
                                                                         "resolution", lo=1, hi=top)
        return MortonLayout(self.box.d, bits, split_bits)

    def _calibrate_decisions(self, layout: MortonLayout) -> None:
        """``lam``, ``delta`` (checked) and ``theta`` of the split decisions over ``layout``."""
        self.lam = privtree_lambda(self.epsilon_tree, layout.fanout, group=self.sensitivity,
                                   noise=self.noise)
        self.delta = privtree_delta(self.lam, layout.fanout, noise=self.noise)
        check_decisions(self.lam, self.delta, layout.fanout, self.noise)
        theta = check_theta(self.options["theta"])
        self.theta = grid_theta(theta) if self.noise == "exact" else theta
        self._fanout = layout.fanout

    def _decisions_spent(self) -> Fraction:
        """``(2 beta - 1) Delta / ((beta - 1) lambda)``."""
        return decisions_epsilon(self.lam, self._fanout, self.sensitivity)

    @property
    def compiled_kernels(self) -> bool:
        """Never: the only compiled kernels a PrivTree release could run are the leaf noise's
        look-ups (one draw per leaf), and its numpy kernels were measured as fast from 1e5 to
        1e7 points (0.9-1.1x), so numba's import (0.5-1.4 s in a fresh process) buys nothing.
        A constant: the point and node counts, private, never decide."""
        return False

    def layout_entries(self, data: Any) -> dict[str, Any]:
        return {"kind": "morton", "bits": self.layout.bits, "split_bits": self.layout.split_bits}


@register_plan
class PrivTreePlan(_PrivTreeBase):
    """PrivTree: ``tree_share`` of epsilon grows the tree, the rest adds ``Lap(Delta / eps_leaf)``
    to each leaf count."""

    name = "privtree"
    options_table = (
        *_POINTS,
        Option("fanout", int | None, None, lo=2,
               doc="``beta``, a power of two up to ``2^d`` (default :func:`privtree_fanout`: ``2^d``, "
                   "every dimension halved, up to 3 dimensions; 4 from 4 dimensions); ``2^s`` splits "
                   "``s`` dimensions per level in round-robin order."),
        Option("theta", float, 0.0, kind="nonnegative", check=check_theta,
               doc="split threshold (default 0, the paper's recommendation)."),
        Option("tree_share", float, 0.5, kind="fraction",
               doc="fraction of ``epsilon`` that builds the tree; the rest goes to the counts."),
        _NEIGHBOURS, SEED, *ROW_OPTIONS[:2],
        Option("resolution", int | None, None, lo=1,
               doc="bits per axis of the finest grid the points are snapped to (public; default and "
                   "maximum ``min(31, 62 // d)``); lower values give a coarser grid and a smaller "
                   "aggregate."),
        ROW_OPTIONS[2], NOISE, PROGRESS,
        Option("levels", int | None, 0,
               doc="public number ``k`` of top levels of the decomposition whose every cell also gets "
                   "a noisy count (:mod:`polars_dp.mechanisms.privtree_levels`); ``0`` (default): the "
                   "leaves only, as in the paper; ``None``: ``max(1, 4 // log2(fanout))``.  With "
                   "``k >= 1`` the count budget ``epsilon - eps_tree`` is split: 1/16 to the top levels "
                   "(geometrically, Cormode et al. 2012), the rest to the leaves, and every count is "
                   "replaced by the least-squares estimate consistent with the tree (post-processing)."),
        PRIVACY_UNIT)
    release_mechanisms = ("privtree",)
    papers: ClassVar[Mapping[str, str]] = {
        "privtree": "Zhang, Xiao, Xie, PrivTree: A Differentially Private Algorithm for Hierarchical "
                    "Decompositions, SIGMOD 2016",
    }
    record_fields = (
        Field("lambda", lambda p, d: p.lam, scale=True),
        Field("delta", lambda p, d: p.delta, scale=True),
        Field("theta", lambda p, d: p.theta, option="theta"),
        Field("fanout", lambda p, d: p.layout.fanout, option="fanout"),
        Field("tree_share", lambda p, d: p.options["tree_share"], option="tree_share"),
        Field("epsilon_tree", lambda p, d: float(p.epsilon_tree), scale=True),
        Field("epsilon_leaf", lambda p, d: float(p.epsilon_leaf), scale=True),
        Field("leaf_noise_scale", lambda p, d: float(p.leaf_scale), scale=True, stated=True),
        Field("resolution_bits", lambda p, d: p.layout.bits, option="resolution"),
        exact_fields("leaf_", lambda p: p.sensitivity, lambda p: p.leaf_scale),
        INPUTS,
        Field("levels", lambda p, d: p.levels or OMIT, option="levels"),
        Field("epsilon_levels", lambda p, d: [float(e) for e in p.epsilon_levels] or OMIT, scale=True),
        Field("level_noise_scales", lambda p, d: [float(b) for b in p.level_scales] or OMIT, scale=True),
    )
    #: No counted top levels where the record states none.
    record_defaults: ClassVar[Mapping[str, Any]] = {"levels": 0}
    unknown_before_data = ("the leaves (which boxes the tree splits, decided by the noisy counts): "
                           "a range's noise is the leaf noise of the leaves it overlaps plus the "
                           "uniformity error inside partly covered leaves")

    def _calibrate(self) -> None:
        super()._calibrate()
        self.epsilon_tree, self.epsilon_leaf = split_budget(self.epsilon, self.options["tree_share"],
                                                            self.noise)
        self.layout = self._tree_layout(privtree_fanout(self.box.d))
        self.levels = check_levels(self.options["levels"], self.layout)
        self.epsilon_levels: list[Any] = []
        if self.levels:  # counted top levels take their share of the count budget
            self.epsilon_levels, self.epsilon_leaf = split_count_budget(self.epsilon_leaf, self.levels,
                                                                        self.box.d, self.noise)
        self.level_scales = [laplace_scale(self.sensitivity, e, self.noise) for e in self.epsilon_levels]
        self.leaf_scale = laplace_scale(self.sensitivity, self.epsilon_leaf, self.noise)
        self._calibrate_decisions(self.layout)
        if self.levels:
            self.correlation = ("counts inferred by least squares from the leaves and the counted top "
                                "levels (their exact noise_std comes from the inference weights)")

    def _counts(self) -> list[tuple[str, int, float | Fraction]]:
        """Leaves ``Lap(Delta / eps_leaf)``, counted levels ``Lap(Delta / eps_l)``."""
        return [("leaf noise", self.sensitivity, self.leaf_scale),
                *((f"level {k} noise", self.sensitivity, b) for k, b in enumerate(self.level_scales, 1))]

    @property
    def noise_model(self) -> NoiseModel:
        return IndependentLaplace(float(self.leaf_scale))


@register_plan
class PrivTreeSubgridPlan(_PrivTreeBase):
    """PrivTree leaves with noisy sub-grids and consistent counts (issue 41;
    :mod:`polars_dp.kernels.subgrid` states the budget split and
    :mod:`polars_dp.mechanisms.spatial_subgrid` the privacy argument).

    ``eps_tree = tree_share epsilon`` grows PrivTree's tree (``lambda`` with group factor
    ``Delta``: ``eps_tree / 2`` under ``replace``), ``eps_leaf = leaf_share (epsilon - eps_tree)``
    adds ``Lap(Delta / eps_leaf)`` to every leaf count and ``eps_sub`` (the rest) adds
    ``Lap(Delta / eps_sub)`` to every sub-cell count, ``Delta`` 1 under ``add_remove`` and 2 under
    ``replace`` (each count vector partitions the box), times the privacy unit's rows."""

    name = "privtree_subgrid"
    options_table = (
        *_POINTS,
        Option("fanout", int | None, None, lo=2,
               doc="``beta``, a power of two up to ``2^d`` (default ``min(4, 2^d)``: two axes halved "
                   "per level, round-robin)."),
        Option("theta", float, 0.0, kind="nonnegative", check=check_theta,
               doc="PrivTree's split threshold (default 0)."),
        Option("tree_share", float | None, None, kind="fraction",
               doc="fraction of ``epsilon`` that builds the tree, in (0, 1) (default ``None``: 0.2 up "
                   "to 3 dimensions, 0.3 from 4)."),
        Option("leaf_share", float, subgrid.LEAF_SHARE, kind="fraction",
               doc="fraction of the count budget ``epsilon - eps_tree`` spent on the leaf counts, in "
                   "(0, 1) (default 0.5); the rest goes to the sub-cell counts."),
        Option("c2", float, subgrid.C2, kind="positive",
               doc="AG's constant, > 0: a leaf of noisy count ``v`` gets about ``(v eps_sub / c2)^(2d/"
                   "(d+2))`` sub-cells (each about ``c2 / eps_sub`` points; default 3)."),
        Option("max_subcell_bits", int | None, None, lo=0,
               doc="the most halvings of a leaf into sub-cells (``2^k`` sub-cells), between 0 and "
                   "``d * resolution`` (default ``None``: ``min(8, d * resolution)``)."),
        _NEIGHBOURS, SEED, *ROW_OPTIONS[:2],
        Option("resolution", int | None, None, lo=1,
               doc="bits per axis of the finest grid the points are snapped to (public; default and "
                   "maximum ``min(31, 62 // d)``)."),
        ROW_OPTIONS[2], NOISE, PROGRESS, PRIVACY_UNIT)
    release_mechanisms = ("privtree_subgrid",)
    papers: ClassVar[Mapping[str, str]] = {
        "privtree_subgrid": "Zhang, Xiao, Xie, PrivTree, SIGMOD 2016 (the leaves), with the second level "
                            "and constrained inference of AG: Qardaji, Yang, Li, Differentially Private "
                            "Grids for Geospatial Data, ICDE 2013 (the sub-grids)",
    }
    record_fields = (
        Field("lambda", lambda p, d: p.lam, scale=True),
        Field("delta", lambda p, d: p.delta, scale=True),
        Field("theta", lambda p, d: p.theta, option="theta"),
        Field("fanout", lambda p, d: p.tree_layout.fanout, option="fanout"),
        Field("tree_share", lambda p, d: p.tree_share, option="tree_share"),
        Field("leaf_share", lambda p, d: p.options["leaf_share"], option="leaf_share"),
        Field("c2", lambda p, d: p.c2, option="c2"),
        Field("max_subcell_bits", lambda p, d: p.max_subcell_bits, option="max_subcell_bits"),
        Field("epsilon_tree", lambda p, d: float(p.epsilon_tree), scale=True),
        Field("epsilon_leaf", lambda p, d: float(p.epsilon_leaf), scale=True),
        Field("epsilon_sub", lambda p, d: float(p.epsilon_sub), scale=True),
        Field("leaf_noise_scale", lambda p, d: float(p.leaf_scale), scale=True, stated=True),
        Field("sub_noise_scale", lambda p, d: float(p.sub_scale), scale=True),
        Field("resolution_bits", lambda p, d: p.tree_layout.bits, option="resolution"),
        exact_fields("leaf_", lambda p: p.sensitivity, lambda p: p.leaf_scale),
        exact_fields("sub_", lambda p: p.sensitivity, lambda p: p.sub_scale),
        INPUTS,
    )
    correlation = ("consistent counts: each leaf's count and its sub-cells' counts combined by weighted "
                   "least squares (exact noise_std from the two variances)")
    unknown_before_data = ("the leaves (decided by PrivTree's noisy comparisons) and their sub-grids "
                           "(sized from the noisy leaf counts): a range's noise is that of the consistent "
                           "counts it overlaps plus the uniformity error inside partly covered sub-cells")

    def _calibrate(self) -> None:
        super()._calibrate()
        self.tree_layout = self._tree_layout(min(4, 2**self.box.d))
        #: the release's cells are the sub-cells: nodes of the bit layout (one halving per depth)
        self.layout = subgrid.subcell_layout(self.tree_layout)
        cap = self.options["max_subcell_bits"]
        cap = min(subgrid.MAX_SUBCELL_BITS, self.tree_layout.total_bits) if cap is None else cap
        self.c2, self.max_subcell_bits = subgrid.check_subgrid_options(self.options["c2"], cap,
                                                                       self.tree_layout)
        share = self.options["tree_share"]
        self.tree_share = subgrid.default_tree_share(self.box.d) if share is None else share
        budget = subgrid.subgrid_budget(Fraction(self.epsilon), self.neighbours,
                                        tree_share=self.tree_share,
                                        leaf_share=self.options["leaf_share"],
                                        unit_factor=self.privacy_unit.factor)
        self.epsilon_leaf: float | Fraction
        self.epsilon_sub: float | Fraction
        parts = (budget.epsilon_tree, budget.epsilon_leaf, budget.epsilon_sub)  # the one split
        self.epsilon_tree, self.epsilon_leaf, self.epsilon_sub = (
            parts if self.noise == "exact" else tuple(float(p) for p in parts))
        self.leaf_scale = laplace_scale(self.sensitivity, self.epsilon_leaf, self.noise)
        self.sub_scale = laplace_scale(self.sensitivity, self.epsilon_sub, self.noise)
        self._calibrate_decisions(self.tree_layout)

    def _counts(self) -> list[tuple[str, int, float | Fraction]]:
        return [("leaf noise", self.sensitivity, self.leaf_scale),
                ("sub-cell noise", self.sensitivity, self.sub_scale)]

    def subcell_bits(self, noisy_leaf: np.ndarray, depth: np.ndarray) -> np.ndarray:
        """Sub-cell bits of leaves of tree ``depth`` from their released counts (post-processing,
        :func:`polars_dp.kernels.subgrid.subcell_bits` with this plan's ``eps_sub``, ``c2`` and cap)."""
        return subgrid.subcell_bits(noisy_leaf, depth, self.tree_layout, epsilon_sub=float(self.epsilon_sub),
                                    c2=self.c2, max_subcell_bits=self.max_subcell_bits)


_N = Option("n", int | None, None, lo=0,
            doc="a public number of points, or ``None`` to use the exact count (``replace`` while no "
                "row can be dropped: ``nulls=\"raise\"`` and ``on_out_of_domain`` not ``\"drop\"``) or "
                "a noisy estimate (otherwise).  Never pass a count computed from the private data.")
_N_SHARE = Option("n_share", float, 0.05, kind="fraction",
                  doc="fraction of ``epsilon`` spent on the noisy number of points when it is not public.")
_C = Option("c", float, 10.0, kind="positive",
            doc="the grid constant: ``m = ceil((n eps / c)^(2/(d+2)))`` cells per side.")


class _CountedGridPlan(PointsPlan):
    """The budget of N for UG and AG: N is public when given, or under ``replace`` neighbours
    while no row is dropped (``nulls="raise"`` and ``on_out_of_domain`` not ``"drop"``: a
    replaced row that is dropped would change N); otherwise N is
    estimated with ``Lap(k / eps_n)`` (sensitivity ``k``, the privacy unit's rows per individual,
    1 for one row), ``eps_n = n_share epsilon``, and the grid gets ``eps_grid = epsilon - eps_n``
    (exact rationals for exact noise).  With an identifier declared N is never public under
    ``replace`` (an individual's kept rows may number 1 to ``k``)."""

    def _calibrate(self) -> None:
        super()._calibrate()
        keeps_rows = (self.options["nulls"] == "raise" and self.options["on_out_of_domain"] != "drop"
                      and not self.privacy_unit.truncates)
        self.n_public = self.options["n"] is not None or (self.neighbours == "replace" and keeps_rows)
        self.epsilon_n: float | Fraction
        self.epsilon_grid: float | Fraction
        self.n_scale: float | Fraction | None = None
        if self.n_public:
            self.epsilon_n = 0.0
            self.epsilon_grid = Fraction(self.epsilon) if self.noise == "exact" else self.epsilon
        else:
            self.epsilon_n, self.epsilon_grid = split_budget(self.epsilon, self.options["n_share"],
                                                             self.noise)
            self.n_scale = laplace_scale(self.n_sensitivity, self.epsilon_n, self.noise)

    @property
    def n_sensitivity(self) -> int:
        """L1 sensitivity of the number of points: ``k`` rows of one individual (1 for one row),
        under either relation (a replaced individual's rows may be dropped, the other's kept)."""
        return self.privacy_unit.factor

    def _n_counts(self) -> list[tuple[str, int, float | Fraction]]:
        """The noisy ``n``, when not public: ``Lap(k / eps_n)``."""
        return [] if self.n_scale is None else [("noise of n", self.n_sensitivity, self.n_scale)]

    @property
    def n_source(self) -> str:
        if self.options["n"] is not None:
            return "public"
        if self.n_public:
            return "exact (public under replace neighbours)"
        return f"noisy (n_share={self.options['n_share']})"

    @classmethod
    def options_from_record(cls, params: Any) -> dict[str, Any]:
        """``n`` and ``n_share`` as :attr:`n_source` states them, the other options as recorded."""
        source = str(params["n_source"])
        share = _N_SHARE.default
        if "n_share=" in source:
            try:
                share = float(source.split("n_share=")[1].rstrip(")"))
            except ValueError:
                raise ParameterError(f"n_source {source!r} is malformed", parameter="n_source") from None
        n = int(params["n_used"]) if source == "public" else None
        return {"n": n, "n_share": share, **super().options_from_record(params)}

    def check_data(self, params: Any) -> None:
        """``n_used``: the public ``n``, or a count of points (an integer for exact noise)."""
        n_used = params.get("n_used")
        if (isinstance(n_used, bool) or not isinstance(n_used, (int, float)) or not math.isfinite(n_used)
                or n_used < 0 or ((self.noise == "exact" or self.options["n"] is not None)
                                  and n_used != round(n_used))):
            raise ReleaseFormatError(f"release metadata field 'params.n_used' must be a number of points "
                                     f">= 0 (an integer for exact noise or a public n), got {n_used!r}")


@register_plan
class UniformGridPlan(_CountedGridPlan):
    """UG: an ``m^d`` grid with ``m`` from ``n`` (public, or a noisy count with ``n_share``)."""

    name = "uniform_grid"
    options_table = (*_POINTS, _N, _N_SHARE, _C, _NEIGHBOURS, *_ROWS)
    release_mechanisms = ("uniform_grid",)
    papers: ClassVar[Mapping[str, str]] = {
        "uniform_grid": "Qardaji, Yang, Li, Differentially Private Grids for Geospatial Data, ICDE 2013 "
                        "(UG)",
    }
    record_fields = (
        Field("c", lambda p, d: p.options["c"], option="c"),
        Field("m", lambda p, d: p.side(d["n_used"])),
        Field("n_used"),
        Field("n_source", lambda p, d: p.n_source),
        Field("epsilon_grid", lambda p, d: float(p.epsilon_grid), scale=True),
        Field("noise_scale", lambda p, d: float(p.cell_scale), scale=True, stated=True),
        exact_fields("", lambda p: p.sensitivity, lambda p: p.cell_scale),
        INPUTS,
    )
    unknown_before_data = ("the grid side m when n is not given (it follows the noisy count), hence "
                           "the uniformity error inside partly covered cells")

    def _calibrate(self) -> None:
        super()._calibrate()
        self.cell_scale = laplace_scale(self.sensitivity, self.epsilon_grid, self.noise)

    def _counts(self) -> list[tuple[str, int, float | Fraction]]:
        return [*self._n_counts(), ("cell noise", self.sensitivity, self.cell_scale)]

    def side(self, n_used: float) -> int:
        """The grid's cells per side for the number of points used (public or noisy)."""
        return grid_side(n_used, float(self.epsilon_grid), self.options["c"], self.box.d)

    @property
    def noise_model(self) -> NoiseModel:
        return IndependentLaplace(float(self.cell_scale))

    def layout_entries(self, data: Any) -> dict[str, Any]:
        return {"kind": "grid", "m": self.side(data["n_used"])}


@register_plan
class AdaptiveGridPlan(_CountedGridPlan):
    """AG: two grid levels, ``alpha`` of the grid budget on the first."""

    name = "adaptive_grid"
    options_table = (
        *_POINTS, _N, _N_SHARE,
        Option("alpha", float, 0.5, kind="fraction",
               doc="fraction of the grid budget spent on the first level (the rest on the second)."),
        _C,
        Option("c2", float, 5.0, kind="positive",
               doc="the second level's constant: a first-level cell of noisy count ``v`` is split into "
                   "``ceil((v eps_2 / c2)^(2/(d+2)))`` cells per side."),
        _NEIGHBOURS, *_ROWS)
    release_mechanisms = ("adaptive_grid",)
    papers: ClassVar[Mapping[str, str]] = {
        "adaptive_grid": "Qardaji, Yang, Li, Differentially Private Grids for Geospatial Data, ICDE 2013 "
                         "(AG)",
    }
    record_fields = (
        Field("alpha", lambda p, d: p.options["alpha"], option="alpha"),
        Field("c", lambda p, d: p.options["c"], option="c"),
        Field("c2", lambda p, d: p.options["c2"], option="c2"),
        Field("m1", lambda p, d: p.first_side(d["n_used"])),
        Field("n_used"),
        Field("n_source", lambda p, d: p.n_source),
        Field("epsilon_grid", lambda p, d: float(p.epsilon_grid), scale=True),
        Field("level1_noise_scale", lambda p, d: float(p.level1_scale), scale=True),
        Field("level2_noise_scale", lambda p, d: float(p.level2_scale), scale=True),
        exact_fields("level1_", lambda p: p.sensitivity, lambda p: p.level1_scale),
        exact_fields("level2_", lambda p: p.sensitivity, lambda p: p.level2_scale),
        INPUTS,
    )
    correlation = "its leaf counts are not independent (constrained inference over two noisy levels)"
    unknown_before_data = ("both grid levels (the second-level split follows the noisy first-level "
                           "counts) and constrained inference mixes the noise: no exact error bar")

    def _calibrate(self) -> None:
        super()._calibrate()
        self.epsilon_level1, self.epsilon_level2 = split_budget(self.epsilon_grid, self.options["alpha"],
                                                                self.noise)
        self.level1_scale = laplace_scale(self.sensitivity, self.epsilon_level1, self.noise)
        self.level2_scale = laplace_scale(self.sensitivity, self.epsilon_level2, self.noise)

    def _counts(self) -> list[tuple[str, int, float | Fraction]]:
        return [*self._n_counts(), ("first-level noise", self.sensitivity, self.level1_scale),
                ("second-level noise", self.sensitivity, self.level2_scale)]

    def first_side(self, n_used: float) -> int:
        """First-level cells per side: ``max(10, ceil(m / 4))``, ``m`` UG's side for ``n_used``."""
        return max(10, math.ceil(grid_side(n_used, float(self.epsilon_grid), self.options["c"],
                                           self.box.d) / 4))

    def second_sides(self, noisy: np.ndarray, first_cells: int) -> np.ndarray:
        """Second-level cells per side of each first-level cell from its noisy count ``v``:
        ``max(1, ceil((max(v, 0) eps_2 / c2)^(2/(d+2))))`` (post-processing of released counts).
        When their cells add up past :data:`MAX_GRID_CELLS`, each side is cut to the largest
        whose cells fit ``MAX_GRID_CELLS / first_cells`` (a public rule on released numbers)."""
        d, c2 = self.box.d, self.options["c2"]
        wanted = (np.maximum(noisy, 0.0) * float(self.epsilon_level2) / c2) ** (2.0 / (d + 2))
        sides = np.maximum(1, np.ceil(np.minimum(wanted, max_side(d)))).astype(np.int64)
        if int((sides.astype(object) ** d).sum()) > MAX_GRID_CELLS:
            sides = np.minimum(sides, max_side(d, max(1, MAX_GRID_CELLS // max(1, first_cells))))
        return sides

    def layout_entries(self, data: Any) -> dict[str, Any]:
        return {"kind": "two_level_grid", "m1": self.first_side(data["n_used"])}


@register_plan
class PriveletGridPlan(PointsPlan):
    """Privelet*: Privelet on a fixed ``2^bits``-per-dimension grid (public)."""

    name = "privelet_grid"
    options_table = (
        *_POINTS,
        Option("bits", int | None, None, lo=1, hi=20,
               doc="the grid's ``2^bits`` cells per dimension (public; default ``max(1, 16 // d)``, "
                   "about 65,536 cells)."),
        _NEIGHBOURS, *_ROWS)
    release_mechanisms = ("privelet_grid",)
    papers: ClassVar[Mapping[str, str]] = {
        "privelet_grid": "Xiao, Wang, Gehrke, ICDE 2010, on a fixed grid (Privelet*, PrivTree paper Sec. "
                         "6.1)",
    }
    record_fields = (
        Field("privelet", lambda p, d: p.privelet.record(), keys=PriveletPlan.record_keys()),
        Field("bits", lambda p, d: p.bits, option="bits"),
        Field("m", lambda p, d: p.m),
        Field("noise_scale", lambda p, d: p.privelet.noise_scale, scale=True, stated=True),
        INPUTS,
    )
    correlation = "its leaf counts are not independent (wavelet noise)"
    data_independent = True
    unknown_before_data = "the uniformity error inside partly covered grid cells"

    def _calibrate(self) -> None:
        super()._calibrate()
        bits = self.options["bits"]
        self.bits = max(1, 16 // self.box.d) if bits is None else bits
        self.m = 1 << self.bits
        #: Privelet over the grid's cell indices (one Haar axis of ``m`` cells per dimension):
        #: its calibration is this plan's, ``rho = (1 + bits)^d``.
        self.privelet = PriveletPlan([Ordinal(c, 0, self.m - 1) for c in self.box.columns],
                                     epsilon=self.epsilon, neighbours=self.neighbours, noise=self.noise,
                                     privacy_unit=self.privacy_unit)
        self.rho = self.privelet.rho
        self.scale = self.privelet.scale
        self.nominal_scale = self.privelet.nominal_scale

    def _exact_spent(self) -> Fraction:
        return self.privelet.epsilon_spent

    @classmethod
    def transformed_axes(cls, params: Mapping[str, Any]) -> tuple[str, ...]:
        return PriveletPlan.transformed_axes(params)

    def layout_entries(self, data: Any) -> dict[str, Any]:
        return {"kind": "grid", "m": self.m}

    @property
    def noise_model(self) -> NoiseModel:
        return WaveletLaplace(float(self.scale), tuple(self.box.columns))


#: How a PrivTree sequence release sums its noisy leaves (:mod:`polars_dp.mechanisms.sequences`).
Postprocess: TypeAlias = Literal["sum_then_clip", "clip_then_sum"]
_SEQUENCES = (
    Option("column", str, doc="a List column of symbols (ints or strings) or a String column (one symbol "
                              "per character)."),
    Option("alphabet", Sequence[int] | Sequence[str],
           doc="the public symbols, e.g. ``range(1, 18)``; anything else raises DomainError."),
    Option("max_length", int, check=functools.partial(check_int, name="max_length (a public bound)", lo=1),
           doc="public truncation length: only the first ``max_length`` symbols of each sequence are "
               "used; ``l_top = max_length + 1``."),
    Option("epsilon", float, kind="positive",
           doc="total budget under add/remove-one-sequence neighbours."),
)


#: Why a sequence mechanism refuses ``"replace"`` (the plan, a budget and a domain file say it).
SEQUENCE_NEIGHBOURS = ("sequence mechanisms are differentially private under add/remove-one neighbours "
                       "only (add/remove-one-sequence neighbours only: one sequence added or removed, none "
                       "replaced); use neighbours='add_remove' (the default; for a Session or an "
                       "Accountant releasing sequences too)")


def check_sequence_neighbours(neighbours: str) -> str:
    """``"add_remove"``, the one relation the sequence mechanisms are private under (their
    sensitivities count one sequence added or removed: ``l_top`` per leaf histogram, one length
    bin); ``"replace"`` is refused with :data:`SEQUENCE_NEIGHBOURS`."""
    if check_neighbours(neighbours) != "add_remove":
        raise ParameterError(SEQUENCE_NEIGHBOURS, parameter="neighbours")
    return neighbours


#: The sequences' row rules (:func:`polars_dp.counting.sequences.encode_sequences`): drop, never
#: clamp, a sequence on its own (the guarantee is unchanged); and their one neighbour relation,
#: which may be stated as for every other mechanism.
_SEQUENCE_ROWS = (
    Option("nulls", Nulls, "raise",
           doc="``\"raise\"`` (default) or ``\"drop\"`` a sequence that is null or holds a null symbol."),
    Option("on_out_of_domain", OnOutOfAlphabet, "raise",
           doc="``\"raise\"`` (default) or ``\"drop\"`` a sequence holding a symbol outside the "
               "alphabet in its first ``max_length`` symbols."),
    Option("neighbours", Literal["add_remove"], "add_remove", check=check_sequence_neighbours,
           doc="``\"add_remove\"`` (the default and the only relation: one sequence added or "
               "removed); ``\"replace\"`` is refused."),
    SEED, NOISE, PROGRESS, PRIVACY_UNIT)


class SequencesPlan(_CountsPlan):
    """Sequences under add/remove-one-sequence neighbours, or, with an identifier declared,
    add/remove one identifier's ``<= k`` kept sequences (``Rows(id_column=...)``: ``k = 1``)."""

    positional = ("column",)
    shape = "sequences"
    #: Whether every internal histogram of a release is the sum of its children's.
    internal_sums: ClassVar[bool] = False
    #: The public cap on a release's nodes (``None``: only the depth bounds them).
    max_nodes: int | None = None

    @property
    def max_depth(self) -> int:
        """The deepest level a release's tree may reach (subclasses)."""
        raise NotImplementedError

    def check_tree(self, params: Mapping[str, Any], n_nodes: int, leaf_min: float) -> None:
        """Refuse what a release's tree (``n_nodes`` nodes, smallest leaf bin ``leaf_min``) and the
        values its data decided cannot both be (subclasses)."""

    @classmethod
    def length_counts(cls, params: Mapping[str, Any]) -> list[float] | None:
        """The noisy counts of the truncated lengths a record holds (subclasses; none by default)."""
        return None

    @property
    def group(self) -> int:
        """The (context, symbol) pairs one individual adds at most: ``k l_top``, ``l_top =
        max_length + 1`` per sequence, ``k`` the privacy unit's sequences (1 without one)."""
        return (self.options["max_length"] + 1) * self.privacy_unit.factor

    @property
    def length_sensitivity(self) -> int:
        """L1 sensitivity of the histogram of sequence lengths: ``k``, the sequences one
        individual adds at most (1 without a privacy unit)."""
        return self.privacy_unit.factor


@register_plan
class PrivTreeSequencesPlan(SequencesPlan):
    """PrivTree over sequence contexts (add/remove-one-sequence neighbours)."""

    name = "privtree_sequences"
    options_table = (
        *_SEQUENCES,
        Option("tree_share", float, 0.25, kind="fraction",
               doc="fraction of ``epsilon`` spent on the tree (the rest on the leaf histograms)."),
        Option("theta", float, 0.0, kind="nonnegative", check=check_theta,
               doc="PrivTree threshold (0, as in the PrivTree paper's experiments)."),
        Option("postprocess", Postprocess, "sum_then_clip",
               doc="``\"sum_then_clip\"`` (unclipped sums of the noisy leaves, queries clip at 0) or "
                   "``\"clip_then_sum\"`` (:mod:`polars_dp.mechanisms.sequences`)."),
        Option("max_nodes", int | None, None, lo=1,
               doc="public cap on the number of tree nodes (default ``2**25 // (|I| + 1)``)."),
        Option("length_share", float, 0.05,
               doc="fraction of ``epsilon`` spent on the noisy length law (0 for none)."),
        *_SEQUENCE_ROWS)
    release_mechanisms = ("privtree_sequences",)
    papers: ClassVar[Mapping[str, str]] = {
        "privtree_sequences": "Zhang, Xiao, Xie, SIGMOD 2016 (Sec. 4: a private prediction suffix tree)",
    }
    record_fields = (
        Field("lambda", lambda p, d: p.lam, scale=True),
        Field("delta", lambda p, d: p.delta, scale=True),
        Field("tree_share", lambda p, d: p.tree_share, option="tree_share"),
        Field("theta", lambda p, d: float(p.theta), option="theta"),
        Field("epsilon_tree", lambda p, d: float(p.epsilon_tree), scale=True),
        Field("epsilon_leaf", lambda p, d: float(p.epsilon_leaf), scale=True),
        Field("leaf_noise_scale", lambda p, d: float(p.leaf_scale), scale=True, stated=True),
        Field("l_top", lambda p, d: p.l_top),
        Field("beta", lambda p, d: p.beta),
        Field("postprocess", lambda p, d: p.options["postprocess"], option="postprocess"),
        Field("max_nodes", lambda p, d: p.max_nodes, option="max_nodes"),
        Field("capped"),
        Field("length_share", lambda p, d: p.length_share, option="length_share"),
        INPUTS,
        exact_fields("leaf_", lambda p: p.group, lambda p: p.leaf_scale),
        Field("epsilon_length", lambda p, d: OMIT if p.length_scale is None else float(p.epsilon_length),
              scale=True),
        Field("length_noise_scale", lambda p, d: OMIT if p.length_scale is None else float(p.length_scale),
              scale=True),
        Field("length_counts"),
        Field("length_exact", lambda p, d: {} if p.length_scale is None else
              noise_params(p.length_sensitivity, p.length_scale, p.noise, "length_"), scale=True,
              keys=("length_noise_scale_exact", "length_epsilon_effective")),
    )
    #: Records written before the entry: no length law, unclipped sums, no cap.
    record_defaults: ClassVar[Mapping[str, Any]] = {"length_share": 0.0, "postprocess": "sum_then_clip",
                                                    "max_nodes": None}
    unknown_before_data = "the tree (which contexts split, decided by noisy counts) and the clipping"

    def _calibrate(self) -> None:
        """The one calibration of :func:`polars_dp.privtree_sequences` (its module docstring has
        the proof): ``l_top = max_length + 1``, ``beta = |I| + 1``; ``eps_tree = tree_share
        epsilon``, ``eps_length = length_share epsilon``, ``eps_leaf = epsilon - eps_tree -
        eps_length`` (exact rationals for exact noise); ``lambda``/``delta`` from ``eps_tree`` with
        group factor ``l_top`` (:func:`~polars_dp.plans.privtree_scales.privtree_sequence_params`);
        leaf bins ``Lap(l_top / eps_leaf)``, length bins ``Lap(1 / eps_length)``.  With a privacy
        unit of ``k`` sequences per individual: ``k l_top`` (:attr:`group`) and ``Lap(k /
        eps_length)``."""
        o = self.options
        self.alphabet_size = alphabet_size(o["alphabet"])
        self.beta = self.alphabet_size + 1
        self.max_length = o["max_length"]
        self.l_top = self.max_length + 1
        self.tree_share = o["tree_share"]
        self.length_share = check_length_share(o["length_share"], self.tree_share)
        self.max_nodes = check_max_nodes(o["max_nodes"], self.beta)
        self.theta = grid_theta(o["theta"]) if self.noise == "exact" else float(o["theta"])
        self.epsilon_tree: float | Fraction
        self.epsilon_length: float | Fraction
        self.epsilon_leaf: float | Fraction
        num: Any = Fraction if self.noise == "exact" else float  # exact: rationals that add up to epsilon
        self.epsilon_tree = num(self.tree_share) * num(self.epsilon)
        self.epsilon_length = num(self.length_share) * num(self.epsilon)
        self.epsilon_leaf = num(self.epsilon) - self.epsilon_tree - self.epsilon_length
        self.lam, self.delta = privtree_sequence_params(self.alphabet_size, self.max_length,
                                                        self.epsilon_tree, noise=self.noise,
                                                        per_unit=self.privacy_unit.factor)
        self.leaf_scale = laplace_scale(self.group, self.epsilon_leaf, self.noise)
        self.length_scale = (laplace_scale(self.length_sensitivity, self.epsilon_length, self.noise)
                             if self.epsilon_length > 0 else None)

    def _counts(self) -> list[tuple[str, int, float | Fraction]]:
        """Leaf bins ``Lap(l_top / eps_leaf)``, length bins ``Lap(1 / eps_length)`` (times ``k``)."""
        length = [] if self.length_scale is None else [("length noise", self.length_sensitivity,
                                                        self.length_scale)]
        return [("leaf noise", self.group, self.leaf_scale), *length]

    def _decisions_spent(self) -> Fraction:
        """``(2 beta - 1) l_top / ((beta - 1) lambda)`` (times ``k``)."""
        return decisions_epsilon(self.lam, self.beta, self.group)

    internal_sums = True

    @property
    def max_depth(self) -> int:
        return self.l_top

    @classmethod
    def length_counts(cls, params: Mapping[str, Any]) -> list[float] | None:
        return params.get("length_counts")

    def check_data(self, params: Any) -> None:
        """``capped`` a flag; ``length_counts`` one finite count per length ``0..max_length``
        (integers for exact noise), recorded exactly when there is a length law."""
        if not isinstance(params.get("capped", False), bool):
            raise ReleaseFormatError(f"release metadata field 'params.capped' must be true or false, got "
                                     f"{params['capped']!r}")
        if self.length_scale is not None or "length_counts" in params:
            counts = params.get("length_counts")
            values = counts if isinstance(counts, list) else []
            ok = (len(values) == self.max_length + 1
                  and all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
                          and (self.noise != "exact" or x == round(x)) for x in values))
            if not ok or self.length_scale is None:
                raise ReleaseFormatError(f"release metadata field 'params.length_counts' must hold one count "
                                         f"per length 0..{self.max_length} (with length_share > 0): the "
                                         "file was edited")

    def check_tree(self, params: Mapping[str, Any], n_nodes: int, leaf_min: float) -> None:
        """A capped tree has no room for another child group under ``max_nodes``; after
        ``clip_then_sum`` no leaf bin is negative."""
        room = (self.max_nodes or n_nodes) - n_nodes
        if params.get("capped", False) and room >= self.beta:
            raise ReleaseFormatError(f"release metadata field 'params.capped' is True but the tree has "
                                     f"room for more nodes under max_nodes = {self.max_nodes}: the file was "
                                     "edited")
        if self.options["postprocess"] == "clip_then_sum" and leaf_min < 0:
            raise ReleaseFormatError("release metadata field 'params.postprocess' is 'clip_then_sum' but a "
                                     "leaf bin is negative: the file was edited")


def alphabet_size(alphabet: Any) -> int:
    """Number of public symbols (a string is its characters), checked as the sequences' encoder
    checks them (:func:`~polars_dp.domains.alphabet.check_alphabet`: not empty, distinct, all
    ints or all strings), so that a bad alphabet is refused before any scale is computed."""
    return len(check_alphabet(alphabet))


def check_length_share(length_share: float, tree_share: float) -> float:
    """``length_share`` in ``[0, 1)`` leaving budget for the leaves: ``tree_share + length_share < 1``."""
    try:
        value = float(length_share)
    except (TypeError, ValueError):
        value = float("nan")
    if not 0.0 <= value < 1.0 or tree_share + value >= 1.0:
        raise ParameterError(f"length_share must be in [0, 1) with tree_share + length_share < 1, got "
                             f"length_share={length_share!r}, tree_share={tree_share!r}",
                             parameter="length_share")
    return value


@register_plan
class NgramPlan(SequencesPlan):
    """N-gram counts up to ``height``: ``Lap(height * l_top / epsilon)`` per count."""

    name = "ngram_sequences"
    options_table = (*_SEQUENCES,
                     Option("height", int, 5, lo=1, doc="the longest n-gram counted (public)."),
                     *_SEQUENCE_ROWS)
    release_mechanisms = ("ngram",)
    papers: ClassVar[Mapping[str, str]] = {
        "ngram": "Chen, Acs, Castelluccia, Differentially Private Sequential Data Publication via "
                 "Variable-Length N-Grams, CCS 2012 (fixed height, without pruning)",
    }
    record_fields = (
        Field("height", lambda p, d: p.options["height"], option="height"),
        Field("l_top", lambda p, d: p.l_top),
        Field("noise_scale", lambda p, d: float(p.scale), scale=True, stated=True),
        Field("sensitivity_per_level", lambda p, d: p.group),
        exact_fields("", lambda p: p.options["height"] * p.group, lambda p: p.scale),
        INPUTS,
    )
    data_independent = True
    unknown_before_data = "nothing about the noise; clipping at 0 in queries is post-processing"

    def _calibrate(self) -> None:
        self.l_top = self.options["max_length"] + 1
        self.scale = laplace_scale(self.options["height"] * self.group, self.epsilon, self.noise)
        self.nominal_scale = self.options["height"] * self.group / self.epsilon

    def _counts(self) -> list[tuple[str, int, float | Fraction]]:
        return [("n-gram noise", self.options["height"] * self.group, self.scale)]

    @property
    def noise_model(self) -> NoiseModel:
        return IndependentLaplace(float(self.scale))

    @property
    def max_depth(self) -> int:
        return int(self.options["height"]) - 1

    @property
    def beta(self) -> int:
        """Counts per node: the symbols and the end mark."""
        return alphabet_size(self.options["alphabet"]) + 1

    @property
    def n_nodes(self) -> int:
        """Nodes of the full n-gram tree: ``sum_{k < height} beta^k``."""
        return sum(self.beta**k for k in range(int(self.options["height"])))

    def working_size(self) -> dict[str, Any]:
        """The n-gram tree: :attr:`n_nodes` nodes of :attr:`beta` counts, 64 bytes per count."""
        return {"shape": (self.n_nodes, self.beta), "bytes_per_cell": 64,
                "dims": f"height {self.options['height']} over {self.beta - 1} symbols",
                "fix": "use a lower height"}


__all__ = ["AdaptiveGridPlan", "Bounds", "NgramPlan", "PointsPlan", "Postprocess", "PrivTreePlan",
           "PrivTreeSequencesPlan", "PrivTreeSubgridPlan", "PriveletGridPlan", "SequencesPlan",
           "SEQUENCE_NEIGHBOURS", "UniformGridPlan", "alphabet_size",
           "check_length_share", "FANOUT_4_FROM", "MAX_GRID_CELLS", "grid_side", "max_side",
           "privtree_fanout", "split_budget"]
