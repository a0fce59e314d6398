"""Unweighted dense counts on every core: a compiled scatter when numba is installed.

``add_counts(out, keys)`` adds one to ``out[k]`` for every key, as ``np.add.at(out, keys, 1)``
(``zero=True``: into a fresh array, as ``np.bincount``).  With the compiled kernels
(:func:`polars_dp.compiled.enabled`) and several threads (:func:`polars_dp.threads.thread_count`),
thread ``t`` zero-fills (when asked) and counts its own range of cells, reading every key: the
same integers in every cell whatever the threads (exact in int64, and in float64 below ``2^53``).
Which way runs depends on numba, ``POLARS_DP_COMPILED`` and the threads, never on the data.
"""

from __future__ import annotations

import itertools
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from polars_dp.compiled import kernel_set
from polars_dp.threads import thread_count


def _build(numba: Any) -> dict[str, Any]:

    @numba.njit(cache=True, nogil=True)
    def count_range(keys: np.ndarray, out: np.ndarray, lo: int, hi: int,
                    zero: bool) -> int:  # pragma: no cover - compiled
        if zero:
            out[lo:hi] = 0
        inside = 0
        for k in keys:
            if lo <= k < hi:
                out[k] += 1
                inside += 1
        return inside

    return {"count_range": count_range}


_active = kernel_set(_build)

#: Cell ranges start at multiples of this many cells (a 4 KB page of int64 or float64).
ALIGN = 512


def add_counts(out: np.ndarray, keys: np.ndarray, zero: bool = False) -> bool:
    """``out[k] += 1`` for every key (``zero``: ``out`` is first set to zero), ``out`` a
    C-contiguous int64 or float64 array and ``keys`` int64 cells of it.  False (``out``
    untouched) when the compiled kernels are off or there is one thread: the caller runs
    ``np.bincount`` / ``np.add.at``."""
    ks = _active()
    threads = thread_count()
    if ks is None or threads < 2:
        return False
    n = out.size
    cut = [min(n, -(-n * t // threads) // ALIGN * ALIGN) for t in range(threads)] + [n]
    ranges = list(itertools.pairwise(cut))
    keys = np.ascontiguousarray(keys, dtype=np.int64)

    def run(r: tuple[int, int]) -> int:
        return int(ks["count_range"](keys, out, r[0], r[1], zero))

    with ThreadPoolExecutor(threads - 1, thread_name_prefix="polars-dp-count") as pool:
        later = [pool.submit(run, r) for r in ranges[1:]]
        inside = run(ranges[0]) + sum(f.result() for f in later)
    if inside != keys.size:  # every key is a cell index by construction (the engines' checks)
        raise RuntimeError(f"{keys.size - inside} count keys fall outside the {n} cells")
    return True


__all__ = ["add_counts"]
