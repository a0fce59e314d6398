"""The exact lattice pipeline over the blocked HN inverse (pure numpy, plus the optional compiled
kernels): counts -> exact int64 forward -> ``perturb`` (the caller's noise on the integer
numerators) -> float64 inverse, block by block in the C order of the coefficients, writing over
the counts (:func:`hn_lattice_inverse`).  The blocking, the dense small-axis inverses and the
driver are :mod:`polars_dp.kernels.wavelet_blocks`.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from polars_dp.domains.attributes import Attribute, Nominal
from polars_dp.errors import ParameterError
from polars_dp.kernels import compiled, parallel
from polars_dp.kernels.row_store import SplitRows
from polars_dp.kernels.wavelet_blocks import (
    DENSE_INVERSE_ENTRIES,
    SLAB_CELLS,
    Source,
    block_plan,
    hn_inverse_blocked,
    single_haar,
)
from polars_dp.kernels.wavelet_exact import check_integer, forward_numerators, hn_denominators
from polars_dp.kernels.wavelets import coefficient_count, haar_inverse

#: ``perturb(numerators, denominators, start)``: the float64 coefficients (same shape as the
#: int64 ``numerators``) of a block that starts at flat coefficient ``start``; ``denominators``
#: (int64) broadcasts to the block.  ``numerators / denominators`` are the exact coefficients.
#: ``numerators`` is always a fresh array that ``perturb`` may overwrite (its result may be a
#: float64 view of it).  With ``hn_lattice_inverse(..., approximate=True)`` it is called with the
#: float64 numerators as a fourth, keyword argument ``approx`` (also fresh).
Perturb = Callable[..., np.ndarray]


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
                       advance: Callable[[int], None] | None = None, approximate: bool = False,
                       threads: int | None = None) -> np.ndarray:
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
    axis: it is called as ``noise_first(Y, denominators, start, m)`` with ``Y`` the numerators
    along every transformed axis but the last (cells along it) and returns the block inverted
    along the last axis; the forward along it is never computed.  If ``perturb`` has a true
    attribute ``by_block`` (its value for a block depends on that block's start and
    numerators alone, and it may be called from several threads at once), the blocks, and the
    column blocks of the outer axes' forward and inverse, are shared among
    ``threads`` threads (default :func:`~polars_dp.kernels.parallel.thread_count`); the
    release is the same for any number of threads.

    Memory: the forward along the outer transformed axes is one int64 buffer of (outer
    coefficients x inner cells) per batch item, reused in place (as float64) by the inverse (plus
    one float64 buffer of that size with ``approximate``).  With ``out`` given as
    ``counts.view(np.float64)`` (the counts are consumed) its first (outer cells) rows are the
    item's own counts (:class:`~polars_dp.kernels.row_store.SplitRows`), so only the extra
    coefficient rows are new memory: 27 rows of 101 cells for a 128-coefficient Haar axis.  The inner axes are
    forward-transformed, perturbed and inverted one block at a time.  The rows of an outer Haar
    axis over padding cells only (:func:`~polars_dp.kernels.wavelets.haar_unused`) reach no
    cell: ``perturb`` never sees them (``skip_unused`` of the driver), and they keep the
    forward's zeros.
    """
    attrs = tuple(attributes)
    tr = [bool(t) for t in transformed]
    counts = check_integer(counts)
    plan = block_plan(attrs, tr, slab_cells)
    if counts.shape != plan.cells:
        raise ParameterError(f"counts has shape {counts.shape} but the attributes declare {plan.cells}")
    counts = np.ascontiguousarray(counts)
    if out is None:
        out = np.empty(plan.cells)
    dens = hn_denominators(attrs, tr)
    lead, split, d = plan.lead, plan.split, len(attrs)
    flat_counts = counts.reshape(plan.batch, -1)
    sub = plan.per_item

    def numerators(x: np.ndarray, first: int, offset: int, stop: int = d) -> np.ndarray:
        """Forward along the transformed axes ``[first, stop)`` (array axis ``k - offset``).
        int64: the axes that grow the array least go first (the least memory traffic; exact
        integers, so the same numerators in any order); float64 approximations in axis order."""
        axes = [k for k in range(first, stop) if tr[k]]
        if x.dtype == np.int64:
            axes.sort(key=lambda k: coefficient_count(attrs[k]) / attrs[k].n_cells)
        for k in axes:
            x = forward_numerators(x, attrs[k], k - offset)
        return x

    undivided: Perturb | None = getattr(perturb, "undivided", None)
    last_attr = attrs[-1]
    fold = (undivided is not None and tr[-1] and not isinstance(last_attr, Nominal) and split < d
            and last_attr.n_cells * coefficient_count(last_attr) > DENSE_INVERSE_ENTRIES)
    handed = threading.local()  # .den: the denominators of the block this thread handed over

    def hand_over(num: np.ndarray, num_f: np.ndarray | None, den: np.ndarray, i: int) -> np.ndarray:
        give = perturb
        if fold and undivided is not None:
            handed.den = den
            give = undivided
        if num_f is None:
            return give(num, den, i)
        return give(num, den, i, approx=num_f)

    def last_inverse(block: np.ndarray) -> np.ndarray:
        return haar_inverse(block, last_attr.n_cells, block.ndim - 1, divisor=handed.den)

    last = last_inverse if fold else None
    # noise_first: ``P H^-1(D u + Z) = P Y + P H^-1(Z)``, exact (see that variant)
    noise_first: Perturb | None = getattr(perturb, "noise_first", None)
    first = fold and noise_first is not None and not approximate
    n_threads = 1
    if getattr(perturb, "by_block", False):
        n_threads = parallel.thread_count() if threads is None else max(1, int(threads))

    def hand_over_first(partial: np.ndarray, den: np.ndarray, i: int) -> np.ndarray:
        assert noise_first is not None
        return noise_first(partial, den, i, last_attr.n_cells)

    def run(source: Source, **kwargs: Any) -> np.ndarray:
        return hn_inverse_blocked(source, attrs, tr, out, slab_cells=slab_cells, advance=advance,
                                  last_inverse=last, last_cells=first, threads=n_threads, skip_unused=True,
                                  **kwargs)

    if lead == d or split == lead:  # batch items (or all cells) go block by block
        lo = min(lead, d)
        item_den = _outer_product(_broadcastable(dens[lo:]))[None]

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

        return run(small_source)
    n_outer = math.prod(plan.coef[lead:split])
    inner, inner_cells = math.prod(plan.coef[split:]), math.prod(plan.cells[split:])
    n_outer_cells = math.prod(plan.cells[lead:split])
    in_place = out.ctypes.data == counts.ctypes.data and out.nbytes == counts.nbytes
    tail = np.empty((n_outer - n_outer_cells if in_place else n_outer, inner_cells), dtype=np.int64)

    def store_of(b: int) -> SplitRows:
        if in_place:
            return SplitRows(flat_counts[b].reshape(n_outer_cells, inner_cells), tail)
        return SplitRows.whole(tail)

    store_f = np.empty((n_outer, inner_cells)) if approximate else None
    outer_den = _outer_product(dens[lead:split]).reshape(-1)
    inner_den = _outer_product(_broadcastable(dens[split:]))[None]
    col_step = max(1, slab_cells // n_outer)
    compiled_forward = store_f is None and single_haar(attrs[lead:split], tr[lead:split])

    def begin_item(b: int) -> None:
        """The outer axes' forward of batch item ``b`` into its coefficient rows, column block by
        column block (each read whole before its coefficients are written: ``store`` may alias it)."""
        store = store_of(b)
        item = flat_counts[b].reshape(n_outer_cells, inner_cells)
        if compiled_forward and compiled.enabled():
            def compiled_columns(cols: tuple[int, int]) -> None:
                c, e = cols
                compiled.haar_columns_forward(item[:, c:e], store.head[:, c:e], store.tail[:, c:e])

            parallel.each(compiled_columns, parallel.column_ranges(inner_cells, n_threads, compiled.COLUMNS),
                          n_threads)
            return

        def columns(c: int) -> None:
            cc = min(col_step, inner_cells - c)
            blk = item[:, c:c + cc].reshape(*plan.cells[lead:split], cc)
            coef = numerators(blk, lead, lead, split)  # new arrays: ``lead`` is transformed
            coef_f = None if store_f is None else numerators(blk.astype(np.float64), lead, lead, split)
            store.set_columns(c, coef.reshape(n_outer, cc))  # may overwrite ``blk``: read above
            if store_f is not None and coef_f is not None:
                store_f[:, c:c + cc] = coef_f.reshape(n_outer, cc)

        parallel.each(columns, range(0, inner_cells, col_step), n_threads)

    def source(i: int, j: int) -> np.ndarray:
        b, offset = divmod(i, sub)
        r, rr = offset // inner, (j - i) // inner
        store = store_of(b)
        x = store.rows(r, rr).reshape(rr, *plan.cells[split:])
        den = outer_den[r:r + rr].reshape(rr, *([1] * (d - split))) * inner_den  # outer rows x inner axes
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

    def buffer_of(b: int) -> SplitRows:
        return store_of(b).view(np.float64)

    return run(source, buffer=buffer_of, begin_item=begin_item)


__all__ = ["Perturb", "hn_lattice_inverse"]
