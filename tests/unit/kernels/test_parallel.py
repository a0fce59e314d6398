"""``parallel.each``: every item once, on up to ``threads`` threads, each with its own scratch
arena; errors raised in the caller; ``thread_count`` and ``column_ranges``."""

from __future__ import annotations

import collections
import itertools
import threading
import time

import numpy as np
import pytest

from polars_dp.errors import ParameterError
from polars_dp.kernels import parallel, scratch


@pytest.mark.parametrize("threads", [1, 2, 3, 8])
def test_every_item_exactly_once(threads):
    seen = []
    lock = threading.Lock()

    def fn(x):
        with lock:
            seen.append(x)

    parallel.each(fn, range(50), threads)
    assert sorted(seen) == list(range(50))


def test_threads_share_the_items():
    names = set()
    barrier = threading.Barrier(2, timeout=10)

    def fn(x):
        if x < 2:
            barrier.wait()  # only passes if two threads hold items 0 and 1 at once
        names.add(threading.current_thread().name)

    parallel.each(fn, range(10), 2)
    assert threading.main_thread().name in names and len(names) == 2


def test_one_thread_runs_in_order_in_the_caller():
    order = []
    parallel.each(lambda x: order.append((x, threading.current_thread().name)), range(5), 1)
    assert order == [(x, threading.current_thread().name) for x in range(5)]


def test_each_thread_has_its_own_scratch_reset_per_item():
    seen: dict[str, collections.Counter] = {}
    lock = threading.Lock()
    barrier = threading.Barrier(2, timeout=10)

    def fn(x):
        if x < 2:
            barrier.wait()  # both threads hold an item: each serves from its own arena
        a = scratch.empty(1000, np.int64)
        a[:] = x
        time.sleep(0.001)  # the other thread works meanwhile: a shared buffer would be overwritten
        assert np.all(a == x)
        with lock:
            seen.setdefault(threading.current_thread().name, collections.Counter())[a.ctypes.data] += 1

    parallel.each(fn, range(40), 2)
    assert len(seen) == 2
    steady = [counts.most_common(1)[0][0] for counts in seen.values()]
    assert steady[0] != steady[1]  # one arena per thread
    assert all(len(counts) <= 2 for counts in seen.values())  # reset before every item: one address


def test_an_error_is_raised_in_the_caller_and_stops_new_items():
    taken = []

    def fn(x):
        taken.append(x)
        if x == 3:
            raise KeyError("boom")
        time.sleep(0.001)  # so that the other thread cannot finish every item first

    with pytest.raises(KeyError, match="boom"):
        parallel.each(fn, range(1000), 2)
    assert len(taken) < 1000


def test_thread_count_reads_the_environment(monkeypatch):
    monkeypatch.setenv(parallel.THREADS_ENV, "3")
    assert parallel.thread_count() == 3
    monkeypatch.delenv(parallel.THREADS_ENV)
    assert 1 <= parallel.thread_count() <= parallel.MAX_THREADS
    for bad in ("0", "-2", "two"):
        monkeypatch.setenv(parallel.THREADS_ENV, bad)
        with pytest.raises(ParameterError, match=parallel.THREADS_ENV):
            parallel.thread_count()


@pytest.mark.parametrize(("columns", "parts", "align"), [(1001, 2, 256), (1001, 3, 1), (10, 4, 256),
                                                         (512, 2, 256), (7, 7, 1), (100, 1, 8)])
def test_column_ranges_cover_the_columns_at_aligned_cuts(columns, parts, align):
    ranges = parallel.column_ranges(columns, parts, align)
    assert ranges[0][0] == 0 and ranges[-1][1] == columns
    assert all(a < b for a, b in ranges) and all(b == c for (_, b), (c, _) in itertools.pairwise(ranges))
    assert len(ranges) <= parts
    assert all(b % align == 0 for _, b in ranges[:-1])
