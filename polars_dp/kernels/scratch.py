"""Reusable scratch memory for the blocked kernels (pure numpy).

Touching memory for the first time is slow (a page fault per 4 KB page; large numpy
temporaries are handed back to the system when freed, so a loop over blocks faults on every
block).  Inside ``with arena():`` the kernels take their block-sized outputs and scratch from
one buffer that lives as long as the context: :func:`empty` bumps a pointer, :func:`reset`
(called by the blocked driver between blocks, once nothing of the previous block is used)
starts again at the front.  A request that does not fit is served by ``np.empty`` and the
buffer is grown to the high-water mark at the next :func:`reset`, so after the first block
nothing is allocated.  Outside a context :func:`empty` is ``np.empty``.

The arena holds memory only; which values are computed never depends on it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

_ALIGN = 64


class _Arena:
    def __init__(self) -> None:
        self.buf = np.empty(0, dtype=np.uint8)
        self.used = 0
        self.high = 0

    def empty(self, shape: Any, dtype: Any) -> np.ndarray:
        dt = np.dtype(dtype)
        shape = (shape,) if isinstance(shape, int) else tuple(int(s) for s in shape)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        start = self.used
        self.used = start + -(-nbytes // _ALIGN) * _ALIGN
        self.high = max(self.high, self.used)
        if self.used > self.buf.size:
            return np.empty(shape, dtype=dt)
        return self.buf[start:start + nbytes].view(dt).reshape(shape)

    def reset(self) -> None:
        if self.high > self.buf.size:
            self.buf = np.empty(self.high, dtype=np.uint8)  # blocks repeat one shape: no slack
        self.used = 0


_local = threading.local()


def _active() -> _Arena | None:
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None


@contextmanager
def arena() -> Iterator[None]:
    """Serve :func:`empty` from one reusable buffer until the context ends (per thread)."""
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    stack.append(_Arena())
    try:
        yield
    finally:
        stack.pop()


def empty(shape: Any, dtype: Any = np.float64) -> np.ndarray:
    """``np.empty(shape, dtype)``, from the active arena if there is one (valid until the
    next :func:`reset`)."""
    a = _active()
    if a is None:
        return np.empty(shape, dtype=dtype)
    return a.empty(shape, dtype)


def reset() -> None:
    """Start the active arena again from the front (everything it served before is dead)."""
    a = _active()
    if a is not None:
        a.reset()


__all__ = ["arena", "empty", "reset"]
