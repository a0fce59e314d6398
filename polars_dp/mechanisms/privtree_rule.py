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
Scores saturate at the public :data:`SCORE_CAP` ``= 2^41 - 1`` (:func:`saturated_scores`):
``min(s, cap)`` is again a score that is monotone along every root-to-leaf path and that one
neighbouring step changes by at most 1 on one path only (``min`` with a constant is monotone
and 1-Lipschitz), so the theorem holds as stated.  Every offset is then an int64 whatever the
counts (``|s| 2^20 < 2^61``), so no count decides whether a release succeeds nor which code
runs; only a public ``theta + depth delta >= 2^41`` (a tiny ``eps_tree``) takes exact Python
integers, with the same law.  A node of ``2^41`` points or more decides as one of ``2^41 -
1``: it splits with probability at least ``1 - exp(-(2^41 - 1 - theta - depth delta) /
lambda) / 2``, within ``e^-128`` of its unsaturated value while ``lambda <= 2^33`` and
``theta + depth delta <= 2^40``.  ``lambda`` and ``delta`` are returned as the least float at
or above the grid value (floats past ``2^33`` are never rounded down).
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


#: Offsets below this magnitude are handled in int64 (no product can overflow).
_INT64_SAFE = 1 << 61
#: Node scores saturate here (module docstring): ``|s| 2^GRID_BITS < 2^61`` for every score.
SCORE_CAP = (_INT64_SAFE >> GRID_BITS) - 1


def saturated_scores(score: np.ndarray) -> np.ndarray:
    """``clip(score, -SCORE_CAP, SCORE_CAP)``, a monotone 1-Lipschitz map of the scores (so
    still a PrivTree score, module docstring): int64 for integer scores of any dtype (int64,
    uint64, Python ints), float64 for floats.  Compared in the scores' own dtype, so no
    count overflows and every count takes the same path."""
    s = np.asarray(score)
    if s.dtype.kind == "f":
        return np.clip(s, -float(SCORE_CAP), float(SCORE_CAP))
    if s.dtype.kind == "u":
        return np.minimum(s, np.uint64(SCORE_CAP)).astype(np.int64)
    return np.clip(s, -SCORE_CAP, SCORE_CAP).astype(np.int64)


def decision_offsets(score: np.ndarray, depth: int, delta_i: int, theta_i: int) -> np.ndarray:
    """``x = theta - b = min(theta + depth delta - s, delta)`` in grid units, exactly, for the
    saturated scores ``s`` (:func:`saturated_scores`).

    int64 whatever the scores; only a public ``theta + depth delta`` or ``delta`` of ``2^61``
    grid units or more (a tiny epsilon) is computed in Python ints (an object array).
    """
    s = saturated_scores(score).reshape(-1).astype(np.int64)  # integers below 2^41: exact
    base = theta_i + depth * delta_i
    if abs(base) < _INT64_SAFE and abs(delta_i) < _INT64_SAFE:  # public: no score decides
        return np.minimum(base - (s << GRID_BITS), delta_i)
    return np.minimum(base - s.astype(object) * (1 << GRID_BITS), delta_i)


def privtree_split(score: np.ndarray, depth: int, *, lam: float, delta: float, theta: float,
                   rng: np.random.Generator | NoiseSource, noise: NoiseKind = "exact") -> np.ndarray:
    """PrivTree decisions for the nodes of one level, one noisy comparison per node.

    ``b = max(s - depth * delta, theta - delta)`` with ``s`` the saturated score
    (:func:`saturated_scores`); split iff ``b + Lap(lam) > theta``.
    ``noise="exact"`` (``lam``, ``delta``, ``theta`` on the grid, integer ``score``): the event
    is drawn exactly with ``x = theta - b`` in grid units; ``"float"``: a float Laplace draw.
    """
    if check_noise(noise) == "exact":
        lam_i, delta_i, theta_i = _on_grid(lam, "lambda"), _on_grid(delta, "delta"), _on_grid(theta, "theta")
        s = np.asarray(score)
        if s.size and s.dtype.kind == "f" and not np.array_equal(s, np.round(s)):
            raise ParameterError("exact PrivTree decisions need integer scores")
        x = decision_offsets(s, depth, delta_i, theta_i)
        return privtree_decision(as_source(rng), x, lam_i).reshape(s.shape)
    saturated = saturated_scores(np.asarray(score, dtype=np.float64))
    biased = np.maximum(saturated - depth * delta, theta - delta)
    return biased + laplace(rng, lam, biased.shape) > theta


__all__ = ["SCORE_CAP", "check_theta", "decision_offsets", "grid_theta", "privtree_delta", "privtree_lambda",
           "privtree_sequence_params", "privtree_split", "saturated_scores"]
