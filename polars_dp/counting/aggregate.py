"""Adding up (key, count) pieces from any engine into one aggregate.

Dense (a frequency matrix or a grid): the result is allocated once, zero-filled int64 (or by
``np.bincount`` of a weighted first piece), or, for an unweighted first piece with the compiled
kernels and several threads into at least :data:`PARALLEL_CELLS` cells, by the parallel scatter
of :mod:`polars_dp.counting.scatter` (the same integers).  A smaller result stays in the cache,
where one thread is the fastest: the scatter's threads would each read every key and cost a
thread start per release (which path runs depends on the public cell count only).  Unweighted
pieces are added in place by ``np.add.at`` (unbuffered, 15-30 % faster than ``bincount``
since numpy 2, which first scans the keys for their extremes, and without a result-sized
temporary per piece, so an engine may add many small pieces, e.g. the row slices of
:mod:`polars_dp.counting.slices`).  Row counts stay int64
(exact) until the float64 result is asked for, then are converted in their own buffer (nothing
allocated twice); a weighted piece converts them to float64 sums first (exact, the
counts being integers below ``2^53``).

Sparse (PrivTree's finest cells): pieces are reduced to sorted unique keys with summed counts
(re-reduced whenever they pile up), returned as int64 ``(keys, counts)``; a single unweighted
piece is returned as its sorted keys with ``counts=None``.

Saturation (a public rule, the same for every dataset).  Each cell's count is
``min(S, B)``, ``S`` the sum of the counts of its rows and ``B =`` :data:`COUNT_BOUND` ``= 2^53``
(where float64 stops holding every integer), so no count wraps in int64 or rounds in float64.
For ``S, S'`` of neighbouring tables, ``|min(S, B) - min(S', B)| <= |S - S'|`` (``min(., B)`` is
1-Lipschitz), so every cell moves by at most what it moved before: the sensitivity of every
mechanism, hence its guarantee, is unchanged; and nothing is refused whatever the total.
Computed without overflow: each row's count is first capped at ``B`` (``min(c, B)`` changes no
result, the counts being non-negative: a cell holding such a row saturates anyway), then the
weights are summed in float64 (``np.bincount``, ``np.add.at``, ``np.add.reduceat``: plain
additions in any order or tree).  Every partial sum of non-negative integers below ``2^53`` is
exact, and once a partial sum reaches ``2^53`` (a float) rounding, being monotone, keeps it
``>= 2^53``; so the float sum is ``S`` when ``S < 2^53`` and at least ``2^53`` otherwise, and
``min(., B)`` of it is exactly ``min(S, B)``.  Unweighted pieces count rows held in memory
(fewer than ``2^53``) in int64 and the SQL engines sum exactly (HUGEINT, DECIMAL(38, 0)) and cap the sum
(:mod:`polars_dp.counting.engines.sql`): the same ``min(S, B)`` in every engine.
"""

from __future__ import annotations

from typing import TypeAlias

import numpy as np
import polars as pl

from polars_dp.counting.scatter import add_counts

#: Sparse pieces are merged once they hold this many keys in total.
MERGE_KEYS = 1 << 23
#: Every cell's count saturates here (module docstring): ``2^53``.
COUNT_BOUND = 1 << 53
#: The first unweighted piece is scattered on every core only into at least this many cells
#: (8 MB of int64 counts, beyond the cache: zero-filling and scattered writes dominate there).
PARALLEL_CELLS = 1 << 20


def saturate(sums: np.ndarray) -> np.ndarray:
    """``min(sums, COUNT_BOUND)`` in place (float64 sums of :func:`row_weights`)."""
    return np.minimum(sums, float(COUNT_BOUND), out=sums)


def row_weights(counts: np.ndarray) -> np.ndarray:
    """Each row's integer count capped at :data:`COUNT_BOUND`, as float64: exact, the float of an
    integer being exact up to ``2^53`` and, rounding being monotone, at least ``2^53`` past it."""
    return saturate(np.asarray(counts).astype(np.float64))


def cell_sums(keys: np.ndarray, weights: np.ndarray | None, n_cells: int) -> np.ndarray:
    """float64 counts per cell of rows at ``keys`` (one each, or their ``weights``), saturated
    at :data:`COUNT_BOUND`: the rule of this module for a mechanism that holds the points
    themselves (AG's two levels)."""
    if weights is None:
        return np.bincount(keys, minlength=n_cells).astype(np.float64)
    return saturate(np.bincount(keys, row_weights(weights), minlength=n_cells))


def _sorted(keys: np.ndarray) -> np.ndarray:
    """``keys`` sorted by Polars' multithreaded sort (int64)."""
    return pl.Series(keys).sort().to_numpy().astype(np.int64, copy=False)


