"""``polars_dp.compiled``: which kernels run.  ``numpy_only`` turns the compiled kernels off in
its block (and in the kernel threads started there), nests, and restores the choice after."""

from __future__ import annotations

import threading

import pytest

from polars_dp import compiled
from polars_dp.kernels import parallel
from tests.helpers.compiled import needs_compiled


@needs_compiled
def test_numpy_only_turns_the_kernels_off_in_its_block():
    assert compiled.enabled()
    with compiled.numpy_only():
        assert not compiled.enabled()
        with compiled.numpy_only(False):  # an inner block keeps the outer choice
            assert not compiled.enabled()
        assert not compiled.enabled()
    assert compiled.enabled()
    with compiled.numpy_only(False):
        assert compiled.enabled()


@needs_compiled
def test_numpy_only_is_restored_after_an_error():
    with pytest.raises(ValueError), compiled.numpy_only():
        raise ValueError("inside")
    assert compiled.enabled()


@needs_compiled
@pytest.mark.parametrize("active", [True, False])
def test_kernel_threads_see_the_callers_choice(active):
    seen: dict[str, bool] = {}
    lock = threading.Lock()

    def record(item: int) -> None:
        with lock:
            seen[threading.current_thread().name] = compiled.enabled()

    barrier = threading.Barrier(2)

    def both(item: int) -> None:  # make sure two threads take part
        barrier.wait(timeout=10)
        record(item)

    with compiled.numpy_only(active):
        parallel.each(both, range(2), threads=2)
    assert len(seen) == 2
    assert set(seen.values()) == {not active}


def test_another_thread_is_not_affected():
    """The choice belongs to the block's thread: a thread started elsewhere keeps the default."""
    seen = []
    started, stop = threading.Event(), threading.Event()

    def other() -> None:
        started.set()
        stop.wait(timeout=10)
        seen.append(compiled.enabled())

    thread = threading.Thread(target=other)
    thread.start()
    started.wait(timeout=10)
    with compiled.numpy_only():
        stop.set()
        thread.join()
    assert seen == [compiled.enabled()]
