"""The HN inverse for large cubes (pure numpy): fused over all axes, blocked, in place.

* :func:`hn_inverse_blocked`: the inverse of coefficients pulled block by block from a source
  (e.g. a noise sampler): inner axes per cache-sized block, outer transformed axes in column
  blocks of one buffer; small axes by their dense inverse matrix (:func:`inverse_axis`).
* :func:`hn_lattice_inverse`: counts -> exact int64 forward -> ``perturb`` (the caller's
  noise on the numerators) -> float64 inverse, blocked, in the C order of the coefficients.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from threadpoolctl import ThreadpoolController

from polars_dp.domains.attributes import Attribute, Nominal
from polars_dp.domains.hierarchy import Hierarchy
from polars_dp.errors import ParameterError
from polars_dp.kernels import compiled, scratch
from polars_dp.kernels.ahead import ahead
from polars_dp.kernels.row_store import SplitRows
from polars_dp.kernels.wavelet_exact import (
    check_integer,
    forward_numerators,
    hn_denominators,
)
from polars_dp.kernels.wavelets import (
    as3d,
    coefficient_count,
    haar_inverse,
    haar_inverse_levels,
    haar_padded_length,
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
    the level kernels, never the dense product (the outer axes, whose blocks are long)."""
    for k in reversed(range(len(attributes))):
        if transformed[k]:
            if last is not None and k == len(attributes) - 1:
                block = last(block)
            elif haar_levels and not isinstance(attributes[k], Nominal):
                block = inverse(block, attributes[k], first_axis + k)
            else:
                block = inverse_axis(block, attributes[k], first_axis + k)
    return block


def _single_haar(attrs: Sequence[Attribute], tr: Sequence[bool]) -> bool:
    """Whether the axes are one transformed Haar axis (the outer axes of the usual layouts)."""
    return len(attrs) == 1 and tr[0] and not isinstance(attrs[0], Nominal)


# ---------------------------------------------------------------------------- blocked HN inverse
#: Target size (coefficients) of one block of the blocked kernels.
SLAB_CELLS = 1 << 21

#: ``source(start, stop)``: the coefficients ``[start, stop)`` of the flat (C order) coefficient
#: array, as an array of that many float64 values (any shape).
Source = Callable[[int, int], np.ndarray]

#: ``perturb(numerators, denominators, start)``: the float64 coefficients (same shape as the
#: int64 ``numerators``) of a block that starts at flat coefficient ``start``; ``denominators``
#: (int64) broadcasts to the block.  ``numerators / denominators`` are the exact coefficients.
#: ``numerators`` is always a fresh array that ``perturb`` may overwrite (its result may be a
#: float64 view of it).  With ``hn_lattice_inverse(..., approximate=True)`` it is called with the
#: float64 numerators as a fourth, keyword argument ``approx`` (also fresh).
Perturb = Callable[..., np.ndarray]

#: ``buffer_of(b)``: the (outer coefficients x inner cells) float64 buffer of batch item ``b``.
ItemBuffer = Callable[[int], SplitRows]


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