def _starts(ordered: np.ndarray) -> np.ndarray:
    """Where each run of equal sorted keys starts (non-empty input)."""
    first = np.empty(ordered.size, dtype=bool)
    first[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    return np.flatnonzero(first)


def _retype(values: np.ndarray, dtype: type) -> np.ndarray:
    """``values`` (8-byte numbers) converted to ``dtype`` in their own buffer."""
    out: np.ndarray = values.view(dtype)
    np.copyto(out, values, casting="unsafe")
    return out


def _runs(ordered: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unique keys and run lengths of sorted keys (about 3x faster than ``np.unique``)."""
    if ordered.size == 0:
        return ordered.astype(np.int64), np.zeros(0, dtype=np.int64)
    starts = _starts(ordered)
    runs = np.empty(starts.size, dtype=np.int64)
    np.subtract(starts[1:], starts[:-1], out=runs[:-1])
    runs[-1] = ordered.size - starts[-1]
    return ordered[starts], runs


def _reduce(keys: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique keys and their summed counts (int64): a sort and run lengths; weighted
    counts summed in float64 and saturated (module docstring), then int64 (exact)."""
    order = pl.Series(keys).arg_sort().to_numpy()
    ordered = keys[order]
    if ordered.size == 0:
        return ordered.astype(np.int64), np.zeros(0, dtype=np.int64)
    starts = _starts(ordered)
    sums = saturate(np.add.reduceat(row_weights(counts)[order], starts))
    return ordered[starts].astype(np.int64, copy=False), sums.astype(np.int64)


class Accumulator:
    """Sum of counts per key over pieces (one piece per batch or per engine result)."""

    def __init__(self, n_cells: int, dense: bool, integer: bool = False, room: int = 0):
        self.n_cells = n_cells
        self.room = room  # unused int64 slots in front of the dense counts (the parallel scatter)
        self.dense_mode = dense
        self.integer = integer  # dense counts as int64
        self._dense: np.ndarray | None = None
        self._pieces: list[tuple[np.ndarray, np.ndarray | None]] = []
        self._held = 0
        self._weighted = False  # dense float64 sums of row weights, saturated by dense()

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
        if counts is not None:  # float64 sums of capped weights (module docstring)
            w = row_weights(counts)
            if self._dense is None:
                self._dense = np.bincount(keys, weights=w, minlength=self.n_cells)
            else:
                if self._dense.dtype != np.float64:
                    self._dense = _retype(self._dense, np.float64)
                np.add.at(self._dense, keys, w)
            self._weighted = True
            return
        if self._dense is None and self._count_on_every_core(keys):
            return
        if self._dense is None:  # the first piece allocates the result
            self._dense = np.zeros(self.n_cells, dtype=np.int64)
        if self._dense.dtype == np.int64:  # row counts in int64 until dense() (exact)
            np.add.at(self._dense, keys, 1)
        else:
            np.add.at(self._dense, keys, 1.0)

    def _count_on_every_core(self, keys: np.ndarray) -> bool:
        """The first piece, one count per key, by the parallel scatter
        (:func:`~polars_dp.counting.scatter.add_counts`: the threads zero-fill and count their own
        cell ranges of the result); False when it does not run.  Later pieces go to ``np.add.at``:
        a streamed piece is small beside the result, and the engine producing the next piece
        needs the other cores.  Fewer than :data:`PARALLEL_CELLS` cells: False (one
        thread's ``np.add.at`` is faster than a thread start and every thread reading every key)."""
        if self.n_cells < PARALLEL_CELLS:
            return False
        dense = np.empty(self.room + self.n_cells, dtype=np.int64)[self.room:]  # the room is never touched
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
        """Flat counts over all ``n_cells`` keys (float64; int64 with ``integer``), each at most
        :data:`COUNT_BOUND`."""
        if self._dense is None:
            self._dense = np.zeros(self.n_cells, dtype=np.int64 if self.integer else np.float64)
        elif self._dense.dtype == np.int64 and not self.integer:  # row counts only: float64 in place
            self._dense = _retype(self._dense, np.float64)
        elif self._weighted:
            saturate(self._dense)
            if self.integer:
                self._dense = _retype(self._dense, np.int64)
            self._weighted = False
        return self._dense

    def sparse(self) -> tuple[np.ndarray, np.ndarray | None]:
        """Sorted int64 keys and their int64 counts; or, when everything came in one unweighted
        piece, the sorted keys with repeats and ``None`` (one count per key): no run-length
        pass for a consumer that only needs sorted keys (PrivTree)."""
        return self._merge()


#: What an engine returns: dense float64 counts, or :meth:`Accumulator.sparse`'s pair.
Counts: TypeAlias = np.ndarray | tuple[np.ndarray, np.ndarray | None]

__all__ = ["COUNT_BOUND", "PARALLEL_CELLS", "Accumulator", "Counts", "cell_sums", "row_weights", "saturate"]
