"""The public rule of a PrivTree's counted top levels: how many, and their share of the budget.

``levels = k`` counts every cell of depths ``1..k`` of the regular ``2^s``-ary decomposition of
the box that PrivTree splits (``s = log2(fanout)``).  The count budget
``eps_count = epsilon - eps_tree`` is split into ``eps_top = LEVELS_SHARE * eps_count`` for
the top levels and ``eps_leaf = eps_count - eps_top`` for the leaves; within the top levels the
geometric rule ``eps_l ∝ 2^((d - 1) l / 3)`` of Cormode et al. (ICDE 2012, Sec. 4.1), as
exact rationals.  The privacy argument and the counting are in
:mod:`polars_dp.mechanisms.privtree_levels`; this module is the data-free part that plans use.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from polars_dp.errors import ParameterError
from polars_dp.kernels.morton import MortonLayout
from polars_dp.kernels.tree_levels import top_cells
from polars_dp.noise import NoiseKind

#: Fraction of the count budget ``epsilon - eps_tree`` spent on the top levels (public).
LEVELS_SHARE = Fraction(1, 16)
#: ``log2`` of the number of cells on the default deepest counted level.
DEFAULT_LEVEL_BITS = 4
#: The most top-level cells a release may count (about 16 bytes of work memory each per level
#: array): ``levels`` beyond it is refused.
MAX_TOP_CELLS = 1 << 24


def default_levels(layout: MortonLayout) -> int:
    """``levels=None``: ``k = max(1, 4 // s)`` (at most ``2^DEFAULT_LEVEL_BITS = 16`` cells on
    level ``k``), capped at the layout's maximum depth."""
    return min(max(1, DEFAULT_LEVEL_BITS // layout.split_bits), layout.max_depth)


def check_levels(levels: Any, layout: MortonLayout) -> int:
    """``levels`` as a count of top levels: ``None`` gives :func:`default_levels`; negative,
    non-integer or more cells than :data:`MAX_TOP_CELLS` is a ParameterError naming the limit."""
    if levels is None:
        return default_levels(layout)
    if isinstance(levels, bool) or not isinstance(levels, (int, np.integer)):
        raise ParameterError(f"levels must be a non-negative integer (or None for the default), "
                             f"got {levels!r}", parameter="levels")
    k = int(levels)
    if k < 0:
        raise ParameterError(f"levels must be >= 0, got {k}", parameter="levels")
    if k > layout.max_depth:
        raise ParameterError(f"levels={k} exceeds the tree's maximum depth {layout.max_depth} at this "
                             "resolution; use at most that", parameter="levels")
    if k and top_cells(k, layout.split_bits) > MAX_TOP_CELLS:
        most = max(j for j in range(k) if top_cells(j, layout.split_bits) <= MAX_TOP_CELLS)
        raise ParameterError(f"levels={k} would count {top_cells(k, layout.split_bits):,} top-level "
                             f"cells, more than the memory limit of {MAX_TOP_CELLS:,} cells; "
                             f"use levels <= {most}", parameter="levels")
    return k


def level_weights(levels: int, d: int) -> list[Fraction]:
    """Geometric weights ``2^((d - 1) l / 3)``, ``l = 1..k``, as rationals (module docstring)."""
    return [Fraction(2.0 ** ((d - 1) * lev / 3.0)).limit_denominator(1 << 20) for lev in range(1, levels + 1)]


def split_count_budget(eps_count: Fraction | float, levels: int, d: int, noise: NoiseKind
                       ) -> tuple[list[Fraction | float], Fraction | float]:
    """``([eps_1, ..., eps_k], eps_leaf)`` with ``sum eps_l + eps_leaf = eps_count`` (exact
    rationals for ``noise="exact"``)."""
    weights = level_weights(levels, d)
    total = sum(weights)
    if noise == "exact":
        top = Fraction(eps_count) * LEVELS_SHARE
        per: list[Fraction | float] = [top * w / total for w in weights]
        return per, Fraction(eps_count) - top
    top_f = float(eps_count) * float(LEVELS_SHARE)
    per_f: list[Fraction | float] = [top_f * float(w / total) for w in weights]
    return per_f, float(eps_count) - top_f


__all__ = ["DEFAULT_LEVEL_BITS", "LEVELS_SHARE", "MAX_TOP_CELLS", "check_levels", "default_levels",
           "level_weights", "split_count_budget"]
