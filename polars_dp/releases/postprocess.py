"""Post-processing of released counts: non-negative projection and integer rounding.

Both steps read only the released counts, so the result is as private as the release
(post-processing invariance, Dwork & Roth 2014, Prop. 2.1).  Each returns new counts; the
release methods (``release.postprocess(...)``) wrap them in a new release whose
``params["postprocessed"]`` lists what was done, in order, e.g.
``[{"method": "nonnegative", "total": 1234.5, "threshold": 0.81}, {"method": "integer",
"total": 1235}]``.

``"nonnegative"``
    The least-squares projection of the counts ``v`` (all ``n`` cells or leaves) onto the
    scaled simplex ``{x >= 0, sum x = T}`` with ``T = sum v``: ``x_i = max(v_i - t, 0)`` where
    the threshold ``t`` solves ``sum_i max(v_i - t, 0) = T`` (found by one sort, O(n log n);
    Held, Wolfe & Crowder 1974; Duchi et al., ICML 2008, Fig. 1).  Since
    ``sum_i max(v_i, 0) >= T``, ``t >= 0``: only the positive counts are sorted.  Small cells lose the
    noise that pushed them below ``t``; every positive cell gives up the same ``t``, so the
    total is kept.  When ``T <= 0`` the set is empty (``T < 0``) or ``{0}``: every count
    becomes 0 (the nearest point with a non-negative total), and the release then has
    nothing to sample from.
``"integer"`` (grid releases)
    Integers with the rounded total ``round(sum v)``: ``floor(v)``, plus 1 on the
    ``round(sum v) - sum floor(v)`` cells with the largest fractional parts (ties broken
    arbitrarily but deterministically).  This is the integer vector with that total
    closest to ``v`` in both L1 and L2.  It keeps signs: apply ``"nonnegative"`` first (as in
    ``postprocess("nonnegative", "integer")``) for non-negative integer counts.

Error bars
    After either step the released noise is no longer the mechanism's (the projection is
    non-linear and data-dependent), so there is no exact standard deviation: the release's
    noise model becomes :class:`~polars_dp.plans.noise_model.Correlated` and ``std`` is NULL
    (Python ``range_counts(std=True)``, SQL macros; ``range_std`` gives NaN).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from polars_dp.errors import ParameterError, ReleaseFormatError
from polars_dp.params import check_option
from polars_dp.plans.noise_model import Correlated

#: Post-processing steps offered by each release type.
GRID_POSTPROCESSING: tuple[str, ...] = ("nonnegative", "integer")
TREE_POSTPROCESSING: tuple[str, ...] = ("nonnegative",)
#: The ``params`` key that lists the steps applied.
PARAM = "postprocessed"


def project_nonnegative(values: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
    """Euclidean projection of ``values`` onto ``{x >= 0, sum x = sum values}`` (module docstring);
    returns the projected array (same shape) and the step's record."""
    v = np.asarray(values, dtype=np.float64)
    flat = v.reshape(-1)
    total = float(flat.sum())
    if not total > 0:
        return np.zeros_like(v), {"method": "nonnegative", "total": 0.0, "threshold": None}
    desc = -np.sort(-flat[flat > 0])  # t >= 0 (sum max(v, 0) >= T), so only positive v_i matter
    excess = np.cumsum(desc) - total
    k = np.arange(1, desc.size + 1)
    rho = int(np.flatnonzero(desc * k > excess)[-1])  # last j with v_(j) > (cumsum_j - T) / j
    threshold = float(excess[rho] / (rho + 1))
    out = np.maximum(flat - threshold, 0.0).reshape(v.shape)
    return out, {"method": "nonnegative", "total": total, "threshold": threshold}


def round_keeping_total(values: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
    """Integer counts with total ``round(sum values)`` closest to ``values`` (module docstring)."""
    v = np.asarray(values, dtype=np.float64)
    flat = v.reshape(-1)
    total = round(float(flat.sum()))
    out = np.floor(flat)
    missing = min(max(round(total - float(out.sum())), 0), flat.size)
    if missing:
        largest = np.argpartition(out - flat, missing - 1)[:missing]  # most negative = largest fraction
        out[largest] += 1.0
    return out.reshape(v.shape), {"method": "integer", "total": total}


_STEPS = {"nonnegative": project_nonnegative, "integer": round_keeping_total}


def postprocess_counts(values: np.ndarray, params: Mapping[str, Any], methods: Sequence[str],
                       valid: Sequence[str]) -> tuple[np.ndarray, dict[str, Any]]:
    """Apply ``methods`` in order; returns the new counts and ``params`` with the steps appended
    to ``params["postprocessed"]``.  An unknown or missing method is a ParameterError listing
    ``valid``."""
    if not methods:
        raise ParameterError(f"name a post-processing step: one or more of {tuple(valid)}")
    out = np.asarray(values, dtype=np.float64)
    steps = list(postprocessing_steps(params))
    for method in methods:
        check_option(method, "post-processing", valid)
        out, record = _STEPS[method](out)
        steps.append(record)
    return out, {**params, PARAM: steps}


def postprocessing_steps(params: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The recorded steps (``[]`` for a release as the mechanism published it); a malformed
    entry is a ReleaseFormatError."""
    steps = params.get(PARAM, [])
    if not isinstance(steps, list) or not all(
            isinstance(s, Mapping) and s.get("method") in _STEPS for s in steps):
        raise ReleaseFormatError(
            f"params[{PARAM!r}] must be a list of steps with a 'method' in {tuple(_STEPS)}, got {steps!r}"
        )
    return steps


def verify_postprocessed(values: np.ndarray, params: Mapping[str, Any], *, rtol: float = 1e-9) -> None:
    """Check released counts against the recorded steps (for integrity checks on reading): the
    last step's ``total`` is their sum, and a ``"nonnegative"`` step (not followed by a step
    that could break it) / a final ``"integer"`` step left no negative / fractional count.
    Raises ReleaseFormatError naming the broken claim; a release with no step passes."""
    steps = postprocessing_steps(params)
    if not steps:
        return
    flat = np.asarray(values, dtype=np.float64).reshape(-1)
    total = float(flat.sum())
    claimed = steps[-1].get("total")
    if not isinstance(claimed, (int, float)) or abs(total - claimed) > rtol * max(1.0, abs(claimed)) + 1e-6:
        raise ReleaseFormatError(f"the counts sum to {total!r} but the last post-processing step records "
                                 f"total={claimed!r}: the release was altered after post-processing")
    if any(s["method"] == "nonnegative" for s in steps) and (flat < 0).any():
        raise ReleaseFormatError("the release records a 'nonnegative' post-processing step but has a "
                                 "negative count: it was altered after post-processing")
    if steps[-1]["method"] == "integer" and not np.array_equal(flat, np.round(flat)):
        raise ReleaseFormatError("the release records an 'integer' post-processing step but has a "
                                 "fractional count: it was altered after post-processing")


def postprocessed_noise_model(params: Mapping[str, Any]) -> Correlated | None:
    """The noise model of a post-processed release (``None`` if nothing was done)."""
    steps = postprocessing_steps(params)
    if not steps:
        return None
    names = ", ".join(s["method"] for s in steps)
    return Correlated(f"the counts were post-processed ({names}) after the noise was added, "
                      "so the mechanism's exact error bars no longer apply")


__all__ = ["GRID_POSTPROCESSING", "PARAM", "TREE_POSTPROCESSING", "postprocess_counts",
           "postprocessed_noise_model", "postprocessing_steps", "project_nonnegative",
           "round_keeping_total", "verify_postprocessed"]
