"""Counting rows held in memory slice by slice, into one result buffer.

A frame in memory is counted in row slices of :func:`slice_rows` rows: the cell of every row
of a slice is computed into one reused key buffer and added to the one result array
(:class:`~polars_dp.counting.aggregate.Accumulator`), so no cell column of the whole input is
ever held (a 1e8-row frame's cells would take 800 MB of fresh pages), and each slice's columns
and cells stay in the cache while they are read twice.

Two ways to compute a slice's cells, chosen from public inputs only (the declared axes, the row
options and the column types of the schema):

* :class:`AffineAxis`, every axis an integer rule ``cell = (v - lo) // width`` for
  ``lo <= v <= hi`` on a column of a narrow integer type (an integer :class:`Ordinal`, or a
  :class:`Nominal` whose integer leaves are ``a, a+1, ..., a+n-1`` in order: ``width = 1``),
  no row rule dropping rows, no count column and the C-order key: numpy on views of the
  columns (:func:`affine_keys`), the same integers as the Polars expression of
  :meth:`~polars_dp.domains.attributes.Ordinal.index_expr` (``tests/unit/counting/test_slices.py``
  checks them against each other); ``on_out_of_domain="clamp"`` clips each value to
  ``[lo, hi]`` first, as the expression does; a null or, without clamp, a value outside
  ``[lo, hi]`` gives no cell and the count is explained by the usual error path;
* otherwise the Polars expressions of the declared axes, evaluated on each slice.

Privacy.  The number of rows is private (under ``add_remove`` neighbours it changes by one),
and so is every slice's content.  The slice size is a function of public inputs only (a
constant and the number of declared axes), the number of slices follows from the row count,
and the counts are the same integers whatever the slicing: every row is added once, to its
own cell, and integer addition does not depend on the order or grouping of the additions
(tests count one frame with several slice sizes and compare).  The output distribution (the
counts, then the noise drawn from public sizes) is therefore that of the unsliced count; only
the running time depends on the row count, as any count's does.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import polars as pl

from polars_dp.counting.spec import CountSpec, strides
from polars_dp.domains.attributes import Nominal, Ordinal

#: Bytes of one slice's key columns and cells (int64 each): inside the last-level cache, large
#: enough that the few numpy calls per slice cost little beside its rows.
SLICE_BYTES = 1 << 22
#: Integer column types whose every value is an int64 (wider types take the Polars expressions).
NARROW_INTEGERS = (pl.Int8, pl.Int16, pl.Int32, pl.Int64, pl.UInt8, pl.UInt16, pl.UInt32)
#: The classes of :data:`NARROW_INTEGERS` (a schema holds instances: a set look-up, not seven
#: comparisons) and the unsigned type of each integer width.
_NARROW_CLASSES = frozenset(NARROW_INTEGERS)
_UNSIGNED = {size: np.dtype(f"u{size}") for size in (1, 2, 4, 8)}
#: An affine axis keeps ``hi - lo`` below this, so ``v - lo`` never wraps in int64.
SPAN_LIMIT = 1 << 62
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def slice_rows(n_axes: int) -> int:
    """Rows per slice (a power of two, at least 4096): :data:`SLICE_BYTES` over 8 bytes per axis
    and per cell.  Public: a constant and the number of declared axes, never the data."""
    rows = SLICE_BYTES // (8 * (n_axes + 1))
    return max(4096, 1 << (rows.bit_length() - 1))


@dataclass(frozen=True)
class AffineAxis:
    """Cell ``(v - lo) // width`` of the values ``lo <= v <= hi`` of ``column``, times ``stride``."""

    column: str
    lo: int
    hi: int
    width: int
    stride: int


def _affine_bounds(axis: object, dtype: pl.DataType) -> tuple[int, int, int] | None:
    """``(lo, hi, width)`` of an axis whose cell is an integer affine rule on ``dtype``, else None."""
    if type(dtype) not in _NARROW_CLASSES and dtype not in NARROW_INTEGERS:
        return None
    if isinstance(axis, Ordinal):
        if not axis.integer:
            return None
        lo, hi, width = int(axis.lo), int(axis.hi), int(axis.width)
    elif isinstance(axis, Nominal):
        labels = axis.cell_labels()
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in labels):
            return None
        lo = labels[0]
        if any(x != lo + i for i, x in enumerate(labels)):
            return None
        hi, width = lo + len(labels) - 1, 1
    else:
        return None
    if not (INT64_MIN <= lo <= hi <= INT64_MAX and hi - lo < SPAN_LIMIT):
        return None
    return lo, hi, width


def affine_axes(spec: CountSpec, dtypes: Sequence[pl.DataType]) -> list[AffineAxis] | None:
    """The axes of ``spec`` as :class:`AffineAxis` rules when every one is affine on its column
    type and the rows are counted one each, every row kept (no row rule dropping rows, no
    count column) under the C-order key; else None (the Polars expressions count)."""
    if spec.key is not None or spec.count_column is not None or spec.drops_rows:
        return None
    out = []
    for axis, dtype, stride in zip(spec.axes, dtypes, strides(spec.shape), strict=True):
        bounds = _affine_bounds(axis, dtype)
        if bounds is None:
            return None
        out.append(AffineAxis(axis.column, *bounds, stride))
    return out


