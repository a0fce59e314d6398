"""Nested block levels per axis, and the level tuples they form (pure numpy, no privacy logic).

An axis of ``n`` cells carries a chain of nested partitions into equal consecutive blocks:
level 0 is one block (the total), the last level the cells; ``sizes[l]`` is the block size at
level ``l`` and divides ``sizes[l - 1]`` (Hay et al., VLDB 2010; Qardaji, Yang, Li, VLDB 2013:
hierarchies of equal fan-out).  An ordinal axis takes a divisor chain of ``n`` (``1001 = 7 ·
11 · 13``: sizes 1001, 143, 13, 1 in one order) or a ``b``-ary chain on the axis padded to
``length = b^k``: the padded cells are *known zeros* (no row falls there), so a measured block
is the count of its real cells.  A nominal axis takes the levels of its public hierarchy whose
nodes all hold the same number of leaves (other depths are skipped: unequal blocks would break
the diagonal structure of :mod:`polars_dp.kernels.level_inference`), plus the total and the
leaves.

A *level tuple* ``t`` picks one level per axis; its blocks are the products of the per-axis
blocks, a partition of the (padded) domain into ``prod_i length_i / sizes[t_i]`` blocks of
``S_t = prod_i sizes[t_i]`` cells each.  Measuring ``t`` means the integer count of every block
(:func:`block_counts`).  All are public functions of the declared domain.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from polars_dp.domains.attributes import Attribute, Nominal
from polars_dp.errors import ParameterError
from polars_dp.kernels import compiled, parallel

#: :func:`fold_owned` packs the real cells this many values at a time.
FOLD_SLAB = 1 << 23
#: :func:`coarsen_real` shares an array of at least this many values among its threads.
PARALLEL_CELLS = 1 << 22
#: How many orderings of an axis's prime factors :func:`divisor_levels` offers at most.
MAX_ORDERINGS = 6


@dataclass(frozen=True)
class AxisLevels:
    """One axis's nested levels: ``n`` real cells on an axis of ``length >= n`` cells (the
    cells past ``n`` are known zeros), ``sizes`` the block size per level, ``sizes[0] =
    length`` (the total) down to ``sizes[-1] = 1`` (the cells), each dividing the one before."""

    n: int
    length: int
    sizes: tuple[int, ...]
    label: str = ""

    def __post_init__(self) -> None:
        sizes = self.sizes
        what = f"levels {list(sizes)} of an axis of {self.n} cells (padded to {self.length})"
        if self.n < 1 or self.length < self.n:
            raise ParameterError(f"{what}: the padded length must be at least the number of cells, "
                                 "which must be at least 1", parameter="levels")
        if not sizes or sizes[0] != self.length or sizes[-1] != 1:
            raise ParameterError(f"{what} must start with the whole axis ({self.length}) and end with the "
                                 "cells (1)", parameter="levels")
        for a, b in itertools.pairwise(sizes):
            if not (b < a and a % b == 0):
                raise ParameterError(f"{what} do not nest: a block size must divide the one above it and be "
                                     f"smaller ({b} under {a}); give nested block sizes", parameter="levels")

    @property
    def count(self) -> int:
        """Number of levels."""
        return len(self.sizes)

    @property
    def padded(self) -> bool:
        return self.length > self.n


def _factor(n: int) -> list[int]:
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    if n > 1:
        out.append(n)
    return out


def _next_permutation(items: list[int]) -> bool:
    """The next distinct permutation in lexicographic order, in place; False after the last."""
    i = len(items) - 2
    while i >= 0 and items[i] >= items[i + 1]:
        i -= 1
    if i < 0:
        return False
    j = len(items) - 1
    while items[j] <= items[i]:
        j -= 1
    items[i], items[j] = items[j], items[i]
    items[i + 1:] = reversed(items[i + 1:])
    return True


def chain_from_factors(n: int, factors: Sequence[int], length: int | None = None,
                       label: str = "") -> AxisLevels:
    """Levels whose block sizes are ``length``, ``length / f_0``, ``length / (f_0 f_1)``, ..., 1."""
    length = n if length is None else length
    return AxisLevels(n, length, tuple(itertools.accumulate(factors, lambda s, f: s // f, initial=length)),
                      label)


def divisor_levels(n: int, limit: int = MAX_ORDERINGS) -> list[AxisLevels]:
    """Finest divisor chains of ``n`` (every prime factor a level), up to ``limit`` orderings of
    the factors (ascending, descending, then the others in lexicographic order)."""
    primes = _factor(n)
    if not primes:
        return [AxisLevels(1, 1, (1,), "1")]
    orders = [tuple(primes), tuple(reversed(primes))]
    perm = list(primes)
    while len(dict.fromkeys(orders)) < limit and _next_permutation(perm):
        orders.append(tuple(perm))
    return [chain_from_factors(n, order, label="x".join(map(str, order))) for order in dict.fromkeys(orders)]


def bary_levels(n: int, b: int = 2) -> AxisLevels:
    """The ``b``-ary chain on the axis padded to ``b^k >= n`` cells (padding: known zeros)."""
    if b < 2:
        raise ParameterError(f"a b-ary chain needs b >= 2, got {b}", parameter="levels")
    k = 0
    while b**k < n:
        k += 1
    return chain_from_factors(n, [b] * k, b**k, label=f"{b}-ary/{b**k}")


def nominal_levels(attribute: Nominal) -> AxisLevels:
    """The total, every depth of the collapsed hierarchy whose blocks (nodes at that depth,
    and shallower leaves) all hold the same number of leaves, and the leaves."""
    h = attribute.hierarchy
    n = h.n_leaves
    leaf = h.fanouts == 0
    sizes = [n]
    for depth in range(1, h.height - 1):
        pick = (h.node_depth == depth) | (leaf & (h.node_depth < depth))
        width = h.node_stop[pick] - h.node_start[pick]
        s = int(width[0])
        if np.all(width == s) and s < sizes[-1] and sizes[-1] % s == 0 and s > 1:
            sizes.append(s)
    if sizes[-1] != 1:
        sizes.append(1)
    return AxisLevels(n, n, tuple(sizes), "hierarchy")


def candidate_levels(attribute: Attribute) -> list[AxisLevels]:
    """Public level chains an axis may take: a nominal axis its hierarchy's; an ordinal axis its
    finest divisor chains and, when ``n`` is not a power of two, the binary chain on the axis
    padded to the next power of two (for a power of two the binary chain is the divisor chain
    and holds every ``2^j``-ary one)."""
    if isinstance(attribute, Nominal):
        return [nominal_levels(attribute)]
    n = attribute.n_cells
    chains = divisor_levels(n)
    if n & (n - 1):
        chains.append(bary_levels(n, 2))
    return chains


# ---------------------------------------------------------------------------- tuples
def tuple_shape(axes: Sequence[AxisLevels]) -> tuple[int, ...]:
    """The shape of the array of level tuples: one entry per axis, its number of levels."""
    return tuple(ax.count for ax in axes)


def block_cells(axes: Sequence[AxisLevels]) -> np.ndarray:
    """``S_t``: cells per block of every level tuple (float64, tuple-shaped)."""
    out = np.ones(tuple_shape(axes))
    for i, ax in enumerate(axes):
        shape = [1] * len(axes)
        shape[i] = ax.count
        out = out * np.asarray(ax.sizes, dtype=np.float64).reshape(shape)
    return out


def pad(counts: np.ndarray, axes: Sequence[AxisLevels]) -> np.ndarray:
    """``counts`` (shape ``n_i``) zero-padded to the axes' lengths."""
    if counts.shape != tuple(ax.n for ax in axes):
        raise ParameterError(f"counts of shape {counts.shape} do not match the axes' cells "
                             f"{tuple(ax.n for ax in axes)}", parameter="counts")
    widths = [(0, ax.length - ax.n) for ax in axes]
    return np.pad(counts, widths) if any(w for _, w in widths) else counts


