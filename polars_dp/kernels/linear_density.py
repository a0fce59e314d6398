"""A piecewise-linear density over a partition of a box into cells (pure numpy; issue 41).

Under the uniformity assumption a range count takes ``count * vol(cell ∩ q) / vol(cell)`` from a
cell crossing the query's boundary.  Here a cell ``i`` with count ``n_i`` and volume ``V_i`` holds
instead the density

    rho_i (1 + sum_j beta_ij t_j),   rho_i = n_i / V_i,   t_j in [-1/2, 1/2]

in the cell's own coordinates (``t_j = (x_j - centre_j) / width_j``).  Its integral over the cell
is ``n_i`` whatever the slopes (``t_j`` integrates to 0), so cells inside a query are answered from
prefix sums exactly as before and only the cells crossing its boundary change: the count of
``[s, e]`` (in ``t``) is ``n_i prod_j (e_j - s_j) (1 + sum_j beta_ij (s_j + e_j) / 2)``, ``O(d)``
per boundary cell (:func:`linear_fraction`).  Everything here is post-processing of released counts.

Slopes (:func:`linear_slopes`)
------------------------------
Along dimension ``j`` a cell has at most one *lower* and one *upper* neighbour: the cell holding
the point just beyond the centre of the face ``x_j = lo_j`` (resp. ``hi_j``).  Where several
smaller cells touch that face centre (it is a corner of theirs), the point is read with the grid
rule ``floor``: the neighbour is the one on the upper side in every other dimension.  A face on
the box's boundary has no neighbour.  With neighbour densities ``rho-`` and ``rho+`` (negative
counts read as 0) at centre distances ``D-`` and ``D+`` (in units of the cell's width along
``j``: ``(1 + w_neighbour / w_i) / 2``), the slope is the central difference
``(rho+ - rho-) / (D+ + D-)``; with one side missing, the one-sided difference of the other side
(the missing side copies it); with both missing, 0.  Then ``beta_ij = slope / rho_i``, and the
slopes of a cell are scaled down together so that ``sum_j |beta_ij| / 2 <= 1``: the density is
non-negative at every corner, hence everywhere.  A cell whose count is ``<= 0`` stays uniform.
On a regular grid a density that is truly linear (and non-negative) is reproduced exactly.

Neighbours come from the partition's own index: :func:`morton_face_neighbours` for Morton leaves
(PrivTree leaves, or sub-cells in the bit layout, :func:`polars_dp.kernels.subgrid.subcell_layout`),
:func:`grid_face_neighbours` for a regular ``m^d`` grid in C order (UG) and
:func:`two_level_face_neighbours` for AG's grid of sub-grids.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from polars_dp.domains.box import Box
from polars_dp.kernels.morton import MortonLayout, deinterleave, morton_codes
from polars_dp.kernels.spatial_sums import edge_tree_sums


def morton_face_neighbours(starts: np.ndarray, depth: np.ndarray, layout: MortonLayout
                           ) -> tuple[np.ndarray, np.ndarray]:
    """``(lower, upper)``, shape ``(n, d)``: the index of the cell beyond each face of the Morton
    cells given by sorted first codes ``starts`` and ``depth`` (a partition of the box; ``-1`` on
    the box's boundary).  Integer arithmetic on the finest grid: the point one finest cell beyond
    the face, at the face centre's cell (``floor``) in the other dimensions, located by
    ``searchsorted`` of its Morton code.  Loops over dimensions only."""
    starts = np.asarray(starts, dtype=np.int64)
    d, bits = layout.d, layout.bits
    lo = np.stack(deinterleave(starts, d, bits), axis=1)
    size = np.left_shift(np.int64(1), bits - layout.halvings(np.asarray(depth, dtype=np.int64)))
    centre = lo + size // 2
    lower = np.full((starts.size, d), -1, dtype=np.int64)
    upper = np.full_like(lower, -1)
    for j in range(d):
        for out, pos in ((lower, lo[:, j] - 1), (upper, lo[:, j] + size[:, j])):
            ok = (pos >= 0) & (pos < (1 << bits))
            point = centre[ok].copy()
            point[:, j] = pos[ok]
            codes = morton_codes([point[:, t] for t in range(d)], bits)
            out[ok, j] = np.searchsorted(starts, codes, side="right") - 1
    return lower, upper


def grid_face_neighbours(shape: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """``(lower, upper)`` for the cells of a regular grid of ``shape`` in C order (``-1`` on the
    box's boundary)."""
    shape = tuple(int(m) for m in shape)
    idx = np.arange(int(np.prod(shape)), dtype=np.int64)
    coords = np.unravel_index(idx, shape)
    lower = np.full((idx.size, len(shape)), -1, dtype=np.int64)
    upper = lower.copy()
    for j, m in enumerate(shape):
        stride = int(np.prod(shape[j + 1:]))
        lower[:, j] = np.where(coords[j] > 0, idx - stride, -1)
        upper[:, j] = np.where(coords[j] < m - 1, idx + stride, -1)
    return lower, upper


def two_level_face_neighbours(m1: int, m2: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray]:
    """``(lower, upper)`` for AG's cells: ``m1^d`` first-level cells in C order, cell ``c`` cut
    into ``m2[c]^d`` sub-cells in C order, all sub-cells of cell ``c`` before those of ``c + 1``
    (the layout of :class:`~polars_dp.releases.spatial.SpatialRelease`'s ``two_level_grid``).
    A neighbour in another first-level cell (side ``m'``) is the sub-cell holding the face
    centre, ``floor((2 i_k + 1) m' / (2 m))`` in each other dimension (exact integers)."""
    m2 = np.asarray(m2, dtype=np.int64)
    n_sub = m2**d
    first = np.concatenate([[0], np.cumsum(n_sub)]).astype(np.int64)
    cell = np.repeat(np.arange(m2.size, dtype=np.int64), n_sub)
    local = np.arange(first[-1], dtype=np.int64) - first[cell]
    m = m2[cell]
    sub = np.empty((cell.size, d), dtype=np.int64)
    top = np.empty_like(sub)
    rest, crest = local.copy(), cell.copy()
    for j in reversed(range(d)):
        sub[:, j], rest = rest % m, rest // m
        top[:, j], crest = crest % m1, crest // m1
    lower = np.full((cell.size, d), -1, dtype=np.int64)
    upper = np.full_like(lower, -1)
    for j in range(d):
        for out, step in ((lower, -1), (upper, 1)):
            s = sub[:, j] + step
            inside = (s >= 0) & (s < m)
            t = top.copy()
            t[:, j] += np.where(inside, 0, step)
            ok = (t[:, j] >= 0) & (t[:, j] < m1)
            other = np.zeros(cell.size, dtype=np.int64)
            for k in range(d):
                other = other * m1 + np.clip(t[:, k], 0, m1 - 1)
            m_n = m2[other]
            code = np.zeros(cell.size, dtype=np.int64)
            for k in range(d):
                if k == j:
                    pos = np.where(inside, s, np.where(step > 0, 0, m_n - 1))
                else:
                    pos = np.where(inside, sub[:, k], (2 * sub[:, k] + 1) * m_n // (2 * m))
                code = code * m_n + pos
            out[ok, j] = (first[other] + code)[ok]
    return lower, upper


def linear_slopes(lo: np.ndarray, hi: np.ndarray, counts: np.ndarray, lower: np.ndarray,
                  upper: np.ndarray) -> np.ndarray:
    """The relative slopes ``beta``, shape ``(n, d)``, of the cells ``[lo, hi]`` (a partition of a
    box) with ``counts`` and face neighbours ``lower`` / ``upper`` (see the module docstring):
    central differences of the neighbours' densities, one-sided at the box's boundary, divided by
    the cell's density and scaled so that ``sum_j |beta_j| / 2 <= 1``."""
    lo = np.asarray(lo, dtype=np.float64)
    hi = np.asarray(hi, dtype=np.float64)
    counts = np.asarray(counts, dtype=np.float64)
    width = hi - lo
    rho = np.maximum(counts, 0.0) / np.prod(width, axis=1)
    n, d = lo.shape
    slope = np.zeros((n, d))
    for j in range(d):
        lo_n, up_n = lower[:, j], upper[:, j]
        has_lo, has_up = lo_n >= 0, up_n >= 0
        r_lo = rho[np.maximum(lo_n, 0)]
        r_up = rho[np.maximum(up_n, 0)]
        d_lo = 0.5 * (1.0 + width[np.maximum(lo_n, 0), j] / width[:, j])
        d_up = 0.5 * (1.0 + width[np.maximum(up_n, 0), j] / width[:, j])
        both = has_lo & has_up
        slope[:, j] = np.where(both, (r_up - r_lo) / np.where(both, d_up + d_lo, 1.0),
                               np.where(has_up, (r_up - rho) / d_up,
                                        np.where(has_lo, (rho - r_lo) / d_lo, 0.0)))
    positive = rho > 0
    beta = np.where(positive[:, None], slope / np.where(positive, rho, 1.0)[:, None], 0.0)
    half = 0.5 * np.abs(beta).sum(axis=1)
    return beta / np.maximum(half, 1.0)[:, None]


def linear_fraction(q_lo: np.ndarray, q_hi: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                    beta: np.ndarray) -> np.ndarray:
    """Share of a cell's count inside query boxes under its linear density: with the overlap
    ``[s_j, e_j]`` in the cell's coordinates ``t``, ``prod_j (e_j - s_j) * (1 + sum_j beta_j
    (s_j + e_j) / 2)``.  Arrays broadcast over leading axes, last axis = dimension (as
    :func:`polars_dp.kernels.morton.overlap_fraction`, which it equals for ``beta = 0``)."""
    width = hi - lo
    centre = 0.5 * (lo + hi)
    s = np.clip((q_lo - centre) / width, -0.5, 0.5)
    e = np.clip((q_hi - centre) / width, -0.5, 0.5)
    length = np.maximum(e - s, 0.0)
    return np.prod(length, axis=-1) * (1.0 + np.sum(beta * (0.5 * (s + e)), axis=-1))


def linear_morton_sums(starts: np.ndarray, counts: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                       beta: np.ndarray, layout: MortonLayout, box: Box, q_lo: np.ndarray,
                       q_hi: np.ndarray) -> np.ndarray:
    """Range counts over Morton cells (sorted first codes ``starts``, boxes ``[lo, hi]``) under
    their linear densities (:func:`polars_dp.kernels.spatial_sums.edge_tree_sums`): each cell
    crossing the query's boundary contributes ``count * linear_fraction``."""
    counts = np.asarray(counts, dtype=np.float64)
    return edge_tree_sums(starts, counts, layout, box, q_lo, q_hi, lambda cell, qi: counts[cell]
                          * linear_fraction(q_lo[qi], q_hi[qi], lo[cell], hi[cell], beta[cell]))


__all__ = ["grid_face_neighbours", "linear_fraction", "linear_morton_sums", "linear_slopes",
           "morton_face_neighbours", "two_level_face_neighbours"]
