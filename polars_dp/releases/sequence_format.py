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
  :class:`~polars_dp.plans.NgramPlan`: the one calibration): ``l_top``, ``beta``,
  ``eps_tree``, ``eps_length``, ``eps_leaf`` equal; ``lambda``, ``delta``,
  ``leaf_noise_scale``, ``length_noise_scale`` (n-grams: ``noise_scale``) against the plan's
  real-valued scales through :func:`~polars_dp.releases.integrity.check_noise_scale` (the
  one tolerance rule: never below, above only by the documented lattice rounding);
* sequence models are add/remove-one only (``neighbours = "add_remove"``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from polars_dp.errors import PolarsDPError, ReleaseFormatError
from polars_dp.plans import NgramPlan, PrivTreeSequencesPlan
from polars_dp.releases.integrity import check_equal, check_noise_scale, positive_number

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
              "epsilon": release.epsilon, "noise": release.noise}
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


def check_sequence_parameters(release: SequenceRelease) -> None:
    """The recorded noise parameters against the plan rebuilt from the declared ones (module
    docstring; the copies of parameters in format-1 files are checked by the metadata codec,
    :func:`polars_dp.releases.metadata.from_format_1`)."""
    if release.mechanism not in SEQUENCE_MECHANISMS:
        raise ReleaseFormatError(f"release metadata field 'mechanism' is {release.mechanism!r}, not a "
                                 f"sequence mechanism {SEQUENCE_MECHANISMS}")
    if release.neighbours != "add_remove":
        raise ReleaseFormatError("release metadata field 'neighbours' of a sequence model must be "
                                 f"'add_remove', got {release.neighbours!r}")
    p = release.params
    plan = rebuilt_plan(release)
    check_equal("params.l_top", p.get("l_top"), plan.l_top)
    if isinstance(plan, NgramPlan):
        check_noise_scale("params.noise_scale", _number(p, "noise_scale"), plan.nominal_scale)
        return
    if "beta" in p:
        check_equal("params.beta", p["beta"], plan.beta)
    check_equal("params.eps_tree", _number(p, "eps_tree"), float(plan.epsilon_tree))
    check_equal("params.eps_leaf", _number(p, "eps_leaf"), float(plan.epsilon_leaf))
    if plan.nominal_length_scale is not None:
        check_equal("params.eps_length", _number(p, "eps_length"), float(plan.epsilon_length))
        check_noise_scale("params.length_noise_scale", _number(p, "length_noise_scale"),
                          plan.nominal_length_scale)
    check_noise_scale("params.lambda", _number(p, "lambda"), plan.nominal_lambda)
    check_noise_scale("params.delta", _number(p, "delta"), plan.nominal_delta)
    check_noise_scale("params.leaf_noise_scale", _number(p, "leaf_noise_scale"), plan.nominal_leaf_scale)


__all__ = ["SEQUENCE_MECHANISMS", "check_sequence_parameters", "check_sequence_structure", "rebuilt_plan"]