def coarsen(arr: np.ndarray, axis: int, factor: int) -> np.ndarray:
    """Block sums of ``factor`` consecutive entries along ``axis`` (numpy's sum: the pyramid's bits)."""
    shape = arr.shape[:axis] + (arr.shape[axis] // factor, factor) + arr.shape[axis + 1:]
    return arr.reshape(shape).sum(axis=axis + 1)


def pyramid(cells: np.ndarray, axes: Sequence[AxisLevels]) -> dict[tuple[int, ...], np.ndarray]:
    """Block sums of ``cells`` (padded shape) at every level tuple: ``{t: array of shape
    (length_i / sizes[t_i])_i}``.  Exact for integer input.  Size ``cells · prod_i Σ_l 1/s_l``."""
    current: dict[tuple[int, ...], np.ndarray] = {(): cells}
    for i, ax in enumerate(axes):
        nxt: dict[tuple[int, ...], np.ndarray] = {}
        for key, arr in current.items():
            a = arr
            for level in range(ax.count - 1, -1, -1):
                nxt[(*key, level)] = a
                if level:
                    a = coarsen(a, i, ax.sizes[level - 1] // ax.sizes[level])
        current = nxt
    return current


def collapse(parts: Mapping[tuple[int, ...], np.ndarray], axes: Sequence[AxisLevels]) -> np.ndarray:
    """``Σ_t U_t(parts[t])``: every part broadcast from its tuple's blocks to the cells (each
    block value copied to its cells) and added; missing tuples count as zero.  One upsample
    per pyramid entry, axis by axis (Horner along the levels)."""
    shape = tuple_shape(axes)
    current = {key: np.asarray(parts[key], dtype=np.float64)
               for key in itertools.product(*(range(c) for c in shape)) if key in parts}
    for i in range(len(axes) - 1, -1, -1):
        ax = axes[i]
        nxt: dict[tuple[int, ...], np.ndarray] = {}
        for head in itertools.product(*(range(c) for c in shape[:i])):
            levels = [current.get((*head, level)) for level in range(ax.count)]
            if all(v is None for v in levels):
                continue
            acc = levels[0]
            for level in range(1, ax.count):
                if acc is not None:
                    acc = np.repeat(acc, ax.sizes[level - 1] // ax.sizes[level], axis=i)
                part = levels[level]
                if part is not None:
                    acc = part.copy() if acc is None else acc + part
            assert acc is not None  # a level of ``head`` holds a part
            nxt[head] = acc
        current = nxt
    return current.get((), np.zeros(tuple(ax.length for ax in axes)))


def coarsen_real(arr: np.ndarray, axis: int, factor: int, threads: int = 1) -> np.ndarray:
    """Integer block sums by ``factor`` along ``axis`` of an array of real blocks only (the
    padding omitted, so the last block may be partial): ``ceil(m / factor)`` blocks, int64.
    An array of at least :data:`PARALLEL_CELLS` values is cut along its first other axis of
    two or more entries into ``threads`` parts summed at once (exact integers: the same values)."""
    m = arr.shape[axis]
    shape = list(arr.shape)
    shape[axis] = -(-m // factor)
    cut_axis = next((j for j in range(arr.ndim) if j != axis and arr.shape[j] > 1), None)
    if threads > 1 and arr.size >= PARALLEL_CELLS and cut_axis is not None:
        out = np.empty(shape, dtype=np.int64)

        def part(rows: tuple[int, int]) -> None:
            where = tuple(slice(*rows) if j == cut_axis else slice(None) for j in range(arr.ndim))
            out[where] = coarsen_real(arr[where], axis, factor)

        parallel.each(part, parallel.column_ranges(arr.shape[cut_axis], threads), threads)
        return out
    if axis == arr.ndim - 1 and m and arr.dtype == np.int64 and arr.flags.c_contiguous:
        done = compiled.int_block_sums_last(arr, factor)  # one pass (None: compiled kernels off)
        if done is not None:
            return done
    full, rest = divmod(m, factor)
    out = np.empty(shape, dtype=np.int64)
    head: list[slice] = [slice(None)] * arr.ndim
    if full and factor <= 8:  # strided adds (exact on integers): no per-block reduction loop
        head[axis] = slice(0, full)
        target = out[tuple(head)]
        for j in range(factor):
            head[axis] = slice(j, full * factor, factor)
            if j:
                np.add(target, arr[tuple(head)], out=target, casting="unsafe")
            else:
                target[...] = arr[tuple(head)]
    elif full:
        head[axis] = slice(0, full * factor)
        src = arr[tuple(head)]
        split = src.reshape(src.shape[:axis] + (full, factor) + src.shape[axis + 1:])
        head[axis] = slice(0, full)
        np.sum(split, axis=axis + 1, dtype=np.int64, out=out[tuple(head)])
    if rest:
        head[axis] = slice(full * factor, m)
        tail: list[slice] = [slice(None)] * arr.ndim
        tail[axis] = slice(full, full + 1)
        np.sum(arr[tuple(head)], axis=axis, keepdims=True, dtype=np.int64, out=out[tuple(tail)])
    return out


def finer(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """Whether level tuple ``a`` is at least as fine as ``b`` on every axis (``b``'s blocks are
    unions of ``a``'s)."""
    return all(x >= y for x, y in zip(a, b, strict=True))


class BlockCounter:
    """Exact integer block counts of level tuples from the real cells' counts, each from the
    smallest array already computed at finer-or-equal levels on every axis (the counts, or a
    cached coarsening no larger than ``cache_cells`` values), coarsening first along the axis
    that shrinks most.  Blocks are those of the real cells (``ceil(n_i / s_i)`` per axis; the
    padding, known zeros, is left out: :func:`padded_blocks` adds it).  Large coarsenings are
    shared among ``threads`` threads (:func:`coarsen_real`: the same integers)."""

    def __init__(self, counts: np.ndarray, axes: Sequence[AxisLevels], cache_cells: int | None = None,
                 threads: int = 1):
        if counts.shape != tuple(ax.n for ax in axes):
            raise ParameterError(f"counts of shape {counts.shape} do not match the axes' cells "
                                 f"{tuple(ax.n for ax in axes)}", parameter="counts")
        self.axes = tuple(axes)
        self.threads = threads
        self.cap = max(1, counts.size // 8) if cache_cells is None else cache_cells
        self.reuse_cap = max(self.cap, counts.size // 3) if cache_cells is None else cache_cells
        self.cache: dict[tuple[int, ...], np.ndarray] = {tuple(ax.count - 1 for ax in axes): counts}

    def real(self, t: tuple[int, ...], rest: Sequence[tuple[int, ...]] = ()) -> np.ndarray:
        """The counts of ``t``'s blocks over the real cells (int64 unless ``t`` is the cells).
        ``rest``: the tuples still to come; among the steps whose blocks may be kept, one that
        leads to blocks more of them can be made from goes first, else the one that shrinks
        most; blocks some of them can be made from are kept up to a third of the counts' size
        (other blocks up to the cap)."""
        if t in self.cache:
            return self.cache[t]
        sources = ((k, a) for k, a in self.cache.items() if finer(k, t))
        key, arr = min(sources, key=lambda item: item[1].size)
        while key != t:
            steps = [i for i in range(len(t)) if key[i] != t[i]]
            i = max(steps, key=lambda j: self._score(arr.shape, key, t, j, rest))
            arr = coarsen_real(arr, i, self.axes[i].sizes[t[i]] // self.axes[i].sizes[key[i]], self.threads)
            key = key[:i] + (t[i],) + key[i + 1:]
            if arr.size <= self.cap or (arr.size <= self.reuse_cap and self._serves(key, arr.size, rest)):
                self.cache[key] = arr
        return arr

    def _serves(self, k: tuple[int, ...], size: int, rest: Sequence[tuple[int, ...]]) -> int:
        """How many of ``rest`` blocks ``k`` (of ``size`` values) can make, where no array kept
        that can make them is as small."""
        return sum(finer(k, r) and not any(finer(c, r) and a.size <= size for c, a in self.cache.items())
                   for r in rest)

    def _score(self, shape: tuple[int, ...], key: tuple[int, ...], t: tuple[int, ...], j: int,
               rest: Sequence[tuple[int, ...]]) -> tuple[int, float]:
        """Step ``j`` from blocks ``key`` (``shape``) towards ``t``: the tuples to come it serves
        (0 when its blocks would not be kept), then how much it shrinks."""
        blocks = -(-self.axes[j].n // self.axes[j].sizes[t[j]])
        size = math.prod(shape) // shape[j] * blocks
        kept = size <= self.reuse_cap
        return self._serves(key[:j] + (t[j],) + key[j + 1:], size, rest) if kept else 0, shape[j] / blocks

    def keep_for(self, rest: Sequence[tuple[int, ...]]) -> None:
        """Forget the arrays none of the tuples ``rest`` can be made from."""
        self.cache = {k: a for k, a in self.cache.items()
                      if any(finer(k, r) for r in rest)}


def padded_blocks(real: np.ndarray, t: tuple[int, ...], axes: Sequence[AxisLevels]) -> np.ndarray:
    """float64 block counts of tuple ``t`` on the padded axes (``length_i / s_i`` blocks; the
    blocks past the real ones are zeros) from its real blocks' counts."""
    shape = tuple(ax.length // ax.sizes[level] for ax, level in zip(axes, t, strict=True))
    if shape == real.shape:
        return real.astype(np.float64)
    out = np.zeros(shape)
    out[tuple(slice(0, m) for m in real.shape)] = real
    return out


def fold(estimate: np.ndarray, axes: Sequence[AxisLevels]) -> np.ndarray:
    """The padded estimate back on the real cells: on each padded axis, the padding's values
    are added to the last real cell (the padded cells are known zeros, so a query reaching the
    last cell may cover the padding at no bias; :mod:`polars_dp.domains.workload`)."""
    out = estimate
    for i, ax in enumerate(axes):
        if ax.padded:
            head = np.take(out, np.arange(ax.n), axis=i)
            tail = np.take(out, np.arange(ax.n - 1, ax.length), axis=i).sum(axis=i)
            idx: list[slice | int] = [slice(None)] * out.ndim
            idx[i] = ax.n - 1
            head[tuple(idx)] = tail
            out = head
    return out


def fold_owned(estimate: np.ndarray, axes: Sequence[AxisLevels]) -> np.ndarray:
    """:func:`fold` bit for bit, writing into ``estimate`` (which it consumes) instead of copying
    it per padded axis: each padding's sum is taken over a C-contiguous copy of the same
    values :func:`fold` sums (the same reduction), then the real cells are packed to the front
    of ``estimate``'s own memory (C order), whose view is returned."""
    out = estimate
    for i, ax in enumerate(axes):
        if ax.padded:
            idx: list[slice | int] = [slice(None)] * out.ndim
            idx[i] = slice(ax.n - 1, ax.length)
            tail = np.ascontiguousarray(out[tuple(idx)]).sum(axis=i)
            idx[i] = ax.n - 1
            out[tuple(idx)] = tail
            idx[i] = slice(0, ax.n)
            out = out[tuple(idx)]
    if out.flags.c_contiguous or not estimate.flags.c_contiguous or out.ndim == 0:
        return np.ascontiguousarray(out)
    # the real cells packed to the front of the buffer, in C order, a slab of the first axis at a
    # time: a cell never moves back past a value still to be read (numpy copies overlapping slabs)
    real = out.shape
    packed = estimate.reshape(-1)[:math.prod(real)].reshape(real)
    step = max(1, FOLD_SLAB // max(1, math.prod(real[1:])))
    for a in range(0, real[0], step):
        packed[a:a + step] = out[a:a + step]
    return packed


__all__ = ["MAX_ORDERINGS", "PARALLEL_CELLS", "AxisLevels", "BlockCounter", "bary_levels", "block_cells",
           "candidate_levels", "chain_from_factors", "coarsen", "coarsen_real", "collapse", "divisor_levels",
           "fold", "fold_owned", "nominal_levels", "pad", "padded_blocks", "pyramid", "tuple_shape"]
