"""Regular grids over a public box (pure numpy): cell of every point, cell boxes.

A box ``[lo, hi]^d`` cut into ``m`` equal cells per dimension: point ``x`` lies in cell
``floor((x_j - lo_j) * m / (hi_j - lo_j))`` along dimension ``j``, with ``x_j = hi_j`` put in
the last cell.  Flat cell indices are in C order (``flat = sum_j i_j m^(d-1-j)``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from polars_dp.domains.box import Box


def grid_cells(points: Sequence[np.ndarray], box: Box, m: int) -> list[np.ndarray]:
    """Integer cell (int64) of every point along each dimension of an ``m``-per-side grid."""
    out = []
    for j, x in enumerate(points):
        g = np.subtract(np.asarray(x, dtype=np.float64), box.lo[j])
        g *= m / box.width[j]
        np.clip(g, 0, m - 1, out=g)  # then truncation is floor (g >= 0), and hi lands in m - 1
        out.append(g.astype(np.int64))
    return out


def flat_cells(per_dim: Sequence[np.ndarray], m: int) -> np.ndarray:
    """C-order flat index of per-dimension cells of an ``m^d`` grid."""
    flat = np.zeros(per_dim[0].shape, dtype=np.int64)
    for i in per_dim:
        flat = flat * m + i
    return flat


def grid_boxes(box: Box, m: int) -> tuple[np.ndarray, np.ndarray]:
    """``(lo, hi)`` of the ``m^d`` cells in C order."""
    idx = np.indices((m,) * box.d).reshape(box.d, -1).T
    lo = box.lo + idx * (box.width / m)
    hi = np.where(idx == m - 1, box.hi, box.lo + (idx + 1) * (box.width / m))
    return lo, hi


__all__ = ["flat_cells", "grid_boxes", "grid_cells"]
