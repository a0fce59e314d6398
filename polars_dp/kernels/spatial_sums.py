"""Range counts over spatial releases under the uniformity assumption (pure numpy).

A leaf ``v`` contributes ``count(v) * vol(v ∩ q) / vol(v)`` to the answer of query box ``q``
(PrivTree paper, Sec. 3 "answering range-count queries"; the usual assumption for UG/AG).
Three kernels, all vectorised over queries (loops only over tree levels or box corners):

* :func:`morton_tree_sums`: top-down traversal of a dyadic tree given by its leaves' Morton
  code ranges; a node inside ``q`` contributes its subtree total (prefix sums over leaves in
  code order), a disjoint node is pruned, a partially covered leaf contributes pro rata.
* :func:`grid_sums`: regular ``m^d`` grids through ``d``-dimensional prefix sums, which under
  uniformity are interpolated multilinearly inside a cell (``4^d`` look-ups per query).
* :func:`two_level_grid_sums`: AG's grid of grids: every (query, first-level cell) pair is
  answered by :func:`grid_sums` on that cell's own sub-grid.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Literal, NamedTuple, overload

import numpy as np

from polars_dp.domains.box import Box
from polars_dp.kernels.morton import MortonLayout, fraction_squares, overlap_fraction


@overload
def morton_tree_sums(leaf_starts: np.ndarray, leaf_counts: np.ndarray, layout: MortonLayout, box: Box,
                     q_lo: np.ndarray, q_hi: np.ndarray, *, weight_squares: Literal[False] = False
                     ) -> np.ndarray: ...
@overload
def morton_tree_sums(leaf_starts: np.ndarray, leaf_counts: np.ndarray, layout: MortonLayout, box: Box,
                     q_lo: np.ndarray, q_hi: np.ndarray, *, weight_squares: Literal[True]
                     ) -> tuple[np.ndarray, np.ndarray]: ...
def morton_tree_sums(leaf_starts: np.ndarray, leaf_counts: np.ndarray, layout: MortonLayout, box: Box,
                     q_lo: np.ndarray, q_hi: np.ndarray, *, weight_squares: bool = False
                     ) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Answers for queries ``[q_lo, q_hi]`` (shape ``(Q, d)``) over leaves sorted by first code.

    With ``weight_squares``, also ``sum over leaves of w^2`` per query, ``w`` being the weight
    of a leaf's count in the answer (1 inside the box, the overlapped fraction at its edge):
    the variance of the answer is that times the variance of one leaf's noise.
    """
    n_q = q_lo.shape[0]
    cum = np.concatenate([[0.0], np.cumsum(leaf_counts, dtype=np.float64)])
    answers = np.zeros(n_q)
    squares = np.zeros(n_q)
    for v in visit_tree(leaf_starts, layout, box, q_lo, q_hi, layout.max_depth + 1):
        answers += np.bincount(v.qi, weights=v.contribution(cum, leaf_counts), minlength=n_q)
        if weight_squares:
            w2 = np.where(v.inside, (v.stop - v.first).astype(np.float64),
                          np.where(v.is_leaf & ~v.inside, v.frac**2, 0.0))
            squares += np.bincount(v.qi, weights=w2, minlength=n_q)
    return (answers, squares) if weight_squares else answers


