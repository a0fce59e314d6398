"""Synthetic rows drawn from a release (pure post-processing: no data, no budget).

A release's counts, with negative values read as zero, define a distribution over its cells
(grid) or leaves (tree): ``p_i = max(c_i, 0) / sum_j max(c_j, 0)``.  ``n`` synthetic rows are
``n`` independent draws from it (equivalently, a multinomial ``(n; p)`` split over the cells,
in random order), each placed at a uniform position inside its cell:

* ordinal attribute, integer domain (integer ``lo``, ``hi``, ``width``): a uniform integer of
  the bin ``[lo + k w, min(lo + (k + 1) w - 1, hi)]``, as ``Int64``;
* ordinal attribute, float domain: uniform in ``[lo + k w, min(lo + (k + 1) w, hi))``
  (a last bin of zero width gives ``hi``), as ``Float64``;
* nominal attribute: the cell's leaf label (``String``, ``Int64`` or ``Boolean``, the type of
  the hierarchy's leaves);
* tree leaf: a point uniform in the leaf box ``[lo, hi)`` (``Float64`` per column).

The release does not record the input's exact dtypes (say ``Int32``); cast the result with
``frame.cast(schema)`` when they matter.  Without a seed the draws come from the OS CSPRNG
(:func:`polars_dp.noise.make_rng`); a seed is allowed because the rows are post-processing of
a published release and reveal nothing more than the release itself.

Everything is vectorised: one ``searchsorted`` over the cumulative weights of the positive
cells picks the cells of all rows, then one uniform offset per row and attribute.  All rows
are drawn at once, so ``n`` is refused (:func:`check_rows_fit`) when its working memory
would exceed this machine's, before anything is allocated.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from polars_dp.domains.attributes import Attribute, Nominal, Ordinal
from polars_dp.errors import DomainTooLargeError, EmptyReleaseError
from polars_dp.memory import total_memory_bytes
from polars_dp.noise import SeedLike, make_rng
from polars_dp.params import check_int


def check_rows_fit(n: int, bytes_per_row: int, what: str = "synthetic rows") -> int:
    """``n``, or DomainTooLargeError when ``n * bytes_per_row`` (the working memory of making
    ``n`` rows at once) exceeds this machine's physical memory; the message says how many fit."""
    have = total_memory_bytes()
    if n * bytes_per_row > have:
        fit = have // bytes_per_row
        raise DomainTooLargeError(
            f"{n:,} {what} need about {n * bytes_per_row / 2**30:,.1f} GiB of working memory but this "
            f"machine has {have / 2**30:.1f} GiB; ask for at most {fit:,} at a time and concatenate"
        )
    return n


def draw_cells(weights: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of ``n`` i.i.d. draws from ``max(weights, 0)`` (normalised), in draw order.

    Only the positive entries are candidates: ``u * W`` (``u`` uniform in [0, 1), ``W`` the
    total positive weight) is located in their cumulative sums, so a cell of weight 0 or less
    is never drawn.  No draw (``n == 0``) needs no positive entry: an empty index array; any
    ``n > 0`` from weights without one is an :class:`~polars_dp.errors.EmptyReleaseError`.
    """
    flat = np.asarray(weights, dtype=np.float64).reshape(-1)
    positive = np.flatnonzero(flat > 0)
    if n == 0:
        return np.empty(0, dtype=np.int64)
    if positive.size == 0:
        raise EmptyReleaseError(
            "this release has no cell with a positive count, so there is nothing to sample from "
            "(negative counts are read as zero); release with a larger epsilon or coarser cells"
        )
    cumulative = np.cumsum(flat[positive])
    picks = np.searchsorted(cumulative, rng.random(n) * cumulative[-1], side="right")
    return positive[np.minimum(picks, positive.size - 1)]


def _ordinal_values(attribute: Ordinal, cells: np.ndarray, rng: np.random.Generator) -> pl.Series:
    """Uniform values inside each row's bin (integers for an integer domain)."""
    if attribute.integer:
        start = attribute.lo + cells * attribute.width
        size = np.minimum(attribute.width, attribute.hi - start + 1)
        return pl.Series(attribute.column, start + rng.integers(0, size), dtype=pl.Int64)
    start = attribute.lo + cells.astype(np.float64) * attribute.width
    stop = np.minimum(start + attribute.width, attribute.hi)
    return pl.Series(attribute.column, start + rng.random(cells.size) * (stop - start), dtype=pl.Float64)


def sample_grid(counts: np.ndarray, attributes: Sequence[Attribute], n: int,
                seed: SeedLike = None) -> pl.DataFrame:
    """``n`` synthetic rows of a grid release (see the module docstring); one column per
    attribute, in the release's order."""
    n = check_int(n, "n (the number of synthetic rows)", lo=0)
    check_rows_fit(n, 8 * (4 + 3 * len(attributes)))  # draws, picks, cells; per axis index, offset, value
    rng = make_rng(seed)
    cells = draw_cells(counts, n, rng)
    axes = np.unravel_index(cells, counts.shape)
    return pl.DataFrame([pl.Series(attribute.column, attribute.cell_labels()).gather(index)
                         if isinstance(attribute, Nominal)
                         else _ordinal_values(attribute, index.astype(np.int64), rng)
                         for attribute, index in zip(attributes, axes, strict=True)])


def sample_boxes(lo: np.ndarray, hi: np.ndarray, count: np.ndarray, columns: Sequence[str], n: int,
                 seed: SeedLike = None) -> pl.DataFrame:
    """``n`` synthetic points of a tree release: a leaf drawn by weight ``max(count, 0)``, then
    a point uniform in its box ``[lo, hi)``; one ``Float64`` column per coordinate."""
    n = check_int(n, "n (the number of synthetic rows)", lo=0)
    check_rows_fit(n, 8 * (4 + 4 * len(columns)))  # draws, picks, leaves; per axis lo, hi, offset, point
    rng = make_rng(seed)
    leaves = draw_cells(count, n, rng)
    low, high = lo[leaves], hi[leaves]
    points = low + rng.random(low.shape) * (high - low)
    return pl.DataFrame({c: pl.Series(c, points[:, j], dtype=pl.Float64) for j, c in enumerate(columns)})


__all__ = ["check_rows_fit", "draw_cells", "sample_boxes", "sample_grid"]
