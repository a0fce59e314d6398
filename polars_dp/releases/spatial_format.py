"""Reading a spatial release table back: columns, layout, leaf order and recomputed parameters.

A table is restored to the release's leaf order from the leaves' geometry (never from row
order) and its derived parameters are checked against the declared ones; anything else is a
:class:`~polars_dp.ReleaseFormatError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from polars_dp.domains.box import Box
from polars_dp.errors import PolarsDPError, ReleaseFormatError
from polars_dp.kernels.grid import grid_boxes
from polars_dp.kernels.morton import MortonLayout
from polars_dp.noise import histogram_sensitivity
from polars_dp.plans import AdaptiveGridPlan, Plan, PriveletGridPlan, PrivTreePlan, UniformGridPlan
from polars_dp.plans.noise_model import (
    Correlated,
    IndependentLaplace,
    NoiseModel,
)
from polars_dp.releases.integrity import (
    RELATIVE_SLACK,
    check_equal,
    check_noise_scale,
    positive_number,
)

if TYPE_CHECKING:
    from polars_dp.releases.spatial import SpatialRelease


LAYOUTS = ("morton", "grid", "two_level_grid")


def float_column(table: pa.Table, name: str) -> np.ndarray:
    """Column ``name`` of a spatial release table as float64 (numbers only, else ReleaseFormatError)."""
    values = table.column(name).to_numpy()
    if not np.issubdtype(values.dtype, np.number):
        raise ReleaseFormatError(f"tree release column {name!r} has type {values.dtype}, not numbers")
    return values.astype(np.float64)


def check_layout(layout: Any) -> dict[str, Any]:
    """The decoded ``layout`` entry, if it is an object naming one of :data:`LAYOUTS`."""
    if not isinstance(layout, dict) or layout.get("kind") not in LAYOUTS:
        raise ReleaseFormatError(f"release metadata field 'layout' must be one of the layouts {LAYOUTS}, "
                                 f"got {layout!r}")
    return layout


def leaf_order(box: Box, layout: Mapping[str, Any], lo: np.ndarray, hi: np.ndarray, depth: np.ndarray,
                codes: np.ndarray | None) -> np.ndarray:
    """Permutation putting the rows in the release's leaf order, after checking that the
    leaves tile ``box`` as ``layout`` says (a missing, repeated or moved leaf is refused).

    Morton: sorted by first code, consecutive code ranges, boxes recomputed from the codes.
    Grid: the ``m^d`` cells in C order, boxes recomputed.  Two-level grid: first-level cells in
    C order, each holding exactly its ``m2^d`` sub-cells (on its sub-grid, each once) in C order.
    """
    n, d = lo.shape
    if n == 0:
        raise ReleaseFormatError("tree release has no leaves")
    kind = layout["kind"]
    if kind == "morton":
        if codes is None:
            raise ReleaseFormatError("a Morton-layout tree release needs its 'morton' column")
        order = np.argsort(codes, kind="stable")
        layout_ = MortonLayout(box.d, int(layout["bits"]), int(layout["split_bits"]))
        c, dep = codes[order].astype(np.int64), depth[order].astype(np.int64)
        if np.any(dep < 0) or np.any(dep > layout_.max_depth):
            raise ReleaseFormatError("tree release has a leaf depth outside its layout")
        span = np.left_shift(np.int64(1), box.d * layout_.bits - dep * layout_.split_bits)
        ends = c + span
        if c[0] != 0 or np.any(c[1:] != ends[:-1]) or ends[-1] != np.int64(1) << (box.d * layout_.bits):
            raise ReleaseFormatError("tree release leaves do not tile the box (a leaf is missing, repeated "
                                     "or moved): the table was edited")
        want_lo, want_hi = layout_.node_boxes(c, dep, box)
    elif kind == "grid":
        m = int(layout["m"])
        if n != m**d:
            raise ReleaseFormatError(f"tree release has {n} leaves but its grid layout has {m**d} cells: "
                                     "rows were removed or added")
        order = np.lexsort(lo.T[::-1])  # C order: first column slowest
        want_lo, want_hi = grid_boxes(box, m)
    else:
        m1 = int(layout["m1"])
        m2 = np.asarray(layout["m2"], dtype=np.int64)
        if m2.size != m1**d or np.any(m2 < 1) or n != int((m2**d).sum()):
            raise ReleaseFormatError("tree release leaves do not match its two-level grid layout: rows were "
                                     "removed or added")
        centre = (lo + hi) / 2
        first = np.clip(np.floor((centre - box.lo) / box.width * m1), 0, m1 - 1).astype(np.int64)
        cell = np.ravel_multi_index(tuple(first.T), (m1,) * d)
        side = m2[cell]
        sub = (box.width / m1) / side[:, None]
        pos = (lo - (box.lo + first * (box.width / m1))) / sub
        k = np.rint(pos).astype(np.int64)
        sub_flat = np.zeros(n, dtype=np.int64)
        for j in range(d):
            sub_flat = sub_flat * side + k[:, j]
        order = np.lexsort((sub_flat, cell))
        expected_cells = np.repeat(np.arange(m1**d), m2**d)
        expected_sub = np.arange(n) - np.repeat(np.cumsum(m2**d) - m2**d, m2**d)
        ok = (np.array_equal(cell[order], expected_cells) and np.array_equal(sub_flat[order], expected_sub)
              and np.all((k >= 0) & (k < side[:, None])) and np.allclose(pos, k, atol=1e-6)
              and np.allclose(hi - lo, sub, rtol=1e-9))
        if not ok:
            raise ReleaseFormatError("tree release leaves do not tile the box as its two-level grid layout "
                                     "says: the table was edited")
        return order
    if not (np.allclose(lo[order], want_lo, rtol=0, atol=1e-12 * float(box.width.max()))
            and np.allclose(hi[order], want_hi, rtol=0, atol=1e-12 * float(box.width.max()))):
        raise ReleaseFormatError("tree release leaf boxes disagree with their layout: the table was edited")
    return order


def rebuilt_plan(release: SpatialRelease) -> Plan | None:
    """The plan of a PrivTree, UG, AG or Privelet* release rebuilt from its metadata (None for
    other mechanisms, or when the file records too little to rebuild it)."""
    p, box = release.params, release.box
    common = {"bounds": [(float(lo), float(hi)) for lo, hi in zip(box.lo, box.hi, strict=True)],
              "epsilon": release.epsilon, "neighbours": release.neighbours, "noise": release.noise}
    try:
        if release.mechanism == "privtree" and "tree_share" in p:
            layout = release.layout or {}
            return PrivTreePlan(list(box.columns), tree_share=p["tree_share"], levels=int(p.get("levels", 0)),
                                fanout=p.get("fanout"),
                                resolution=layout.get("bits", p.get("resolution_bits")),
                                **common)
        if release.mechanism == "privelet_grid" and "bits" in p:
            return PriveletGridPlan(list(box.columns), bits=p["bits"], **common)
        if release.mechanism in ("uniform_grid", "adaptive_grid") and "n_source" in p and "n_used" in p:
            public = str(p["n_source"]) == "public"
            n = {"n": int(p["n_used"]) if public else None, "n_share": _share(p["n_source"]),
                 "c": p.get("c", 10.0)}
            if release.mechanism == "uniform_grid":
                return UniformGridPlan(list(box.columns), **n, **common)
            return AdaptiveGridPlan(list(box.columns), **n, alpha=p.get("alpha", 0.5), c2=p.get("c2", 5.0),
                                    **common)
    except PolarsDPError as exc:
        raise ReleaseFormatError(f"release metadata field 'params' is invalid: {exc}") from None
    return None


def _share(n_source: Any) -> float:
    text = str(n_source)
    if "n_share=" in text:
        try:
            return float(text.split("n_share=")[1].rstrip(")"))
        except ValueError:
            raise ReleaseFormatError(
                f"release metadata field 'params.n_source' is malformed: {text!r}") from None
    return 0.05


def _recorded(p: Mapping[str, Any], key: str) -> float | None:
    return positive_number(p[key], f"params.{key}") if key in p else None


def _check_against_plan(release: SpatialRelease, plan: Plan) -> float | None:
    """The recorded budget split and scales against the rebuilt plan's (each recorded value
    that the plan computes; the one calibration).  Returns the recorded scale of independent
    leaf noise, if any."""
    p = release.params
    if isinstance(plan, PrivTreePlan):
        if "epsilon_tree" in p:
            check_equal("params.epsilon_tree", p["epsilon_tree"], float(plan.epsilon_tree))
        if "epsilon_leaf" in p:
            check_equal("params.epsilon_leaf", p["epsilon_leaf"], float(plan.epsilon_leaf))
        recorded = p.get("epsilon_levels", [])
        if not isinstance(recorded, list) or len(recorded) != len(plan.epsilon_levels):
            raise ReleaseFormatError(f"release metadata field 'params.epsilon_levels' is {recorded!r} but "
                                     f"the declared parameters count {plan.levels} top level(s); the file "
                                     "was edited or is corrupt")
        for j, (got, want) in enumerate(zip(recorded, plan.epsilon_levels, strict=True)):
            check_equal(f"params.epsilon_levels[{j}]", got, float(want))
        scales = p.get("level_noise_scales", [])
        if not isinstance(scales, list) or len(scales) != len(plan.nominal_level_scales):
            raise ReleaseFormatError("release metadata fields 'params.epsilon_levels' and "
                                     "'params.level_noise_scales' must be lists of one number per "
                                     "counted level")
        for j, (b, nominal) in enumerate(zip(scales, plan.nominal_level_scales, strict=True)):
            name = f"params.level_noise_scales[{j}]"
            check_noise_scale(name, positive_number(b, name), nominal)
        scale = _recorded(p, "leaf_noise_scale")
        if scale is not None:
            check_noise_scale("params.leaf_noise_scale", scale, plan.nominal_leaf_scale)
        return scale
    if isinstance(plan, PriveletGridPlan):
        if "rho" in p:
            check_equal("params.rho", p["rho"], plan.rho)
        scale = _recorded(p, "noise_scale")
        if scale is not None:
            check_noise_scale("params.noise_scale", scale, plan.nominal_scale)
        return scale
    if isinstance(plan, (UniformGridPlan, AdaptiveGridPlan)) and "epsilon_grid" in p:
        check_equal("params.epsilon_grid", p["epsilon_grid"], float(plan.epsilon_grid))
    if isinstance(plan, AdaptiveGridPlan):
        for level, nominal in ((1, plan.nominal_level1_scale), (2, plan.nominal_level2_scale)):
            key = f"level{level}_noise_scale"
            recorded_scale = _recorded(p, key)
            if recorded_scale is not None:
                check_noise_scale(f"params.{key}", recorded_scale, nominal)
        return None
    assert isinstance(plan, UniformGridPlan)
    scale = _recorded(p, "noise_scale")
    if scale is not None:
        check_noise_scale("params.noise_scale", scale, plan.nominal_cell_scale)
    return scale


def check_spatial_parameters(release: SpatialRelease) -> None:
    """The recorded parameters against the plan rebuilt from the declared ones
    (:func:`rebuilt_plan`); for a file that records too little to rebuild it (or a mechanism
    without a plan rebuild), the relations between the recorded values: ``epsilon_tree +
    epsilon_leaf = epsilon``, ``epsilon_tree = tree_share * epsilon``, ``epsilon_grid <=
    epsilon``, scales from the recorded epsilons.  Then the noise model's scale equals the
    recorded one (or is at least ``sensitivity / epsilon``: leaf counts partition the data)."""
    eps = release.epsilon
    sens = histogram_sensitivity(release.neighbours)
    plan = rebuilt_plan(release)
    scale = (_check_against_plan(release, plan) if plan is not None
             else _check_recorded_relations(release, sens))
    model = release.noise_model
    if isinstance(model, IndependentLaplace):
        if scale is not None:
            check_equal("noise_model.scale", model.scale, scale)
        else:
            check_noise_scale("noise_model.scale", max(model.scale, sens / eps), sens / eps)


def _check_recorded_relations(release: SpatialRelease, sens: int) -> float | None:
    """Files without a rebuildable plan: the recorded values checked against each other."""
    p, eps = release.params, release.epsilon

    def number(key: str) -> float:
        if key not in p:
            raise ReleaseFormatError(f"release metadata field 'params' has no {key!r} entry, which the "
                                     "recorded noise parameters need")
        return positive_number(p[key], f"params.{key}")

    if "epsilon_tree" in p and "epsilon_leaf" in p:
        check_equal("params.epsilon_leaf", number("epsilon_tree") + number("epsilon_leaf")
                    + _levels_epsilon(p, sens), eps)
        if "tree_share" in p:
            check_equal("params.epsilon_tree", number("epsilon_tree"), number("tree_share") * eps)
    if "epsilon_grid" in p and number("epsilon_grid") > eps * (1 + RELATIVE_SLACK):
        raise ReleaseFormatError(f"release metadata field 'params.epsilon_grid' ({p['epsilon_grid']!r}) "
                                 f"exceeds epsilon ({eps!r})")
    scale = None
    if "leaf_noise_scale" in p:
        scale = number("leaf_noise_scale")
        check_noise_scale("params.leaf_noise_scale", scale, sens / number("epsilon_leaf"))
    if "noise_scale" in p:
        scale = number("noise_scale")
        if "rho" in p:
            check_noise_scale("params.noise_scale", scale, sens * number("rho") / eps)
        elif "epsilon_grid" in p:
            check_noise_scale("params.noise_scale", scale, sens / number("epsilon_grid"))
    return scale


def _levels_epsilon(p: Mapping[str, Any], sens: int) -> float:
    """Budget of the counted top levels (0 without them), each level's recorded noise scale
    checked against ``sensitivity / epsilon_l`` (:mod:`polars_dp.mechanisms.privtree_levels`)."""
    if "epsilon_levels" not in p:
        return 0.0
    eps_l, scales = p["epsilon_levels"], p.get("level_noise_scales")
    if (not isinstance(eps_l, list) or not isinstance(scales, list) or len(eps_l) != len(scales)
            or len(eps_l) != p.get("levels")):
        raise ReleaseFormatError("release metadata fields 'params.epsilon_levels' and "
                                 "'params.level_noise_scales' must be lists of one number per counted level")
    for j, (e, b) in enumerate(zip(eps_l, scales, strict=True)):
        e = positive_number(e, f"params.epsilon_levels[{j}]")
        name = f"params.level_noise_scales[{j}]"
        check_noise_scale(name, positive_number(b, name), sens / e)
    return float(sum(eps_l))


def legacy_noise_model(mechanism: str, params: Mapping[str, Any]) -> NoiseModel:
    """The noise of a release written by 0.1.0 (a format-1 file without a ``noise_model``
    entry, ``docs/release-format.md``): read from the mechanism and its params (for those files
    only; newer files carry the model)."""
    if mechanism == "privtree" and "leaf_noise_scale" in params:
        return IndependentLaplace(float(params["leaf_noise_scale"]))
    if mechanism == "uniform_grid" and "noise_scale" in params:
        return IndependentLaplace(float(params["noise_scale"]))
    return Correlated("its leaf counts are not independent (constrained inference or a wavelet)")


__all__ = ["LAYOUTS", "check_layout", "check_spatial_parameters", "float_column", "leaf_order",
           "legacy_noise_model", "rebuilt_plan"]
