"""Adding up (key, count) pieces from any engine into one aggregate.

Dense (a frequency matrix or a grid): the float64 result is allocated once, by
``np.bincount`` of the first piece (its int64 output converted to float64 in its own buffer,
so nothing is allocated twice; with ``integer`` the int64 output is the result), or, for an
unweighted first piece with the compiled kernels and several threads, by the parallel scatter
of :mod:`polars_dp.counting.scatter` (the same integers).  Later pieces
are added in place by ``np.add.at`` (unbuffered, as fast as ``bincount`` since numpy 2 and
without a result-sized temporary per piece; exact, the counts being integers below ``2^53``).

Sparse (PrivTree's finest cells): pieces are reduced to sorted unique keys with summed counts
(re-reduced whenever they pile up), returned as int64 ``(keys, counts)``; a single unweighted
piece is returned as its sorted keys with ``counts=None``.
"""

from __future__ import annotations

from typing import TypeAlias

import numpy as np
import polars as pl

from polars_dp.counting.scatter import add_counts

#: Sparse pieces are merged once they hold this many keys in total.
MERGE_KEYS = 1 << 23


def _sorted(keys: np.ndarray) -> np.ndarray:
    """``keys`` sorted by Polars' multithreaded sort (int64)."""
    return pl.Series(keys).sort().to_numpy().astype(np.int64, copy=False)


def _runs(ordered: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unique keys and run lengths of sorted keys (about 3x faster than ``np.unique``)."""
    if ordered.size == 0:
        return ordered.astype(np.int64), np.zeros(0, dtype=np.int64)
    first = np.empty(ordered.size, dtype=bool)
    first[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    runs = np.empty(starts.size, dtype=np.int64)
    np.subtract(starts[1:], starts[:-1], out=runs[:-1])
    runs[-1] = ordered.size - starts[-1]
    return ordered[starts], runs


def _reduce(keys: np.ndarray, counts: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique keys and their summed counts (int64): a sort and run lengths; weighted
    counts summed exactly in int64 by a Polars group-by."""
    if counts is None:
        return _runs(_sorted(keys))
    summed = (pl.DataFrame({"key": keys, "count": np.rint(counts).astype(np.int64)})
              .group_by("key").agg(pl.col("count").sum()).sort("key"))
    return summed["key"].to_numpy(), summed["count"].to_numpy().astype(np.int64)


class Accumulator:
    """Sum of counts per key over pieces (one piece per batch or per engine result)."""

    def __init__(self, n_cells: int, dense: bool, integer: bool = False):
        self.n_cells = n_cells
        self.dense_mode = dense
        self.integer = integer  # dense counts as int64
        self._dense: np.ndarray | None = None
        self._pieces: list[tuple[np.ndarray, np.ndarray | None]] = []
        self._held = 0

    def add(self, keys: np.ndarray, counts: np.ndarray | None = None) -> None:
        """Add one count per key (``counts=None``) or ``counts[i]`` at ``keys[i]``."""
        keys = np.asarray(keys, dtype=np.int64)
        if keys.size == 0:
            return
        if counts is not None:
            counts = np.asarray(counts)
        if not self.dense_mode:  # unweighted pieces stay raw sorted keys until a merge
            self._pieces.append((_sorted(keys), None) if counts is None else _reduce(keys, counts))
            self._held += self._pieces[-1][0].size
            if self._held > MERGE_KEYS and len(self._pieces) > 1:
                self._pieces = [self._merge()]
                self._held = self._pieces[0][0].size
            return
        if counts is None and self._dense is None and self._count_on_every_core(keys):
            return
        if self.integer:  # int64 counts, exact
            if self._dense is None and counts is None:  # bincount's own output is the result
                self._dense = np.bincount(keys, minlength=self.n_cells).astype(np.int64, copy=False)
                return
            if self._dense is None:
                self._dense = np.zeros(self.n_cells, dtype=np.int64)
            np.add.at(self._dense, keys, 1 if counts is None else counts.astype(np.int64))
            return
        w = None if counts is None else counts.astype(np.float64)
        if self._dense is None:  # the first piece allocates the result: bincount writes it
            if w is not None:
                self._dense = np.bincount(keys, weights=w, minlength=self.n_cells)
            else:
                out = np.bincount(keys, minlength=self.n_cells)
                self._dense = out.view(np.float64)
                np.copyto(self._dense, out, casting="unsafe")
            return
        np.add.at(self._dense, keys, 1.0 if w is None else w)

    def _count_on_every_core(self, keys: np.ndarray) -> bool:
        """The first piece, one count per key, by the parallel scatter
        (:func:`~polars_dp.counting.scatter.add_counts`: the threads zero-fill and count their own
        cell ranges of the result); False when it does not run.  Later pieces go to ``np.add.at``:
        a streamed piece is small beside the result, and the engine producing the next piece
        needs the other cores."""
        dense = np.empty(self.n_cells, dtype=np.int64 if self.integer else np.float64)
        if not add_counts(dense, keys, zero=True):
            return False
        self._dense = dense
        return True

    def _merge(self) -> tuple[np.ndarray, np.ndarray | None]:
        if not self._pieces:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        if len(self._pieces) == 1:
            return self._pieces[0]
        pieces = [p if p[1] is not None else _runs(p[0]) for p in self._pieces]
        keys = np.concatenate([p[0] for p in pieces])
        counts = np.concatenate([p[1] for p in pieces])
        return _reduce(keys, counts.astype(np.float64))

    def dense(self) -> np.ndarray:
        """Flat counts over all ``n_cells`` keys (float64; int64 with ``integer``)."""
        if self._dense is None:
            self._dense = np.zeros(self.n_cells, dtype=np.int64 if self.integer else np.float64)
        return self._dense

    def sparse(self) -> tuple[np.ndarray, np.ndarray | None]:
        """Sorted int64 keys and their int64 counts; or, when everything came in one unweighted
        piece, the sorted keys with repeats and ``None`` (one count per key): no run-length
        pass for a consumer that only needs sorted keys (PrivTree)."""
        return self._merge()


#: What an engine returns: dense float64 counts, or :meth:`Accumulator.sparse`'s pair.
Counts: TypeAlias = np.ndarray | tuple[np.ndarray, np.ndarray | None]

__all__ = ["Accumulator", "Counts"]
