"""The HN inverse for large cubes (pure numpy): fused over all axes, blocked, in place.

* :func:`hn_inverse_blocked`: the inverse of coefficients pulled block by block from a source
  (e.g. a noise sampler): inner axes per cache-sized block, outer transformed axes in column
  blocks of one buffer; small axes by their dense inverse matrix (:func:`inverse_axis`).
* :func:`block_plan`: how a cube is cut into blocks.

The exact lattice pipeline on top of the driver is :mod:`polars_dp.kernels.lattice_blocks`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from threadpoolctl import ThreadpoolController

from polars_dp.domains.attributes import Attribute, Nominal
from polars_dp.domains.hierarchy import Hierarchy
from polars_dp.errors import ParameterError
from polars_dp.kernels import compiled, parallel, scratch
from polars_dp.kernels.row_store import SplitRows
from polars_dp.kernels.wavelets import (
    as3d,
    coefficient_count,
    haar_inverse,
    haar_inverse_levels,
    haar_padded_length,
    haar_unused,
    inverse,
    nominal_inverse,
    nominal_tree,
    with_axis,
)

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
    n = nominal_tree(h).n_nodes
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
    v, shape, axis = as3d(np.asarray(u, dtype=np.float64), axis)
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
    return out.reshape(with_axis(shape, axis, m))


#: ``last(block)``: the inverse along the last axis of an inner block (see hn_inverse_blocked).
LastInverse = Callable[[np.ndarray], np.ndarray]


def _inverse_axes(block: np.ndarray, attributes: Sequence[Attribute], transformed: Sequence[bool],
                  first_axis: int, last: LastInverse | None = None, haar_levels: bool = False) -> np.ndarray:
    """Inverse along the transformed axes of ``block`` (axis ``first_axis + k`` is attribute k);
    ``last`` replaces :func:`inverse_axis` along the last one; ``haar_levels``: Haar axes by
    the level kernels, never the dense product (the outer axes, whose blocks are long).
    Order: ``last`` first, then the axes that shrink the block most (coefficients per cell),
    so that the least memory is read and written (ties: from the last axis back)."""
    d = len(attributes)
    axes = [k for k in reversed(range(d)) if transformed[k] and not (last is not None and k == d - 1)]
    axes.sort(key=lambda k: attributes[k].n_cells / coefficient_count(attributes[k]))
    if last is not None and d and transformed[d - 1]:
        block = last(block)
    for k in axes:
        if haar_levels and not isinstance(attributes[k], Nominal):
            block = inverse(block, attributes[k], first_axis + k)
        else:
            block = inverse_axis(block, attributes[k], first_axis + k)
    return block


def single_haar(attrs: Sequence[Attribute], tr: Sequence[bool]) -> bool:
    """Whether the axes are one transformed Haar axis (the outer axes of the usual layouts)."""
    return len(attrs) == 1 and tr[0] and not isinstance(attrs[0], Nominal)


# ---------------------------------------------------------------------------- blocked HN inverse
#: Target size (coefficients) of one block of the blocked kernels.
SLAB_CELLS = 1 << 21

#: ``source(start, stop)``: the coefficients ``[start, stop)`` of the flat (C order) coefficient
#: array, as an array of that many float64 values (any shape).
Source = Callable[[int, int], np.ndarray]


#: ``buffer_of(b)``: the (outer coefficients x inner cells) float64 buffer of batch item ``b``.
ItemBuffer = Callable[[int], SplitRows]


@dataclass(frozen=True)
class BlockPlan:
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


def _item_groups(plan: BlockPlan, slab: int) -> list[tuple[int, int]]:
    """``(first item, items)`` of every block when a batch item fits one block (``split == lead``):
    at most half a slab of coefficients per group (an item group's pipeline holds several
    block-sized temporaries; with two threads, half-slab groups keep the scratch of one
    full-slab thread, at the same speed)."""
    group = max(1, slab // (2 * plan.per_item))
    return [(b, min(group, plan.batch - b)) for b in range(0, plan.batch, group)]


def _row_blocks(plan: BlockPlan, slab: int) -> list[tuple[int, int]]:
    """``(first outer coefficient row, rows)`` of every block of one batch item (``split > lead``)."""
    inner, n_outer = _prod(plan.coef[plan.split:]), _prod(plan.coef[plan.lead:plan.split])
    step = max(1, slab // inner)
    return [(r, min(step, n_outer - r)) for r in range(0, n_outer, step)]


def _without(blocks: list[tuple[int, int]], unused: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The row blocks ``(first row, rows)`` cut where they meet the ``unused`` ranges ``[a, b)``,
    those rows left out (a few dozen blocks and ranges)."""
    drop = np.zeros(max(r + rr for r, rr in blocks), dtype=bool)
    for a, b in unused:
        drop[a:b] = True
    out = []
    for r, rr in blocks:
        keep = np.flatnonzero(~drop[r:r + rr]) + r
        if keep.size:  # runs of kept rows
            cut = np.flatnonzero(np.diff(keep) != 1) + 1
            out += [(int(k[0]), int(k.size)) for k in np.split(keep, cut)]
    return out


