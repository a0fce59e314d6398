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

Kernels for large cubes
    * :func:`hn_inverse_blocked`: the HN inverse of coefficients pulled block by block from a
      source (e.g. a noise sampler), fused over all axes: inner axes per cache-sized block,
      outer transformed axes in column blocks of one buffer; small axes by their dense
      inverse matrix (:func:`inverse_axis`).
    * :func:`hn_forward_int` / :func:`forward_int`: the exact forward transform of integer
      counts as int64 numerators ``D * u``; Haar coefficients are integers (``D = 1``), nominal
      ones have ``D = 2 (f_parent - 1)`` (:func:`nominal_denominators`); across axes the
      denominators multiply (:func:`hn_denominators`).
    * :func:`hn_lattice_inverse`: counts -> exact int64 forward -> ``perturb`` (the caller's
      noise on the numerators) -> float64 inverse, blocked, in the C order of the coefficients.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from threadpoolctl import ThreadpoolController

from polars_dp.domains.attributes import Attribute, Nominal
from polars_dp.domains.hierarchy import Hierarchy
from polars_dp.errors import HierarchyError, ParameterError, QueryError
from polars_dp.kernels.prefix import cumsum_inplace


# ---------------------------------------------------------------------------- helpers
def _as3d(x: np.ndarray, axis: int) -> tuple[np.ndarray, tuple[int, ...], int]:
    """View ``x`` as (before, n, after) around ``axis``; returns (view, shape, axis)."""
    axis = axis % x.ndim
    shape = x.shape
    pre = int(np.prod(shape[:axis], dtype=np.int64))
    post = int(np.prod(shape[axis + 1:], dtype=np.int64))
    x = np.ascontiguousarray(x)
    return x.reshape(pre, shape[axis], post), shape, axis


def _with_axis(shape: tuple[int, ...], axis: int, n: int) -> tuple[int, ...]:
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
    return _haar_sums_and_differences(np.asarray(x, dtype=np.float64), axis)


def _haar_sums_and_differences(x: np.ndarray, axis: int) -> np.ndarray:
    """Unnormalised Haar coefficients of ``x`` along ``axis`` in ``x``'s dtype (float64 or int64):
    level by level, the details ``even - odd`` and the sums ``even + odd`` passed up."""
    v, shape, axis = _as3d(x, axis)
    m = v.shape[1]
    p = haar_padded_length(m)
    s = np.zeros((v.shape[0], p, v.shape[2]), dtype=x.dtype)
    s[:, :m] = v
    out = np.empty_like(s)
    half = p
    while half > 1:  # finest level first: its details go to [half/2, half)
        half //= 2
        even, odd = s[:, 0:2 * half:2], s[:, 1:2 * half:2]
        np.subtract(even, odd, out=out[:, half:2 * half])
        s = even + odd
    out[:, 0] = s[:, 0]
    return out.reshape(_with_axis(shape, axis, p))


