"""Exact integer forward transforms of counts (int64 numerators ``D * u``, pure numpy).

Haar coefficients of integer counts are integers (``D = 1``); nominal ones have
``D = 2 (f_parent - 1)`` (:func:`nominal_denominators`); across axes the denominators
multiply (:func:`hn_denominators`).  Used by the exact Privelet path and by
:func:`polars_dp.kernels.lattice_blocks.hn_lattice_inverse`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from polars_dp.domains.attributes import Attribute, Nominal
from polars_dp.domains.hierarchy import Hierarchy
from polars_dp.errors import ParameterError
from polars_dp.kernels import compiled, scratch
from polars_dp.kernels.prefix import cumsum_inplace
from polars_dp.kernels.wavelets import (
    NominalTree,
    as3d,
    haar_inverse_levels,
    haar_padded_length,
    haar_sums_and_differences,
    nominal_tree,
    segment_sums,
    with_axis,
)


# ---------------------------------------------------------------------------- exact integer forward
def check_integer(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    if not (np.issubdtype(x.dtype, np.integer) or x.dtype == np.bool_):
        raise ParameterError(f"the exact forward transform needs integer counts, got dtype {x.dtype}")
    return x.astype(np.int64, copy=False)


def haar_forward_int(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """:func:`haar_forward` of integer cells, exactly, in int64.

    Every unnormalised Haar coefficient is a sum of cells with signs in {-1, 0, 1} (the total,
    or ``sum(left half) - sum(right half)``), so it is an integer; its denominator is 1.
    """
    return haar_sums_and_differences(check_integer(x), axis)


def nominal_denominators(hierarchy: Hierarchy) -> np.ndarray:
    """Per node (BFS order) the int64 ``D`` with ``D * u`` an integer for integer leaves:
    1 for the root, ``2 (f_parent - 1)`` for a node below a parent of fanout ``f_parent``."""
    t = nominal_tree(hierarchy)
    return np.r_[1, 2 * (t.parent_fanout.astype(np.int64) - 1)].astype(np.int64)


def nominal_forward_int(x: np.ndarray, hierarchy: Hierarchy, axis: int = -1) -> np.ndarray:
    """Integer numerators ``D * u`` of the nominal coefficients of integer leaves (int64).

    ``u_root = leafsum(root)``; below a parent ``p`` of fanout ``f``:
    ``u_N = f/(2f-2) (leafsum(N) - leafsum(p)/f) = (f leafsum(N) - leafsum(p)) / (2 (f - 1))``,
    so the numerator is ``f leafsum(N) - leafsum(p)`` and the denominator
    :func:`nominal_denominators`.  ``nominal_forward = numerators / denominators``.
    """
    return _nominal_numerators(check_integer(x), hierarchy, axis)


def _nominal_numerators(x: np.ndarray, hierarchy: Hierarchy, axis: int) -> np.ndarray:
    """:func:`nominal_forward_int`'s formula in ``x``'s dtype (int64 or float64)."""
    t = nominal_tree(hierarchy)
    v, shape, axis = as3d(x, axis)
    if v.shape[1] != t.n_leaves:
        raise ParameterError(f"the hierarchy has {t.n_leaves} leaves but axis {axis} has {v.shape[1]}")
    if v.dtype == np.int64 and compiled.enabled():  # the same integers, one pass per row
        out = scratch.empty((v.shape[0], t.n_nodes, v.shape[2]), np.int64)
        if compiled.nominal_numerators(np.ascontiguousarray(v), t, out):
            return out.reshape(with_axis(shape, axis, t.n_nodes))
    if t.balanced:
        return _nominal_forward_int_by_level(v, t).reshape(with_axis(shape, axis, t.n_nodes))
    cum = np.zeros((v.shape[0], t.n_leaves + 1, v.shape[2]), dtype=v.dtype)
    cum[:, 1:] = v
    cumsum_inplace(cum[:, 1:], 1)  # the same sums as np.cumsum, one vector add per leaf
    leafsum = cum[:, t.stop] - cum[:, t.start]
    out = np.empty_like(leafsum)
    out[:, 0] = leafsum[:, 0]
    f = t.parent_fanout.astype(v.dtype)[:, None]
    np.subtract(leafsum[:, 1:] * f, leafsum[:, t.parent[1:]], out=out[:, 1:])
    return out.reshape(with_axis(shape, axis, t.n_nodes))


def _nominal_forward_int_by_level(v: np.ndarray, t: NominalTree) -> np.ndarray:
    """:func:`nominal_forward_int` of ``v`` (pre, leaves, post) when all leaves share one depth
    (BFS lists them last, in leaf order): leaf sums bottom-up by ``reduceat`` over the sibling
    runs, then per level ``f leafsum(N) - leafsum(p)`` with the parents broadcast over their
    children.  Two passes over the leaves instead of a cumulative sum and gathers."""
    levels = [(0, 1), *t.level_bounds]
    integer = np.issubdtype(v.dtype, np.integer)
    sums = [v]  # leaf sums per depth, deepest first
    for a, b in reversed(levels[:-1]):
        fan = t.fanout[a:b]
        if integer:  # exact in any order: equal-fanout segments as one block reduction
            sums.append(segment_sums(sums[-1], fan))
        else:
            sums.append(np.add.reduceat(sums[-1], np.r_[0, np.cumsum(fan)[:-1]], axis=1))
    sums.reverse()
    out = scratch.empty((v.shape[0], t.n_nodes, v.shape[2]), v.dtype)
    out[:, 0] = sums[0][:, 0]
    for depth in range(1, len(levels)):
        a, b = levels[depth]
        pa, pb = levels[depth - 1]
        fan = t.fanout[pa:pb].astype(np.int64)
        kids = out[:, a:b]
        if np.all(fan == fan[0]):  # uniform fanout: one factor, parents broadcast over their children
            f = int(fan[0])
            np.multiply(sums[depth], v.dtype.type(f), out=kids)
            kids.reshape(v.shape[0], pb - pa, f, v.shape[2])[...] -= sums[depth - 1][:, :, None]
        else:
            np.multiply(sums[depth], np.repeat(fan, fan).astype(v.dtype)[:, None], out=kids)
            kids -= np.repeat(sums[depth - 1], fan, axis=1)
    return out


def denominators(attribute: Attribute) -> np.ndarray:
    """Per coefficient the int64 denominator of :func:`forward_int` (all 1 for Haar)."""
    if isinstance(attribute, Nominal):
        return nominal_denominators(attribute.hierarchy)
    return np.ones(haar_padded_length(attribute.n_cells), dtype=np.int64)


def forward_int(x: np.ndarray, attribute: Attribute, axis: int = -1) -> np.ndarray:
    """Exact int64 numerators of the 1-D transform: ``forward = forward_int / denominators``."""
    return forward_numerators(check_integer(x), attribute, axis)


def forward_numerators(x: np.ndarray, attribute: Attribute, axis: int = -1) -> np.ndarray:
    """The numerators of :func:`forward_int` computed in ``x``'s dtype by the same formula.

    int64: exact, and exact modulo ``2^64`` when a value overflows (every step is an addition,
    subtraction or product by an integer constant, which int64 arrays compute modulo ``2^64``).
    float64: each step rounded; :func:`float_error_steps` bounds the rounding.
    """
    if isinstance(attribute, Nominal):
        return _nominal_numerators(x, attribute.hierarchy, axis)
    return haar_sums_and_differences(x, axis)


def float_error_steps(attribute: Attribute) -> int:
    """An upper bound on the roundings any cell's contribution meets in the float64
    :func:`forward_numerators` (Haar: one sum per level and a difference; nominal: the
    cumulative sum or level sums over the leaves, a difference, a product, a difference)."""
    if isinstance(attribute, Nominal):
        return attribute.hierarchy.n_leaves + nominal_tree(attribute.hierarchy).height + 3
    return haar_padded_length(attribute.n_cells).bit_length() + 2


def float_magnitude_factor(attribute: Attribute) -> int:
    """``K`` with ``sum of |terms| <= K x (sum of the line's cells)`` in every step of the float64
    :func:`forward_numerators` of non-negative cells (Haar: 1; nominal: ``2 (f_max + 1)``,
    the prefix-sum difference counting each cell up to twice, then ``f leafsum - leafsum``)."""
    if isinstance(attribute, Nominal):
        return 2 * (int(attribute.hierarchy.fanouts.max()) + 1)
    return 1


# ---------------------------------------------------------------------------- exact scaled inverse
#: :func:`haar_inverse_scaled` stays in int64 (and float64-exact) while ``P max|z| < 2^52``.
SCALED_LIMIT = 1 << 52


def haar_inverse_scaled(z: np.ndarray, m: int, axis: int = -1) -> np.ndarray:
    """``W = P * haar_inverse(z)`` (cells ``[0, m)``, ``P`` the padded length) of integer
    coefficients ``z``, exactly.

    Eq. 3 with the halvings multiplied out: ``P x_i = z_0 + sum_k (+-k) z_(k, i)`` over the
    levels of ``k = 1, 2, ..., P/2`` nodes (``z_(k, i)`` the detail of the level-``k`` node
    over cell ``i``, ``+`` on its left half), so every partial sum is an integer of size at
    most ``P max|z|``.  int64 input is computed in int64 when ``P max|z| < 2^52``
    (:data:`SCALED_LIMIT`, so ``|W| < 2^52``), else (and for object input) in Python ints
    (an object array); the values are the same either way, and which way runs depends on
    ``z`` alone.
    """
    c, shape, axis = as3d(np.asarray(z), axis)
    p = haar_padded_length(m)
    if c.shape[1] != p:
        raise ParameterError(f"{m} cells need {p} Haar coefficients along axis {axis}, got {c.shape[1]}")
    if c.dtype != object:
        c = check_integer(c)
        if c.size and max(-int(c.min()), int(c.max())) * p >= SCALED_LIMIT:
            c = c.astype(object)
    wide = c.dtype == object

    def alloc(n: Any) -> np.ndarray:
        return np.empty(n, dtype=object) if wide else scratch.empty(n, np.int64)

    pre, post = c.shape[0], c.shape[2]
    out = alloc((pre, m, post))
    if p == 1:
        out[...] = c
        return out.reshape(with_axis(shape, axis, m))
    h = pre * (p // 2) * post
    work = alloc(3 * h)
    bufs = (work[:h], work[h:2 * h])
    s = c[:, 0:1]  # P * (z_0 / P)
    which = 0
    for k, n_even, n_odd in haar_inverse_levels(m):
        need = n_even + n_odd
        nxt = out if 2 * k == p else bufs[which][:pre * need * post].reshape(pre, need, post)
        dk = work[2 * h:2 * h + pre * n_even * post].reshape(pre, n_even, post)
        np.multiply(c[:, k:k + n_even], k, out=dk)  # P * (k / P) z
        np.add(s[:, :n_even], dk, out=nxt[:, 0::2])
        np.subtract(s[:, :n_odd], dk[:, :n_odd], out=nxt[:, 1::2])
        s, which = nxt, 1 - which
    return out.reshape(with_axis(shape, axis, m))


#: Cells per step of :func:`scaled_to_float` (its temporaries stay in cache).
_STEP = 1 << 15


def scaled_to_float(y: np.ndarray, w: np.ndarray, p: int, out: np.ndarray | None = None) -> np.ndarray:
    """``fl(N / P)``, the correctly rounded float64 of ``N / P`` for ``N = P y + w`` (``P = 2^b``),
    without forming ``N``.

    int64 ``y`` (``|y| < 2^62``) and ``w`` (``|w| < 2^52``, as :func:`haar_inverse_scaled`
    returns it in int64): with ``K = 52 - b``, ``y = y_h + y_l``, ``y_l = y mod 2^K``.  Then
    ``y_h`` (a multiple of ``2^K`` below ``2^62``), ``y_l`` and ``w / P`` are exact in float64,
    so is ``s = y_l + w / P`` (below ``2^(K+1)`` in size, on the grid ``2^-b``: 53 bits), and
    ``fl(y_h + s)`` is one rounding of the exact ``N / P``.  Object ``w`` (Python ints):
    ``(P y + w) / P`` in Python, also correctly rounded.  So the result is a function of ``N``
    alone whichever way runs.  ``y`` has ``w``'s shape.
    """
    if p & (p - 1) or not 1 <= p <= 1 << 52:
        raise ParameterError(f"scaled_to_float needs a power of two up to 2^52, got {p}")
    if out is None:
        out = np.empty(w.shape)
    if w.dtype == object:
        out[...] = (np.asarray(y).astype(object) * p + w) / p  # int / int: correctly rounded
        return out
    bits = p.bit_length() - 1
    low = np.int64((1 << (52 - bits)) - 1)
    yf, wf, of = y.reshape(-1), w.reshape(-1), out.reshape(-1)
    if not (np.shares_memory(of, out) and yf.size == wf.size == of.size):
        raise ParameterError("scaled_to_float needs y, w and out of one shape, out contiguous")
    t = scratch.empty(min(_STEP, wf.size), np.int64)
    f = scratch.empty(t.size)
    scale = 1.0 / p
    for a in range(0, wf.size, _STEP):
        b = min(wf.size, a + _STEP)
        tt, ff = t[:b - a], f[:b - a]
        np.multiply(wf[a:b], scale, out=ff)  # w / P, exact
        np.bitwise_and(yf[a:b], low, out=tt)  # y_l
        np.add(tt, ff, out=ff)  # s = y_l + w / P, exact
        np.bitwise_and(yf[a:b], ~low, out=tt)  # y_h
        np.add(tt, ff, out=of[a:b])  # fl(y_h + s): the one rounding
    return out


def hn_forward_int(x: np.ndarray, attributes: Sequence[Attribute], transformed: Sequence[bool]) -> np.ndarray:
    """Exact int64 numerators of the HN transform of integer counts (whole array).

    ``hn_forward(x) = hn_forward_int(x) / prod_axes denominators`` (the per-axis
    denominators of :func:`hn_denominators` multiply, as the 1-D maps are applied along
    every transformed axis in turn).
    """
    x = check_integer(x)
    for axis, (a, t) in enumerate(zip(attributes, transformed, strict=True)):
        if t:
            x = forward_int(x, a, axis)
    return x


def hn_denominators(attributes: Sequence[Attribute], transformed: Sequence[bool]) -> list[np.ndarray]:
    """Per axis the int64 denominators of :func:`hn_forward_int` (ones on untransformed axes);
    a coefficient's denominator is the product over axes (an outer product)."""
    return [denominators(a) if t else np.ones(a.n_cells, dtype=np.int64)
            for a, t in zip(attributes, transformed, strict=True)]


__all__ = ["SCALED_LIMIT", "check_integer", "denominators", "float_error_steps", "float_magnitude_factor",
           "forward_int", "forward_numerators", "haar_forward_int", "haar_inverse_scaled", "hn_denominators",
           "hn_forward_int", "nominal_denominators", "nominal_forward_int", "scaled_to_float"]