def block_plan(attributes: Sequence[Attribute], transformed: Sequence[bool], slab: int) -> BlockPlan:
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
    return BlockPlan(coef, cells, lead, split)


def _store(target: np.ndarray, values: np.ndarray, add: bool) -> None:
    if add:
        target += values.reshape(target.shape)
    else:
        target[...] = values.reshape(target.shape)


def hn_inverse_blocked(source: Source, attributes: Sequence[Attribute], transformed: Sequence[bool],
                       out: np.ndarray, *, add: bool = False, slab_cells: int = SLAB_CELLS,
                       buffer: np.ndarray | ItemBuffer | None = None,
                       advance: Callable[[int], None] | None = None,
                       last_inverse: LastInverse | None = None, last_cells: bool = False,
                       begin_item: Callable[[int], None] | None = None, threads: int = 1,
                       skip_unused: bool = False) -> np.ndarray:
    """``out (+)= inverse_HN(U)`` with the coefficients ``U`` pulled block by block from
    ``source`` in their C order (each coefficient exactly once).

    Blocks: leading untransformed axes are batch items (their cells map one to one); the
    remaining axes are split so that one block of rows of the inner axes holds at most
    ``slab_cells`` coefficients.  Each block is inverted along the inner axes while it is in
    cache and written to a buffer of shape (outer coefficients, inner cells); the buffer is
    then inverted along the outer transformed axes in column blocks straight into ``out``.
    So the cube is read and written about twice whatever the number of transformed axes, and
    the extra memory is the buffer (none if a batch item fits one block).  ``buffer`` (a flat
    float64 array of at least that size, or ``buffer_of(b)`` giving batch item ``b``'s as
    :class:`~polars_dp.kernels.row_store.SplitRows`) may alias storage that ``source`` has
    finished reading, even item ``b``'s rows of ``out`` (without ``add``): rows are written
    only after the source returned them, and a column block of ``out`` only after the
    buffer's columns were read into its inverse.  ``advance(n)`` is called
    with the number of coefficients consumed after every block (progress).  ``last_inverse(block)``,
    when given, replaces the inverse along the last axis of every block that ``source`` returned
    (the caller's kernel for values that ``source`` left unscaled).  ``begin_item(b)`` is called
    before the first block of batch item ``b`` is pulled (when the outer axes are buffered).

    ``threads > 1`` shares the blocks of a batch item, and the column blocks of its outer
    inverse, among that many threads (:func:`~polars_dp.kernels.parallel.each`): only for a
    ``source`` (and ``last_inverse``) whose value for a block depends on that block alone, and
    that may be called from several threads at once.  Each block writes only its own rows
    (and a column block its own columns), so the output does not depend on the threads.

    ``skip_unused``: when the outer axes are one Haar axis, its coefficient rows over padding
    cells only (:func:`~polars_dp.kernels.wavelets.haar_unused`: about 18% of them for 101
    cells) are never pulled from ``source``: the outer inverse never reads them, so no cell
    depends on them.  Their rows of the buffer keep what is there (``begin_item`` wrote them).
    For a ``source`` whose value for a block depends on that block alone (``threads``).
    """
    attrs = tuple(attributes)
    tr = [bool(t) for t in transformed]
    plan = block_plan(attrs, tr, slab_cells)
    if out.shape != plan.cells or out.dtype != np.float64 or not out.flags.c_contiguous:
        raise ParameterError(f"out must be a C-contiguous float64 array of shape {plan.cells}")
    block_last = plan.cells[-1] if last_cells else plan.coef[-1]
    with blas_single_thread(), scratch.arena():
        return _run_blocks(source, attrs, tr, plan, out, add, slab_cells, buffer, _locked(advance),
                           (lambda block: block) if last_cells else last_inverse, block_last,
                           begin_item or (lambda b: None), max(1, int(threads)), skip_unused)


def _locked(advance: Callable[[int], None] | None) -> Callable[[int], None]:
    """``advance`` (progress) made safe to call from the block threads."""
    if advance is None:
        return lambda n: None
    lock = threading.Lock()

    def tick(n: int) -> None:
        with lock:
            advance(n)

    return tick


def _block_shape(coef: tuple[int, ...], last: int) -> tuple[int, ...]:
    """A block's shape along ``coef``'s axes, ``last`` entries along the last one."""
    return (*coef[:-1], last) if coef else ()


