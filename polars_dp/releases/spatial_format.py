"""Reading a spatial release table back: columns, layout, leaf order and recomputed parameters.

A table is restored to the release's leaf order from the leaves' geometry (never from row
order) and its derived parameters are checked against the declared ones; anything else is a
:class:`~polars_dp.ReleaseFormatError`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from polars_dp.domains.box import Box
from polars_dp.errors import PolarsDPError, ReleaseFormatError
from polars_dp.kernels.grid import grid_boxes
from polars_dp.kernels.morton import MortonLayout
from polars_dp.noise import noise_params
from polars_dp.plans import AdaptiveGridPlan, Plan, PriveletGridPlan, PrivTreePlan, UniformGridPlan
from polars_dp.plans.base import recorded_inputs
from polars_dp.plans.noise_model import (
    Correlated,
    IndependentLaplace,
    NoiseModel,
    noise_model_to_json,
)
from polars_dp.plans.privtree_scales import grid_theta
from polars_dp.plans.spatial import PointsPlan
from polars_dp.releases.integrity import check_equal, check_params
from polars_dp.releases.postprocess import postprocessed_noise_model

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
              "epsilon": release.epsilon, "neighbours": release.neighbours, "noise": release.noise,
              **recorded_inputs(p)}
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


def expected_params(release: SpatialRelease, plan: Plan) -> dict[str, Any]:
    """Every ``params`` entry of a release of ``plan`` that the plan decides: the budget split,
    the scales (as recorded: floats, and for exact noise their exact rationals and the epsilon
    each spends, :func:`~polars_dp.noise.noise_params`) and the public options."""
    noise, sens = release.noise, plan.count_sensitivity
    if isinstance(plan, PrivTreePlan):
        out = {**plan.input_params(), "lambda": plan.lam, "delta": plan.delta, "fanout": plan.layout.fanout,
               "tree_share": plan.options["tree_share"], "epsilon_tree": float(plan.epsilon_tree),
               "epsilon_leaf": float(plan.epsilon_leaf), "leaf_noise_scale": float(plan.leaf_scale),
               "resolution_bits": plan.layout.bits, **noise_params(sens, plan.leaf_scale, noise, "leaf_")}
        if plan.levels:
            out.update({"levels": plan.levels, "epsilon_levels": [float(e) for e in plan.epsilon_levels],
                        "level_noise_scales": [float(b) for b in plan.level_scales]})
        return out
    if isinstance(plan, PriveletGridPlan):
        return {**plan.privelet.release_params(), "bits": plan.bits, "m": plan.m,
                "noise_scale": float(plan.scale), **plan.input_params()}
    assert isinstance(plan, (UniformGridPlan, AdaptiveGridPlan))
    out = {"c": plan.options["c"], "n_source": plan.n_source, "epsilon_grid": float(plan.epsilon_grid),
           **plan.input_params()}
    n_used = float(release.params["n_used"])  # a number: checked first (_check_data_params)
    if isinstance(plan, UniformGridPlan):
        out.update({"m": plan.side(n_used), "noise_scale": float(plan.cell_scale),
                    **noise_params(sens, plan.cell_scale, noise)})
        return out
    out.update({"alpha": plan.options["alpha"], "c2": plan.options["c2"], "m1": plan.first_side(n_used),
                "level1_noise_scale": float(plan.level1_scale),
                "level2_noise_scale": float(plan.level2_scale),
                **noise_params(sens, plan.level1_scale, noise, "level1_"),
                **noise_params(sens, plan.level2_scale, noise, "level2_")})
    return out


def _check_data_params(release: SpatialRelease, plan: Plan) -> None:
    """The entries only the data (or a free public choice) decides: PrivTree's ``theta`` (a
    threshold >= 0, on the exact grid for exact noise); the grids' ``n_used`` (the public ``n``,
    or a count: an integer for exact noise) and the sides it gives, as the layout records them."""
    p = release.params
    if isinstance(plan, PrivTreePlan):
        theta = p.get("theta", 0.0)
        if (isinstance(theta, bool) or not isinstance(theta, (int, float)) or not math.isfinite(theta)
                or theta < 0 or (release.noise == "exact" and grid_theta(theta) != theta)):
            raise ReleaseFormatError(f"release metadata field 'params.theta' must be a threshold >= 0 (on "
                                     f"the exact grid for exact noise), got {theta!r}")
    if isinstance(plan, (UniformGridPlan, AdaptiveGridPlan)):
        n_used = p["n_used"]
        if (isinstance(n_used, bool) or not isinstance(n_used, (int, float)) or not math.isfinite(n_used)
                or n_used < 0 or ((release.noise == "exact" or plan.options["n"] is not None)
                                  and n_used != round(n_used))):
            raise ReleaseFormatError(f"release metadata field 'params.n_used' must be a number of points "
                                     f">= 0 (an integer for exact noise or a public n), got {n_used!r}")
        if plan.options["n"] is not None:
            check_equal("params.n_used", n_used, plan.options["n"])
        side = "m" if isinstance(plan, UniformGridPlan) else "m1"
        check_equal(f"layout.{side}", release.layout.get(side), p.get(side))
    if isinstance(plan, PriveletGridPlan):
        check_equal("layout.m", release.layout.get("m"), plan.m)


def check_spatial_parameters(release: SpatialRelease) -> None:
    """The recorded parameters against the plan rebuilt from the declared ones
    (:func:`rebuilt_plan`): the mechanism's layout, every ``params`` entry
    (:func:`expected_params`, :func:`~polars_dp.releases.integrity.check_params`), the values
    only the data decides (:func:`_check_data_params`) and the noise model: the plan's
    (:attr:`~polars_dp.plans.spatial.PointsPlan.release_noise_model`), or after post-processing
    the one that says so.  Files of the float sampler written before an entry was recorded may
    lack it (0.1.0); a file whose plan cannot be rebuilt is refused."""
    plan = rebuilt_plan(release)
    if not isinstance(plan, PointsPlan):
        raise ReleaseFormatError(f"release metadata field 'params' of a {release.mechanism!r} release "
                                 "records too little to rebuild its plan: the file was edited")
    kind = ("morton" if isinstance(plan, PrivTreePlan) else
            "two_level_grid" if isinstance(plan, AdaptiveGridPlan) else "grid")
    check_equal("layout.kind", release.layout.get("kind"), kind)
    if isinstance(plan, PrivTreePlan):
        check_equal("layout.split_bits", release.layout.get("split_bits"), plan.layout.split_bits)
    _check_data_params(release, plan)
    header = {"seeded": release.seeded, "neighbours": release.neighbours}
    check_params(release.params, expected_params(release, plan), required=release.noise == "exact",
                 header=header, data=("theta", "n_used"))
    model = release.noise_model
    want = postprocessed_noise_model(release.params) or plan.release_noise_model
    if isinstance(model, IndependentLaplace) and isinstance(want, IndependentLaplace):
        check_equal("noise_model.scale", model.scale, want.scale)
    if model != want and model != legacy_noise_model(release.mechanism, release.params):
        raise ReleaseFormatError(f"release metadata field 'noise_model' is {noise_model_to_json(model)} but "
                                 f"the declared parameters give {noise_model_to_json(want)}; the file was "
                                 "edited or is corrupt")


def legacy_noise_model(mechanism: str, params: Mapping[str, Any]) -> NoiseModel:
    """The noise of a release written by 0.1.0 (a format-1 file without a ``noise_model``
    entry, ``docs/release-format.md``): read from the mechanism and its params (for those files
    only; newer files carry the model)."""
    if mechanism == "privtree" and "leaf_noise_scale" in params:
        return IndependentLaplace(float(params["leaf_noise_scale"]))
    if mechanism == "uniform_grid" and "noise_scale" in params:
        return IndependentLaplace(float(params["noise_scale"]))
    return Correlated("its leaf counts are not independent (constrained inference or a wavelet)")


__all__ = ["LAYOUTS", "check_layout", "check_spatial_parameters", "expected_params", "float_column",
           "leaf_order", "legacy_noise_model", "rebuilt_plan"]
