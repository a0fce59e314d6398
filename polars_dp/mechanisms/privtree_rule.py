"""PrivTree's split rule and noise parameters, shared by the spatial and sequence trees.

PrivTree (Zhang, Xiao, Xie, SIGMOD 2016, Sec. 3: algorithm and privacy theorem): a node ``v`` at depth
``depth(v)`` with score ``s(v)`` (a count, or any monotone score that one neighbouring step
changes by at most 1 along one root-to-leaf path) gets the biased, clamped score

    b(v) = max(s(v) - depth(v) * delta, theta - delta)

and splits iff ``b(v) + Lap(lambda) > theta``.  With ``delta = lambda ln(beta)`` the split
decisions are ``eps``-DP when ``lambda >= (2 beta - 1) / ((beta - 1) eps)``, whatever the
depth.  On empty data the root splits w.p. 1/2 and deeper nodes w.p. ``1 / (2 beta)``.

Exact decisions (``noise="exact"``, Canonne-Kamath-Steinke)
---------------------------------------------
``lambda``, ``delta`` and ``theta`` live on the grid ``2^-GRID_BITS``: ``lambda`` is rounded
*up* from the exact rational ``(2 beta - 1) group / ((beta - 1) eps_tree)`` (so the decisions
spend at most ``eps_tree``), ``delta`` is rounded up from a rigorous upper bound of
``lambda ln(beta)`` and ``theta`` to the nearest grid point (a public threshold: any value is
private).  The proof only needs ``delta = gamma lambda`` with ``lambda >= (2 e^gamma - 1) /
((e^gamma - 1) eps)``; the right side decreases in ``gamma``, so ``gamma = delta / lambda >=
ln(beta)`` keeps the guarantee (and spurious splits stay below ``1 / (2 beta)``).  Then
``x = theta - b`` is an integer multiple of the grid (scores are integers) and
:func:`polars_dp.noise.privtree_decision` draws the event ``Lap(lambda) > x`` exactly.
Every score is accepted: ``x`` is int64 while all terms stay below ``2^61`` and exact Python
integers past that (:func:`decision_offsets`), with the same law either way, so no count
decides whether a release succeeds.  ``lambda`` and ``delta`` are returned as the least float
at or above the grid value (floats past ``2^33`` are never rounded down).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from polars_dp.errors import ParameterError
from polars_dp.noise import (
    GRID_BITS,
    NoiseKind,
    NoiseSource,
    as_source,
    check_noise,
    laplace,
    privtree_decision,
)
from polars_dp.plans.privtree_scales import (
    check_theta,
    grid_theta,
    privtree_delta,
    privtree_lambda,
    privtree_sequence_params,
)


def _on_grid(value: float, name: str) -> int:
    scaled = Fraction(value) * (1 << GRID_BITS)
    if scaled.denominator != 1:
        raise ParameterError(
            f"exact PrivTree decisions need {name} on the 2^-{GRID_BITS} grid, got {value!r}")
    return int(scaled)


#: Scores and offsets below this magnitude are handled in int64 (no product can overflow).
_INT64_SAFE = 1 << 61


def decision_offsets(score: np.ndarray, depth: int, delta_i: int, theta_i: int) -> np.ndarray:
    """``x = theta - b = min(theta + depth delta - s, delta)`` in grid units, exactly.

    int64 where every term is below ``2^61``; any score past that (or a huge public
    ``depth delta``) is computed in Python ints (an object array), so no score is refused
    and the decision's law is the same for every dataset.
    """
    s = np.asarray(score).reshape(-1)
    base = theta_i + depth * delta_i
    limit = _INT64_SAFE >> GRID_BITS
    if abs(base) < _INT64_SAFE and abs(delta_i) < _INT64_SAFE and s.dtype != object:
        if not np.any(np.abs(s) >= limit):  # compared in the scores' own dtype: no overflow
            return np.minimum(base - (s.astype(np.int64) << GRID_BITS), delta_i)
    so = np.frompyfunc(int, 1, 1)(s).astype(object)  # exact Python ints, element-wise
    return np.minimum(base - so * (1 << GRID_BITS), delta_i)


def privtree_split(score: np.ndarray, depth: int, *, lam: float, delta: float, theta: float,
                   rng: np.random.Generator | NoiseSource, noise: NoiseKind = "exact") -> np.ndarray:
    """PrivTree decisions for the nodes of one level, one noisy comparison per node.

    ``b = max(score - depth * delta, theta - delta)``; split iff ``b + Lap(lam) > theta``.
    ``noise="exact"`` (``lam``, ``delta``, ``theta`` on the grid, integer ``score``): the event
    is drawn exactly with ``x = theta - b`` in grid units; ``"float"``: a float Laplace draw.
    """
    if check_noise(noise) == "exact":
        lam_i, delta_i, theta_i = _on_grid(lam, "lambda"), _on_grid(delta, "delta"), _on_grid(theta, "theta")
        s = np.asarray(score)
        if s.size and not np.array_equal(s, np.round(s)):
            raise ParameterError("exact PrivTree decisions need integer scores")
        x = decision_offsets(s, depth, delta_i, theta_i)
        return privtree_decision(as_source(rng), x, lam_i).reshape(s.shape)
    biased = np.maximum(np.asarray(score, dtype=np.float64) - depth * delta, theta - delta)
    return biased + laplace(rng, lam, biased.shape) > theta


__all__ = ["check_theta", "grid_theta", "privtree_delta", "privtree_lambda", "privtree_sequence_params",
           "privtree_split"]