def _run_blocks(source: Source, attrs: tuple[Attribute, ...], tr: list[bool], plan: BlockPlan,
                out: np.ndarray, add: bool, slab_cells: int, buffer: np.ndarray | ItemBuffer | None,
                tick: Callable[[int], None], last: LastInverse | None, block_last: int,
                begin_item: Callable[[int], None], threads: int, skip_unused: bool) -> np.ndarray:
    d = len(attrs)
    if plan.lead == d:  # nothing transformed: coefficients are cells
        flat = out.reshape(-1)

        def cells_block(i: int) -> None:
            j = min(i + slab_cells, flat.size)
            _store(flat[i:j], source(i, j), add)
            tick(j - i)

        parallel.each(cells_block, range(0, flat.size, slab_cells), threads)
        return out
    lead, split = plan.lead, plan.split
    batch, sub = plan.batch, plan.per_item
    rows_out = out.reshape(batch, -1)
    if split == lead:  # a whole batch item fits one block: groups of items
        def items_block(group: tuple[int, int]) -> None:
            b, g = group
            blk = np.asarray(source(b * sub, (b + g) * sub))
            blk = blk.reshape(g, *_block_shape(plan.coef[lead:], block_last))
            _store(rows_out[b:b + g], _inverse_axes(blk, attrs[lead:], tr[lead:], 1, last), add)
            tick(g * sub)

        parallel.each(items_block, _item_groups(plan, slab_cells), threads)
        return out
    outer_coef = plan.coef[lead:split]
    n_outer, n_outer_cells = _prod(outer_coef), _prod(plan.cells[lead:split])
    inner, inner_cells = _prod(plan.coef[split:]), _prod(plan.cells[split:])
    buffer_of: ItemBuffer
    if buffer is None or isinstance(buffer, np.ndarray):
        whole = SplitRows.whole(np.empty((n_outer, inner_cells)) if buffer is None
                                else buffer.reshape(-1)[:n_outer * inner_cells].reshape(n_outer, inner_cells))
        buffer_of = lambda b: whole  # noqa: E731 - one buffer for every batch item
    else:
        buffer_of = buffer
    col_step = max(1, slab_cells // n_outer)
    outer_haar = single_haar(attrs[lead:split], tr[lead:split])
    outer_levels = np.array(list(haar_inverse_levels(plan.cells[lead])) if outer_haar else [],
                            dtype=np.int64).reshape(-1, 3)
    row_blocks = _row_blocks(plan, slab_cells)
    unused = haar_unused(plan.cells[lead]) if skip_unused and outer_haar else []
    if unused:
        row_blocks = _without(row_blocks, unused)
    skipped = (n_outer - sum(rr for _, rr in row_blocks)) * inner
    for b in range(batch):
        base = b * sub
        begin_item(b)
        buf = buffer_of(b)

        def rows_block(rows: tuple[int, int], base: int = base, buf: SplitRows = buf) -> None:
            r, rr = rows
            blk = np.asarray(source(base + r * inner, base + (r + rr) * inner))
            blk = blk.reshape(rr, *_block_shape(plan.coef[split:], block_last))
            res = _inverse_axes(blk, attrs[split:], tr[split:], 1, last)
            buf.set_rows(r, res.reshape(rr, inner_cells))
            tick(rr * inner)

        parallel.each(rows_block, row_blocks, threads)
        if skipped:
            tick(skipped)
        item = rows_out[b].reshape(n_outer_cells, inner_cells)
        if outer_haar and compiled.enabled():
            def compiled_columns(cols: tuple[int, int], buf: SplitRows = buf,
                                 item: np.ndarray = item) -> None:
                j, k = cols  # the same bits as below, column chunk by column chunk
                compiled.haar_columns_inverse(buf.head[:, j:k], buf.tail[:, j:k], outer_levels, item[:, j:k],
                                              add)

            parallel.each(compiled_columns, parallel.column_ranges(inner_cells, threads, compiled.COLUMNS),
                          threads)
            continue

        def columns_block(j: int, buf: SplitRows = buf, item: np.ndarray = item) -> None:
            jj = min(col_step, inner_cells - j)
            blk = buf.columns(j, jj).reshape(*outer_coef, jj)
            res = _inverse_axes(blk, attrs[lead:split], tr[lead:split], 0,  # a new array: at least
                                haar_levels=True)  # one outer axis is transformed
            _store(item[:, j:j + jj], res.reshape(n_outer_cells, jj), add)

        parallel.each(columns_block, range(0, inner_cells, col_step), threads)
    return out


def hn_inverse(u: np.ndarray, attributes: Sequence[Attribute], transformed: Sequence[bool], *,
               out: np.ndarray | None = None, slab_cells: int = SLAB_CELLS) -> np.ndarray:
    """Inverse HN transform (the 1-D inverses along every transformed axis), blocked.

    ``u`` is the full coefficient array; see :func:`hn_inverse_blocked` for the blocking.
    Small axes use their dense inverse matrix (:func:`inverse_axis`).  Returns float64 cells
    (in ``out`` if given).
    """
    attrs = tuple(attributes)
    plan = block_plan(attrs, list(transformed), slab_cells)
    u = np.asarray(u, dtype=np.float64)
    if u.shape != plan.coef:
        raise ParameterError(f"expected coefficients of shape {plan.coef}, got {u.shape}")
    flat = np.ascontiguousarray(u).reshape(-1)
    return hn_inverse_blocked(lambda i, j: flat[i:j], attrs, transformed,
                              np.empty(plan.cells) if out is None else out, slab_cells=slab_cells)


__all__ = ["DENSE_INVERSE_ENTRIES", "SLAB_CELLS", "BlockPlan", "LastInverse", "Source", "block_plan",
           "blas_single_thread", "hn_inverse", "hn_inverse_blocked", "inverse_axis",
           "inverse_matrix", "single_haar"]
