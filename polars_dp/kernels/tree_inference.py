"""Least-squares consistency on a tree of noisy counts (pure numpy, linear time).

Setting (Hay, Rastogi, Miklau, Suciu, VLDB 2010, Sec. 4; weighted form as in Cormode et al.,
ICDE 2012, Sec. 4.2): every node ``v`` of a tree has an unknown count ``x_v`` equal to the sum
of its children's; some nodes carry an independent noisy observation ``y_v`` of variance
``sigma_v^2`` (precision ``p_v = 1 / sigma_v^2``; ``p_v = 0``: unobserved).  Every leaf is
observed.  The weighted least-squares (best linear unbiased) estimate of all counts subject to
the sum constraints is computed in two passes, one vectorised step per level:

* **bottom-up**: ``z_v`` is the best estimate of ``x_v`` from the observations in ``v``'s
  subtree and ``V_v`` its variance.  A leaf: ``z = y, V = 1/p``.  An inner node with children
  sum ``s = sum z_c`` and ``S = sum V_c``: ``V_v = 1 / (1/S + p_v)``, ``z_v = V_v (s/S + p_v y_v)``
  (``z = s, V = S`` when unobserved).
* **top-down**: ``xhat_root = z_root``; a child gets its share of its parent's correction in
  proportion to its variance, ``xhat_c = z_c + (V_c / S) (xhat_v - s)``, so every node equals
  the sum of its children exactly.

With ``p`` constant per level and every node observed this is Hay et al.'s two-pass
algorithm; the weighted form also covers unobserved inner nodes and leaves at any depth.

Error of a linear functional (exact, for any independent noise of the stated variances).
Write ``e_v = xhat_v - x_v``.  Then ``e_c = eta_c + r_c e_v`` with ``r_c = V_c / S_v``, where
the innovations ``eta`` of different parents are uncorrelated with each other and with
``e_root`` (variance ``V_root``), and siblings' innovations have the covariance of independent
variables of variances ``V_c`` conditioned on their sum:
``Cov(eta_c, eta_c') = V_c [c = c'] - V_c V_c' / S_v``.  A sum ``sum_n a_n xhat_n`` therefore has
noise variance ``h_root^2 V_root + sum_v (sum_c V_c h_c^2 - (sum_c V_c h_c)^2 / S_v)`` with
``h_v = a_v + sum_c r_c h_c`` accumulated bottom-up (:func:`functional_variance`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class TreeEstimate:
    """Per-level results of :func:`infer_tree` (level 0 is the root).

    ``xhat``: consistent estimates; ``V``: bottom-up variances; ``ratio``: ``r_v = V_v / S_parent``
    (1 at the root); ``group``: ``S_v`` of inner nodes (``inf`` at leaves)."""

    xhat: list[np.ndarray]
    V: list[np.ndarray]
    ratio: list[np.ndarray]
    group: list[np.ndarray]


def infer_tree(parent: list[np.ndarray], y: list[np.ndarray], precision: list[np.ndarray]) -> TreeEstimate:
    """Weighted least-squares estimates of all node counts (module docstring).

    Level ``l`` has ``n_l`` nodes; ``parent[l]`` (int64, ``l >= 1``) gives each node's parent
    index in level ``l - 1`` (``parent[0]`` is ignored); ``y[l]`` the observations (any value
    where ``precision[l] == 0``); ``precision[l]`` the inverse variances.  A node without
    children must be observed.  Cost: ``O(number of nodes)``, one vectorised step per level.
    """
    depth = len(y)
    z: list[np.ndarray] = [np.empty(0)] * depth
    V: list[np.ndarray] = [np.empty(0)] * depth
    sums: list[np.ndarray] = [np.empty(0)] * depth
    group: list[np.ndarray] = [np.empty(0)] * depth
    for lev in range(depth - 1, -1, -1):
        n = y[lev].size
        p = np.asarray(precision[lev], dtype=np.float64)
        yl = np.asarray(y[lev], dtype=np.float64)
        if lev + 1 < depth:
            s: np.ndarray = np.bincount(parent[lev + 1], weights=z[lev + 1], minlength=n)
            S: np.ndarray = np.bincount(parent[lev + 1], weights=V[lev + 1], minlength=n)
            inner = np.bincount(parent[lev + 1], minlength=n) > 0
        else:
            s, S, inner = np.zeros(n), np.zeros(n), np.zeros(n, dtype=bool)
        if np.any(~inner & ~(p > 0)):
            raise ValueError("tree inference: a node without children has no observation")
        with np.errstate(divide="ignore", invalid="ignore"):
            inv_s = np.where(inner, 1.0 / np.where(inner, S, 1.0), 0.0)
            var = 1.0 / (inv_s + p)
            zl = var * (s * inv_s + np.where(p > 0, p * yl, 0.0))
        z[lev], V[lev], sums[lev] = zl, var, s
        group[lev] = np.where(inner, S, np.inf)
    xhat = [z[0].copy()]
    ratio = [np.ones_like(z[0])]
    for lev in range(1, depth):
        par = parent[lev]
        r = V[lev] / group[lev - 1][par]
        ratio.append(r)
        xhat.append(z[lev] + r * (xhat[lev - 1][par] - sums[lev - 1][par]))
    return TreeEstimate(xhat=xhat, V=V, ratio=ratio, group=group)


def node_variances(est: TreeEstimate, parent: list[np.ndarray]) -> list[np.ndarray]:
    """Variance of every ``xhat_v``: ``P_root = V_root``, ``P_c = V_c + r_c^2 (P_v - S_v)``."""
    P = [est.V[0].copy()]
    for lev in range(1, len(est.V)):
        par = parent[lev]
        P.append(est.V[lev] + est.ratio[lev] ** 2 * (P[lev - 1][par] - est.group[lev - 1][par]))
    return P


def functional_variance(weights: list[np.ndarray], owner: list[np.ndarray], up: list[np.ndarray],
                        V: list[np.ndarray], ratio: list[np.ndarray], group: list[np.ndarray],
                        n_out: int) -> np.ndarray:
    """Noise variance of many sums ``sum_n a_n xhat_n`` over visited nodes, level by level.

    Level ``l`` of a traversal visits ``m_l`` (sum, node) pairs: ``weights[l]`` is ``a_n``,
    ``owner[l]`` the sum each pair belongs to (``0 <= owner < n_out``), ``up[l]`` (``l >= 1``)
    the pair's parent pair in level ``l - 1``, and ``V``/``ratio``/``group`` the node's values of
    :class:`TreeEstimate` gathered per pair.  A visited inner pair must have all its children
    visited (pairs of weight 0 are fine).  Returns one variance per sum (module docstring).
    """
    out = np.zeros(n_out)
    h_below: np.ndarray | None = None
    for lev in range(len(weights) - 1, -1, -1):
        m = weights[lev].size
        h = np.asarray(weights[lev], dtype=np.float64).copy()
        if h_below is not None:
            child_up = up[lev + 1]
            hv = V[lev + 1] * h_below
            h += np.bincount(child_up, weights=ratio[lev + 1] * h_below, minlength=m)
            sq = np.bincount(child_up, weights=hv * h_below, minlength=m)
            lin = np.bincount(child_up, weights=hv, minlength=m)
            has = np.bincount(child_up, minlength=m) > 0
            term = np.where(has, sq - lin**2 / np.where(has, group[lev], 1.0), 0.0)
            out += np.bincount(owner[lev], weights=term, minlength=n_out)
        h_below = h
    if h_below is not None:
        out += np.bincount(owner[0], weights=h_below**2 * V[0], minlength=n_out)
    return np.maximum(out, 0.0)


__all__ = ["TreeEstimate", "functional_variance", "infer_tree", "node_variances"]