class Visit(NamedTuple):
    """The (query, node) pairs of one depth of a top-down traversal: query ``qi`` meets node
    ``prefix`` (Morton code at that depth) whose leaves are ``starts[first:stop]``; ``inside``:
    the node lies in the query box; ``frac``: the overlapped fraction of its volume; ``parent``:
    the row of the pair at the previous depth that expanded into this one."""

    depth: int
    qi: np.ndarray
    prefix: np.ndarray
    first: np.ndarray
    stop: np.ndarray
    is_leaf: np.ndarray
    inside: np.ndarray
    frac: np.ndarray
    parent: np.ndarray

    def contribution(self, cum: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """Each pair's share of its query's answer: the subtree total (prefix sums ``cum`` of
        ``counts`` in code order) of a node inside the box, ``count * frac`` of a leaf crossing
        its boundary, 0 otherwise (that node is expanded or disjoint)."""
        out = np.where(self.inside, cum[self.stop] - cum[self.first], 0.0)
        partial = self.is_leaf & ~self.inside
        out[partial] = counts[self.first[partial]] * self.frac[partial]
        return out


def edge_tree_sums(starts: np.ndarray, totals: np.ndarray, layout: MortonLayout, box: Box, q_lo: np.ndarray,
                   q_hi: np.ndarray, edge: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
    """Range sums over leaves sorted by first code ``starts``: the nodes inside a query from prefix
    sums of the float ``totals``, each leaf crossing its boundary (overlapped fraction > 0) from
    ``edge(leaf, qi)`` (its part of query ``qi``'s answer)."""
    n_q = q_lo.shape[0]
    cum = np.concatenate([[0.0], np.cumsum(totals)])
    answers = np.zeros(n_q)
    for v in visit_tree(starts, layout, box, q_lo, q_hi, layout.max_depth + 1):
        part = np.where(v.inside, cum[v.stop] - cum[v.first], 0.0)
        crossing = np.nonzero(v.is_leaf & ~v.inside & (v.frac > 0))[0]
        if crossing.size:
            part[crossing] = edge(v.first[crossing], v.qi[crossing])
        answers += np.bincount(v.qi, weights=part, minlength=n_q)
    return answers


def visit_tree(starts: np.ndarray, layout: MortonLayout, box: Box, q_lo: np.ndarray, q_hi: np.ndarray,
               n_depths: int, *, starts_are_nodes: bool = False) -> Iterator[Visit]:
    """Top-down traversal of the dyadic tree whose leaves tile ``box`` and start at the sorted
    Morton codes ``starts``: per depth, the pairs of queries and the nodes they partly cover
    (a node inside a query or disjoint from it is not expanded, nor is a leaf).  A node is a
    leaf when one start falls in its code range (``starts_are_nodes``: and that start is its
    own first code)."""
    n_q = q_lo.shape[0]
    qi = np.arange(n_q)
    prefix = np.zeros(n_q, dtype=np.int64)
    parent = np.zeros(n_q, dtype=np.int64)
    lo = np.broadcast_to(box.lo, (n_q, layout.d)).copy()
    hi = np.broadcast_to(box.hi, (n_q, layout.d)).copy()
    children = np.arange(layout.fanout, dtype=np.int64)
    for depth in range(n_depths):
        if not qi.size:
            return
        shift = layout.shift(depth)
        start = prefix << shift
        first = np.searchsorted(starts, start, side="left")
        stop = np.searchsorted(starts, start + (np.int64(1) << shift), side="left")
        is_leaf = stop - first == 1
        if starts_are_nodes:
            is_leaf &= starts[np.minimum(first, starts.size - 1)] == start
        ql, qh = q_lo[qi], q_hi[qi]
        inside = np.all((ql <= lo) & (hi <= qh), axis=1)
        frac = overlap_fraction(ql, qh, lo, hi)
        yield Visit(depth, qi, prefix, first, stop, is_leaf, inside, frac, parent)
        expand = ~inside & ~is_leaf & (frac > 0)
        if not expand.any():
            return
        parent = np.repeat(np.nonzero(expand)[0], layout.fanout)
        qi = np.repeat(qi[expand], layout.fanout)
        prefix, lo, hi = child_boxes(layout, depth, prefix[expand], lo[expand], hi[expand], children)


def child_boxes(layout: MortonLayout, depth: int, prefix: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                children: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``fanout`` children of each node at ``depth`` (Morton ``prefix``, box ``[lo, hi]``):
    their prefixes and boxes, each node's children consecutive in child-code order (the split
    dimensions of ``depth`` halved, the child code's bit ``t`` choosing the upper half)."""
    k = layout.fanout
    child_prefix = ((prefix << layout.split_bits)[:, None] | children).ravel()
    lo = np.repeat(lo, k, axis=0)
    hi = np.repeat(hi, k, axis=0)
    child = np.tile(children, prefix.size)
    for t, dim in enumerate(layout.split_dims(depth)):
        upper = ((child >> (layout.split_bits - 1 - t)) & 1).astype(bool)
        mid = 0.5 * (lo[:, dim] + hi[:, dim])
        lo[:, dim] = np.where(upper, mid, lo[:, dim])
        hi[:, dim] = np.where(upper, hi[:, dim], mid)
    return child_prefix, lo, hi


def grid_weight_squares(m: int, box: Box, q_lo: np.ndarray, q_hi: np.ndarray) -> np.ndarray:
    """``sum over cells of w^2`` of an ``m^d`` grid, ``w`` = fraction of a cell inside the query.

    The weights factorise over dimensions, so the sum is a product of per-dimension sums:
    ``(full cells) + f_first^2 + f_last^2`` (or ``f^2`` when one cell holds the whole range).
    """
    width = box.width / m
    a = (np.clip(q_lo, box.lo, box.hi) - box.lo) / width  # positions in cell units
    b = (np.clip(q_hi, box.lo, box.hi) - box.lo) / width
    return fraction_squares(a, b, m)


#: Entries of one half's multiplied-out factors (``4^ceil(d/2)`` per pair) held at once by
#: :func:`grid_sums`: it answers ``GRID_SUMS_TERMS // 4^ceil(d/2)`` pairs at a time (32,768 in 4-D),
#: about 16 MB of offsets and weights whatever ``d``.
GRID_SUMS_TERMS = 1 << 19


def grid_sums(prefix: np.ndarray, offset: np.ndarray, m: np.ndarray, cell_lo: np.ndarray,
              cell_hi: np.ndarray, q_lo: np.ndarray, q_hi: np.ndarray) -> np.ndarray:
    """Answers of ``P`` (query, grid) pairs: pair ``i`` asks box ``[q_lo[i], q_hi[i]]`` of the
    ``m[i]^d`` grid spanning ``[cell_lo[i], cell_hi[i]]`` whose flattened prefix sums start at
    ``prefix[offset[i]]``.

    Under uniformity the count below a point ``t`` (in cell units) is the multilinear
    interpolation of the prefix sums at ``t``; a box is the signed sum of that function at its
    ``2^d`` corners, each interpolated from ``2^d`` prefix sums: ``4^d`` terms, each a product over
    the dimensions of one of four (corner, vertex) factors.  The factors of the first and of the
    last ``d // 2`` dimensions are multiplied out separately (``4^(d/2)`` index offsets and weights
    each), so a term costs one addition and one product of two arrays before its look-up.
    """
    n, d = q_lo.shape
    chunk = max(1, GRID_SUMS_TERMS // 4 ** -(-d // 2))
    out = np.zeros(n)
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        out[a:b] = _grid_sums(prefix, offset[a:b], m[a:b], cell_lo[a:b], cell_hi[a:b], q_lo[a:b], q_hi[a:b])
    return out


def _grid_sums(prefix: np.ndarray, offset: np.ndarray, m: np.ndarray, cell_lo: np.ndarray,
               cell_hi: np.ndarray, q_lo: np.ndarray, q_hi: np.ndarray) -> np.ndarray:
    n, d = q_lo.shape
    if not n:
        return np.zeros(0)
    mf = m.astype(np.float64)
    # per dimension, the four (corner, vertex) factors: index offset (i + vertex) * stride and
    # weight sign * (frac if vertex else 1 - frac), the sign -1 at the lower corner
    factors = []
    for j in range(d):
        w = cell_hi[:, j] - cell_lo[:, j]
        u = np.clip((q_lo[:, j] - cell_lo[:, j]) / w * mf, 0.0, mf)
        v = np.maximum(u, np.clip((q_hi[:, j] - cell_lo[:, j]) / w * mf, 0.0, mf))
        stride = (m + 1) ** (d - 1 - j)
        terms = []
        for t, sign in ((u, -1.0), (v, 1.0)):
            i = np.minimum(np.floor(t), mf - 1).astype(np.int64)
            frac = t - i
            terms.append((i * stride, sign * (1.0 - frac)))
            terms.append(((i + 1) * stride, sign * frac))
        factors.append(terms)
    first = _multiply_out(factors[:d // 2], offset)
    second = _multiply_out(factors[d // 2:], None)
    out = np.zeros(n)
    for idx_a, w_a in first:
        assert idx_a is not None  # the first half starts from ``offset``
        for idx_b, w_b in second:
            w = w_b if w_a is None else w_a * w_b
            out += w * prefix[idx_a + idx_b]
    return out


def _multiply_out(factors: list[list[tuple[np.ndarray, np.ndarray]]], base: np.ndarray | None
                  ) -> list[tuple[np.ndarray | None, np.ndarray | None]]:
    """Every product of one factor per dimension: summed index offsets (from ``base``) and
    multiplied weights, ``4^len(factors)`` pairs (``None``: nothing added yet, offset 0 and
    weight 1, so no pass adds zeros or multiplies ones)."""
    out: list[tuple[np.ndarray | None, np.ndarray | None]] = [(base, None)]
    for terms in factors:
        out = [(o if idx is None else idx + o, f if w is None else w * f) for idx, w in out for o, f in terms]
    return out


def two_level_grid_sums(prefix: np.ndarray, offsets: np.ndarray, m2: np.ndarray, m1: int, box: Box,
                        q_lo: np.ndarray, q_hi: np.ndarray) -> np.ndarray:
    """Answers over a grid of ``m1^d`` cells, cell ``c`` holding its own ``m2[c]^d`` sub-grid
    (prefix sums at ``prefix[offsets[c]:]``)."""
    qi, cell, c_lo, c_hi = touched_cells(m1, box, q_lo, q_hi)
    pair = grid_sums(prefix, offsets[cell], m2[cell], c_lo, c_hi, q_lo[qi], q_hi[qi])
    return np.bincount(qi, weights=pair, minlength=q_lo.shape[0])


def touched_cells(m1: int, box: Box, q_lo: np.ndarray, q_hi: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every (query, cell) pair of a grid of ``m1^d`` cells over ``box`` whose cell the query
    ``[q_lo, q_hi]`` touches: the query index, the cell's C-order index and its box
    ``[c_lo, c_hi]`` (the last cell of an axis closed at ``box.hi``); none for a query outside."""
    n_q, d = q_lo.shape
    cell_w = box.width / m1
    a = np.clip(np.floor((q_lo - box.lo) / cell_w), 0, m1 - 1).astype(np.int64)
    b = np.clip(np.floor((q_hi - box.lo) / cell_w), 0, m1 - 1).astype(np.int64)
    empty = np.any((q_hi < box.lo) | (q_lo > box.hi), axis=1)
    lens = np.where(empty[:, None], 0, b - a + 1)
    per_query = np.prod(lens, axis=1)
    qi = np.repeat(np.arange(n_q), per_query)
    local = np.arange(qi.size) - np.repeat(np.cumsum(per_query) - per_query, per_query)
    idx = np.empty((qi.size, d), dtype=np.int64)
    for j in reversed(range(d)):
        idx[:, j] = a[qi, j] + local % lens[qi, j]
        local = local // lens[qi, j]
    cell = np.zeros(qi.size, dtype=np.int64)
    for j in range(d):
        cell = cell * m1 + idx[:, j]
    c_lo = box.lo + idx * cell_w
    c_hi = np.where(idx == m1 - 1, box.hi, c_lo + cell_w)
    return qi, cell, c_lo, c_hi


__all__ = ["GRID_SUMS_TERMS", "Visit", "child_boxes", "edge_tree_sums", "grid_sums", "morton_tree_sums",
           "touched_cells", "two_level_grid_sums", "visit_tree"]
