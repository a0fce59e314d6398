"""The parallel count scatter: ``np.bincount`` / ``np.add.at``'s integers on any number of threads."""

from __future__ import annotations

import numpy as np
import pytest

from polars_dp.counting import aggregate, scatter
from polars_dp.counting.aggregate import PARALLEL_CELLS, Accumulator
from tests.helpers.compiled import needs_compiled


@needs_compiled
@pytest.mark.parametrize("threads", ["2", "3"])
@pytest.mark.parametrize("n", [1, 700, 5 * scatter.ALIGN + 3, 100_003])
@pytest.mark.parametrize("dtype", [np.int64, np.float64])
def test_scatter_counts_like_bincount(monkeypatch, threads, n, dtype):
    monkeypatch.setenv("POLARS_DP_THREADS", threads)
    rng = np.random.default_rng(n)
    keys = np.concatenate([rng.integers(0, n, 3 * n), [0, n - 1, n - 1]])
    out = np.full(n, 7, dtype=dtype)  # whatever is there: zero=True overwrites it
    assert scatter.add_counts(out, keys, zero=True)
    want = np.bincount(keys, minlength=n)
    assert out.dtype == dtype and np.array_equal(out, want)
    assert scatter.add_counts(out, keys[::2])  # a later piece adds
    np.add.at(want, keys[::2], 1)
    assert np.array_equal(out, want)


@needs_compiled
def test_scatter_refuses_keys_outside_the_cells(monkeypatch):
    monkeypatch.setenv("POLARS_DP_THREADS", "2")
    with pytest.raises(RuntimeError, match="outside"):
        scatter.add_counts(np.zeros(10, dtype=np.int64), np.array([3, 10]))


@pytest.mark.parametrize(("compiled", "threads"), [("0", "2"), ("1", "1")])
def test_scatter_leaves_it_to_numpy_without_compiled_kernels_or_threads(monkeypatch, compiled, threads):
    monkeypatch.setenv("POLARS_DP_COMPILED", compiled)
    monkeypatch.setenv("POLARS_DP_THREADS", threads)
    out = np.full(5, 7, dtype=np.int64)
    assert not scatter.add_counts(out, np.array([1, 2]), zero=True)
    assert np.all(out == 7)


@pytest.mark.parametrize("cells", [1000, PARALLEL_CELLS])
@pytest.mark.parametrize("compiled", ["0", "1"])
@pytest.mark.parametrize("integer", [False, True])
def test_accumulator_gives_the_same_counts_either_way(monkeypatch, compiled, integer, cells):
    """Unweighted pieces through the scatter (or numpy), a weighted one through numpy."""
    monkeypatch.setenv("POLARS_DP_COMPILED", compiled)
    monkeypatch.setenv("POLARS_DP_THREADS", "2")
    rng = np.random.default_rng(3)
    pieces = [rng.integers(0, cells, 5000) for _ in range(3)]
    acc = Accumulator(cells, dense=True, integer=integer)
    for p in pieces:
        acc.add(p)
    acc.add(pieces[0][:10], np.full(10, 4))
    want = sum(np.bincount(p, minlength=cells) for p in pieces)
    np.add.at(want, pieces[0][:10], 4)
    got = acc.dense()
    assert got.dtype == (np.int64 if integer else np.float64) and np.array_equal(got, want)


def recorded_scatters(monkeypatch) -> list[int]:
    """Replace the parallel scatter by ``np.bincount``; the list gets each scattered result's size."""
    sizes: list[int] = []

    def recording(out, keys, zero=False):
        sizes.append(out.size)
        out[:] = np.bincount(keys, minlength=out.size)
        return True
    monkeypatch.setattr(aggregate, "add_counts", recording)
    return sizes


@pytest.mark.parametrize(("cells", "scattered"), [(10_000, False), (PARALLEL_CELLS - 1, False),
                                                  (PARALLEL_CELLS, True)])
def test_only_a_result_beyond_the_cache_is_scattered_on_every_core(monkeypatch, cells, scattered):
    """A small result is one ``np.bincount`` (no thread started); the counts are the same."""
    calls = recorded_scatters(monkeypatch)
    keys = np.random.default_rng(5).integers(0, cells, 4000)
    acc = Accumulator(cells, dense=True, integer=True)
    acc.add(keys)
    assert calls == ([cells] if scattered else [])
    assert np.array_equal(acc.dense(), np.bincount(keys, minlength=cells))


@pytest.mark.parametrize("room", [0, 1, 12_345])
def test_scattered_counts_leave_the_room_asked_for_in_front_of_them(monkeypatch, room):
    """With ``room`` the scattered counts are the last cells of a buffer with ``room`` int64
    slots in front, never written (a consumer builds its larger result there); the same counts."""
    writes = recorded_scatters(monkeypatch)
    keys = np.random.default_rng(6).integers(0, PARALLEL_CELLS, 4000)
    acc = Accumulator(PARALLEL_CELLS, dense=True, integer=True, room=room)
    acc.add(keys)
    got = acc.dense()
    assert writes == [PARALLEL_CELLS] and np.array_equal(got, np.bincount(keys, minlength=PARALLEL_CELLS))
    owner = got if got.base is None else got.base
    assert owner.size == room + PARALLEL_CELLS and got.ctypes.data == owner.ctypes.data + 8 * room


@needs_compiled
def test_frequency_matrix_leaves_the_room_through_the_engines(monkeypatch):
    import polars as pl

    import polars_dp as pdp
    from polars_dp.counting.frequency import frequency_matrix

    monkeypatch.setenv("POLARS_DP_THREADS", "2")
    monkeypatch.setattr(aggregate, "PARALLEL_CELLS", 0)
    attrs = [pdp.Ordinal("a", 0, 9), pdp.Ordinal("b", 0, 6)]
    rng = np.random.default_rng(2)
    frame = pl.DataFrame({"a": rng.integers(0, 10, 500), "b": rng.integers(0, 7, 500)})
    want = frequency_matrix(frame, attrs, integer=True)
    for data in (frame, frame.to_arrow()):
        got = frequency_matrix(data, attrs, integer=True, room=9)
        owner = got
        while owner.base is not None:
            owner = owner.base
        assert np.array_equal(got, want) and owner.nbytes == 8 * (9 + 70)
        assert got.ctypes.data == owner.ctypes.data + 8 * 9