def _item_groups(plan: _Plan, slab: int) -> list[tuple[int, int]]:
    """``(first item, items)`` of every block when a batch item fits one block (``split == lead``)."""
    group = max(1, slab // plan.per_item)
    return [(b, min(group, plan.batch - b)) for b in range(0, plan.batch, group)]


def _row_blocks(plan: _Plan, slab: int) -> list[tuple[int, int]]:
    """``(first outer coefficient row, rows)`` of every block of one batch item (``split > lead``)."""
    inner, n_outer = _prod(plan.coef[plan.split:]), _prod(plan.coef[plan.lead:plan.split])
    step = max(1, slab // inner)
    return [(r, min(step, n_outer - r)) for r in range(0, n_outer, step)]


def block_ranges(attributes: Sequence[Attribute], transformed: Sequence[bool],
                 slab_cells: int = SLAB_CELLS) -> list[tuple[int, int]]:
    """The flat coefficient ranges ``[start, stop)`` that :func:`hn_inverse_blocked` pulls from its
    source, in order (the blocks of a transformed cube: groups of batch items, or row blocks of
    every batch item)."""
    plan = _plan(tuple(attributes), [bool(t) for t in transformed], slab_cells)
    if plan.lead == len(plan.cells):
        total = _prod(plan.cells)
        return [(i, min(i + slab_cells, total)) for i in range(0, total, slab_cells)]
    sub = plan.per_item
    if plan.split == plan.lead:
        return [(b * sub, (b + g) * sub) for b, g in _item_groups(plan, slab_cells)]
    inner = _prod(plan.coef[plan.split:])
    return [(b * sub + r * inner, b * sub + (r + rr) * inner)
            for b in range(plan.batch) for r, rr in _row_blocks(plan, slab_cells)]


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
                       buffer: np.ndarray | ItemBuffer | None = None,
                       advance: Callable[[int], None] | None = None,
                       last_inverse: LastInverse | None = None, last_cells: bool = False) -> np.ndarray:
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
    (the caller's kernel for values that ``source`` left unscaled).
    """
    attrs = tuple(attributes)
    tr = [bool(t) for t in transformed]
    plan = _plan(attrs, tr, slab_cells)
    if out.shape != plan.cells or out.dtype != np.float64 or not out.flags.c_contiguous:
        raise ParameterError(f"out must be a C-contiguous float64 array of shape {plan.cells}")
    block_last = plan.cells[-1] if last_cells else plan.coef[-1]
    if last_cells:
        last_inverse = _as_is
    with blas_single_thread(), scratch.arena():
        return _run_blocks(source, attrs, tr, plan, out, add, slab_cells, buffer, advance, last_inverse,
                           block_last)


def _as_is(block: np.ndarray) -> np.ndarray:
    return block


def _block_shape(coef: tuple[int, ...], last: int) -> tuple[int, ...]:
    """A block's shape along ``coef``'s axes, ``last`` entries along the last one."""
    return (*coef[:-1], last) if coef else ()


def _run_blocks(source: Source, attrs: tuple[Attribute, ...], tr: list[bool], plan: _Plan, out: np.ndarray,
                add: bool, slab_cells: int, buffer: np.ndarray | ItemBuffer | None,
                advance: Callable[[int], None] | None, last: LastInverse | None, block_last: int
                ) -> np.ndarray:
    tick = advance or (lambda n: None)
    d = len(attrs)
    if plan.lead == d:  # nothing transformed: coefficients are cells
        flat = out.reshape(-1)
        for i in range(0, flat.size, slab_cells):
            j = min(i + slab_cells, flat.size)
            scratch.reset()
            _store(flat[i:j], source(i, j), add)
            tick(j - i)
        return out
    lead, split = plan.lead, plan.split
    batch, sub = plan.batch, plan.per_item
    rows_out = out.reshape(batch, -1)
    if split == lead:  # a whole batch item fits one block: groups of items
        for b, g in _item_groups(plan, slab_cells):
            scratch.reset()
            blk = np.asarray(source(b * sub, (b + g) * sub))
            blk = blk.reshape(g, *_block_shape(plan.coef[lead:], block_last))
            _store(rows_out[b:b + g], _inverse_axes(blk, attrs[lead:], tr[lead:], 1, last), add)
            tick(g * sub)
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
    outer_haar = _single_haar(attrs[lead:split], tr[lead:split])
    outer_levels = np.array(list(haar_inverse_levels(plan.cells[lead])) if outer_haar else [],
                            dtype=np.int64).reshape(-1, 3)
    for b in range(batch):
        base = b * sub
        buf = buffer_of(b)
        for r, rr in _row_blocks(plan, slab_cells):
            scratch.reset()
            blk = np.asarray(source(base + r * inner, base + (r + rr) * inner))
            blk = blk.reshape(rr, *_block_shape(plan.coef[split:], block_last))
            res = _inverse_axes(blk, attrs[split:], tr[split:], 1, last)
            buf.set_rows(r, res.reshape(rr, inner_cells))
            tick(rr * inner)
        item = rows_out[b].reshape(n_outer_cells, inner_cells)
        if outer_haar and compiled.haar_columns_inverse(buf.head, buf.tail, outer_levels, item, add):
            continue  # the same bits as below, column chunk by column chunk
        for j in range(0, inner_cells, col_step):
            jj = min(col_step, inner_cells - j)
            scratch.reset()
            blk = buf.columns(j, jj).reshape(*outer_coef, jj)
            res = _inverse_axes(blk, attrs[lead:split], tr[lead:split], 0,  # a new array: at least
                                haar_levels=True)  # one outer axis is transformed
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


def _broadcastable(parts: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Per-axis denominators with the all-ones axes (Haar, untransformed) cut to length 1, so
    their outer product broadcasts instead of repeating ones."""
    return [p if np.any(p != 1) else p[:1] for p in parts]


def _outer_product(parts: Sequence[np.ndarray]) -> np.ndarray:
    """Outer product of 1-D int64 arrays, shape ``(len(p) for p in parts)``."""
    out = np.ones((), dtype=np.int64)
    for p in parts:
        out = np.multiply.outer(out, p)
    return out


def hn_lattice_inverse(counts: np.ndarray, attributes: Sequence[Attribute], transformed: Sequence[bool],
                       perturb: Perturb, *, out: np.ndarray | None = None, slab_cells: int = SLAB_CELLS,
                       advance: Callable[[int], None] | None = None, approximate: bool = False) -> np.ndarray:
    """``inverse_HN(perturb(forward_HN(counts)))``: exact int64 forward, float64 inverse, blocked.

    The integer numerators ``D * u`` of every coefficient (:func:`hn_forward_int`, with the
    denominators ``D`` of :func:`hn_denominators`) are handed to ``perturb`` block by block,
    in the C order of the full coefficient array; ``perturb`` returns the float64 (noisy)
    coefficients of the block, and the inverse of those is written to ``out``.  The int64
    numerators are exact modulo ``2^64`` whatever their size; with ``approximate=True`` the
    same numerators computed in float64 (:func:`forward_numerators`) are passed as well, as
    ``perturb(numerators, denominators, start, approx=...)`` (a fresh array it may overwrite),
    so that ``perturb`` can recover numerators that overflowed int64.  If ``perturb`` has an
    attribute ``undivided`` (the same noisy numerators ``X``, not divided by ``D``: int64, or
    float64 ``float(X)``) and the last axis is a Haar axis inverted level by level, that is
    called instead and the division is folded into the Haar inverse
    (``haar_inverse(X, divisor=D)``, bit for bit the inverse of ``X / D``).  If ``perturb`` has
    an attribute ``noise_first`` and ``approximate`` is False, that replaces both on such an
    axis: it is called as ``noise_first(Y, denominators, start, m, w)`` with ``Y`` the numerators
    along every transformed axis but the last (cells along it) and returns the block inverted
    along the last axis; the forward along it is never computed.  ``w`` is the block's noise
    from ``perturb.first_noise(shape, denominators, m)`` when the perturb has one: that is
    called block by block in the same order, one block ahead, on a worker thread
    (:func:`~polars_dp.kernels.ahead.ahead`); else None.

    Memory: the forward along the outer transformed axes is one int64 buffer of (outer
    coefficients x inner cells) per batch item, reused in place (as float64) by the inverse (plus
    one float64 buffer of that size with ``approximate``).  With ``out`` given as
    ``counts.view(np.float64)`` (the counts are consumed) its first (outer cells) rows are the
    item's own counts (:class:`~polars_dp.kernels.row_store.SplitRows`), so only the extra
    coefficient rows are new memory: 27 rows of 101 cells for a 128-coefficient Haar axis.  The inner axes are
    forward-transformed, perturbed and inverted one block at a time.
    """
    attrs = tuple(attributes)
    tr = [bool(t) for t in transformed]
    counts = check_integer(counts)
    plan = _plan(attrs, tr, slab_cells)
    if counts.shape != plan.cells:
        raise ParameterError(f"counts has shape {counts.shape} but the attributes declare {plan.cells}")
    counts = np.ascontiguousarray(counts)
    if out is None:
        out = np.empty(plan.cells)
    dens = hn_denominators(attrs, tr)
    lead, split, d = plan.lead, plan.split, len(attrs)
    flat_counts = counts.reshape(plan.batch, -1)

    def numerators(x: np.ndarray, first: int, offset: int, stop: int = d) -> np.ndarray:
        """Forward along the transformed axes ``[first, stop)`` (array axis ``k - offset``)."""
        for k in range(first, stop):
            if tr[k]:
                x = forward_numerators(x, attrs[k], k - offset)
        return x

    # A perturb with an ``undivided`` variant hands over ``X`` itself when the last axis is a Haar
    # axis inverted level by level: the division by ``D`` is folded into that inverse's scaling
    # (``haar_inverse(X, divisor=D)`` is bit for bit ``haar_inverse(X / D)``), one pass fewer.
    undivided: Perturb | None = getattr(perturb, "undivided", None)
    last_attr = attrs[-1]
    fold = (undivided is not None and tr[-1] and not isinstance(last_attr, Nominal) and split < d
            and last_attr.n_cells * coefficient_count(last_attr) > DENSE_INVERSE_ENTRIES)
    handed: list[np.ndarray] = []  # the denominators of the block just handed over

    def hand_over(num: np.ndarray, num_f: np.ndarray | None, den: np.ndarray, i: int) -> np.ndarray:
        give = perturb
        if fold and undivided is not None:
            handed[:] = [den]
            give = undivided
        if num_f is None:
            return give(num, den, i)
        return give(num, den, i, approx=num_f)

    def last_inverse(block: np.ndarray) -> np.ndarray:
        return haar_inverse(block, last_attr.n_cells, block.ndim - 1, divisor=handed[0])

    last = last_inverse if fold else None
    # A perturb with a ``noise_first`` variant, on the narrow lattice, skips the last Haar axis's
    # forward: it gets the numerators along the other axes and returns the block inverted along
    # the last one (``P H^-1(D u + Z) = P Y + P H^-1(Z)``, exact; see that variant).
    noise_first: Perturb | None = getattr(perturb, "noise_first", None)
    first = fold and noise_first is not None and not approximate
    m_last = last_attr.n_cells

    # A perturb with a ``first_noise(shape, denominators, m)`` has the noise-first blocks' noise
    # drawn and inverted along the last axis by a worker thread one block ahead (the same draws in
    # the same order: :func:`ahead`), so that on two cores it overlaps the block before.
    drawer: Callable[[tuple[int, ...], np.ndarray, int], np.ndarray] | None = getattr(
        perturb, "first_noise", None)
    p_last = coefficient_count(last_attr) if first else 0  # a Haar axis when noise comes first
    drawn: list[Generator[tuple[int, np.ndarray], None, None]] = []

    def hand_over_first(partial: np.ndarray, den: np.ndarray, i: int) -> np.ndarray:
        assert noise_first is not None
        w = None
        if drawn:
            start, w = next(drawn[0])
            if start != i:
                raise RuntimeError(f"noise drawn for the block at {start} handed to the block at {i}")
        return noise_first(partial, den, i, m_last, w)

    def run(source: Source, request: Callable[[int, int], tuple[tuple[int, ...], np.ndarray]],
            **kwargs: Any) -> np.ndarray:
        """:func:`hn_inverse_blocked` of ``source``; on the noise-first path every block's noise is
        ``drawer(*request(start, stop), m)``, drawn ahead."""
        if first and drawer is not None:
            def take(block: tuple[int, int], draw: Callable[..., np.ndarray] = drawer
                     ) -> tuple[int, np.ndarray]:
                return block[0], draw(*request(*block), m_last)

            drawn.append(ahead(take, block_ranges(attrs, tr, slab_cells)))
        try:
            return hn_inverse_blocked(source, attrs, tr, out, slab_cells=slab_cells, advance=advance,
                                      last_inverse=last, last_cells=first, **kwargs)
        finally:
            for draws in drawn:
                draws.close()  # cancels what was not started, waits for the running draw

    if lead == d or split == lead:  # batch items (or all cells) go block by block
        lo = min(lead, d)
        item_den = _outer_product(_broadcastable(dens[lo:]))[None]
        sub = plan.per_item

        def small_source(i: int, j: int) -> np.ndarray:
            if lead == d:
                x = counts.reshape(-1)[i:j]
                return hand_over(x.copy(), x.astype(np.float64) if approximate else None,
                                 np.ones((), dtype=np.int64), i)
            b, g = i // sub, (j - i) // sub
            x = flat_counts[b:b + g].reshape(g, *plan.cells[lead:])
            if first:
                return hand_over_first(numerators(x, lead, lead - 1, d - 1), item_den, i)
            num = numerators(x, lead, lead - 1)
            if num is x:
                num = x.copy()
            num_f = numerators(x.astype(np.float64), lead, lead - 1) if approximate else None
            return hand_over(num, num_f, item_den, i)

        def small_request(i: int, j: int) -> tuple[tuple[int, ...], np.ndarray]:
            return ((j - i) // sub, *plan.coef[lead:d - 1], p_last), item_den

        return run(small_source, small_request)
    outer_coef = plan.coef[lead:split]
    n_outer = _prod(outer_coef)
    inner, inner_cells = _prod(plan.coef[split:]), _prod(plan.cells[split:])
    n_outer_cells = _prod(plan.cells[lead:split])
    # Overwriting the counts, batch item b's first cells-many coefficient rows are its own counts'
    # memory (each column block is read whole before its coefficients are written back, each row
    # block before its inverse): only the extra coefficient rows take new memory.
    in_place = out.ctypes.data == counts.ctypes.data and out.nbytes == counts.nbytes
    tail = np.empty((n_outer - n_outer_cells if in_place else n_outer, inner_cells), dtype=np.int64)

    def store_of(b: int) -> SplitRows:
        if in_place:
            return SplitRows(flat_counts[b].reshape(n_outer_cells, inner_cells), tail)
        return SplitRows.whole(tail)

    store_f = np.empty((n_outer, inner_cells)) if approximate else None
    outer_den = _outer_product(dens[lead:split]).reshape(-1)
    inner_den = _outer_product(_broadcastable(dens[split:]))[None]
    sub = plan.per_item
    col_step = max(1, slab_cells // n_outer)
    compiled_forward = store_f is None and _single_haar(attrs[lead:split], tr[lead:split])

    def source(i: int, j: int) -> np.ndarray:
        b, offset = divmod(i, sub)
        r, rr = offset // inner, (j - i) // inner
        store = store_of(b)
        item = flat_counts[b].reshape(n_outer_cells, inner_cells)
        if r == 0 and not (compiled_forward and compiled.haar_columns_forward(item, store.head, store.tail)):
            for c in range(0, inner_cells, col_step):  # a new batch item: the outer axes' forward
                scratch.reset()  # each column block is copied into ``store`` before the next
                cc = min(col_step, inner_cells - c)
                blk = item[:, c:c + cc].reshape(*plan.cells[lead:split], cc)
                coef = _outer_forward(blk, lead, split)  # new arrays: ``lead`` is transformed
                coef_f = None if store_f is None else _outer_forward(blk.astype(np.float64), lead, split)
                store.set_columns(c, coef.reshape(n_outer, cc))  # may overwrite ``blk``: read above
                if store_f is not None and coef_f is not None:
                    store_f[:, c:c + cc] = coef_f.reshape(n_outer, cc)
        x = store.rows(r, rr).reshape(rr, *plan.cells[split:])
        den = rows_den(i, j)
        if first:
            return hand_over_first(numerators(x, split, split - 1, d - 1), den, i)
        num = numerators(x, split, split - 1)
        if np.shares_memory(num, x):
            num = num.copy()
        num_f = None
        if store_f is not None:
            num_f = numerators(store_f[r:r + rr].reshape(rr, *plan.cells[split:]), split, split - 1)
            if np.shares_memory(num_f, store_f):
                num_f = num_f.copy()
        return hand_over(num, num_f, den, i)

    def _outer_forward(blk: np.ndarray, first: int, stop: int) -> np.ndarray:
        for k in range(first, stop):
            if tr[k]:
                blk = forward_numerators(blk, attrs[k], k - first)
        return blk

    def buffer_of(b: int) -> SplitRows:
        return store_of(b).view(np.float64)

    def rows_den(i: int, j: int) -> np.ndarray:
        """The denominators of the row block ``[i, j)`` (its outer rows times the inner axes')."""
        r, rr = (i % sub) // inner, (j - i) // inner
        return outer_den[r:r + rr].reshape(rr, *([1] * (d - split))) * inner_den

    def rows_request(i: int, j: int) -> tuple[tuple[int, ...], np.ndarray]:
        return ((j - i) // inner, *plan.coef[split:d - 1], p_last), rows_den(i, j)

    return run(source, rows_request, buffer=buffer_of)



__all__ = ["DENSE_INVERSE_ENTRIES", "Perturb", "SLAB_CELLS", "Source", "block_ranges", "hn_inverse",
           "hn_inverse_blocked", "hn_lattice_inverse", "inverse_axis", "inverse_matrix"]
