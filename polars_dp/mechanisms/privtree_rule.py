"""PrivTree's split rule and noise parameters, shared by the spatial and sequence trees.

PrivTree (Zhang, Xiao, Xie, SIGMOD 2016, Sec. 3; spec §2.3-§2.4): a node ``v`` at depth
``depth(v)`` with score ``s(v)`` (a count, or any monotone score that one neighbouring step
changes by at most 1 along one root-to-leaf path) gets the biased, clamped score

    b(v) = max(s(v) - depth(v) * delta, theta - delta)

and splits iff ``b(v) + Lap(lambda) > theta``.  With ``delta = lambda ln(beta)`` the split
decisions are ``eps``-DP when ``lambda >= (2 beta - 1) / ((beta - 1) eps)``, whatever the
depth.  On empty data the root splits w.p. 1/2 and deeper nodes w.p. ``1 / (2 beta)``.
"""

from __future__ import annotations

import math

import numpy as np

from polars_dp.errors import ParameterError
from polars_dp.noise import check_epsilon, laplace


def privtree_lambda(eps_tree: float, fanout: int) -> float:
    """Noise scale of the split decisions: ``(2 beta - 1) / ((beta - 1) eps_tree)`` (spec §2.4)."""
    return (2 * fanout - 1) / ((fanout - 1) * check_epsilon(eps_tree, "eps_tree"))


def privtree_delta(lam: float, fanout: int) -> float:
    """Depth bias per level: ``delta = lambda * ln(beta)`` (gamma = ln beta, spec §2.4)."""
    return lam * math.log(fanout)


def check_theta(theta: float) -> float:
    """The split threshold: a finite number >= 0.

    Any threshold keeps the privacy guarantee, but below 0 even empty nodes split with
    probability above 1/2 at every depth, so the tree grows exponentially until the
    resolution limit; such thresholds are refused.
    """
    try:
        value = float(theta)
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise ParameterError(f"theta must be a finite number >= 0 (the paper uses 0), got {theta!r}")
    return value


def privtree_split(score: np.ndarray, depth: int, *, lam: float, delta: float, theta: float,
                   rng: np.random.Generator) -> np.ndarray:
    """PrivTree decisions for the nodes of one level, one Laplace draw per node.

    ``b = max(score - depth * delta, theta - delta)``; split iff ``b + Lap(lam) > theta``.
    """
    biased = np.maximum(np.asarray(score, dtype=np.float64) - depth * delta, theta - delta)
    return biased + laplace(rng, lam, biased.shape) > theta


def privtree_sequence_params(alphabet_size: int, max_length: int, eps_tree: float) -> tuple[float, float]:
    """``(lambda, delta)`` of the sequence PrivTree (Theorem 4.1 as reconstructed, spec §2.10).

    ``beta = |I| + 1``, ``l_top = max_length + 1`` (end marker included):
    ``lambda = (2 beta - 1) / (beta - 1) * l_top / eps_tree`` and ``delta = lambda * ln(beta)``.
    The ``l_top`` factor is group privacy: adding/removing one sequence adds/removes at most
    ``l_top`` (context, symbol) pairs, each changing the scores of one root-to-leaf path by
    at most 1 (spec §2.9, general monotone scores).
    """
    beta = alphabet_size + 1
    lam = privtree_lambda(eps_tree / (max_length + 1), beta)
    return lam, privtree_delta(lam, beta)


__all__ = ["check_theta", "privtree_delta", "privtree_lambda", "privtree_sequence_params", "privtree_split"]
