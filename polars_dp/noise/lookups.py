"""The samplers' table look-ups, compiled when numba is installed (the ``fast`` extra).

Each function does what the numpy lines it replaces in :mod:`polars_dp.noise.discrete` do,
word by word and with the same integer operations, so a seed gives the same draws either way
(the tests compare them); it returns None when the compiled kernels are off
(:func:`polars_dp.compiled.enabled`) and the caller runs its numpy lines.  Which runs never
depends on the words.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from polars_dp.compiled import kernel_set


def _build(numba: Any) -> dict[str, Any]:

    @numba.njit(cache=True, nogil=True)
    def guide(w: np.ndarray, table: np.ndarray, shift: np.uint64, marker: np.int64, out: np.ndarray,
              marked: np.ndarray) -> int:  # pragma: no cover - compiled
        n = 0
        for i in range(w.size):
            y = table[w[i] >> shift]
            out[i] = y
            if y == marker:
                marked[n] = i
                n += 1
        return n

    @numba.njit(cache=True, nogil=True)
    def two_tables(w: np.ndarray, first: np.ndarray, second: np.ndarray, shift_a: np.uint64,
                   shift_b: np.uint64, mask_b: np.uint64, bad: np.int64, out: np.ndarray,
                   marked: np.ndarray) -> int:  # pragma: no cover - compiled
        n = 0
        for i in range(w.size):
            x = w[i]
            y = np.int64(first[x >> shift_a]) + np.int64(second[(x >> shift_b) & mask_b])
            out[i] = y
            if y >= bad:
                marked[n] = i
                n += 1
        return n

    return {"guide": guide, "two_tables": two_tables}


_active = kernel_set(_build)


def guide(w: np.ndarray, table: np.ndarray, shift: np.uint64, marker: int, out: np.ndarray
          ) -> np.ndarray | None:
    """``out = table[w >> shift]``; returns ``flatnonzero(out == marker)`` (None: not compiled)."""
    ks = _active()
    if ks is None:
        return None
    marked = np.empty(w.size, dtype=np.int64)
    n = ks["guide"](w, table, shift, np.int64(marker), out, marked)
    return marked[:n]


def two_tables(w: np.ndarray, first: np.ndarray, second: np.ndarray, shift_a: np.uint64,
               shift_b: np.uint64, mask_b: np.uint64, bad: int, out: np.ndarray) -> np.ndarray | None:
    """``out = first[w >> shift_a] + second[(w >> shift_b) & mask_b]``; returns
    ``flatnonzero(out >= bad)`` (None: not compiled)."""
    ks = _active()
    if ks is None:
        return None
    marked = np.empty(w.size, dtype=np.int64)
    n = ks["two_tables"](w, first, second, shift_a, shift_b, mask_b, np.int64(bad), out, marked)
    return marked[:n]


__all__ = ["guide", "two_tables"]
