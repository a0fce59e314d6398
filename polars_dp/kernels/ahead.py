"""Work taken one step ahead by a worker thread (the noise of the next block while this one is
transformed): the results, their order and the calls are those of a plain loop.

The numba kernels and the large numpy operations release the GIL, so on two cores drawing a
block's noise overlaps the transforms of the block before it.  Which results come out never
depends on the thread: the worker runs the calls one at a time, in order.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def ahead(fn: Callable[[T], R], items: Iterable[T], depth: int = 1) -> Generator[R, None, None]:
    """``fn(item)`` for every item, in order, computed by one worker thread up to ``depth``
    results ahead of the one being used.  An exception in ``fn`` is raised where its
    result would have been yielded; closing the iterator early cancels what was not started
    and waits for the call that was."""
    source = iter(items)
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="polars-dp-ahead")
    pending: deque[Future[R]] = deque()
    try:
        for item in source:
            pending.append(pool.submit(fn, item))
            if len(pending) >= max(1, depth):
                break
        while pending:
            result = pending.popleft().result()
            for item in source:  # the next call starts while this result is used
                pending.append(pool.submit(fn, item))
                break
            yield result
    finally:
        for future in pending:
            future.cancel()
        pool.shutdown(wait=True)


__all__ = ["ahead"]
