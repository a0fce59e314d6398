"""Range counts of (two-level) grids under the piecewise-linear density (pure numpy; issue 41).

Under :mod:`polars_dp.kernels.linear_density` a cell ``i`` crossed by a query contributes
``n_i prod_k L_ik (1 + sum_j beta_ij m_ij)`` with ``L_ik`` its covered length along ``k`` and
``m_ij = (s_j + e_j) / 2`` the centre of the covered part (cell coordinates): the uniform share plus
``sum_j (n_i beta_ij) (L_ij m_ij) prod_{k != j} L_ik``.  The term of dimension ``j`` vanishes unless
the cell holds a face of the query along ``j`` (``m_ij = 0`` for a cell covered whole along
``j``), so it lives in at most two slabs of the grid across ``j``; in each slab it is the uniform
range count of the weights ``n beta_j`` over the other dimensions, from their prefix sums
(:func:`polars_dp.kernels.spatial_sums.grid_sums`), times the slab's ``L m``.  Work per query
and first-level cell: ``O(d 2^(2d))`` as the uniform answer, not the number of cells crossed.
"""

from __future__ import annotations

import numpy as np

from polars_dp.domains.box import Box
from polars_dp.kernels.prefix import prefix_sums
from polars_dp.kernels.spatial_sums import grid_sums, touched_cells


def _slab_prefix(weights: np.ndarray, m2: np.ndarray, d: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per dimension ``j``: flattened prefix sums over the other dimensions of each slab across
    ``j`` of every sub-grid (``weights[:, j]``), and each sub-grid's offset in them."""
    n_sub = m2**d
    leaf_start = np.concatenate([[0], np.cumsum(n_sub)])[:-1]
    sizes = m2 * (m2 + 1) ** (d - 1)
    offsets = np.concatenate([[0], np.cumsum(sizes)])[:-1].astype(np.int64)
    out = []
    for j in range(d):
        prefix = np.empty(int(sizes.sum()))
        for side in np.unique(m2):
            cells = np.nonzero(m2 == side)[0]
            s = int(side)
            w = weights[leaf_start[cells][:, None] + np.arange(s**d), j].reshape((cells.size,) + (s,) * d)
            w = np.moveaxis(w, 1 + j, 1).reshape((cells.size * s,) + (s,) * (d - 1))
            p = prefix_sums(w, batch_axes=1).reshape(cells.size, -1)
            prefix[(offsets[cells][:, None] + np.arange(p.shape[1])).ravel()] = p.ravel()
        out.append((prefix, offsets))
    return out


def linear_grid_correction(counts: np.ndarray, beta: np.ndarray, m1: int, m2: np.ndarray, box: Box,
                           q_lo: np.ndarray, q_hi: np.ndarray) -> np.ndarray:
    """What the linear density adds to the uniform answers of queries ``[q_lo, q_hi]`` (inside
    ``box``) over ``m1^d`` first-level cells in C order, cell ``c`` cut into ``m2[c]^d`` sub-cells
    in C order (UG: ``m1 = 1``, ``m2 = [m]``), sub-cells of cell ``c`` before those of ``c + 1``."""
    n_q, d = q_lo.shape
    m2 = np.asarray(m2, dtype=np.int64)
    weights = np.asarray(counts, dtype=np.float64)[:, None] * beta
    qi, cell, c_lo, c_hi = touched_cells(m1, box, q_lo, q_hi)
    ql = np.maximum(q_lo[qi], c_lo)
    qh = np.minimum(q_hi[qi], c_hi)
    side = m2[cell]
    sf = side.astype(np.float64)
    leaf_start = np.concatenate([[0], np.cumsum(m2**d)])[:-1]
    slabs = _slab_prefix(weights, m2, d) if d > 1 else []
    extra = np.zeros(qi.size)
    for j in range(d):
        w = (c_hi[:, j] - c_lo[:, j]) / sf
        lo_slab = np.clip(np.floor((ql[:, j] - c_lo[:, j]) / w), 0, side - 1).astype(np.int64)
        hi_slab = np.clip(np.floor((qh[:, j] - c_lo[:, j]) / w), 0, side - 1).astype(np.int64)
        others = [k for k in range(d) if k != j]
        for slab, use in ((lo_slab, np.ones(qi.size, dtype=bool)), (hi_slab, hi_slab != lo_slab)):
            centre = c_lo[:, j] + (slab + 0.5) * w
            s = np.clip((ql[:, j] - centre) / w, -0.5, 0.5)
            e = np.clip((qh[:, j] - centre) / w, -0.5, 0.5)
            factor = np.where(use, np.maximum(e - s, 0.0) * 0.5 * (s + e), 0.0)
            if d == 1:
                total = weights[leaf_start[cell] + slab, 0]
            else:
                prefix, offsets = slabs[j]
                total = grid_sums(prefix, offsets[cell] + slab * (side + 1) ** (d - 1), side,
                                  c_lo[:, others], c_hi[:, others], ql[:, others], qh[:, others])
            extra += factor * total
    return np.bincount(qi, weights=extra, minlength=n_q)


__all__ = ["linear_grid_correction"]
