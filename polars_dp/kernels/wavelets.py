"""Privelet's wavelet transforms as numpy kernels along one axis of an n-d array.

Xiao, Wang, Gehrke, *Differential Privacy via Wavelet Transforms* (ICDE 2010), Sec. IV-V.
Every kernel works on all 1-D vectors along ``axis`` at once; the only Python loops are over
the levels of a decomposition tree.

Coefficient convention (unnormalised)
-------------------------------------
The paper adds ``Lap(lambda / W(c))`` to each coefficient ``c``.  Here every coefficient is
stored multiplied by its weight, ``u = W(c) * c``, so the mechanism adds i.i.d. ``Lap(lambda)``
to every ``u``: the same distribution, without a per-coefficient scale.  :func:`weights`
returns ``W``, so ``forward(x) / weights`` gives the paper's coefficients.  With this
convention the generalised sensitivity ``sum_c W(c) |delta c|`` is the L1 norm of the change
of ``u``.

Haar (ordinal attributes, Sec. IV-A)
    A vector of ``m`` cells is zero-padded to ``P = 2^l >= m`` (the padding depends on the
    public domain only).  ``u`` has ``P`` entries in level order: ``u[0]`` is the total
    (``W(c0) = P`` times the mean ``c0``); for level ``i = 1..l`` the ``2^(i-1)`` node
    coefficients follow, each ``sum(left half) - sum(right half)`` (``W = 2^(l-i+1)``, the
    node's leaf count, times ``c = (mean left - mean right) / 2``).  The inverse maps
    ``(s, d) -> ((s + d)/2, (s - d)/2)`` level by level and drops the padded cells.
    Generalised sensitivity ``P(A) = 1 + l`` (Lemma 2).

Nominal (Sec. IV-B)
    One coefficient per node of the (collapsed) hierarchy, in its BFS order.  Root:
    ``c0 = total`` (``W = 1``).  Other node ``N`` with parent fanout ``f``:
    ``c_N = leafsum(N) - mean of leafsum over N's siblings (N included)``, ``W = f / (2f - 2)``.
    The inverse first subtracts from every sibling group its mean (the paper's refinement,
    a no-op on exact coefficients), then rebuilds top-down
    ``leafsum(child) = c_child + leafsum(parent) / f_parent`` (Eq. 5).  Generalised sensitivity
    ``P(A) = height`` (Lemma 4; the deepest leaf's level for unbalanced hierarchies).

Multi-dimensional (HN, Sec. V): the 1-D transforms applied along every transformed axis in
turn (:func:`hn_forward`); the inverse along the axes in reverse order (:func:`hn_inverse`).
Weights multiply, so the sensitivity is ``prod P(A)`` (Theorem 2).

Exact integer forward transforms: :mod:`polars_dp.kernels.wavelet_exact`; the blocked inverse
for large cubes: :mod:`polars_dp.kernels.wavelet_blocks`; range variance factors:
:mod:`polars_dp.kernels.wavelet_variance`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import lru_cache

import numpy as np

from polars_dp.domains.attributes import Attribute, Nominal
from polars_dp.domains.hierarchy import Hierarchy
from polars_dp.errors import HierarchyError, ParameterError
from polars_dp.kernels import compiled, scratch
from polars_dp.kernels.prefix import cumsum_inplace


# ---------------------------------------------------------------------------- helpers
def as3d(x: np.ndarray, axis: int) -> tuple[np.ndarray, tuple[int, ...], int]:
    """View ``x`` as (before, n, after) around ``axis``; returns (view, shape, axis)."""
    axis = axis % x.ndim
    shape = x.shape
    pre = int(np.prod(shape[:axis], dtype=np.int64))
    post = int(np.prod(shape[axis + 1:], dtype=np.int64))
    x = np.ascontiguousarray(x)
    return x.reshape(pre, shape[axis], post), shape, axis


def with_axis(shape: tuple[int, ...], axis: int, n: int) -> tuple[int, ...]:
    return (*shape[:axis], n, *shape[axis + 1:])


def haar_levels(m: int) -> int:
    """``l = ceil(log2 m)``: levels of the Haar tree over ``m`` cells padded to ``2^l``."""
    if m < 1:
        raise ParameterError(f"a Haar transform needs at least one cell, got {m}")
    return int(m - 1).bit_length()


def haar_padded_length(m: int) -> int:
    """``P = 2^ceil(log2 m)``, the padded length (and coefficient count) of ``m`` cells."""
    return 1 << haar_levels(m)


# ---------------------------------------------------------------------------- Haar
def haar_weights(m: int) -> np.ndarray:
    """``W_Haar`` in coefficient order: ``P`` for the base, ``2^(l-i+1)`` at level ``i``."""
    p = haar_padded_length(m)
    w = np.empty(p, dtype=np.float64)
    w[0] = p
    for k in range(haar_levels(m)):  # level i = k + 1 has 2^k nodes of 2^(l-k) leaves
        w[1 << k: 2 << k] = p >> k
    return w


def haar_forward(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Unnormalised Haar coefficients ``W * c`` along ``axis`` (length ``P``)."""
    return haar_sums_and_differences(np.asarray(x, dtype=np.float64), axis)


