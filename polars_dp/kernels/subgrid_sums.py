"""Range counts over PrivTree leaves cut into sub-grids, at the cost of the leaf traversal (pure numpy).

Answering over the sub-cells with :func:`polars_dp.kernels.spatial_sums.morton_tree_sums` in the
bit layout walks every sub-cell level one bit at a time.  Here the traversal stops at the leaves
(the tree's own fanout): a leaf inside a query contributes its consistent total (prefix sums over
leaves), and a leaf crossing the query's boundary is answered from the summed-area array of its
own sub-grid (a ``2^h_0 x ... x 2^h_(d-1)`` product grid, :func:`polars_dp.kernels.subgrid.subcell_halvings`):

* uniform density in each sub-cell: the count below a point is the multilinear interpolation of
  the summed-area array, a box the signed sum over its corners (``4^d`` look-ups per pair, as
  :func:`polars_dp.kernels.spatial_sums.grid_sums`);
* linear density in each sub-cell (:mod:`polars_dp.kernels.linear_density`, slopes ``beta``):
  the uniform answer plus, per dimension ``j``, ``sum_i x_i beta_ij (e_j^2 - s_j^2) / 2 prod_(k != j)
  L_k``, which involves only the two end slabs of sub-cells along ``j``; it is read from the
  summed-area array of ``x beta_j`` with the same interpolation in the other dimensions
  (``(1 + d) 4^d`` look-ups per pair).

Both give the same numbers as answering over the sub-cells one by one (tests).  The summed-area
arrays are built once per release (:func:`subgrid_prefix`), grouped by sub-grid shape and
orientation: a loop over at most ``(max_subcell_bits + 1) d`` groups, none over leaves.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from polars_dp.domains.box import Box
from polars_dp.kernels.morton import MortonLayout
from polars_dp.kernels.prefix import prefix_sums
from polars_dp.kernels.spatial_sums import edge_tree_sums
from polars_dp.kernels.subgrid import subcell_halvings


@dataclass(frozen=True)
class SubgridPrefix:
    """Summed-area arrays of every leaf's sub-grid in C order: leaf ``L``'s block starts at
    ``offsets[L]`` and has shape ``(2^h_0 + 1, ..., 2^h_(d-1) + 1)`` (``halvings[L]``); ``prefix``
    has one column per summed quantity (the rows of :func:`subgrid_prefix`'s ``values``): column 0
    sums the sub-cell counts, column ``1 + j`` (when built with slopes) ``count * beta_j``."""

    halvings: np.ndarray
    offsets: np.ndarray
    prefix: np.ndarray


def morton_to_c_order(k: int, first_dim: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Per local Morton index ``l < 2^k`` of a sub-grid whose first bit halves ``first_dim``: its
    C-order position in the sub-grid, and the sub-grid's cells per dimension."""
    local = np.arange(1 << k, dtype=np.int64)
    coord = np.zeros((d, local.size), dtype=np.int64)
    sides = np.ones(d, dtype=np.int64)
    for p in range(k):
        dim = (first_dim + p) % d
        coord[dim] = 2 * coord[dim] + ((local >> (k - 1 - p)) & 1)
        sides[dim] *= 2
    pos = np.zeros(local.size, dtype=np.int64)
    for j in range(d):
        pos = pos * sides[j] + coord[j]
    return pos, sides


def subgrid_prefix(depth: np.ndarray, k: np.ndarray, values: np.ndarray, layout: MortonLayout
                   ) -> SubgridPrefix:
    """Summed-area arrays of the sub-grids of leaves of ``depth`` with ``k`` sub-cell bits;
    ``values`` has shape ``(rows, n_subcells)``, the sub-cells in the order of
    :func:`polars_dp.kernels.subgrid.subcells` (Morton order within each leaf)."""
    depth = np.asarray(depth, dtype=np.int64)
    k = np.asarray(k, dtype=np.int64)
    values = np.atleast_2d(np.asarray(values, dtype=np.float64))
    d = layout.d
    halvings = subcell_halvings(depth, k, layout)
    sizes = np.prod(np.ldexp(1.0, halvings) + 1, axis=1).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    sub_first = np.concatenate([[0], np.cumsum(np.left_shift(np.int64(1), k))]).astype(np.int64)
    prefix = np.zeros((int(offsets[-1]), values.shape[0]))
    first_dim = (depth * layout.split_bits) % d
    group_key = k * d + first_dim
    for key in np.unique(group_key):  # one pass per sub-grid shape and orientation
        kk, fd = int(key) // d, int(key) % d
        leaves = np.nonzero(group_key == key)[0]
        pos, sides = morton_to_c_order(kk, fd, d)
        grid = np.empty((values.shape[0], leaves.size, 1 << kk))
        grid[:, :, pos] = values[:, sub_first[leaves][:, None] + np.arange(1 << kk)]
        p = prefix_sums(grid.reshape((values.shape[0] * leaves.size, *sides)), batch_axes=1)
        block = int(np.prod(sides + 1))
        prefix[(offsets[leaves][:, None] + np.arange(block)).ravel()] = p.reshape(values.shape[0], -1).T
    return SubgridPrefix(halvings, offsets[:-1], prefix)


def _axis_terms(a: np.ndarray, b: np.ndarray, m: np.ndarray
                ) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """The four prefix indices along one axis of a query covering ``[a, b]`` (cell units, ``0 <=
    a <= b <= m``), and two weightings of them.

    * interpolation: ``F(b) - F(a)``, ``F`` the linear interpolation of the prefix axis (the
      uniform count below a position);
    * slab: ``sum over the end cells i of (e_i^2 - s_i^2) / 2 * (P[i + 1] - P[i])``, ``[s_i, e_i]``
      the covered part of cell ``i`` in its coordinates ``t in [-1/2, 1/2]`` (cells covered whole
      give 0): the integral of ``t`` over the covered part of each end cell.
    """
    i0 = np.minimum(np.floor(a), m - 1)
    i1 = np.minimum(np.floor(b), m - 1)
    f0, f1 = a - i0, b - i1
    slab = []
    for i, keep in ((i1, np.where(i1 == i0, 0.0, 1.0)), (i0, 1.0)):
        s = np.clip(a - i, 0.0, 1.0) - 0.5
        e = np.clip(b - i, 0.0, 1.0) - 0.5
        w = keep * 0.5 * (e**2 - s**2)
        slab += [-w, w]
    index = [i1.astype(np.int64), i1.astype(np.int64) + 1, i0.astype(np.int64), i0.astype(np.int64) + 1]
    return index, [1.0 - f1, f1, f0 - 1.0, -f0], slab


#: Pairs per block of :func:`subgrid_pair_sums`, times the ``4^d`` corner terms (bounds its scratch).
PAIR_TERMS_BLOCK = 1 << 20


def subgrid_pair_sums(sub: SubgridPrefix, leaf: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                      q_lo: np.ndarray, q_hi: np.ndarray, *, linear: bool) -> np.ndarray:
    """Counts of (query, leaf) pairs over the leaf's sub-grid: ``leaf`` indexes the leaves, ``lo`` /
    ``hi`` their boxes, ``q_lo`` / ``q_hi`` the queries (all of the pairs' length).  The ``4^d``
    corner terms of every pair are gathered at once (in blocks of pairs), column 0 weighted by the
    products of the interpolation weights and, with ``linear``, column ``1 + j`` by the same
    products with the slab weights along ``j``."""
    n, d = q_lo.shape
    out = np.empty(n)
    block = max(1, PAIR_TERMS_BLOCK >> (2 * d))
    for start in range(0, n, block):
        sl = slice(start, min(n, start + block))
        out[sl] = _pair_block(sub, leaf[sl], lo[sl], hi[sl], q_lo[sl], q_hi[sl], linear)
    return out


def _pair_block(sub: SubgridPrefix, leaf: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                q_lo: np.ndarray, q_hi: np.ndarray, linear: bool) -> np.ndarray:
    m = np.ldexp(1.0, sub.halvings[leaf])
    width = hi - lo
    a = np.clip((q_lo - lo) / width * m, 0.0, m)
    b = np.maximum(a, np.clip((q_hi - lo) / width * m, 0.0, m))
    n, d = a.shape
    stride = np.ones(n, dtype=np.int64)
    idx: np.ndarray = sub.offsets[leaf]
    interp: list[np.ndarray] = []
    slab: list[np.ndarray] = []
    for j in reversed(range(d)):  # axis j of the (4,) * d term grid, pairs last
        index, w_interp, w_slab = _axis_terms(a[:, j], b[:, j], m[:, j])
        shape = (1,) * j + (4,) + (1,) * (d - 1 - j) + (n,)
        idx = idx + (np.stack(index) * stride).reshape(shape)
        interp.insert(0, np.stack(w_interp).reshape(shape))
        slab.insert(0, np.stack(w_slab).reshape(shape))
        stride = stride * (m[:, j].astype(np.int64) + 1)
    rows = sub.prefix[:, : 1 + d] if linear else sub.prefix[:, :1]
    values = rows[idx.reshape(-1, n)]  # (4^d, n, rows)
    weight = functools.reduce(np.multiply, interp)
    out = np.einsum("tp,tp->p", weight.reshape(-1, n), values[:, :, 0])
    if linear:
        for j in range(d):
            w_j = functools.reduce(np.multiply, [*interp[:j], slab[j], *interp[j + 1:]])
            w_j = np.broadcast_to(w_j, weight.shape).reshape(-1, n)
            out += np.einsum("tp,tp->p", w_j, values[:, :, 1 + j])
    return out


def subgrid_tree_sums(leaf_starts: np.ndarray, leaf_totals: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                      sub: SubgridPrefix, layout: MortonLayout, box: Box, q_lo: np.ndarray, q_hi: np.ndarray,
                      *, linear: bool = False) -> np.ndarray:
    """Range counts over leaves (sorted first codes ``leaf_starts``, boxes ``[lo, hi]``) with
    sub-grids: PrivTree's traversal, nodes inside a query from prefix sums of ``leaf_totals`` (the
    consistent leaf counts, the sums of their sub-cells), leaves crossing its boundary from their
    sub-grids (:func:`subgrid_pair_sums`; ``linear``: under the sub-cells' linear densities, the
    prefix built with the ``count * beta_j`` rows)."""
    totals = np.asarray(leaf_totals, dtype=np.float64)
    return edge_tree_sums(leaf_starts, totals, layout, box, q_lo, q_hi, lambda leaf, qi: subgrid_pair_sums(
        sub, leaf, lo[leaf], hi[leaf], q_lo[qi], q_hi[qi], linear=linear))


__all__ = ["SubgridPrefix", "morton_to_c_order", "subgrid_pair_sums", "subgrid_prefix", "subgrid_tree_sums"]