def haar_inverse(u: np.ndarray, m: int, axis: int = -1) -> np.ndarray:
    """Cells ``[0, m)`` rebuilt from unnormalised Haar coefficients along ``axis`` (Eq. 3).

    With ``s`` a node's sum and ``d`` its detail, the children's sums are ``(s + d)/2`` and
    ``(s - d)/2``.  The halvings are folded into one up-front scaling of the coefficients
    (level-``k`` details by ``2^k / P``, the base by ``1 / P``), so each level is one add and
    one subtract; only the nodes that cover cells ``< m`` are rebuilt (no padded output).
    """
    c, shape, axis = _as3d(np.asarray(u, dtype=np.float64), axis)
    p = haar_padded_length(m)
    if c.shape[1] != p:
        raise ParameterError(f"{m} cells need {p} Haar coefficients along axis {axis}, got {c.shape[1]}")
    scaled = c * (1.0 / haar_weights(m))[:, None]  # level k: W = P / 2^k, so 1/W = 2^k / P
    s = scaled[:, 0:1]
    k = 1
    while k < p:  # k nodes (sums s, details d) -> 2k children, of which `need` cover cells < m
        need = -(-m * 2 * k // p)
        n_even, n_odd = (need + 1) // 2, need // 2
        d = scaled[:, k:2 * k]
        nxt = np.empty((c.shape[0], need, c.shape[2]))
        np.add(s[:, :n_even], d[:, :n_even], out=nxt[:, 0::2])
        np.subtract(s[:, :n_odd], d[:, :n_odd], out=nxt[:, 1::2])
        s = nxt
        k *= 2
    return s.reshape(_with_axis(shape, axis, m))


# ---------------------------------------------------------------------------- nominal
class _Tree:
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
        fan = h.fanouts
        self.fanout = fan
        # sibling groups: BFS lists the children of a node consecutively, in parent order
        child_parent = self.parent[1:]
        self.group_start = np.flatnonzero(np.r_[True, child_parent[1:] != child_parent[:-1]])
        self.group_size = np.diff(np.r_[self.group_start, child_parent.size])
        f = fan[child_parent].astype(np.float64)  # parent fanout of every non-root node
        self.parent_fanout = f
        self.weights = np.r_[1.0, f / (2.0 * f - 2.0)]
        depth = h.node_depth
        self.level_bounds = [(int(np.searchsorted(depth, d)), int(np.searchsorted(depth, d, "right")))
                             for d in range(1, int(depth.max()) + 1)]
        leaves = np.flatnonzero(fan == 0)
        self.leaf_nodes = leaves[np.argsort(self.start[leaves])]  # BFS node of DFS leaf j
        self.leaves_contiguous = bool(np.all(np.diff(self.leaf_nodes) == 1))
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


@lru_cache(maxsize=64)
def _tree(h: Hierarchy) -> _Tree:
    return _Tree(h)


def nominal_weights(hierarchy: Hierarchy) -> np.ndarray:
    """``W_Nom`` per node in BFS order: 1 for the root, ``f/(2f-2)`` below a parent of fanout f."""
    return _tree(hierarchy).weights.copy()


def nominal_forward(x: np.ndarray, hierarchy: Hierarchy, axis: int = -1) -> np.ndarray:
    """Unnormalised nominal coefficients ``W * c`` along ``axis`` (one per node, BFS order)."""
    t = _tree(hierarchy)
    v, shape, axis = _as3d(np.asarray(x, dtype=np.float64), axis)
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
    return out.reshape(_with_axis(shape, axis, t.n_nodes))


def nominal_inverse(u: np.ndarray, hierarchy: Hierarchy, axis: int = -1) -> np.ndarray:
    """Leaves rebuilt from unnormalised nominal coefficients along ``axis``.

    Subtracts each sibling group's mean (the paper's refinement), then applies Eq. 5
    top-down: ``leafsum(child) = c_child + leafsum(parent) / f_parent``.  Written per node
    ``N`` with parent ``p``: ``leafsum(N) = k_p u_N + offset_p`` with ``k_p = 1 / W`` and
    ``offset_p = leafsum(p) / f_p - k_p * mean(u over p's children)``; the offsets are
    computed for the internal nodes only (level by level), then every leaf takes one
    multiply-add.
    """
    t = _tree(hierarchy)
    c, shape, axis = _as3d(np.asarray(u, dtype=np.float64), axis)
    if c.shape[1] != t.n_nodes:
        raise ParameterError(f"the hierarchy has {t.n_nodes} nodes but axis {axis} has {c.shape[1]}")
    kids = c[:, 1:]
    group_mean = np.add.reduceat(kids, t.group_start, axis=1) / t.group_size[:, None]
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
    if t.leaves_contiguous:
        out = c[:, leaves[0]:leaves[-1] + 1] * t.leaf_k[:, None]
    else:
        out = c[:, leaves] * t.leaf_k[:, None]
    out += np.take(offset, t.leaf_group, axis=1)
    return out.reshape(_with_axis(shape, axis, t.n_leaves))


# ---------------------------------------------------------------------------- by attribute
def generalized_sensitivity(attribute: Attribute) -> int:
    """``P(A)``: ``1 + ceil(log2 |A|)`` (ordinal, Lemma 2) or the hierarchy height (Lemma 4)."""
    if isinstance(attribute, Nominal):
        return _tree(attribute.hierarchy).height
    return 1 + haar_levels(attribute.n_cells)


def variance_factor_bound(attribute: Attribute) -> float:
    """``H(A)``: ``(2 + log2 P)/2`` (ordinal, Eq. 4) or 4 (nominal, Eq. 6); Theorem 3."""
    if isinstance(attribute, Nominal):
        return 4.0
    return (2 + haar_levels(attribute.n_cells)) / 2


def coefficient_count(attribute: Attribute) -> int:
    """Coefficients along the axis: the padded length (Haar) or the node count (nominal)."""
    if isinstance(attribute, Nominal):
        return _tree(attribute.hierarchy).n_nodes
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


# ---------------------------------------------------------------------------- exact integer forward
def _check_integer(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    if not (np.issubdtype(x.dtype, np.integer) or x.dtype == np.bool_):
        raise ParameterError(f"the exact forward transform needs integer counts, got dtype {x.dtype}")
    return x.astype(np.int64, copy=False)


def haar_forward_int(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """:func:`haar_forward` of integer cells, exactly, in int64.

    Every unnormalised Haar coefficient is a sum of cells with signs in {-1, 0, 1} (the total,
    or ``sum(left half) - sum(right half)``), so it is an integer; its denominator is 1.
    """
    return _haar_sums_and_differences(_check_integer(x), axis)


def nominal_denominators(hierarchy: Hierarchy) -> np.ndarray:
    """Per node (BFS order) the int64 ``D`` with ``D * u`` an integer for integer leaves:
    1 for the root, ``2 (f_parent - 1)`` for a node below a parent of fanout ``f_parent``."""
    t = _tree(hierarchy)
    return np.r_[1, 2 * (t.parent_fanout.astype(np.int64) - 1)].astype(np.int64)


def nominal_forward_int(x: np.ndarray, hierarchy: Hierarchy, axis: int = -1) -> np.ndarray:
    """Integer numerators ``D * u`` of the nominal coefficients of integer leaves (int64).

    ``u_root = leafsum(root)``; below a parent ``p`` of fanout ``f``:
    ``u_N = f/(2f-2) (leafsum(N) - leafsum(p)/f) = (f leafsum(N) - leafsum(p)) / (2 (f - 1))``,
    so the numerator is ``f leafsum(N) - leafsum(p)`` and the denominator
    :func:`nominal_denominators`.  ``nominal_forward = numerators / denominators``.
    """
    t = _tree(hierarchy)
    v, shape, axis = _as3d(_check_integer(x), axis)
    if v.shape[1] != t.n_leaves:
        raise ParameterError(f"the hierarchy has {t.n_leaves} leaves but axis {axis} has {v.shape[1]}")
    cum = np.zeros((v.shape[0], t.n_leaves + 1, v.shape[2]), dtype=np.int64)
    cum[:, 1:] = v
    cumsum_inplace(cum[:, 1:], 1)  # the same sums as np.cumsum, one vector add per leaf
    leafsum = cum[:, t.stop] - cum[:, t.start]
    out = np.empty_like(leafsum)
    out[:, 0] = leafsum[:, 0]
    f = t.parent_fanout.astype(np.int64)[:, None]
    np.subtract(leafsum[:, 1:] * f, leafsum[:, t.parent[1:]], out=out[:, 1:])
    return out.reshape(_with_axis(shape, axis, t.n_nodes))


def denominators(attribute: Attribute) -> np.ndarray:
    """Per coefficient the int64 denominator of :func:`forward_int` (all 1 for Haar)."""
    if isinstance(attribute, Nominal):
        return nominal_denominators(attribute.hierarchy)
    return np.ones(haar_padded_length(attribute.n_cells), dtype=np.int64)


def forward_int(x: np.ndarray, attribute: Attribute, axis: int = -1) -> np.ndarray:
    """Exact int64 numerators of the 1-D transform: ``forward = forward_int / denominators``."""
    if isinstance(attribute, Nominal):
        return nominal_forward_int(x, attribute.hierarchy, axis)
    return haar_forward_int(x, axis)


def hn_forward_int(x: np.ndarray, attributes: Sequence[Attribute], transformed: Sequence[bool]) -> np.ndarray:
    """Exact int64 numerators of the HN transform of integer counts (whole array).

    ``hn_forward(x) = hn_forward_int(x) / prod_axes denominators`` (the per-axis
    denominators of :func:`hn_denominators` multiply, as the 1-D maps are applied along
    every transformed axis in turn).
    """
    x = _check_integer(x)
    for axis, (a, t) in enumerate(zip(attributes, transformed, strict=True)):
        if t:
            x = forward_int(x, a, axis)
    return x


def hn_denominators(attributes: Sequence[Attribute], transformed: Sequence[bool]) -> list[np.ndarray]:
    """Per axis the int64 denominators of :func:`hn_forward_int` (ones on untransformed axes);
    a coefficient's denominator is the product over axes (an outer product)."""
    return [denominators(a) if t else np.ones(a.n_cells, dtype=np.int64)
            for a, t in zip(attributes, transformed, strict=True)]


# ---------------------------------------------------------------------------- fast 1-D inverse
#: Axes whose inverse as a dense (cells x coefficients) matrix has at most this many entries
#: are inverted with one matrix product instead of the level-by-level kernels.
DENSE_INVERSE_ENTRIES = 16384


@lru_cache(maxsize=128)
def _haar_matrix(m: int) -> np.ndarray:
    p = haar_padded_length(m)
    return np.ascontiguousarray(haar_inverse(np.eye(p), m, axis=1).T)


@lru_cache(maxsize=128)
def _nominal_matrix(h: Hierarchy) -> np.ndarray:
    n = _tree(h).n_nodes
    return np.ascontiguousarray(nominal_inverse(np.eye(n), h, axis=1).T)


def inverse_matrix(attribute: Attribute) -> np.ndarray:
    """The 1-D inverse as a dense ``(cells, coefficients)`` matrix ``L``: ``inverse(u) = L u``."""
    if isinstance(attribute, Nominal):
        return _nominal_matrix(attribute.hierarchy)
    return _haar_matrix(attribute.n_cells)


@lru_cache(maxsize=1)
def _threadpools() -> ThreadpoolController:
    return ThreadpoolController()


def blas_single_thread() -> Any:
    """Context limiting BLAS to one thread: the small-axis products are many small matrix
    products, for which BLAS threads cost more than they give (badly so on a busy machine)."""
    return _threadpools().limit(limits=1, user_api="blas")


def inverse_axis(u: np.ndarray, attribute: Attribute, axis: int = -1) -> np.ndarray:
    """:func:`inverse` along ``axis``, by a matrix product on small axes (at most
    :data:`DENSE_INVERSE_ENTRIES` matrix entries), else by the level-by-level kernels."""
    m, c = attribute.n_cells, coefficient_count(attribute)
    if m * c > DENSE_INVERSE_ENTRIES:
        return inverse(u, attribute, axis)
    v, shape, axis = _as3d(np.asarray(u, dtype=np.float64), axis)
    if v.shape[1] != c:
        raise ParameterError(f"{attribute.column}: {c} coefficients expected along axis {axis}, "
                             f"got {v.shape[1]}")
    mat = inverse_matrix(attribute)
    if v.shape[2] == 1:
        out = v[:, :, 0] @ mat.T
    elif v.shape[0] == 1:
        out = mat @ v[0]
    else:
        out = np.matmul(mat, v)
    return out.reshape(_with_axis(shape, axis, m))


def _inverse_axes(block: np.ndarray, attributes: Sequence[Attribute], transformed: Sequence[bool],
                  first_axis: int) -> np.ndarray:
    """Inverse along the transformed axes of ``block`` (axis ``first_axis + k`` is attribute k)."""
    for k in reversed(range(len(attributes))):
        if transformed[k]:
            block = inverse_axis(block, attributes[k], first_axis + k)
    return block


# ---------------------------------------------------------------------------- blocked HN inverse
#: Target size (coefficients) of one block of the blocked kernels.
SLAB_CELLS = 1 << 21

#: ``source(start, stop)``: the coefficients ``[start, stop)`` of the flat (C order) coefficient
#: array, as an array of that many float64 values (any shape).
Source = Callable[[int, int], np.ndarray]

#: ``perturb(numerators, denominators, start)``: the float64 coefficients (same shape as the
#: int64 ``numerators``) of a block that starts at flat coefficient ``start``; ``denominators``
#: (int64) broadcasts to the block.  ``numerators / denominators`` are the exact coefficients.
Perturb = Callable[[np.ndarray, np.ndarray, int], np.ndarray]


@dataclass(frozen=True)
class _Plan:
    """How a cube is cut into blocks: ``lead`` leading untransformed axes (batch items), then
    outer transformed axes ``[lead, split)`` (a buffer, inverted in column blocks), then inner
    axes ``[split, d)`` (one block of rows holds at most ``slab`` coefficients)."""

    coef: tuple[int, ...]
    cells: tuple[int, ...]
    lead: int
    split: int

    @property
    def batch(self) -> int:
        return _prod(self.cells[:self.lead])

    @property
    def per_item(self) -> int:  # coefficients per batch item
        return _prod(self.coef[self.lead:])


def _prod(xs: Sequence[int]) -> int:
    return int(np.prod(xs, dtype=np.int64)) if len(xs) else 1


def _plan(attributes: Sequence[Attribute], transformed: Sequence[bool], slab: int) -> _Plan:
    coef = tuple(coefficient_count(a) if t else a.n_cells
                 for a, t in zip(attributes, transformed, strict=True))
    cells = tuple(a.n_cells for a in attributes)
    d = len(cells)
    lead = 0
    while lead < d and not transformed[lead]:
        lead += 1
    split = lead
    while split < d and _prod(coef[split:]) > slab:
        split += 1
    return _Plan(coef, cells, lead, split)


def _store(target: np.ndarray, values: np.ndarray, add: bool) -> None:
    if add:
        target += values.reshape(target.shape)
    else:
        target[...] = values.reshape(target.shape)


def hn_inverse_blocked(source: Source, attributes: Sequence[Attribute], transformed: Sequence[bool],
                       out: np.ndarray, *, add: bool = False, slab_cells: int = SLAB_CELLS,
                       buffer: np.ndarray | None = None,
                       advance: Callable[[int], None] | None = None) -> np.ndarray:
    """``out (+)= inverse_HN(U)`` with the coefficients ``U`` pulled block by block from
    ``source`` in their C order (each coefficient exactly once).

    Blocks: leading untransformed axes are batch items (their cells map one to one); the
    remaining axes are split so that one block of rows of the inner axes holds at most
    ``slab_cells`` coefficients.  Each block is inverted along the inner axes while it is in
    cache and written to a buffer of shape (outer coefficients, inner cells); the buffer is
    then inverted along the outer transformed axes in column blocks straight into ``out``.
    So the cube is read and written about twice whatever the number of transformed axes, and
    the extra memory is the buffer (none if a batch item fits one block).  ``buffer`` (a flat
    float64 array of at least that size) may alias storage that ``source`` has finished
    reading: rows are written only after the source returned them.  ``advance(n)`` is called
    with the number of coefficients consumed after every block (progress).
    """
    attrs = tuple(attributes)
    tr = [bool(t) for t in transformed]
    plan = _plan(attrs, tr, slab_cells)
    if out.shape != plan.cells or out.dtype != np.float64 or not out.flags.c_contiguous:
        raise ParameterError(f"out must be a C-contiguous float64 array of shape {plan.cells}")
    with blas_single_thread():
        return _run_blocks(source, attrs, tr, plan, out, add, slab_cells, buffer, advance)


def _run_blocks(source: Source, attrs: tuple[Attribute, ...], tr: list[bool], plan: _Plan, out: np.ndarray,
                add: bool, slab_cells: int, buffer: np.ndarray | None,
                advance: Callable[[int], None] | None) -> np.ndarray:
    tick = advance or (lambda n: None)
    d = len(attrs)
    if plan.lead == d:  # nothing transformed: coefficients are cells
        flat = out.reshape(-1)
        for i in range(0, flat.size, slab_cells):
            j = min(i + slab_cells, flat.size)
            _store(flat[i:j], source(i, j), add)
            tick(j - i)
        return out
    lead, split = plan.lead, plan.split
    batch, sub = plan.batch, plan.per_item
    rows_out = out.reshape(batch, -1)
    if split == lead:  # a whole batch item fits one block: groups of items
        group = max(1, slab_cells // sub)
        for b in range(0, batch, group):
            g = min(group, batch - b)
            blk = np.asarray(source(b * sub, (b + g) * sub)).reshape(g, *plan.coef[lead:])
            _store(rows_out[b:b + g], _inverse_axes(blk, attrs[lead:], tr[lead:], 1), add)
            tick(g * sub)
        return out
    outer_coef = plan.coef[lead:split]
    n_outer, n_outer_cells = _prod(outer_coef), _prod(plan.cells[lead:split])
    inner, inner_cells = _prod(plan.coef[split:]), _prod(plan.cells[split:])
    if buffer is None:
        buf = np.empty((n_outer, inner_cells))
    else:
        buf = buffer.reshape(-1)[:n_outer * inner_cells].reshape(n_outer, inner_cells)
    row_step = max(1, slab_cells // inner)
    col_step = max(1, slab_cells // n_outer)
    for b in range(batch):
        base = b * sub
        for r in range(0, n_outer, row_step):
            rr = min(row_step, n_outer - r)
            blk = np.asarray(source(base + r * inner, base + (r + rr) * inner))
            blk = blk.reshape(rr, *plan.coef[split:])
            buf[r:r + rr] = _inverse_axes(blk, attrs[split:], tr[split:], 1).reshape(rr, inner_cells)
            tick(rr * inner)
        item = rows_out[b].reshape(n_outer_cells, inner_cells)
        for j in range(0, inner_cells, col_step):
            jj = min(col_step, inner_cells - j)
            blk = buf[:, j:j + jj].reshape(*outer_coef, jj)
            res = _inverse_axes(blk, attrs[lead:split], tr[lead:split], 0)
            _store(item[:, j:j + jj], res.reshape(n_outer_cells, jj), add)
    return out


def hn_inverse(u: np.ndarray, attributes: Sequence[Attribute], transformed: Sequence[bool], *,
               out: np.ndarray | None = None, slab_cells: int = SLAB_CELLS) -> np.ndarray:
    """Inverse HN transform (the 1-D inverses along every transformed axis), blocked.

    ``u`` is the full coefficient array; see :func:`hn_inverse_blocked` for the blocking.
    Small axes use their dense inverse matrix (:func:`inverse_axis`).  Returns float64 cells
    (in ``out`` if given).
    """
    attrs = tuple(attributes)
    plan = _plan(attrs, list(transformed), slab_cells)
    u = np.asarray(u, dtype=np.float64)
    if u.shape != plan.coef:
        raise ParameterError(f"expected coefficients of shape {plan.coef}, got {u.shape}")
    flat = np.ascontiguousarray(u).reshape(-1)
    if out is None:
        out = np.empty(plan.cells)
    return hn_inverse_blocked(lambda i, j: flat[i:j], attrs, transformed, out, slab_cells=slab_cells)


def _outer_product(parts: Sequence[np.ndarray]) -> np.ndarray:
    """Outer product of 1-D int64 arrays, shape ``(len(p) for p in parts)``."""
    out = np.ones((), dtype=np.int64)
    for p in parts:
        out = np.multiply.outer(out, p)
    return out


def hn_lattice_inverse(counts: np.ndarray, attributes: Sequence[Attribute], transformed: Sequence[bool],
                       perturb: Perturb, *, out: np.ndarray | None = None, slab_cells: int = SLAB_CELLS,
                       advance: Callable[[int], None] | None = None) -> np.ndarray:
    """``inverse_HN(perturb(forward_HN(counts)))``: exact int64 forward, float64 inverse, blocked.

    The integer numerators ``D * u`` of every coefficient (:func:`hn_forward_int`, with the
    denominators ``D`` of :func:`hn_denominators`) are handed to ``perturb`` block by block,
    in the C order of the full coefficient array; ``perturb`` returns the float64 (noisy)
    coefficients of the block, and the inverse of those is written to ``out``.

    Memory: the forward along the outer transformed axes is one int64 buffer of (outer
    coefficients x inner cells), reused in place (as float64) by the inverse; with ``out``
    given as ``counts.view(np.float64)`` (the counts are consumed) nothing else of cube size
    is allocated.  The inner axes are forward-transformed, perturbed and inverted one block at
    a time.
    """
    attrs = tuple(attributes)
    tr = [bool(t) for t in transformed]
    counts = _check_integer(counts)
    plan = _plan(attrs, tr, slab_cells)
    if counts.shape != plan.cells:
        raise ParameterError(f"counts has shape {counts.shape} but the attributes declare {plan.cells}")
    counts = np.ascontiguousarray(counts)
    if out is None:
        out = np.empty(plan.cells)
    dens = hn_denominators(attrs, tr)
    lead, split, d = plan.lead, plan.split, len(attrs)
    flat_counts = counts.reshape(plan.batch, -1)
    if lead == d or split == lead:  # batch items (or all cells) go block by block
        lo = min(lead, d)
        item_den = _outer_product(dens[lo:])[None]
        sub = plan.per_item

        def small_source(i: int, j: int) -> np.ndarray:
            if lead == d:
                x = counts.reshape(-1)[i:j]
                return perturb(x.copy(), np.ones((), dtype=np.int64), i)
            b, g = i // sub, (j - i) // sub
            x = flat_counts[b:b + g].reshape(g, *plan.cells[lead:])
            num = x
            for k in range(lead, d):
                if tr[k]:
                    num = forward_int(num, attrs[k], k - lead + 1)
            if num is x:
                num = x.copy()
            return perturb(num, item_den, i)

        return hn_inverse_blocked(small_source, attrs, tr, out, slab_cells=slab_cells, advance=advance)
    outer_coef = plan.coef[lead:split]
    n_outer = _prod(outer_coef)
    inner, inner_cells = _prod(plan.coef[split:]), _prod(plan.cells[split:])
    n_outer_cells = _prod(plan.cells[lead:split])
    store = np.empty((n_outer, inner_cells), dtype=np.int64)
    outer_den = _outer_product(dens[lead:split]).reshape(-1)
    inner_den = _outer_product(dens[split:])[None]
    sub = plan.per_item
    col_step = max(1, slab_cells // n_outer)

    def source(i: int, j: int) -> np.ndarray:
        b, offset = divmod(i, sub)
        r, rr = offset // inner, (j - i) // inner
        if r == 0:  # a new batch item: forward along the outer axes, column block by block
            item = flat_counts[b].reshape(n_outer_cells, inner_cells)
            for c in range(0, inner_cells, col_step):
                cc = min(col_step, inner_cells - c)
                blk = item[:, c:c + cc].reshape(*plan.cells[lead:split], cc)
                for k in range(lead, split):
                    if tr[k]:
                        blk = forward_int(blk, attrs[k], k - lead)
                store[:, c:c + cc] = blk.reshape(n_outer, cc)
        x = store[r:r + rr].reshape(rr, *plan.cells[split:])
        num = x
        for k in range(split, d):
            if tr[k]:
                num = forward_int(num, attrs[k], k - split + 1)
        if np.shares_memory(num, store):
            num = num.copy()
        den = outer_den[r:r + rr].reshape(rr, *([1] * (d - split))) * inner_den
        return perturb(num, den, i)

    return hn_inverse_blocked(source, attrs, tr, out, slab_cells=slab_cells,
                              buffer=store.view(np.float64), advance=advance)


# ---------------------------------------------------------------------------- variance
def _check_ranges(attribute: Attribute, starts: np.ndarray, stops: np.ndarray) -> None:
    bad = (starts < 0) | (stops > attribute.n_cells) | (starts >= stops)
    if np.any(bad):
        i = int(np.flatnonzero(bad)[0])
        raise QueryError(
            f"{attribute.column}: cell range [{starts[i]}, {stops[i]}) is empty or outside "
            f"[0, {attribute.n_cells})"
        )


def _overlap(s: np.ndarray, t: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.clip(np.minimum(t, b) - np.maximum(s, a), 0, None)


def haar_range_variance_factor(m: int, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """``sum_c a_c^2`` for the ranges ``[start, stop)`` of ``m`` Haar cells.

    ``a_c`` is the weight of unnormalised coefficient ``c`` in the range sum after the
    inverse: ``(stop - start) / P`` for the base and ``(|R ∩ left| - |R ∩ right|) / W`` for a
    node of ``W`` leaves.  Only the (at most two) nodes per level that contain a range end
    are partially covered; all others contribute 0.  One pass per level.
    """
    s = np.asarray(starts, dtype=np.int64)
    t = np.asarray(stops, dtype=np.int64)
    p = haar_padded_length(m)
    f = ((t - s) / p) ** 2
    w = p
    while w > 1:
        half = w // 2
        first = (s // w) * w
        last = ((t - 1) // w) * w
        for a, use in ((first, np.ones(s.shape, dtype=bool)), (last, last != first)):
            diff = _overlap(s, t, a, a + half) - _overlap(s, t, a + half, a + w)
            f += np.where(use, (diff / w) ** 2, 0.0)
        w = half
    return f


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
    tr = _tree(hierarchy)
    s = np.asarray(starts, dtype=np.int64)
    t = np.asarray(stops, dtype=np.int64)
    # 1/prod of fanouts of the proper ancestors of each node (root: 1)
    node_scale = np.ones(tr.n_nodes)
    for a, b in tr.level_bounds:
        par = tr.parent[a:b]
        node_scale[a:b] = node_scale[par] / tr.fanout[par]
    leaf_scale = np.empty(tr.n_leaves)
    leaf_scale[tr.start[tr.leaf_nodes]] = node_scale[tr.leaf_nodes]
    cum = np.r_[0.0, np.cumsum(leaf_scale)]
    inv_w = 1.0 / tr.weights[1:]
    out = np.empty(s.shape, dtype=np.float64)
    step = max(1, chunk_cells // tr.n_nodes)
    for i in range(0, s.size, step):
        qs, qt = s[i:i + step, None], t[i:i + step, None]
        lo = np.clip(qs, tr.start, tr.stop)
        hi = np.clip(qt, tr.start, tr.stop)
        q = (cum[hi] - cum[lo]) / node_scale
        kids = q[:, 1:]
        mean = np.add.reduceat(kids, tr.group_start, axis=1) / tr.group_size
        a = (kids - np.repeat(mean, tr.group_size, axis=1)) * inv_w
        out[i:i + step] = q[:, 0] ** 2 + np.einsum("ij,ij->i", a, a)
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


__all__ = [
    "DENSE_INVERSE_ENTRIES",
    "SLAB_CELLS",
    "Perturb",
    "Source",
    "coefficient_count",
    "denominators",
    "forward_int",
    "haar_forward_int",
    "hn_denominators",
    "hn_forward_int",
    "hn_inverse_blocked",
    "hn_lattice_inverse",
    "inverse_axis",
    "inverse_matrix",
    "nominal_denominators",
    "nominal_forward_int",
    "forward",
    "generalized_sensitivity",
    "haar_forward",
    "haar_inverse",
    "haar_levels",
    "haar_padded_length",
    "haar_range_variance_factor",
    "haar_weights",
    "hn_forward",
    "hn_inverse",
    "inverse",
    "nominal_forward",
    "nominal_inverse",
    "nominal_range_variance_factor",
    "nominal_weights",
    "range_variance_factor",
    "variance_factor_bound",
    "weights",
]