def haar_sums_and_differences(x: np.ndarray, axis: int) -> np.ndarray:
    """Unnormalised Haar coefficients of ``x`` along ``axis`` in ``x``'s dtype (float64 or int64):
    level by level, the details ``even - odd`` and the sums ``even + odd`` passed up.

    The zero padding is never materialised: at a level with ``n`` non-zero sums the
    ``n // 2`` full pairs are combined, an odd last sum passes up alone (``x - 0``, ``x + 0``,
    the same values as with the padding) and the details of the all-padding nodes are zero.
    The sums live in one scratch buffer of half the padded length (two halves, ping-pong)."""
    v, shape, axis = as3d(x, axis)
    pre, m, post = v.shape
    p = haar_padded_length(m)
    out = scratch.empty((pre, p, post), x.dtype)
    if p == 1:
        out[...] = v
        return out.reshape(with_axis(shape, axis, p))
    h = pre * (p // 2) * post
    work = scratch.empty(h + h // 2 + pre * post, x.dtype)
    bufs = (work[:h], work[h:])  # compact (pre, half, post) arrays, one level each
    cur, n, half, which = v, m, p, 0
    while half > 1:  # finest level first: its details go to [half/2, half)
        half //= 2
        full = n // 2
        nxt = out[:, 0:1] if half == 1 else bufs[which][:pre * half * post].reshape(pre, half, post)
        even, odd = cur[:, 0:2 * full:2], cur[:, 1:2 * full:2]
        np.subtract(even, odd, out=out[:, half:half + full])
        np.add(even, odd, out=nxt[:, :full])
        if n % 2:  # a last sum without a partner: its pair is padding
            np.subtract(cur[:, n - 1], 0, out=out[:, half + full])
            np.add(cur[:, n - 1], 0, out=nxt[:, full])
        n = (n + 1) // 2
        out[:, half + n:2 * half] = 0  # nodes over padding only
        cur, which = nxt, 1 - which
    return out.reshape(with_axis(shape, axis, p))


def haar_inverse_levels(m: int) -> Iterator[tuple[int, int, int]]:
    """The levels of Eq. 3's inverse over ``m`` cells, top down: ``(k, n_even, n_odd)`` for the
    level of ``k = 1, 2, ..., P/2`` nodes, whose children ``2i`` (``i < n_even``) and ``2i + 1``
    (``i < n_odd``) are the ones that cover cells ``< m`` (no padded output is rebuilt)."""
    p = haar_padded_length(m)
    k = 1
    while k < p:
        need = -(-m * 2 * k // p)
        yield k, (need + 1) // 2, need // 2
        k *= 2


def haar_unused(m: int) -> list[tuple[int, int]]:
    """The coefficients ``[a, b)`` (unnormalised layout: base, then the ``k`` details of each
    level of ``k`` nodes) whose nodes cover padding cells ``>= m`` only.  The inverse never
    reads them (:func:`haar_inverse_levels` rebuilds no padded output), so their values, and
    any noise on them, reach no cell.  A function of ``m`` alone."""
    return [(k + n_even, 2 * k) for k, n_even, _ in haar_inverse_levels(m) if n_even < k]


def haar_inverse(u: np.ndarray, m: int, axis: int = -1, divisor: np.ndarray | None = None) -> np.ndarray:
    """Cells ``[0, m)`` rebuilt from unnormalised Haar coefficients along ``axis`` (Eq. 3).

    With ``s`` a node's sum and ``d`` its detail, the children's sums are ``(s + d)/2`` and
    ``(s - d)/2``.  The halvings are folded into the coefficients (level-``k`` details by
    ``2^k / P``, the base by ``1 / P``, exact powers of two), so each level is one scaling,
    one add and one subtract; only the nodes that cover cells ``< m`` are rebuilt (no padded
    output).  The intermediate sums live in one scratch buffer (two halves, ping-pong) and the
    last level writes the result.

    ``divisor`` (broadcastable to ``u`` with length 1 along ``axis``; integers or float64, exact
    in float64) makes the coefficients ``u / divisor``: the scaling becomes one division by
    ``divisor x P / 2^k``, which rounds as ``u / divisor`` then times ``2^k / P`` does (a power
    of two scales a rounded quotient exactly, barring under- and overflow), so the result is
    bit for bit ``haar_inverse(u / divisor)``; ``u`` may then be int64 (converted as ``/`` does).
    """
    if divisor is None:
        c, shape, axis = as3d(np.asarray(u, dtype=np.float64), axis)
        dv = None
    else:
        c, shape, axis = as3d(np.asarray(u), axis)
        dv = as3d(np.broadcast_to(np.asarray(divisor, dtype=np.float64), with_axis(shape, axis, 1)), axis)[0]
    p = haar_padded_length(m)
    if c.shape[1] != p:
        raise ParameterError(f"{m} cells need {p} Haar coefficients along axis {axis}, got {c.shape[1]}")
    pre, post = c.shape[0], c.shape[2]
    out = scratch.empty((pre, m, post))
    if p == 1:
        if dv is None:
            np.multiply(c, 1.0, out=out)
        else:
            np.divide(c, dv, out=out)
        return out.reshape(with_axis(shape, axis, m))
    h = pre * (p // 2) * post
    work = scratch.empty(3 * h)
    bufs = (work[:h], work[h:2 * h])  # compact (pre, need, post) arrays, one level each
    s = bufs[1][:pre * post].reshape(pre, 1, post)  # k = 1 writes bufs[0]
    if dv is None:
        np.multiply(c[:, 0:1], 1.0 / p, out=s)  # base: W = P
    else:
        np.divide(c[:, 0:1], dv * p, out=s)
    which = 0
    for k, n_even, n_odd in haar_inverse_levels(m):  # k nodes (sums s, details d) -> children
        need = n_even + n_odd
        nxt = out if 2 * k == p else bufs[which][:pre * need * post].reshape(pre, need, post)
        dk = work[2 * h:2 * h + pre * n_even * post].reshape(pre, n_even, post)
        if dv is None:
            np.multiply(c[:, k:k + n_even], k / p, out=dk)  # level of k nodes: W = P / k
        else:
            np.divide(c[:, k:k + n_even], dv * (p // k), out=dk)
        np.add(s[:, :n_even], dk, out=nxt[:, 0::2])
        np.subtract(s[:, :n_odd], dk[:, :n_odd], out=nxt[:, 1::2])
        s, which = nxt, 1 - which
    return out.reshape(with_axis(shape, axis, m))


# ---------------------------------------------------------------------------- nominal
class NominalTree:
    """Index arrays of a collapsed hierarchy used by the nominal kernels (cached)."""

    def __init__(self, h: Hierarchy):
        if h.n_leaves < 2:
            raise HierarchyError(
                f"a hierarchy with a single leaf ({h.leaves[0]!r}) has nothing to transform; "
                "leave the attribute untransformed or add categories"
            )
        self.n_nodes = h.n_nodes
        self.n_leaves = h.n_leaves
        self.start, self.stop = h.node_start, h.node_stop
        self.parent = h.node_parent
        self.fanout = fan = h.fanouts
        # sibling groups: BFS lists the children of a node consecutively, in parent order
        child_parent = self.parent[1:]
        self.group_start = np.flatnonzero(np.r_[True, child_parent[1:] != child_parent[:-1]])
        self.group_size = np.diff(np.r_[self.group_start, child_parent.size])
        self.parent_fanout = f = fan[child_parent].astype(np.float64)  # of every non-root node
        self.weights = np.r_[1.0, f / (2.0 * f - 2.0)]
        depth = h.node_depth
        self.level_bounds = [(int(np.searchsorted(depth, d)), int(np.searchsorted(depth, d, "right")))
                             for d in range(1, int(depth.max()) + 1)]
        leaves = np.flatnonzero(fan == 0)
        self.leaf_nodes = leaves[np.argsort(self.start[leaves])]  # BFS node of DFS leaf j
        self.leaves_contiguous = bool(np.all(np.diff(self.leaf_nodes) == 1))
        # every leaf at the greatest depth, so BFS lists the leaves last and in leaf order
        self.balanced = bool(np.all(depth[leaves] == depth.max())) and self.leaves_contiguous \
            and int(self.leaf_nodes[0]) == self.n_nodes - self.n_leaves
        group_of_node = np.repeat(np.arange(self.group_start.size), self.group_size)  # node - 1
        self.group_parent = child_parent[self.group_start]
        self.group_k = (2.0 * fan[self.group_parent] - 2.0) / fan[self.group_parent]  # 1 / W
        self.leaf_group = group_of_node[self.leaf_nodes - 1]
        self.leaf_k = self.group_k[self.leaf_group]
        # per depth of the parents: their groups [ga, gb) and the internal children of those groups
        internal = np.flatnonzero(fan > 0)
        self.n_internal = internal.size
        pos = np.full(self.n_nodes, -1)
        pos[internal] = np.arange(internal.size)
        group_depth = depth[self.group_parent]
        self.internal_levels = []
        for d in range(int(depth.max())):
            ga, gb = (int(x) for x in np.searchsorted(group_depth, [d, d + 1]))
            kids = internal[(depth[internal] == d + 1)]
            self.internal_levels.append((ga, gb, pos[self.group_parent[ga:gb]],
                                         fan[self.group_parent[ga:gb]].astype(np.float64), kids,
                                         group_of_node[kids - 1], pos[kids]))
        self.height = h.height
        # the leaves (contiguous) as consecutive groups of one size f: (first group, groups, f)
        self.leaf_run: tuple[int, int, int] | None = None
        if self.leaves_contiguous:
            g0, n_groups = int(self.leaf_group[0]), int(self.leaf_group[-1] - self.leaf_group[0]) + 1
            size = int(self.n_leaves) // n_groups
            if size * n_groups == self.n_leaves and np.array_equal(
                    self.leaf_group, np.repeat(np.arange(g0, g0 + n_groups), size)):
                self.leaf_run = (g0, n_groups, size)


def segment_sums(x: np.ndarray, fanouts: np.ndarray) -> np.ndarray:
    """Sums of consecutive segments of ``fanouts[i]`` entries along axis 1 of an integer ``x``
    (pre, sum(fanouts), post): ``np.add.reduceat`` at the segment starts.

    With one fanout ``f`` and a last axis long enough to vectorise, the segments are summed
    as a ``(segments, f)`` block along its axis 2 (integer sums: exact in any order, and
    modulo ``2^64`` when they wrap, like ``reduceat``); otherwise ``reduceat``.  Integers only:
    in float64 the two orders of summation round differently."""
    if not np.issubdtype(x.dtype, np.integer):
        raise ParameterError(f"segment_sums adds integers only, got dtype {x.dtype}")
    f = int(fanouts[0])
    if x.shape[2] < 8 or np.any(fanouts != f):
        return np.add.reduceat(x, np.r_[0, np.cumsum(fanouts)[:-1]], axis=1)
    out = scratch.empty((x.shape[0], fanouts.size, x.shape[2]), x.dtype)
    np.add.reduce(x.reshape(x.shape[0], fanouts.size, f, x.shape[2]), axis=2, out=out)
    return out


@lru_cache(maxsize=64)
def nominal_tree(h: Hierarchy) -> NominalTree:
    return NominalTree(h)


def nominal_weights(hierarchy: Hierarchy) -> np.ndarray:
    """``W_Nom`` per node in BFS order: 1 for the root, ``f/(2f-2)`` below a parent of fanout f."""
    return nominal_tree(hierarchy).weights.copy()


def nominal_forward(x: np.ndarray, hierarchy: Hierarchy, axis: int = -1) -> np.ndarray:
    """Unnormalised nominal coefficients ``W * c`` along ``axis`` (one per node, BFS order)."""
    t = nominal_tree(hierarchy)
    v, shape, axis = as3d(np.asarray(x, dtype=np.float64), axis)
    if v.shape[1] != t.n_leaves:
        raise ParameterError(f"the hierarchy has {t.n_leaves} leaves but axis {axis} has {v.shape[1]}")
    cum = np.zeros((v.shape[0], t.n_leaves + 1, v.shape[2]))
    cum[:, 1:] = v
    cumsum_inplace(cum[:, 1:], 1)  # the same sums as np.cumsum, one vector add per leaf
    leafsum = cum[:, t.stop] - cum[:, t.start]  # segment sums of every node
    out = np.empty_like(leafsum)
    out[:, 0] = leafsum[:, 0]
    kids = leafsum[:, 1:]
    mean = np.add.reduceat(kids, t.group_start, axis=1) / t.group_size[:, None]
    np.subtract(kids, np.repeat(mean, t.group_size, axis=1), out=out[:, 1:])
    out[:, 1:] *= t.weights[1:, None]
    return out.reshape(with_axis(shape, axis, t.n_nodes))


def sibling_sums(kids: np.ndarray, t: NominalTree) -> np.ndarray:
    """Each sibling group's sum of ``kids`` (pre, nodes below the root, post), float64, taken
    left to right: ``((k_0 + k_1) + k_2) + ...``, one fixed order whatever the layout (so a
    compiled twin can repeat it).  One vector add per position within the groups."""
    out = np.empty((kids.shape[0], t.group_start.size, kids.shape[2]))
    out[...] = kids[:, t.group_start]
    sizes = t.group_size
    if np.all(sizes == sizes[0]) and t.group_start.size * int(sizes[0]) == kids.shape[1]:
        blocks = kids.reshape(kids.shape[0], t.group_start.size, int(sizes[0]), kids.shape[2])
        for j in range(1, int(sizes[0])):
            out += blocks[:, :, j]
        return out
    for j in range(1, int(sizes.max())):
        has = np.flatnonzero(sizes > j)
        out[:, has] += kids[:, t.group_start[has] + j]
    return out


def nominal_inverse(u: np.ndarray, hierarchy: Hierarchy, axis: int = -1) -> np.ndarray:
    """Leaves rebuilt from unnormalised nominal coefficients along ``axis``.

    Subtracts each sibling group's mean (the paper's refinement; sums left to right,
    :func:`sibling_sums`), then applies Eq. 5
    top-down: ``leafsum(child) = c_child + leafsum(parent) / f_parent``.  Written per node
    ``N`` with parent ``p``: ``leafsum(N) = k_p u_N + offset_p`` with ``k_p = 1 / W`` and
    ``offset_p = leafsum(p) / f_p - k_p * mean(u over p's children)``; the offsets are
    computed for the internal nodes only (level by level), then every leaf takes one
    multiply-add.
    """
    t = nominal_tree(hierarchy)
    c, shape, axis = as3d(np.asarray(u, dtype=np.float64), axis)
    if c.shape[1] != t.n_nodes:
        raise ParameterError(f"the hierarchy has {t.n_nodes} nodes but axis {axis} has {c.shape[1]}")
    if compiled.enabled():  # the same operations in the same order, one pass per row
        done = scratch.empty((c.shape[0], t.n_leaves, c.shape[2]))
        if compiled.nominal_inverse(np.ascontiguousarray(c), t, done):
            return done.reshape(with_axis(shape, axis, t.n_leaves))
    kids = c[:, 1:]
    group_mean = sibling_sums(kids, t)
    group_mean /= t.group_size[:, None]
    # offset of each group, built top-down (groups are listed in BFS order of their parents)
    offset = np.empty_like(group_mean)
    internal_ls = np.empty((c.shape[0], t.n_internal, c.shape[2]))  # leaf sums of internal nodes
    internal_ls[:, 0] = c[:, 0]
    for ga, gb, parent_pos, parent_fan, child_nodes, child_groups, child_pos in t.internal_levels:
        offset[:, ga:gb] = (internal_ls[:, parent_pos] / parent_fan[:, None]
                            - t.group_k[ga:gb, None] * group_mean[:, ga:gb])
        if child_nodes.size:
            internal_ls[:, child_pos] = (t.group_k[child_groups, None] * c[:, child_nodes]
                                         + offset[:, child_groups])
    leaves = t.leaf_nodes
    if t.leaf_run is not None:  # consecutive groups of f leaves: one factor per group, broadcast offsets
        g0, n_groups, f = t.leaf_run
        out = scratch.empty((c.shape[0], t.n_leaves, c.shape[2]))
        src = c[:, leaves[0]:leaves[0] + t.n_leaves].reshape(c.shape[0], n_groups, f, c.shape[2])
        view = out.reshape(c.shape[0], n_groups, f, c.shape[2])
        np.multiply(src, t.group_k[g0:g0 + n_groups, None, None], out=view)
        view += offset[:, g0:g0 + n_groups, None, :]
        return out.reshape(with_axis(shape, axis, t.n_leaves))
    if t.leaves_contiguous:
        out = c[:, leaves[0]:leaves[-1] + 1] * t.leaf_k[:, None]
    else:
        out = c[:, leaves] * t.leaf_k[:, None]
    out += np.take(offset, t.leaf_group, axis=1)
    return out.reshape(with_axis(shape, axis, t.n_leaves))


# ---------------------------------------------------------------------------- by attribute
def generalized_sensitivity(attribute: Attribute) -> int:
    """``P(A)``: ``1 + ceil(log2 |A|)`` (ordinal, Lemma 2) or the hierarchy height (Lemma 4)."""
    if isinstance(attribute, Nominal):
        return nominal_tree(attribute.hierarchy).height
    return 1 + haar_levels(attribute.n_cells)


def variance_factor_bound(attribute: Attribute) -> float:
    """``H(A)``: ``(2 + log2 P)/2`` (ordinal, Eq. 4) or 4 (nominal, Eq. 6); Theorem 3."""
    if isinstance(attribute, Nominal):
        return 4.0
    return (2 + haar_levels(attribute.n_cells)) / 2


def coefficient_count(attribute: Attribute) -> int:
    """Coefficients along the axis: the padded length (Haar) or the node count (nominal)."""
    if isinstance(attribute, Nominal):
        return nominal_tree(attribute.hierarchy).n_nodes
    return haar_padded_length(attribute.n_cells)


def weights(attribute: Attribute) -> np.ndarray:
    """The paper's 1-D weights ``W`` of the attribute's coefficients."""
    if isinstance(attribute, Nominal):
        return nominal_weights(attribute.hierarchy)
    return haar_weights(attribute.n_cells)


def forward(x: np.ndarray, attribute: Attribute, axis: int = -1) -> np.ndarray:
    """Unnormalised 1-D transform of ``attribute`` along ``axis``."""
    if isinstance(attribute, Nominal):
        return nominal_forward(x, attribute.hierarchy, axis)
    return haar_forward(x, axis)


def inverse(u: np.ndarray, attribute: Attribute, axis: int = -1) -> np.ndarray:
    """Inverse of :func:`forward` (with the nominal mean subtraction)."""
    if isinstance(attribute, Nominal):
        return nominal_inverse(u, attribute.hierarchy, axis)
    return haar_inverse(u, attribute.n_cells, axis)


def hn_forward(x: np.ndarray, attributes: Sequence[Attribute], transformed: Sequence[bool]) -> np.ndarray:
    """HN transform (Sec. V): the 1-D transform along each transformed axis, first to last."""
    for axis, (a, t) in enumerate(zip(attributes, transformed, strict=True)):
        if t:
            x = forward(x, a, axis)
    return x


__all__ = ["NominalTree", "as3d", "coefficient_count", "forward", "generalized_sensitivity", "sibling_sums",
           "haar_forward", "haar_inverse", "haar_inverse_levels", "haar_levels", "haar_padded_length",
           "haar_unused", "haar_sums_and_differences", "haar_weights", "hn_forward", "inverse",
           "nominal_forward", "nominal_inverse", "nominal_tree", "nominal_weights", "segment_sums",
           "variance_factor_bound", "weights", "with_axis"]
