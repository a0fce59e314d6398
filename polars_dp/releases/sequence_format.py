"""Reading a sequence release back: tree structure and noise parameters checked against the plan.

What :meth:`SequenceRelease.from_arrow` verifies beyond the common metadata (the checksum,
required unless ``unverified=True``, is checked by the caller):

* the tree: children contiguous in BFS order, ``beta = |I| + 1`` per split node with
  prepended codes ``0..beta-1``; no node below the start marker ``#``; depth at most
  ``l_top`` (PrivTree) or ``height - 1`` (n-grams); at most ``max_nodes`` nodes; for PrivTree
  every internal histogram the sum of its children's (both post-processings publish sums;
  not checked on files that predate checksums, whose 0.1.0 writer clipped level by level);
* the parameters, against the plan rebuilt from the declared ``epsilon``, shares, alphabet
  and ``max_length`` (:class:`~polars_dp.plans.PrivTreeSequencesPlan`,
  :class:`~polars_dp.plans.NgramPlan`: the one calibration): every ``params`` entry the plan
  decides (:func:`expected_params`: ``l_top``, ``beta``, the budget split, ``lambda``,
  ``delta``, every scale with its exact rational and ``epsilon_effective``) equal to the
  plan's, and those the data decides consistent (:func:`_check_data_params`); any other entry
  is refused (:func:`~polars_dp.releases.integrity.check_params`);
* sequence models are add/remove-one only (``neighbours = "add_remove"``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from polars_dp.errors import PolarsDPError, ReleaseFormatError
from polars_dp.noise import noise_params
from polars_dp.plans import NgramPlan, PrivTreeSequencesPlan
from polars_dp.plans.base import recorded_inputs
from polars_dp.plans.privtree_scales import grid_theta
from polars_dp.releases.integrity import check_params, positive_number

if TYPE_CHECKING:
    from polars_dp.releases.sequence import SequenceRelease

SEQUENCE_MECHANISMS = ("privtree_sequences", "ngram")


def _number(p: Mapping[str, Any], key: str, *, positive: bool = True) -> float:
    if key not in p:
        raise ReleaseFormatError(f"release metadata field 'params' has no {key!r} entry, which the "
                                 "recorded noise parameters need")
    value = p[key]
    if not positive:
        if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
                or value < 0):
            raise ReleaseFormatError(
                f"release metadata field 'params.{key}' must be a number >= 0, got {value!r}")
        return float(value)
    return positive_number(value, f"params.{key}")


def check_sequence_structure(release: SequenceRelease, *, sums: bool = True) -> None:
    """The tree's shape (and, if ``sums``, PrivTree's internal sums): see the module docstring."""
    beta, n = release.alphabet_size + 1, release.n_nodes
    parent, prepended = release.parent[1:], release.prepended[1:]
    if (n - 1) % beta:
        raise ReleaseFormatError(f"sequence model has {n} nodes, not 1 + a multiple of beta = {beta}: "
                                 "nodes were removed or added")
    split = parent[::beta]
    if (not np.array_equal(parent, np.repeat(split, beta))
            or not np.array_equal(prepended, np.tile(np.arange(beta), split.size))
            or np.any(np.diff(split) <= 0)):
        raise ReleaseFormatError("sequence model nodes do not form a tree of full, ordered child groups "
                                 "in BFS order: the table was edited")
    if np.any(release.prepended[split] == beta - 1):
        raise ReleaseFormatError("sequence model has children below a start marker '#': the table was edited")
    p = release.params
    max_depth = (int(_number(p, "height")) - 1 if release.mechanism == "ngram"
                 else release.max_length + 1)
    if release.height > max_depth:
        raise ReleaseFormatError(f"sequence model is {release.height} levels deep; its parameters allow "
                                 f"{max_depth}")
    if "max_nodes" in p and n > _number(p, "max_nodes"):
        raise ReleaseFormatError(f"sequence model has {n} nodes, above its max_nodes = {p['max_nodes']!r}")
    if sums and release.mechanism == "privtree_sequences" and split.size:
        totals = np.zeros_like(release.hist)
        np.add.at(totals, release.parent[1:], release.hist[1:])
        internal = release.first_child >= 0
        if not np.allclose(release.hist[internal], totals[internal], rtol=1e-9, atol=1e-6):
            raise ReleaseFormatError("sequence model's internal histograms are not the sums of their "
                                     "children's: the counts were edited")


def rebuilt_plan(release: SequenceRelease) -> NgramPlan | PrivTreeSequencesPlan:
    """The plan of a sequence release rebuilt from its metadata (the one calibration: no
    formula is repeated here); a parameter the plan refuses is a ReleaseFormatError."""
    p = release.params
    common = {"alphabet": list(release.alphabet), "max_length": release.max_length,
              "epsilon": release.epsilon, "noise": release.noise, **recorded_inputs(p)}
    try:
        if release.mechanism == "ngram":
            return NgramPlan("", height=int(_number(p, "height")), **common)
        return PrivTreeSequencesPlan(
            "", tree_share=_number(p, "tree_share"), theta=_number(p, "theta", positive=False),
            postprocess=p.get("postprocess", "sum_then_clip"), max_nodes=p.get("max_nodes"),
            length_share=_number(p, "length_share", positive=False) if "length_share" in p else 0.0,
            **common)
    except PolarsDPError as exc:
        if isinstance(exc, ReleaseFormatError):
            raise
        raise ReleaseFormatError(f"release metadata field 'params' is invalid: {exc}") from None


def expected_params(release: SequenceRelease, plan: NgramPlan | PrivTreeSequencesPlan) -> dict[str, Any]:
    """Every ``params`` entry of a release of ``plan`` that the plan decides: the budget split,
    the scales (floats, and for exact noise their exact rationals and the epsilon each spends,
    :func:`~polars_dp.noise.noise_params`) and the public options."""
    noise = release.noise
    if isinstance(plan, NgramPlan):
        height = plan.options["height"]
        return {"height": height, "l_top": plan.l_top, "noise_scale": float(plan.scale),
                "sensitivity_per_level": plan.group, **noise_params(height * plan.group, plan.scale, noise),
                **plan.input_params()}
    out = {"l_top": plan.l_top, "beta": plan.beta, "tree_share": plan.tree_share,
           "length_share": plan.length_share, "eps_tree": float(plan.epsilon_tree),
           "eps_leaf": float(plan.epsilon_leaf), "postprocess": plan.options["postprocess"],
           "max_nodes": plan.max_nodes, **plan.input_params()}
    if plan.length_scale is not None:
        out.update({"eps_length": float(plan.epsilon_length), "length_noise_scale": float(plan.length_scale),
                    **noise_params(plan.length_sensitivity, plan.length_scale, noise, "length_")})
    out.update({"leaf_noise_scale": float(plan.leaf_scale), "lambda": plan.lam, "delta": plan.delta,
                **noise_params(plan.group, plan.leaf_scale, noise, "leaf_")})
    return out


def _check_data_params(release: SequenceRelease, plan: PrivTreeSequencesPlan) -> None:
    """The entries of a PrivTree model that the data (or a free public choice) decides:
    ``theta`` (>= 0, on the exact grid for exact noise), ``capped`` (a capped tree has no room
    for another child group), ``length_counts`` (one finite count per length ``0..max_length``,
    integers for exact noise), and ``clip_then_sum`` leaves no negative bin."""
    p = release.params
    theta = p.get("theta", 0.0)
    if release.noise == "exact" and grid_theta(theta) != theta:
        raise ReleaseFormatError(f"release metadata field 'params.theta' is {theta!r}, not on the exact grid")
    capped = p.get("capped", False)
    if not isinstance(capped, bool) or (capped and plan.max_nodes - release.n_nodes >= plan.beta):
        raise ReleaseFormatError(f"release metadata field 'params.capped' is {capped!r} but the tree has "
                                 f"room for more nodes under max_nodes = {plan.max_nodes}: the file was "
                                 "edited")
    if plan.length_scale is not None or "length_counts" in p:
        counts = p.get("length_counts")
        values = np.asarray(counts if isinstance(counts, list) else [], dtype=object)
        ok = (values.shape == (release.max_length + 1,)
              and all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
                      and (release.noise != "exact" or x == round(x)) for x in values))
        if not ok or plan.length_scale is None:
            raise ReleaseFormatError(f"release metadata field 'params.length_counts' must hold one count "
                                     f"per length 0..{release.max_length} (with length_share > 0): the "
                                     "file was edited")
    if plan.options["postprocess"] == "clip_then_sum" and np.any(release.hist[release.is_leaf] < 0):
        raise ReleaseFormatError("release metadata field 'params.postprocess' is 'clip_then_sum' but a leaf "
                                 "bin is negative: the file was edited")


def check_sequence_parameters(release: SequenceRelease) -> None:
    """The recorded noise parameters against the plan rebuilt from the declared ones (module
    docstring; :func:`~polars_dp.releases.integrity.check_params`: every entry accounted for;
    the copies of parameters in format-1 files are checked by the metadata codec,
    :func:`polars_dp.releases.metadata.from_format_1`)."""
    if release.mechanism not in SEQUENCE_MECHANISMS:
        raise ReleaseFormatError(f"release metadata field 'mechanism' is {release.mechanism!r}, not a "
                                 f"sequence mechanism {SEQUENCE_MECHANISMS}")
    if release.neighbours != "add_remove":
        raise ReleaseFormatError("release metadata field 'neighbours' of a sequence model must be "
                                 f"'add_remove', got {release.neighbours!r}")
    plan = rebuilt_plan(release)
    data = () if isinstance(plan, NgramPlan) else ("theta", "capped", "length_counts")
    header = {"seeded": release.seeded, "neighbours": release.neighbours}
    check_params(release.params, expected_params(release, plan), data=data, header=header,
                 required=release.noise == "exact")
    if isinstance(plan, PrivTreeSequencesPlan):
        _check_data_params(release, plan)


__all__ = ["SEQUENCE_MECHANISMS", "check_sequence_parameters", "check_sequence_structure", "expected_params",
           "rebuilt_plan"]
