"""Exact per-axis variance factors of range counts under wavelet noise (Privelet, Theorem 3).

A range count of the inverse transform of i.i.d. ``Lap(lambda)`` coefficients has variance
``2 lambda^2 prod_axes f_axis``; these kernels give ``f`` for a Haar or a nominal axis.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from polars_dp.domains.attributes import Attribute, Nominal
from polars_dp.domains.expressions import NUMPY, Ops, top_two
from polars_dp.domains.hierarchy import Hierarchy
from polars_dp.domains.workload import AxisWorkload
from polars_dp.errors import QueryError
from polars_dp.kernels.tail_bounds import AxisWeights
from polars_dp.kernels.wavelets import haar_levels, haar_padded_length, nominal_tree


# ---------------------------------------------------------------------------- variance
def _check_ranges(attribute: Attribute, starts: np.ndarray, stops: np.ndarray) -> None:
    bad = (starts < 0) | (stops > attribute.n_cells) | (starts >= stops)
    if np.any(bad):
        i = int(np.flatnonzero(bad)[0])
        raise QueryError(
            f"{attribute.column}: cell range [{starts[i]}, {stops[i]}) is empty or outside "
            f"[0, {attribute.n_cells})"
        )


class HaarLevel(NamedTuple):
    """One level of the Haar tree for a batch of ranges: nodes of ``w`` cells; ``same`` = both
    range ends in one node; ``d`` = |cells in the left half - cells in the right half| of the
    range in that node; ``d_first`` / ``d_last`` = the same of the first / last node when the
    ends fall in different nodes."""

    w: int
    same: Any
    d: Any
    d_first: Any
    d_last: Any


def haar_levels_of(ops: Ops, m: int, starts: Any, stops: Any) -> Iterator[HaarLevel]:
    """:class:`HaarLevel` per node width ``w = P, ..., 2`` of the ranges ``[start, stop)`` of
    ``m`` cells (``ops``: :mod:`polars_dp.domains.expressions`; numpy or SQL).

    Only the (at most two) nodes holding a range end are partly covered (every other node
    adds ``d = 0``).  Within one node (``start // w = (stop - 1) // w``) ``d`` is the overlap
    difference; otherwise the range covers the first node from ``r = start mod w`` and the
    last for ``u = (stop - 1) mod w + 1`` cells, so ``d_first = min(r, w - r)`` and
    ``d_last = min(u, w - u)``.  Integer arithmetic.
    """
    s, t = starts, stops
    for w in (haar_padded_length(m) >> j for j in range(haar_levels(m))):
        r, u = s % w, (t - 1) % w + 1
        mid = s - r + w // 2
        d = ops.abs(ops.greatest(ops.least(t, mid) - s, 0) - ops.greatest(t - ops.greatest(s, mid), 0))
        yield HaarLevel(w, s // w == (t - 1) // w, d, ops.least(r, w - r), ops.least(u, w - u))


def haar_weight_terms(ops: Ops, m: int, starts: Any, stops: Any) -> list[Any]:
    """The ``1 + 2 l`` columns of :func:`haar_range_weights` (``ops``: numpy or SQL)."""
    cols = [(stops - starts) / haar_padded_length(m)]
    for lv in haar_levels_of(ops, m, starts, stops):
        cols += [ops.where(lv.same, lv.d, lv.d_first) / lv.w, ops.where(lv.same, 0, lv.d_last) / lv.w]
    return cols


def haar_axis_weights(ops: Ops, m: int, starts: Any, stops: Any, factor: Any, listed: bool) -> AxisWeights:
    """:class:`~polars_dp.kernels.tail_bounds.AxisWeights` of the ranges ``[start, stop)`` of ``m``
    Haar cells from the scalar :func:`haar_weight_terms` (``ops``: numpy or SQL): their largest
    and second largest (:func:`~polars_dp.domains.expressions.top_two`, no list), ``factor``
    (:func:`haar_range_factor`, the same squares summed level by level) and their list only
    where the terms are ``listed``."""
    terms = haar_weight_terms(ops, m, starts, stops)
    top, second = top_two(ops, terms)
    return AxisWeights(top, second, factor, ops.lst(*terms) if listed else None)


def haar_range_weights(m: int, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """``|a_c|`` of the (at most ``1 + 2 l``) unnormalised Haar coefficients with a non-zero
    weight in the range sums ``[start, stop)``, shape ``(queries, 1 + 2 l)`` (zeros pad).

    ``a_c`` is the weight of unnormalised coefficient ``c`` in the range sum after the
    inverse: ``(stop - start) / P`` for the base and ``(|R ∩ left| - |R ∩ right|) / W`` for a
    node of ``W`` leaves, per level the first and the last node holding a range end
    (:func:`haar_levels_of`; :func:`haar_weight_terms`).
    """
    s = np.asarray(starts, dtype=np.int64)
    t = np.asarray(stops, dtype=np.int64)
    return np.stack(haar_weight_terms(NUMPY, m, s, t), axis=-1)


def haar_range_factor(ops: Ops, m: int, starts: Any, stops: Any) -> Any:
    """``sum_c a_c^2`` of the ranges ``[start, stop)`` of ``m`` Haar cells (the squares of
    :func:`haar_range_weights`): ``base^2 + sum_levels (a^2 + b^2)`` over the level pairs of
    :func:`haar_weight_terms` (each an ``ops.let``: SQL computes the terms once for the variance
    and the interval's largest weights), summed left to right, so numpy and SQL agree bit for bit.
    The weights are ``d / w`` with integers ``d <= w / 2`` and ``w`` a power of two, so every
    square and every level's sum is exact: this is ``((stop - start) / P)^2 + sum_levels D / w^2``
    with the integer ``D = d^2`` within one node, else ``d_first^2 + d_last^2``
    (:func:`haar_levels_of`) to the bit."""
    terms = [ops.let(x) for x in haar_weight_terms(ops, m, starts, stops)]
    total = terms[0] * terms[0]
    for a, b in zip(terms[1::2], terms[2::2], strict=True):
        total = total + (a * a + b * b)
    return total


def haar_range_variance_factor(m: int, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """``sum_c a_c^2`` for the ranges ``[start, stop)`` of ``m`` Haar cells: the sum of
    squares of :func:`haar_range_weights` (:func:`haar_range_factor` on numpy)."""
    return haar_range_factor(NUMPY, m, np.asarray(starts, dtype=np.int64), np.asarray(stops, dtype=np.int64))


def nominal_range_variance_factor(hierarchy: Hierarchy, starts: np.ndarray, stops: np.ndarray,
                                  chunk_cells: int = 1 << 22) -> np.ndarray:
    """``sum_c a_c^2`` for leaf ranges ``[start, stop)`` under the nominal transform.

    Let ``Q_N`` be the weight of ``leafsum(N)`` in the range sum when Eq. 5 is unrolled:
    ``Q_N = sum over range leaves x under N of 1 / prod(fanouts on the path N -> x)``,
    which is a prefix-sum difference of per-leaf root products.  Mean subtraction turns
    the weight of node ``M``'s refined coefficient into ``Q_M - mean(Q over M's siblings)``;
    dividing by ``W(M)`` gives ``a_M``; the root's is ``Q_root``.  Vectorized over
    (query, node), in chunks of queries.
    """
    s = np.asarray(starts, dtype=np.int64)
    t = np.asarray(stops, dtype=np.int64)
    out = np.empty(s.shape, dtype=np.float64)
    step = max(1, chunk_cells // nominal_tree(hierarchy).n_nodes)
    for i in range(0, s.size, step):  # chunks of queries: the weights are (queries, nodes)
        weights = nominal_range_weights(hierarchy, s[i:i + step], t[i:i + step])
        out[i:i + step] = np.einsum("ij,ij->i", weights, weights)
    return out


def range_variance_factor(attribute: Attribute, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """Per-axis factor ``f`` with ``Var(range count) = 2 lambda^2 prod_axes f`` (Theorem 3).

    For a transformed axis ``f = sum_c (a_c / W(c))^2`` where ``a_c`` is the exact linear
    weight of the paper's coefficient ``c`` in the range answer after the inverse
    (including mean subtraction and the dropped padding); equivalently ``sum_c a'_c^2`` for
    the unnormalised coefficients used here.  Vectorized over queries; ``starts``/``stops``
    are cell indices, ``stop`` exclusive.
    """
    s = np.atleast_1d(np.asarray(starts, dtype=np.int64))
    t = np.atleast_1d(np.asarray(stops, dtype=np.int64))
    if s.shape != t.shape:
        raise QueryError(f"starts and stops differ in shape: {s.shape} vs {t.shape}")
    _check_ranges(attribute, s, t)
    if isinstance(attribute, Nominal):
        return nominal_range_variance_factor(attribute.hierarchy, s, t)
    return haar_range_variance_factor(attribute.n_cells, s, t)


def axis_workload_factor(attribute: Attribute, axis: AxisWorkload, transformed: bool) -> float:
    """``Σ_q weight_q f(q)`` over one axis's family of intervals (:class:`~polars_dp.domains.
    workload.AxisWorkload`), exactly, from its Gram statistics: no interval is listed on an
    ordinal axis (all ranges of 65,536 cells are 2.1e9 intervals).

    ``f(q) = Σ_c (q · v_c)²`` with ``v_c`` the inverse's column of coefficient ``c``
    (:func:`haar_range_weights`): ``1 / P`` on every cell for the base, ``± 1 / w`` on the left /
    right half of a node of ``w`` cells; so the sum is ``Σ_c v_cᵀ G v_c`` with ``G = Σ_q weight_q
    q qᵀ`` the axis's Gram matrix (zero on the padding), i.e. ``S_P / P² + Σ_nodes (S_L + S_R -
    2 X_LR) / w²`` from the block sums ``S`` and half sums ``X`` of ``G``
    (:meth:`~polars_dp.domains.workload.AxisWorkload.block_sums` with ``fold=False``,
    :meth:`~polars_dp.domains.workload.AxisWorkload.half_sums`), O(P log P).  Untransformed:
    ``Σ_q weight_q |q| = tr G``.  A nominal axis lists its intervals (hierarchy nodes) and sums
    :func:`range_variance_factor`."""
    if not transformed:
        return float(axis.block_sums(1, axis.n, fold=False).sum())
    if isinstance(attribute, Nominal):
        starts, stops, weights = axis.intervals()
        return float(range_variance_factor(attribute, starts, stops) @ weights)
    p = haar_padded_length(attribute.n_cells)
    total = float(axis.block_sums(p, p, fold=False).sum()) / (p * p)
    for w in (p >> j for j in range(haar_levels(attribute.n_cells))):
        inner = float(axis.block_sums(w // 2, p, fold=False).sum()) - 2.0 * float(axis.half_sums(w, p).sum())
        total += inner / (w * w)
    return total


# ---------------------------------------------------------------------------- weights
def nominal_range_weights(hierarchy: Hierarchy, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """``|a_c|`` of every nominal coefficient (root first, then BFS) in the leaf-range sums
    ``[start, stop)``, shape ``(queries, nodes)``; squares sum to
    :func:`nominal_range_variance_factor`."""
    tr = nominal_tree(hierarchy)
    s = np.asarray(starts, dtype=np.int64)[:, None]
    t = np.asarray(stops, dtype=np.int64)[:, None]
    node_scale = np.ones(tr.n_nodes)
    for a, b in tr.level_bounds:
        par = tr.parent[a:b]
        node_scale[a:b] = node_scale[par] / tr.fanout[par]
    leaf_scale = np.empty(tr.n_leaves)
    leaf_scale[tr.start[tr.leaf_nodes]] = node_scale[tr.leaf_nodes]
    cum = np.r_[0.0, np.cumsum(leaf_scale)]
    q = (cum[np.clip(t, tr.start, tr.stop)] - cum[np.clip(s, tr.start, tr.stop)]) / node_scale
    kids = q[:, 1:]
    mean = np.add.reduceat(kids, tr.group_start, axis=1) / tr.group_size
    a = (kids - np.repeat(mean, tr.group_size, axis=1)) / tr.weights[1:]
    return np.abs(np.concatenate([q[:, :1], a], axis=1))


def range_weights(attribute: Attribute, starts: np.ndarray, stops: np.ndarray, transformed: bool
                  ) -> tuple[np.ndarray, np.ndarray]:
    """``(weights, multiplicities)``, each ``(queries, terms)``: the distinct ``|a_c|`` of the
    noise terms along one axis of the range sums and how many coefficients carry each (an
    untransformed axis: weight 1 on each of its ``stop - start`` cells)."""
    s = np.atleast_1d(np.asarray(starts, dtype=np.int64))
    t = np.atleast_1d(np.asarray(stops, dtype=np.int64))
    _check_ranges(attribute, s, t)
    if not transformed:
        return np.ones((s.size, 1)), (t - s).astype(np.float64)[:, None]
    w = (nominal_range_weights(attribute.hierarchy, s, t) if isinstance(attribute, Nominal)
         else haar_range_weights(attribute.n_cells, s, t))
    return w, np.ones_like(w)


@dataclass(frozen=True)
class AxisRanges:
    """The half-open cell ranges ``[starts, stops)`` of a batch of queries along one axis: the
    per-axis pieces of a grid error bar on numpy (the SQL macros render the same pieces per
    query, :mod:`polars_dp.releases.sql_grid`), for a noise model to combine
    (:mod:`polars_dp.plans.noise_model`)."""

    attribute: Attribute
    starts: np.ndarray
    stops: np.ndarray

    @property
    def column(self) -> str:
        return self.attribute.column

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """``(starts, stops)``: the cell ranges themselves (a noise model of block levels reads them)."""
        return self.starts, self.stops

    def factor(self, transformed: bool) -> np.ndarray:
        """Variance factor ``f`` of each range: :func:`range_variance_factor` along a transformed
        axis, else ``stop - start`` (one unit-weight value per cell)."""
        if transformed:
            return range_variance_factor(self.attribute, self.starts, self.stops)
        return (self.stops - self.starts).astype(np.float64)

    def terms(self, transformed: bool) -> tuple[np.ndarray, np.ndarray]:
        """:func:`range_weights` of the ranges."""
        return range_weights(self.attribute, self.starts, self.stops, transformed)

    def width(self, transformed: bool) -> int:
        """Number of terms per range of :meth:`terms` (public: the same for every range)."""
        return axis_width(self.attribute, transformed)

    def weights(self, ops: Ops, factor: Any, listed: bool) -> AxisWeights:
        """The transformed axis's :class:`~polars_dp.kernels.tail_bounds.AxisWeights` (``ops``:
        numpy): largest and second largest of :meth:`terms`, ``factor`` (its :meth:`factor`)
        the sum of squares, and the list where ``listed``."""
        if isinstance(self.attribute, Nominal):
            w = nominal_range_weights(self.attribute.hierarchy, self.starts, self.stops)
            top = ops.lmax(w)
            return AxisWeights(top, ops.lsecond(w, top), factor, w if listed else None)
        return haar_axis_weights(ops, self.attribute.n_cells, self.starts, self.stops, factor, listed)

    def sliced(self, part: slice) -> AxisRanges:
        """The ranges of the queries ``part``."""
        return AxisRanges(self.attribute, self.starts[part], self.stops[part])


def axis_ranges(attributes: Sequence[Attribute], starts: Any, stops: Any) -> list[AxisRanges]:
    """:class:`AxisRanges` per axis of the cell boxes ``[starts, stops)`` (shape (queries, d));
    QueryError for any other shape."""
    s = np.atleast_2d(np.asarray(starts, dtype=np.int64))
    t = np.atleast_2d(np.asarray(stops, dtype=np.int64))
    d = len(attributes)
    if s.ndim != 2 or s.shape != t.shape or s.shape[1] != d:
        raise QueryError(f"starts and stops must both have shape (queries, {d}), one column per attribute "
                         f"({', '.join(a.column for a in attributes)}); got {s.shape} and {t.shape}")
    return [AxisRanges(a, s[:, j], t[:, j]) for j, a in enumerate(attributes)]


def axis_width(attribute: Attribute, transformed: bool) -> int:
    """Number of terms :func:`range_weights` gives per range of ``attribute``."""
    w, _ = range_weights(attribute, np.array([0]), np.array([attribute.n_cells]), transformed)
    return int(w.shape[1])


__all__ = ["AxisRanges", "HaarLevel", "axis_ranges", "axis_workload_factor", "axis_width",
           "haar_axis_weights", "haar_levels_of", "haar_range_factor",
           "haar_range_variance_factor", "haar_range_weights", "haar_weight_terms",
           "nominal_range_variance_factor", "nominal_range_weights", "range_variance_factor", "range_weights"]