def affine_keys(columns: Sequence[np.ndarray], axes: Sequence[AffineAxis], clamp: bool,
                out: np.ndarray, scratch: np.ndarray) -> bool:
    """The C-order cell of every row into ``out`` (int64, the rows' length) from the columns'
    values (numpy views, no nulls); False when, without ``clamp``, a value lies outside its
    axis's ``[lo, hi]`` (that row has no cell).  With ``clamp`` each value is first clipped to
    ``[lo, hi]``.  ``scratch`` is an int64 buffer of the same length.

    Outside values are found in one pass per axis: ``lo <= v <= hi`` exactly when ``v - lo``,
    computed modulo ``2^64`` and read as unsigned, is at most ``hi - lo`` (``v`` and ``lo`` are
    int64 and ``hi - lo < 2^62``, so a negative difference reads as at least ``2^63``).  Each
    term ``((v - lo) // width) * stride`` is then exact: below the number of cells.  Every step
    computes in int64 (``dtype=``), whatever the column's width: numpy 1.x would otherwise compute
    ``uint8 - 200`` in uint8 (value-based casting) and wrap."""
    first = True
    for x, a in zip(columns, axes, strict=True):
        target = out if first else scratch
        span = a.hi - a.lo
        if clamp:
            np.clip(x, np.int64(a.lo), np.int64(a.hi), out=target, dtype=np.int64)
            if a.lo:
                np.subtract(target, np.int64(a.lo), out=target, dtype=np.int64)
            term = target
        else:
            if a.lo == 0 and (x.dtype.kind == "u" or span < 1 << (8 * x.itemsize - 1)):
                # v itself read as unsigned of its width: a negative v reads as at least 2^(bits-1)
                term = x
                unsigned = x.view(_UNSIGNED[x.itemsize])
            else:
                np.subtract(x, np.int64(a.lo), out=target, dtype=np.int64)
                term = target
                unsigned = target.view(np.uint64)
            if unsigned.size and int(unsigned.max()) > span:
                return False
        if a.width != 1:
            np.floor_divide(term, np.int64(a.width), out=target, dtype=np.int64)
            term = target
        if first:
            if a.stride != 1:
                np.multiply(term, np.int64(a.stride), out=out, dtype=np.int64)
            elif term is not out:
                np.copyto(out, term)
            first = False
        elif a.stride == 1:
            np.add(out, term, out=out, dtype=np.int64)
        else:
            np.multiply(term, np.int64(a.stride), out=scratch, dtype=np.int64)
            np.add(out, scratch, out=out)
    return True


def affine_counter(frame: pl.DataFrame, axes: Sequence[AffineAxis], clamp: bool, rows: int
                   ) -> Iterator[np.ndarray | None]:
    """The cells of ``frame``'s rows, ``rows`` at a time, each slice written into the same key
    buffer (consume each before the next); one None (and nothing after) when a row has no
    cell: a null, or a value outside its axis's domain without ``clamp``."""
    series = [frame.get_column(a.column) for a in axes]
    if any(s.null_count() for s in series):
        yield None
        return
    n = frame.height
    with key_buffers(min(rows, n)) as (keys, scratch):
        for start in range(0, n, rows):
            m = min(rows, n - start)
            columns = [(s if m == n else s.slice(start, m)).to_numpy() for s in series]
            if not affine_keys(columns, axes, clamp, keys[:m], scratch[:m]):
                yield None
                return
            yield keys[:m]


_spare = threading.local()


@contextmanager
def key_buffers(rows: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Two int64 buffers of at least ``rows`` values (the slice's cells and scratch), kept for
    the thread's next count: a fresh megabyte faults in its pages on every call (about 0.5 ms
    per release measured), reused ones are already mapped.  A buffer is lent to one counter at
    a time (a second counter running meanwhile gets its own).  Memory only: the counts never
    depend on it."""
    held = getattr(_spare, "buffers", None)
    _spare.buffers = None
    if held is None or held[0].size < rows:
        held = (np.empty(rows, dtype=np.int64), np.empty(rows, dtype=np.int64))
    try:
        yield held
    finally:
        _spare.buffers = held


def frame_slices(frame: pl.DataFrame, rows: int) -> Iterator[pl.DataFrame]:
    """``frame`` as consecutive slices of ``rows`` rows (views, no copy)."""
    for start in range(0, frame.height, rows):
        yield frame.slice(start, rows)


__all__ = ["NARROW_INTEGERS", "SLICE_BYTES", "AffineAxis", "affine_axes", "affine_counter", "affine_keys",
           "frame_slices", "key_buffers", "slice_rows"]
