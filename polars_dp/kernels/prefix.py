"""Summed-area (prefix-sum) arrays and box sums by inclusion-exclusion (pure numpy).

``P[j_1, ..., j_d] = sum_{i_k < j_k} M[i_1, ..., i_d]`` (a zero border in front of every
axis), so the sum of ``M`` over the box ``[s, t)`` is

    sum_{b in {0,1}^d} (-1)^(d - |b|) P[c(b)],   c(b)_k = t_k if b_k else s_k

(``2^d`` look-ups per box).  Used by grid releases (cells) and spatial grids (leaves).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import numpy as np

#: Target size (cells) of one block of prefix rows.
BLOCK_CELLS = 1 << 21


def cumsum_inplace(a: np.ndarray, axis: int) -> None:
    """``np.cumsum(a, axis, out=a)`` with the same additions in the same order (bit-identical):
    along the last axis (or before short rows) numpy's own loop; along another axis one
    vectorised add per index (``a[i] += a[i - 1]``), much faster than numpy's strided
    accumulate there."""
    if axis == a.ndim - 1 or int(np.prod(a.shape[axis + 1:], dtype=np.int64)) < 64:  # short rows
        np.cumsum(a, axis=axis, out=a)
        return
    v = np.moveaxis(a, axis, 0)
    for i in range(1, v.shape[0]):
        np.add(v[i - 1], v[i], out=v[i])


def prefix_row_blocks(counts: np.ndarray, block_cells: int = BLOCK_CELLS) -> Iterator[tuple[int, np.ndarray]]:
    """The summed-area array of ``counts`` in blocks of rows along the first axis.

    Yields ``(r, rows)``: ``rows`` are ``P[r:r + len(rows)]`` (row 0, all zeros, comes first on
    its own).  A block is valid until the next one is requested (one buffer is reused).
    Each block carries the running column sums of the rows before it
    (``acc_i = acc_{i-1} + M[i]``, exactly the first-axis cumulative sum), then takes the
    cumulative sums along the other axes while it is in cache.  The additions are the same,
    in the same order, as one ``np.cumsum`` per axis over the whole array, so the values are
    bit-identical to :func:`prefix_sums`; only one block is held at a time.
    """
    counts = np.asarray(counts, dtype=np.float64)
    rest = counts.shape[1:]
    rest_p = tuple(n + 1 for n in rest)
    inner = int(np.prod(rest_p, dtype=np.int64))
    step = max(1, block_cells // max(inner, 1))
    yield 0, np.zeros((1, *rest_p))
    carry = None
    interior = (slice(None),) + (slice(1, None),) * len(rest)
    buffer = np.zeros((min(step, counts.shape[0]), *rest_p))  # borders stay 0 under the cumsums
    for r in range(0, counts.shape[0], step):
        src = counts[r:r + step]
        block = buffer[:src.shape[0]]
        body = block[interior]
        body[...] = src
        if carry is not None:
            body[0] += carry
        cumsum_inplace(body, 0)
        carry = body[-1].copy()
        for axis in range(1, counts.ndim):
            cumsum_inplace(block, axis)
        yield r + 1, block


def prefix_sums(counts: np.ndarray, *, batch_axes: int = 0) -> np.ndarray:
    """Summed-area array of ``counts`` with a zero border on every axis after the first
    ``batch_axes`` (a stack of independent grids keeps its leading axes as they are).

    Shape ``(n_1 + 1, ..., n_d + 1)`` for ``batch_axes=0``, filled block by block
    (:func:`prefix_row_blocks`: one pass, cache-sized cumulative sums); with batch axes, one
    in-place cumulative sum per axis.
    """
    counts = np.asarray(counts, dtype=np.float64)
    if batch_axes == 0 and counts.ndim:
        prefix = np.empty(tuple(n + 1 for n in counts.shape))
        for r, rows in prefix_row_blocks(counts):
            prefix[r:r + rows.shape[0]] = rows
        return prefix
    lead = counts.shape[:batch_axes]
    prefix = np.zeros(lead + tuple(n + 1 for n in counts.shape[batch_axes:]), dtype=np.float64)
    prefix[(slice(None),) * batch_axes + (slice(1, None),) * (counts.ndim - batch_axes)] = counts
    for axis in range(batch_axes, counts.ndim):
        np.cumsum(prefix, axis=axis, out=prefix)
    return prefix


def _corners(n: int, low: Sequence[np.ndarray], high: Sequence[np.ndarray]
             ) -> Iterator[tuple[np.ndarray, bool]]:
    """Per corner of ``n`` boxes: its flat index, per axis ``k`` its upper side ``high[k]`` or its
    lower side ``low[k]`` (the index times the axis's stride), and its sign (odd number of low
    sides: subtract)."""
    for corner in range(1 << len(low)):
        index = np.zeros(n, dtype=np.int64)
        n_low = 0
        for k in range(len(low)):
            if corner >> k & 1:
                index += high[k]
            else:
                index += low[k]
                n_low += 1
        yield index, bool(n_low % 2)


def _signed_sum(n: int, terms: Iterable[tuple[np.ndarray, bool]]) -> np.ndarray:
    """``sum ± values`` over the corners' ``(values, negative)``, in their order."""
    total = np.zeros(n, dtype=np.float64)
    for values, negative in terms:
        if negative:
            total -= values
        else:
            total += values
    return total


