"""Optional compiled kernels (numba, from the ``fast`` extra): whether they run.

A compiled kernel performs the integer operations of the numpy code it replaces, value by
value, so both give the same bits (the tests compare them).  int64 arithmetic wraps modulo
``2^64`` in both; numba compiles without ``fastmath``, so a float operation is the correctly
rounded one numpy performs.  Which of the two runs depends only on whether numba is installed
and on ``POLARS_DP_COMPILED`` (``0`` turns the compiled kernels off), or inside
:func:`numpy_only` (a caller's choice from public sizes), never on data or noise.  numba is
imported on first use, not with the package; the kernels are cached on disk.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from typing import Any

#: True inside :func:`numpy_only` (per thread and task; kernels.parallel's threads inherit it).
_NUMPY_ONLY: ContextVar[bool] = ContextVar("polars_dp_numpy_only", default=False)


@cache
def numba_module() -> Any:
    """The ``numba`` module, or None when it is not installed."""
    try:
        import numba  # optional dependency: the ``fast`` extra
    except ImportError:
        return None
    return numba


def switched_on() -> bool:
    """``POLARS_DP_COMPILED`` is not ``0`` (numba not imported: the check is free)."""
    return os.environ.get("POLARS_DP_COMPILED", "1") != "0"


def requested() -> bool:
    """Whether compiled kernels should run if numba is installed: ``POLARS_DP_COMPILED`` is not
    ``0`` and the caller is not inside :func:`numpy_only` (numba not imported: the check is free)."""
    return switched_on() and not _NUMPY_ONLY.get()


def enabled() -> bool:
    """Whether compiled kernels run: numba is installed, ``POLARS_DP_COMPILED`` is not ``0`` and
    the caller is not inside :func:`numpy_only` (then numba is not even imported)."""
    return requested() and numba_module() is not None


@contextmanager
def numpy_only(active: bool = True) -> Iterator[None]:
    """Within this block (when ``active``) the kernels run their numpy lines: the same bits,
    without importing numba or loading the compiled kernels (0.6-0.8 s of CPU in a fresh
    process), for work too small to win that back.  Nested blocks keep the outer choice."""
    token = _NUMPY_ONLY.set(active or _NUMPY_ONLY.get())
    try:
        yield
    finally:
        _NUMPY_ONLY.reset(token)


def kernel_set(build: Callable[[Any], dict[str, Any]]) -> Callable[[], dict[str, Any] | None]:
    """A getter of the kernels that ``build(numba)`` compiles (built once, on first use): None
    when numba is missing or the compiled kernels are off."""
    built = cache(lambda: None if numba_module() is None else build(numba_module()))
    return lambda: built() if enabled() else None


__all__ = ["enabled", "kernel_set", "numba_module", "numpy_only", "requested", "switched_on"]
