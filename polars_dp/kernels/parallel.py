"""Independent blocks shared among threads (the caller's thread among them).

The numba kernels, the samplers' bit generators and numpy's large operations release the GIL,
so blocks whose work is a function of the block alone (its coefficients, and noise from its
own stream: :meth:`~polars_dp.noise.NoiseSource.block_streams`) run on every core.  Which
values come out never depends on the threads: each block writes only its own part of the
output, and nothing a block computes depends on which thread took it or when.
"""

from __future__ import annotations

import contextvars
import itertools
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from polars_dp.kernels import scratch
from polars_dp.threads import MAX_THREADS, THREADS_ENV, thread_count

T = TypeVar("T")


def each(fn: Callable[[T], object], items: Iterable[T], threads: int = 1) -> None:
    """``fn(item)`` for every item, by up to ``threads`` threads that each take the next item
    not yet taken (the caller's thread is one of them), each in a copy of the caller's context
    (:func:`polars_dp.compiled.numpy_only` holds there too); each thread serves :mod:`scratch`
    from its own arena, reset before every item.  The first exception raised by ``fn`` stops
    the threads from taking further items and is raised here once all have stopped."""
    todo = list(items)
    if threads <= 1 or len(todo) <= 1:
        for item in todo:
            scratch.reset()
            fn(item)
        return
    lock = threading.Lock()
    state = {"next": 0}
    errors: list[BaseException] = []

    def work() -> None:
        with scratch.arena():
            while True:
                with lock:
                    k = state["next"]
                    if errors or k >= len(todo):
                        return
                    state["next"] = k + 1
                scratch.reset()
                try:
                    fn(todo[k])
                except BaseException as exc:
                    with lock:
                        errors.append(exc)
                    return

    helpers = min(threads, len(todo)) - 1
    with ThreadPoolExecutor(max_workers=helpers, thread_name_prefix="polars-dp-block") as pool:
        futures = [pool.submit(contextvars.copy_context().run, work) for _ in range(helpers)]
        work()
        for f in futures:
            f.result()
    if errors:
        raise errors[0]


def column_ranges(columns: int, parts: int, align: int = 1) -> list[tuple[int, int]]:
    """``[start, stop)`` ranges cutting ``columns`` into at most ``parts`` near-equal pieces whose
    inner boundaries are multiples of ``align`` (so chunked kernels see the same chunks)."""
    if parts <= 1 or columns <= align:
        return [(0, columns)]
    units = -(-columns // align)
    parts = min(parts, units)
    cuts = [min(columns, (units * k // parts) * align) for k in range(parts + 1)]
    return [(a, b) for a, b in itertools.pairwise(cuts) if b > a]


__all__ = ["MAX_THREADS", "THREADS_ENV", "column_ranges", "each", "thread_count"]