def streamed_box_sums(counts: np.ndarray, starts: np.ndarray, stops: np.ndarray,
                      block_cells: int = BLOCK_CELLS) -> np.ndarray:
    """:func:`box_sums` of :func:`prefix_sums` without holding the summed-area array: its row
    blocks are streamed once (:func:`prefix_row_blocks`) and only the ``2^d`` corner values of
    every box are kept.  Bit-identical answers; memory one block plus the corner values."""
    counts = np.asarray(counts, dtype=np.float64)
    starts = np.atleast_2d(np.asarray(starts, dtype=np.int64))
    stops = np.atleast_2d(np.asarray(stops, dtype=np.int64))
    shape = tuple(n + 1 for n in counts.shape)
    inner = int(np.prod(shape[1:], dtype=np.int64))
    strides = np.cumprod((1, *shape[::-1]), dtype=np.int64)[-2::-1]  # C order, in elements
    corners = list(_corners(starts.shape[0], [starts[:, k] * s for k, s in enumerate(strides)],
                            [stops[:, k] * s for k, s in enumerate(strides)]))
    flat = np.concatenate([c[0] for c in corners])
    values: np.ndarray = np.empty(flat.size)
    order = np.argsort(flat, kind="stable")
    sorted_flat = flat[order]
    for r, rows in prefix_row_blocks(counts, block_cells):
        lo, hi = np.searchsorted(sorted_flat, [r * inner, (r + rows.shape[0]) * inner])
        if hi > lo:
            pick = order[lo:hi]
            values[pick] = rows.reshape(-1)[flat[pick] - r * inner]
    return _signed_sum(starts.shape[0], zip(values.reshape(len(corners), -1), (c[1] for c in corners),
                                            strict=True))


def box_sums(prefix: np.ndarray, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """Sums of the boxes ``[starts, stops)`` (shape (queries, d)) from a summed-area array:
    ``2^d`` vectorised gathers from the flat prefix array."""
    starts = np.atleast_2d(np.asarray(starts, dtype=np.int64))
    stops = np.atleast_2d(np.asarray(stops, dtype=np.int64))
    element_strides = np.asarray(prefix.strides, dtype=np.int64) // prefix.itemsize
    low, high = starts * element_strides, stops * element_strides
    flat = prefix.reshape(-1)
    corners = _corners(starts.shape[0], [low[:, k] for k in range(prefix.ndim)],
                       [high[:, k] for k in range(prefix.ndim)])
    return _signed_sum(starts.shape[0], ((flat.take(index), negative) for index, negative in corners))


__all__ = ["BLOCK_CELLS", "box_sums", "cumsum_inplace", "prefix_row_blocks", "prefix_sums",
           "streamed_box_sums"]
