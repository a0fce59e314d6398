"""How many threads the parallel kernels use (the count scatter, the blocked wavelet kernels).

A property of the environment and the machine, never of the data: which values come out never
depends on it (every parallel kernel writes disjoint parts of its output).
"""

from __future__ import annotations

import os

from polars_dp.errors import ParameterError

#: Environment variable capping the threads (default: the usable cores, at most :data:`MAX_THREADS`).
THREADS_ENV = "POLARS_DP_THREADS"
MAX_THREADS = 8


def thread_count() -> int:
    """Threads for the parallel kernels: ``$POLARS_DP_THREADS`` if set (a positive integer),
    else the cores this process may run on, at most :data:`MAX_THREADS`."""
    raw = os.environ.get(THREADS_ENV, "").strip()
    if raw:
        try:
            n = int(raw)
        except ValueError:
            n = 0
        if n < 1:
            raise ParameterError(f"{THREADS_ENV} must be a positive integer, got {raw!r}")
        return n
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(usable, MAX_THREADS))


__all__ = ["MAX_THREADS", "THREADS_ENV", "thread_count"]
