"""A 2-D array kept as two row ranges in separate memory (pure numpy).

The blocked lattice pipeline forwards a batch item's cells (``n_cells`` rows) into coefficient
rows (``n_coef >= n_cells``) and later inverts them back into the same cells.  When the release
overwrites the counts, the first ``n_cells`` coefficient rows can live in the counts' own
memory (each column block is read whole before its coefficients are written back, each row
block before its inverse is written back) and only the ``n_coef - n_cells`` extra rows need
fresh memory: :class:`SplitRows` is that ``(head rows + tail rows) x columns`` array.
"""

from __future__ import annotations

import numpy as np

from polars_dp.errors import ParameterError
from polars_dp.kernels import scratch


class SplitRows:
    """Rows ``[0, h)`` of an ``(n_rows, cols)`` array in ``head``, rows ``[h, n_rows)`` in ``tail``
    (both C-contiguous 2-D arrays with the same columns and dtype)."""

    def __init__(self, head: np.ndarray, tail: np.ndarray) -> None:
        if head.ndim != 2 or tail.ndim != 2 or head.shape[1] != tail.shape[1] or head.dtype != tail.dtype:
            raise ParameterError("SplitRows needs two 2-D arrays with equal columns and dtype")
        self.head, self.tail = head, tail
        self.split = head.shape[0]
        self.shape = (head.shape[0] + tail.shape[0], head.shape[1])

    @classmethod
    def whole(cls, array: np.ndarray) -> SplitRows:
        """One array, no tail."""
        return cls(array, array[:0])

    def view(self, dtype: type) -> SplitRows:
        """The same memory read as ``dtype`` (of the same item size)."""
        return SplitRows(self.head.view(dtype), self.tail.view(dtype))

    def _parts(self, r: int, rr: int) -> list[tuple[np.ndarray, int, int]]:
        """``(part, first row in part, rows)`` covering rows ``[r, r + rr)``."""
        out = []
        if r < self.split:
            n = min(rr, self.split - r)
            out.append((self.head, r, n))
            r, rr = self.split, rr - n
        if rr > 0:
            out.append((self.tail, r - self.split, rr))
        return out

    def rows(self, r: int, rr: int) -> np.ndarray:
        """Rows ``[r, r + rr)``: a view when they lie in one part, else a copy (scratch)."""
        parts = self._parts(r, rr)
        if len(parts) == 1:
            part, a, n = parts[0]
            return part[a:a + n]
        out = scratch.empty((rr, self.shape[1]), self.head.dtype)
        np.concatenate([part[a:a + n] for part, a, n in parts], out=out)
        return out

    def set_rows(self, r: int, values: np.ndarray) -> None:
        """Rows ``[r, r + len(values))`` ``= values`` (2-D, or any shape of that many rows)."""
        values = values.reshape(-1, self.shape[1])
        done = 0
        for part, a, n in self._parts(r, values.shape[0]):
            part[a:a + n] = values[done:done + n]
            done += n

    def columns(self, c: int, cc: int) -> np.ndarray:
        """Every row of columns ``[c, c + cc)``: a view without a tail, else a copy (scratch)."""
        if not self.tail.shape[0]:
            return self.head[:, c:c + cc]
        out = scratch.empty((self.shape[0], cc), self.head.dtype)
        out[:self.split] = self.head[:, c:c + cc]
        out[self.split:] = self.tail[:, c:c + cc]
        return out

    def set_columns(self, c: int, values: np.ndarray) -> None:
        """Every row of columns ``[c, c + values.shape[-1])`` ``= values`` (``n_rows`` rows)."""
        values = values.reshape(self.shape[0], -1)
        cc = values.shape[1]
        self.head[:, c:c + cc] = values[:self.split]
        self.tail[:, c:c + cc] = values[self.split:]


__all__ = ["SplitRows"]
