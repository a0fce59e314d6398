"""Optional compiled twins of the wavelet kernels (numba, the ``fast`` extra): one pass per row.

Each performs the integer and IEEE-754 operations of the numpy kernels it replaces, in the same
order per value, so both give the same bits (the tests compare them on every path).  Whether
they run is :func:`polars_dp.compiled.enabled` (numba installed, ``POLARS_DP_COMPILED``
not ``0``): never a function of the data.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from polars_dp.compiled import enabled, numba_module
from polars_dp.kernels.wavelet_exact import SCALED_LIMIT


@cache
def _kernels() -> dict[str, Any] | None:
    """The compiled kernels, or None without numba (compiled on first call, cached on disk)."""
    numba = numba_module()
    if numba is None:
        return None

    @numba.njit(cache=True, nogil=True)
    def min_max(z: np.ndarray) -> tuple[int, int]:  # pragma: no cover - compiled
        lo = hi = z.flat[0]
        for v in z.flat:
            lo = min(lo, v)
            hi = max(hi, v)
        return lo, hi

    @numba.njit(cache=True, nogil=True)
    def haar_last_to_float(z: np.ndarray, y: np.ndarray, row_den: np.ndarray, out: np.ndarray,
                           m: int, low: np.int64) -> None:  # pragma: no cover - compiled
        rows, p = z.shape
        buf = np.empty(p, np.int64)
        scale = 1.0 / p
        high = ~low
        for r in range(rows):
            buf[0] = z[r, 0]
            k = 1
            while k < p:  # in place, right to left: child 2i, 2i+1 overwrite sums already read
                for i in range(k - 1, -1, -1):
                    d = z[r, k + i] * k
                    s = buf[i]
                    buf[2 * i] = s + d
                    buf[2 * i + 1] = s - d
                k *= 2
            den = row_den[r]
            for i in range(m):
                yi = y[r, i]
                out[r, i] = (float(yi & high) + (float(yi & low) + float(buf[i]) * scale)) / den

    return {"min_max": min_max, "haar_last_to_float": haar_last_to_float}


def haar_last_to_float(z: np.ndarray, y: np.ndarray, row_den: np.ndarray, m: int,
                       out: np.ndarray) -> bool:
    """``out = fl(N / P) / D`` per row, ``N = P y + P H^-1(z)`` along the last axis: the
    compiled :func:`~polars_dp.kernels.wavelet_exact.haar_inverse_scaled` followed by
    :func:`~polars_dp.kernels.wavelet_exact.scaled_to_float` and the division by each row's
    ``D`` (``row_den``, float64; ``x / 1.0 = x``), the same operations value by value.

    ``z``: int64 ``(rows, P)``; ``y``: int64 ``(rows, m)``; ``out``: float64 ``(rows, m)``, all
    C-contiguous.  Returns False, leaving ``out`` alone, when the compiled kernels are off or
    ``P max|z| >= 2^52`` (the numpy kernels then take the exact wide path).
    """
    ks = _kernels() if enabled() else None
    if ks is None:
        return False
    p = z.shape[1]
    if z.size:
        lo, hi = ks["min_max"](z)
        if max(-int(lo), int(hi)) * p >= SCALED_LIMIT:
            return False
    low = np.int64((1 << (52 - (p.bit_length() - 1))) - 1)
    ks["haar_last_to_float"](z, y, row_den, out, m, low)
    return True


__all__ = ["enabled", "haar_last_to_float"]
