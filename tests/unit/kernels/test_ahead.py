"""``ahead``: the results, their order and the calls of a plain loop, computed by one worker
thread one step ahead."""

from __future__ import annotations

import threading
import time

import pytest

from polars_dp.kernels.ahead import ahead


def test_results_and_calls_are_those_of_a_loop():
    calls = []

    def fn(x):
        calls.append((x, threading.current_thread().name))
        return x * x

    assert list(ahead(fn, range(20))) == [x * x for x in range(20)]
    assert [x for x, _ in calls] == list(range(20))  # one call at a time, in order
    assert all(name.startswith("polars-dp-ahead") for _, name in calls)


def test_the_next_call_runs_while_a_result_is_used():
    started = []

    def fn(x):
        started.append(x)
        return x

    it = ahead(fn, range(5), depth=1)
    assert next(it) == 0
    deadline = time.monotonic() + 5
    while len(started) < 2 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert started == [0, 1]  # one ahead, not more
    assert list(it) == [1, 2, 3, 4]


def test_an_error_is_raised_in_its_place_and_stops_the_calls():
    calls = []

    def fn(x):
        calls.append(x)
        if x == 3:
            raise ValueError("bad item 3")
        return x

    got = []
    with pytest.raises(ValueError, match="bad item 3"):
        for y in ahead(fn, range(10)):
            got.append(y)
    assert got == [0, 1, 2]
    assert calls == [0, 1, 2, 3]  # nothing is started past the error


def test_closing_early_waits_for_the_running_call_and_skips_the_rest():
    calls = []

    def fn(x):
        time.sleep(0.01)
        calls.append(x)
        return x

    it = ahead(fn, range(100), depth=2)
    assert next(it) == 0
    it.close()
    n = len(calls)
    time.sleep(0.05)
    assert len(calls) == n <= 3  # the running call finished, nothing runs after close returned
