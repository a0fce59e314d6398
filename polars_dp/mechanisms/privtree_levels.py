"""Noisy counts of the public top levels of a PrivTree's decomposition and their budget.

Levels (a public rule)
----------------------
``levels = k`` counts every cell of depths ``1..k`` of the regular ``2^s``-ary decomposition of
the box that PrivTree splits (``s = log2(fanout)``), level ``l`` having ``2^(s l)`` cells.
``levels = None`` takes the largest ``k`` with at most ``2^4`` cells on level ``k``
(:data:`~polars_dp.plans.privtree_levels.DEFAULT_LEVEL_BITS`): ``k = max(1, 4 // s)``
(``d = 2``: 2 levels, 16 cells; ``d = 4``: 1 level, 16 cells), capped at the
discretisation limit.  ``levels = 0``, the option's default, is PrivTree as published by
Zhang et al.

Budget (a public rule; Cormode et al., ICDE 2012, Sec. 4.1)
----------------------------------------------------------
The split decisions keep ``eps_tree = tree_share * epsilon``.  The count budget
``eps_count = epsilon - eps_tree`` is split into ``eps_top = LEVELS_SHARE * eps_count``
(``eps_count / 16``) for the top levels and ``eps_leaf = eps_count - eps_top`` for the leaves;
within the top levels the geometric rule ``eps_l ∝ 2^((d - 1) l / 3)`` (``d = 2``: Cormode et
al.'s ratio ``2^(1/3)`` between adjacent levels, more budget to deeper levels), its weights
rounded to rationals with denominators below ``2^20`` so that ``sum_l eps_l = eps_top`` exactly.

Privacy
-------
Each level is a partition of the box, so its counts have L1 sensitivity 1 under add/remove-one
and 2 under replace-one; level ``l`` gets discrete Laplace noise of scale
``sensitivity / eps_l`` (rounded up to the ``2^-20`` grid), independent of everything else.
By sequential composition the release spends ``eps_tree + sum_l eps_l + eps_leaf = epsilon``
under either relation (the decisions: PrivTree's theorem with group privacy for replace-one,
see :mod:`polars_dp.mechanisms.spatial_tree`).  The levels are public, so which cells are counted
never depends on the data.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from polars_dp.kernels.morton import MortonLayout
from polars_dp.noise import NoiseKind, add_noise
from polars_dp.plans.privtree_levels import (
    DEFAULT_LEVEL_BITS,
    LEVELS_SHARE,
    MAX_TOP_CELLS,
    check_levels,
    default_levels,
    level_weights,
    split_count_budget,
)


def level_counts(codes: np.ndarray, weights: np.ndarray | None, layout: MortonLayout, levels: int
                 ) -> list[np.ndarray]:
    """Exact int64 counts of every cell of levels ``1..k`` (code order) from sorted finest codes
    (``weights``: points per code, ``None``: one each)."""
    codes = np.asarray(codes, dtype=np.int64)  # sorted: a cell is a contiguous run of codes
    edges = np.searchsorted(codes, np.arange((1 << (layout.split_bits * levels)) + 1, dtype=np.int64)
                            << layout.shift(levels))
    if weights is None:
        counts = [np.diff(edges)]
    else:
        cum = np.r_[np.int64(0), np.cumsum(np.asarray(weights, dtype=np.int64))]
        counts = [np.diff(cum[edges])]
    for _ in range(levels - 1):
        counts.append(counts[-1].reshape(-1, layout.fanout).sum(axis=1))
    return counts[::-1]


def noisy_level_counts(counts: list[np.ndarray], scales: list[Any], src: Any, noise: NoiseKind) -> np.ndarray:
    """Every level's counts plus its own independent noise, concatenated (levels in order)."""
    out = []
    for c, scale in zip(counts, scales, strict=True):
        noisy = c.astype(np.float64)
        add_noise(noisy, scale, src, noise)
        out.append(noisy)
    return np.concatenate(out)


__all__ = ["DEFAULT_LEVEL_BITS", "LEVELS_SHARE", "MAX_TOP_CELLS", "check_levels", "default_levels",
           "level_counts", "level_weights", "noisy_level_counts", "split_count_budget"]
