"""Optional compiled kernels (numba, from the ``fast`` extra): whether they run.

A compiled kernel performs the integer operations of the numpy code it replaces, value by
value, so both give the same bits (the tests compare them).  int64 arithmetic wraps modulo
``2^64`` in both; numba compiles without ``fastmath``, so a float operation is the correctly
rounded one numpy performs.  Which of the two runs depends only on whether numba is installed
and on ``POLARS_DP_COMPILED`` (``0`` turns the compiled kernels off), or inside
:func:`numpy_only` (a caller's choice from public sizes), or in :func:`sized` (a direct
request's size, public), never on data or noise.  numba is imported on first use, not with
the package; the kernels are cached on disk.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from typing import Any

#: The kernel choice of the enclosing block (per thread and task; kernels.parallel's threads
#: inherit it): True inside :func:`numpy_only`, False inside ``numpy_only(False)`` (the compiled
#: kernels chosen), None where no caller chose.
_NUMPY_ONLY: ContextVar[bool | None] = ContextVar("polars_dp_numpy_only", default=None)

#: Values of a direct request from which :func:`sized` loads the compiled kernels in a process
#: that has not imported numba yet: numba's import and the kernels' disk cache cost 0.5-1.4 s
#: of CPU in a fresh process, which the compiled look-ups (7-20 ns a draw faster than numpy's)
#: win back only from about 2^25 draws; as ``plans.base.COMPILED_FROM`` for a release.
SIZED_FROM = 1 << 24


@cache
def numba_module() -> Any:
    """The ``numba`` module, or None when it is not installed."""
    try:
        import numba  # optional dependency: the ``fast`` extra
    except ImportError:
        return None
    return numba


def numba_imported() -> bool:
    """Whether this process has imported numba already (its import cost is paid)."""
    return "numba" in sys.modules


def switched_on() -> bool:
    """``POLARS_DP_COMPILED`` is not ``0`` (numba not imported: the check is free)."""
    return os.environ.get("POLARS_DP_COMPILED", "1") != "0"


def requested() -> bool:
    """Whether compiled kernels should run if numba is installed: ``POLARS_DP_COMPILED`` is not
    ``0`` and the caller is not inside :func:`numpy_only` (numba not imported: the check is free)."""
    return switched_on() and _NUMPY_ONLY.get() is not True


def enabled() -> bool:
    """Whether compiled kernels run: numba is installed, ``POLARS_DP_COMPILED`` is not ``0`` and
    the caller is not inside :func:`numpy_only` (then numba is not even imported)."""
    return requested() and numba_module() is not None


@contextmanager
def numpy_only(active: bool = True) -> Iterator[None]:
    """Within this block (when ``active``) the kernels run their numpy lines: the same bits,
    without importing numba or loading the compiled kernels (0.6-0.8 s of CPU in a fresh
    process), for work too small to win that back.  ``numpy_only(False)`` chooses the compiled
    kernels (:func:`sized` then keeps them).  An inner block keeps an outer ``numpy_only()``."""
    token = _NUMPY_ONLY.set(active or _NUMPY_ONLY.get() is True)
    try:
        yield
    finally:
        _NUMPY_ONLY.reset(token)


@contextmanager
def sized(values: int) -> Iterator[None]:
    """A direct request for ``values`` values (a public size: the caller's own argument) where
    no enclosing block chose the kernels: the numpy ones below :data:`SIZED_FROM` unless this
    process has already imported numba (its cost is paid), the compiled ones from it.  Inside
    :func:`numpy_only` (either way) the enclosing choice holds.  Only for a size the caller
    states; a mechanism whose sizes come from the data chooses by a block of its own."""
    if _NUMPY_ONLY.get() is not None:
        yield
        return
    with numpy_only(values < SIZED_FROM and not numba_imported()):
        yield


def in_background(warm: Callable[[], None]) -> threading.Thread | None:
    """``warm()`` (a pipeline's kernels called on tiny public arrays: numba's import and disk
    cache, about a second in a fresh process) in a daemon thread, started before the counts so
    that it runs while an engine counts with the GIL released; join it before the kernels run.
    None when the compiled kernels are switched off, or not wanted here (:func:`numpy_only`).
    A failure in it is dropped: the same kernels run again, and raise, in the release itself."""
    if not requested():
        return None

    def run() -> None:
        try:
            warm()
        except Exception:  # the release's own calls raise the same error
            return

    thread = threading.Thread(target=run, name="polars-dp-warm-up", daemon=True)
    thread.start()
    return thread


def kernel_set(build: Callable[[Any], dict[str, Any]]) -> Callable[[], dict[str, Any] | None]:
    """A getter of the kernels that ``build(numba)`` compiles (built once, on first use): None
    when numba is missing or the compiled kernels are off."""
    built = cache(lambda: None if numba_module() is None else build(numba_module()))
    return lambda: built() if enabled() else None


__all__ = ["SIZED_FROM", "enabled", "in_background", "kernel_set", "numba_imported", "numba_module",
           "numpy_only", "requested", "sized", "switched_on"]
