"""The streamed hierarchical release kernels: integer block counts of any level tuple from the
counts or a coarser level, the in-place fold, and the working set of the streamed least squares
against the cube's size (the whole pyramid is never held)."""

from __future__ import annotations

import itertools
import tracemalloc

import numpy as np
import pytest

import polars_dp as pdp
from polars_dp.kernels.block_levels import (
    BlockCounter,
    bary_levels,
    chain_from_factors,
    collapse,
    fold,
    fold_owned,
    nominal_levels,
    pad,
    padded_blocks,
    pyramid,
)
from polars_dp.kernels.level_inference import gls, gls_from_sum, noisy_normal_sum
from tests.helpers.compiled import needs_compiled

OCC = pdp.Nominal("o", pdp.Hierarchy.from_dict({f"h{g}": list(range(g * 4, g * 4 + 4)) for g in range(3)}))
AXES = (bary_levels(11), chain_from_factors(2, [2]), nominal_levels(OCC), bary_levels(37, 3))


@pytest.mark.parametrize("cap", [0, 10, None])
def test_block_counter_gives_every_tuples_counts_in_any_order(cap):
    rng = np.random.default_rng(5)
    counts = rng.integers(0, 9, size=tuple(ax.n for ax in AXES))
    want = pyramid(pad(counts, AXES), AXES)
    tuples = list(itertools.product(*(range(ax.count) for ax in AXES)))
    rng.shuffle(tuples)
    counter = BlockCounter(counts, AXES, cache_cells=cap)
    for t in map(tuple, tuples):
        got = padded_blocks(counter.real(t), t, AXES)
        assert got.dtype == np.float64
        np.testing.assert_array_equal(got, want[t])
    counter.keep_for([])
    assert counter.cache == {}


def test_block_counter_told_the_tuples_to_come_reads_the_counts_less_often(monkeypatch):
    """Told the tuples still to come, the counter takes the step towards blocks they can be
    made from and keeps those blocks: the same counts, fewer passes over the counts."""
    import polars_dp.kernels.block_levels as BL

    rng = np.random.default_rng(8)
    counts = rng.integers(0, 9, size=tuple(ax.n for ax in AXES))
    want = pyramid(pad(counts, AXES), AXES)
    tuples = [(0, 0, 0, 1), (0, 1, 2, 2), (1, 1, 2, 1), (2, 1, 2, 2), (3, 0, 2, 1), (4, 1, 2, 1)]
    reads = {False: 0, True: 0}
    real_coarsen = BL.coarsen_real
    for told in (False, True):
        def spy(arr, axis, factor, threads=1, told=told):
            reads[told] += arr.size == counts.size
            return real_coarsen(arr, axis, factor, threads)
        monkeypatch.setattr(BL, "coarsen_real", spy)
        counter = BlockCounter(counts, AXES, cache_cells=counts.size // 8)
        counter.reuse_cap = counts.size // 3
        for k, t in enumerate(tuples):
            got = counter.real(t, tuples[k + 1:] if told else ())
            np.testing.assert_array_equal(padded_blocks(got, t, AXES), want[t])
    assert reads[True] < reads[False]


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("shape", [(5, 4, 1001), (1, 3, 50), (1, 1, 9)])
def test_integer_block_sums_shared_among_threads_are_the_same(monkeypatch, shape, threads):
    """Above ``PARALLEL_CELLS`` (made 0 here) the block sums are cut along the first other axis
    of two or more entries and summed on several threads: the same integers on every axis."""
    import polars_dp.kernels.block_levels as BL

    monkeypatch.setattr(BL, "PARALLEL_CELLS", 0)
    x = np.random.default_rng(threads).integers(-2**40, 2**40, size=shape)
    for axis, factor in itertools.product(range(3), (2, 3, 64)):
        want = np.add.reduceat(x, np.arange(0, shape[axis], factor), axis=axis)
        np.testing.assert_array_equal(BL.coarsen_real(x, axis, factor, threads), want)


@pytest.mark.parametrize("factor", [1, 2, 3, 4, 7, 8, 64, 2000])
@pytest.mark.parametrize("compiled", ["0", "1"])
def test_integer_block_sums_along_the_last_axis(monkeypatch, factor, compiled):
    """Compiled (the last axis in one pass) or numpy, the block sums of every axis (the last
    block partial) are exact."""
    import polars_dp.kernels.compiled as K
    from polars_dp.compiled import enabled
    from polars_dp.kernels.block_levels import coarsen_real

    monkeypatch.setenv("POLARS_DP_COMPILED", compiled)
    ran = []
    real_kernel = K.int_block_sums_last

    def spy(*args):
        out = real_kernel(*args)
        if out is not None:
            ran.append(args[1])
        return out
    monkeypatch.setattr(K, "int_block_sums_last", spy)
    x = np.random.default_rng(factor).integers(-2**40, 2**40, size=(3, 4, 1001))
    for axis in range(3):
        got = coarsen_real(x, axis, factor)
        m = x.shape[axis]
        starts = np.arange(0, m, factor)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, np.add.reduceat(x, starts, axis=axis))
    assert ran == ([factor] if enabled() else [])


@pytest.mark.parametrize("slab", [1, 3 * 2 * 12 * 37, 1 << 23])
def test_fold_owned_is_fold_bit_for_bit(monkeypatch, slab):
    """Packed into the estimate's own memory, one first-axis row or three or all at a time."""
    import polars_dp.kernels.block_levels as BL

    monkeypatch.setattr(BL, "FOLD_SLAB", slab)
    rng = np.random.default_rng(2)
    est = rng.standard_normal(tuple(ax.length for ax in AXES)) * 1e3
    want = fold(est.copy(), AXES)
    got = fold_owned(est, AXES)
    assert got.flags.c_contiguous and got.shape == tuple(ax.n for ax in AXES)
    np.testing.assert_array_equal(got.view(np.int64), want.view(np.int64))


# 1944 values per row of the first axis: slabs of 1, 3 and 5 rows, and one slab
@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("slab", [1, 64, 3 * 1944, 5 * 1944, 1 << 30])
def test_streamed_least_squares_equals_gls_bit_for_bit_on_any_slab(slab, threads):
    """Float measurements (no integer structure), every slab size, the slabs on one thread or
    several: the streamed normal sum and pyramid walk give :func:`gls`'s bits."""
    rng = np.random.default_rng(3)
    shape = tuple(ax.count for ax in AXES)
    weights = np.where(rng.random(shape) < 0.3, rng.random(shape), 0.0)
    weights[-1, -1, -1, -1] = 0.5
    counts = rng.integers(0, 50, size=tuple(ax.n for ax in AXES))
    exact = pyramid(pad(counts, AXES), AXES)
    measured = [t for t in np.ndindex(*shape) if weights[t] > 0]
    noise = {t: rng.standard_normal(exact[t].shape) * 3 for t in measured}
    want = gls({t: exact[t] + noise[t] for t in measured}, weights, AXES)

    def add_noise(t, y):
        y += noise[t]

    z = noisy_normal_sum(counts, AXES, measured, weights, add_noise, slab_cells=slab, threads=threads)
    got = gls_from_sum(z, weights, AXES, slab_cells=slab, threads=threads)
    np.testing.assert_array_equal(got.view(np.int64), want.view(np.int64))


def _random_axis(rng):
    """A small axis of one of the library's level kinds: b-ary levels (b = 2 or 3, padded), a
    chain of factors 2, 3 or 4 over a padded length, or a plain binary chain."""
    kind = int(rng.integers(0, 3))
    if kind == 0:
        return bary_levels(int(rng.integers(1, 40)), int(rng.integers(2, 4)))
    factors = [int(f) for f in rng.choice([2, 2, 3, 4], size=int(rng.integers(1, 4)))] if kind == 1 \
        else [2] * int(rng.integers(2, 5))
    length = int(np.prod(factors))
    return chain_from_factors(int(rng.integers(length // 2 + 1, length + 1)), factors, length)


@pytest.mark.parametrize("seed", range(60))
def test_random_plans_on_random_slabs_give_gls_bits(monkeypatch, seed):
    """Random 1-3 axis plans, random measured tuples and weights (the cells tuple sometimes
    unmeasured or alone in its group), each summed and solved on random slab sizes, threads and
    tile sizes: :func:`collapse`'s normal sum and :func:`gls`'s estimate bit for bit."""
    import polars_dp.kernels.level_inference as LI

    rng = np.random.default_rng(seed)
    axes = tuple(_random_axis(rng) for _ in range(int(rng.integers(1, 4))))
    shape = tuple(ax.count for ax in axes)
    weights = np.where(rng.random(shape) < rng.choice([0.2, 0.5, 1.0]), rng.random(shape) + 0.01, 0.0)
    weights[(-1,) * len(axes)] = 0.0 if rng.random() < 0.3 else 1.0
    weights[(0,) * len(axes)] = 1.0  # the total: the system has a solution
    counts = rng.integers(0, 30, size=tuple(ax.n for ax in axes))
    exact = pyramid(pad(counts, axes), axes)
    measured = [t for t in np.ndindex(*shape) if weights[t] > 0]
    noise = {t: rng.standard_normal(exact[t].shape) * 3 for t in measured}
    want_z = collapse({t: weights[t] * (exact[t] + noise[t]) for t in measured}, axes)
    want = gls({t: exact[t] + noise[t] for t in measured}, weights, axes)

    def add_noise(t, y):
        y += noise[t]

    for _ in range(4):
        slab, threads = int(rng.choice([1, 3, 16, 64, 1000, 1 << 30])), int(rng.integers(1, 4))
        monkeypatch.setattr(LI, "TILE_CELLS", int(rng.choice([1, 5, 64, 1 << 16])))
        z = noisy_normal_sum(counts.copy(), axes, measured, weights, add_noise, slab_cells=slab,
                             threads=threads)
        np.testing.assert_array_equal(z.view(np.int64), want_z.view(np.int64))
        got = gls_from_sum(z, weights, axes, slab_cells=slab, threads=threads)
        np.testing.assert_array_equal(got.view(np.int64), want.view(np.int64))


def _peak(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_streamed_least_squares_holds_about_two_cubes_not_the_pyramid():
    """Census-like axes (a padded ordinal, a short nominal, a wide ordinal), the budgets of the
    random range workload, slabs of 2^14 values: measuring and solving hold at most 2.25 padded
    float cubes beyond the counts (the normal sum, one chain of the first axis, the folded
    output), where measuring every tuple and then solving holds more than 10."""
    attrs = [pdp.Ordinal("a", 0, 100), pdp.Nominal("g", categories=[0, 1]), pdp.Ordinal("c", 0, 1000)]
    plan = pdp.plan("hierarchical", attrs, epsilon=1.0, workload=pdp.workload.random_ranges(attrs))
    axes, weights, measured = plan.axes, plan.weights, plan.measured
    cube = 8 * int(np.prod([ax.length for ax in axes]))
    counts = np.random.default_rng(1).integers(0, 5, size=tuple(ax.n for ax in axes))
    noise = np.random.default_rng(2)

    def add_noise(t, y):  # in chunks, as the mechanism draws
        flat = y.reshape(-1)
        for a in range(0, flat.size, 4096):
            flat[a:a + 4096] += noise.integers(-3, 4, size=flat[a:a + 4096].size)

    def streamed():
        z = noisy_normal_sum(counts, axes, measured, weights, add_noise, slab_cells=1 << 14)
        gls_from_sum(z, weights, axes, slab_cells=1 << 14)

    def whole():
        exact = pyramid(pad(counts, axes), axes)
        gls({t: exact[t] + 1.0 for t in measured}, weights, axes)

    assert _peak(streamed) <= 2.25 * cube
    assert _peak(whole) > 10 * cube  # what the bound above rules out


@pytest.mark.parametrize("threads", [1, 2])
def test_the_least_squares_never_holds_the_half_cube(threads):
    """The census-like budgets of the random range workload reach the first axis's cells and
    levels above the half cube's: the pyramid walk makes that level from the cells by halving
    twice a slab at a time, so it holds well under 0.6 cubes beside ``z`` (0.94 when the half
    cube is made whole), with :func:`gls`'s bits."""
    attrs = [pdp.Ordinal("a", 0, 100), pdp.Nominal("g", categories=[0, 1]), pdp.Ordinal("c", 0, 1000)]
    plan = pdp.plan("hierarchical", attrs, epsilon=1.0, workload=pdp.workload.random_ranges(attrs))
    axes, weights = plan.axes, plan.weights
    cube = 8 * int(np.prod([ax.length for ax in axes]))
    counts = np.random.default_rng(1).integers(0, 5, size=tuple(ax.n for ax in axes))
    exact = pyramid(pad(counts, axes), axes)
    measured = [t for t in np.ndindex(*weights.shape) if weights[t] > 0]
    want = gls({t: exact[t] + 0.5 for t in measured}, weights, axes)
    z = collapse({t: weights[t] * (exact[t] + 0.5) for t in measured}, axes)
    got = []
    assert _peak(lambda: got.append(gls_from_sum(z, weights, axes, slab_cells=1 << 14, threads=threads))) \
        < 0.6 * cube
    np.testing.assert_array_equal(got[0].view(np.int64), want.view(np.int64))


def test_counts_in_a_list_are_consumed_with_the_same_sum():
    rng = np.random.default_rng(4)
    counts = rng.integers(0, 20, size=tuple(ax.n for ax in AXES))
    weights = np.zeros(tuple(ax.count for ax in AXES))
    weights[0, 1, 1, 2] = weights[-1, -1, -1, -1] = weights[2, 0, 2, 1] = 1.5
    measured = [t for t in np.ndindex(*weights.shape) if weights[t] > 0]
    want = noisy_normal_sum(counts, AXES, measured, weights, lambda t, y: None)
    held = [counts.copy()]
    got = noisy_normal_sum(held, AXES, measured, weights, lambda t, y: None)
    assert held == []
    np.testing.assert_array_equal(got.view(np.int64), want.view(np.int64))


@pytest.mark.parametrize("chunk", [8, 24, 2 * 1944])  # rows of 1944 values: parts of 1 and 2 rows
def test_large_tuples_noised_by_blocks_of_rows_take_the_same_draws(chunk):
    """With ``noise_chunk`` a large tuple is filled, noised and weighted by blocks of rows; the
    noise callback sees consecutive parts (multiples of the chunk but the last), so a stream
    of draws gives the same sum as one call per tuple."""
    rng = np.random.default_rng(6)
    counts = rng.integers(0, 20, size=tuple(ax.n for ax in AXES))
    weights = np.zeros(tuple(ax.count for ax in AXES))
    weights[0, 1, 1, 2] = weights[-1, -1, -1, -1] = weights[2, 0, 2, 1] = weights[-1, 0, -1, -1] = 1.5
    measured = [t for t in np.ndindex(*weights.shape) if weights[t] > 0]
    sizes_of = {t: int(np.prod([ax.length // ax.sizes[i] for ax, i in zip(AXES, t, strict=True)]))
                for t in measured}
    noise = {t: rng.standard_normal(n) for t, n in sizes_of.items()}
    sizes: dict = {}

    def streamed(t, part):
        start = sum(sizes.get(t, []))
        assert all(s % chunk == 0 for s in sizes.get(t, []))  # every earlier part a multiple
        sizes.setdefault(t, []).append(part.size)
        part.reshape(-1)[:] += noise[t][start:start + part.size]

    def whole(t, y):
        y += noise[t].reshape(y.shape)

    want = noisy_normal_sum(counts, AXES, measured, weights, whole)
    got = noisy_normal_sum(counts, AXES, measured, weights, streamed, noise_chunk=chunk)
    assert any(len(v) > 1 for v in sizes.values())
    np.testing.assert_array_equal(got.view(np.int64), want.view(np.int64))


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("chunk", [8, 24])
def test_blocks_with_streams_of_their_own_give_the_same_bits_on_any_threads(chunk, threads):
    """A tuple given a block noise (``block_noise``) is filled, noised and weighted by blocks of
    rows on several threads; each block's draws depend on its first value alone, so the sum is
    the same bits as one thread's, and as :func:`gls`'s ``z`` of the counts plus those draws
    (each block's draws in place, the other tuples' from ``add_noise`` in order)."""
    rng = np.random.default_rng(7)
    counts = rng.integers(0, 20, size=tuple(ax.n for ax in AXES))
    weights = np.zeros(tuple(ax.count for ax in AXES))
    weights[0, 1, 1, 2] = weights[-1, -1, -1, -1] = weights[2, 0, 2, 1] = weights[-1, 0, -1, -1] = 1.5
    measured = [t for t in np.ndindex(*weights.shape) if weights[t] > 0]
    shape_of = {t: tuple(ax.length // ax.sizes[i] for ax, i in zip(AXES, t, strict=True)) for t in measured}
    big = {t for t in measured if np.prod(shape_of[t]) > 4 * chunk}
    noise = {t: rng.standard_normal(shape_of[t]) for t in measured}
    starts: dict = {}

    def add_noise(t, y):
        assert t not in big
        y += noise[t]

    def block_noise(t):
        if t not in big:
            return None

        def add_block(part, start, fresh):
            starts.setdefault(t, []).append(start)
            if fresh:
                part.fill(np.nan)  # whatever bytes: written over, never read
                part.reshape(-1)[:] = 0.0 + noise[t].reshape(-1)[start:start + part.size]
            else:
                part.reshape(-1)[:] += noise[t].reshape(-1)[start:start + part.size]

        return add_block

    exact = pyramid(pad(counts, AXES), AXES)
    z = collapse({t: weights[t] * (exact[t] + noise[t]) for t in measured}, AXES)
    got = noisy_normal_sum(counts, AXES, measured, weights, add_noise, noise_chunk=chunk,
                           threads=threads, block_noise=block_noise)
    one = noisy_normal_sum(counts, AXES, measured, weights, add_noise, noise_chunk=chunk,
                           threads=1, block_noise=block_noise)
    assert big and set(starts) == big and max(len(v) for v in starts.values()) > 4  # blocks of rows
    np.testing.assert_array_equal(got.view(np.int64), one.view(np.int64))
    np.testing.assert_array_equal(got, z)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("padded", [True, False])
def test_counts_leaving_room_take_the_cells_tuple_in_their_buffer(threads, padded):
    """Consumed counts at the end of a buffer of the padded cube's size: the cells' tuple (the
    last measured) is built over them, in waves of blocks, with the same bits as a new cube;
    when the padding is too thin for the waves (no padding at all) a new cube is made."""
    axes = AXES if padded else (chain_from_factors(12, [3, 4]), chain_from_factors(2, [2]),
                                nominal_levels(OCC), chain_from_factors(36, [6, 6]))
    rng = np.random.default_rng(9)
    counts = rng.integers(0, 20, size=tuple(ax.n for ax in axes))
    weights = np.zeros(tuple(ax.count for ax in axes))
    weights[0, 1, 1, 1] = weights[2, 0, 2, 1] = weights[-1, -1, -1, -1] = 1.5
    measured = [t for t in np.ndindex(*weights.shape) if weights[t] > 0]
    cube = int(np.prod([ax.length for ax in axes]))
    noise = {t: rng.standard_normal(tuple(ax.length // ax.sizes[i] for ax, i in zip(axes, t, strict=True)))
             for t in measured}

    fresh_flags: list[bool] = []

    def block_noise(t):
        def add_block(part, start, fresh):
            fresh_flags.append(fresh)
            if fresh:
                part.reshape(-1)[:] = 0.0 + noise[t].reshape(-1)[start:start + part.size]
            else:
                part.reshape(-1)[:] += noise[t].reshape(-1)[start:start + part.size]
        return add_block

    def run(held):
        return noisy_normal_sum(held, axes, measured, weights, lambda t, y: None, noise_chunk=16,
                                threads=threads, block_noise=block_noise)

    want = run([counts.copy()])
    buffer = np.full(cube, -7, dtype=np.int64)  # whatever is in the room
    buffer[cube - counts.size:] = counts.reshape(-1)
    got = run([buffer[cube - counts.size:].reshape(counts.shape)])
    np.testing.assert_array_equal(got.view(np.int64), want.view(np.int64))
    assert np.shares_memory(got, buffer) == padded
    # compiled, every block with counts is written fresh (no zeros filled first over the room)
    from polars_dp.compiled import enabled
    assert any(fresh_flags) == enabled()


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_waves_over_the_room_are_the_widest_that_never_overwrite_an_unread_count(threads):
    """Each wave's rows end before the first counts row it reads; one more block per wave would
    break that somewhere (few waves: few barriers); none when ``threads`` blocks do not fit."""
    from polars_dp.kernels.level_inference import _waves

    shape, real_shape = (40, 6, 8), (31, 5, 7)
    room = np.zeros(shape)
    real = room.reshape(-1)[room.size - int(np.prod(real_shape)):].view(np.int64).reshape(real_shape)
    y_row, c_row, head = 8 * 48, 8 * 35, room.nbytes - real.nbytes

    def fits(width):
        return all(min(40, w + width) * y_row <= head + min(w, 31) * c_row for w in range(0, 40, width))

    waves = _waves(room, real, shape, 2, threads)
    width = waves[0].stop - waves[0].start
    assert [a for w in waves for a in w] == list(range(0, 40, 2)) and fits(width)
    assert width >= 2 * threads and not any(fits(k) for k in range(width + 2, 41, 2))
    assert _waves(room, real, shape, 2, 40) is None


@needs_compiled
@pytest.mark.parametrize("seed", range(6))
def test_compiled_binary_last_axis_gives_the_numpy_bits(monkeypatch, seed):
    """A binary last axis (padded, and a power of two): its least-squares pass runs compiled, a
    row at a time, with :func:`gls`'s bits, whichever of its levels the weights reach (the
    cells or not, one level or many)."""
    import polars_dp.kernels.compiled as K

    axes = (bary_levels(11), nominal_levels(OCC), bary_levels(37) if seed % 2 else bary_levels(64))
    rng = np.random.default_rng(seed)
    shape = tuple(ax.count for ax in axes)
    weights = np.where(rng.random(shape) < 0.25, rng.random(shape), 0.0)
    weights[-1, -1, -1] = 0.0 if seed == 2 else 0.5
    weights[0, 0, 0] = 0.3
    counts = rng.integers(0, 50, size=tuple(ax.n for ax in axes))
    exact = pyramid(pad(counts, axes), axes)
    measured = [t for t in np.ndindex(*shape) if weights[t] > 0]
    noise = {t: rng.standard_normal(exact[t].shape) * 3 for t in measured}
    want = gls({t: exact[t] + noise[t] for t in measured}, weights, axes)
    calls = []
    real = K.binary_level_rows

    def spy(*args):
        calls.append(args[1])
        return real(*args)
    monkeypatch.setattr(K, "binary_level_rows", spy)
    for slab in (1, 1 << 20):
        z = noisy_normal_sum(counts, axes, measured, weights, lambda t, y: y.__iadd__(noise[t]))
        got = gls_from_sum(z, weights, axes, slab_cells=slab)
        np.testing.assert_array_equal(got.view(np.int64), want.view(np.int64))
    assert calls and any(len(drops) > 1 for drops in calls)


@needs_compiled
@pytest.mark.parametrize("refused", [False, True])
def test_compiled_counts_and_weight_pass_gives_the_numpy_bits(monkeypatch, refused):
    """A large tuple's blocks of rows: noise first, then counts and weight in one compiled pass,
    the bits of filling, noising and weighting in numpy (noise with zeros and -0.0 too); a pass
    the kernel refuses adds the counts in numpy after the noise, with the same bits."""
    import polars_dp.kernels.compiled as K

    rng = np.random.default_rng(9)
    counts = rng.integers(0, 20, size=tuple(ax.n for ax in AXES))
    weights = np.zeros(tuple(ax.count for ax in AXES))
    weights[0, 1, 1, 2] = weights[2, 0, 2, 1] = 1.5
    weights[-1, -1, -1, -1] = 0.37
    measured = [t for t in np.ndindex(*weights.shape) if weights[t] > 0] + [(3, 0, 2, 3)]  # one of weight 0
    measured.sort()
    sizes = {t: int(np.prod([ax.length // ax.sizes[i] for ax, i in zip(AXES, t, strict=True)]))
             for t in measured}
    noise = {t: rng.standard_normal(n) for t, n in sizes.items()}
    for v in noise.values():
        v[::7] = 0.0
        v[::11] = -0.0
    drawn: dict = {}

    def add(t, part):
        start = drawn.get(t, 0)
        drawn[t] = start + part.size
        part.reshape(-1)[:] += noise[t][start:start + part.size]

    calls: list[bool] = []
    real_kernel = K.add_counts

    def spy(*args):
        calls.append(False if refused else real_kernel(*args))
        return calls[-1]
    monkeypatch.setattr(K, "add_counts", spy)
    sums = []
    for flag in ("0", "1"):
        monkeypatch.setenv("POLARS_DP_COMPILED", flag)
        drawn.clear()
        sums.append(noisy_normal_sum(counts, AXES, measured, weights, add, noise_chunk=24))
    assert calls and all(c != refused for c in calls)
    numpy_sum, compiled_sum = sums
    np.testing.assert_array_equal(compiled_sum.view(np.int64), numpy_sum.view(np.int64))


@pytest.mark.parametrize("slab", [1, 2 * 1944, 5 * 1944])
@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("tile", [1, 7, 96, 1 << 30])
def test_pending_additions_made_by_tiles_give_the_whole_slab_bits(monkeypatch, tile, threads, slab):
    """The normal sum's additions into a slab at full resolution are left pending and made a
    tile at a time (tiles of any size, the slabs on any threads): :func:`gls`'s ``z`` bit for
    bit, and the pending path is taken."""
    import polars_dp.kernels.level_inference as LI

    monkeypatch.setattr(LI, "TILE_CELLS", tile)
    settled = []
    real_settle = LI._settle

    def settle(value, out=None):
        settled.append(isinstance(value, LI._Chain) and len(value.parts))
        return real_settle(value, out)

    monkeypatch.setattr(LI, "_settle", settle)
    rng = np.random.default_rng(11)
    shape = tuple(ax.count for ax in AXES)
    weights = np.where(rng.random(shape) < 0.4, rng.random(shape) * 7, 0.0)
    weights[-1, -1, -1, -1] = 0.3
    counts = rng.integers(0, 50, size=tuple(ax.n for ax in AXES))
    exact = pyramid(pad(counts, AXES), AXES)
    measured = [t for t in np.ndindex(*shape) if weights[t] > 0]
    noise = {t: rng.standard_normal(exact[t].shape) * 1e3 for t in measured}
    want = collapse({t: weights[t] * (exact[t] + noise[t]) for t in measured}, AXES)

    def add_noise(t, y):
        y += noise[t]

    z = noisy_normal_sum(counts, AXES, measured, weights, add_noise, slab_cells=slab, threads=threads)
    np.testing.assert_array_equal(z.view(np.int64), want.view(np.int64))
    assert max(settled) >= 2  # several additions were pending on one slab


def _sum_with_the_cells_alone_in_their_group(axes, measured, slab, threads, seed=5):
    """``(noisy_normal_sum, collapse)`` of ``measured`` (unit weights, Gaussian noise) on random
    counts over ``axes``."""
    rng = np.random.default_rng(seed)
    shape = tuple(ax.count for ax in axes)
    weights = np.zeros(shape)
    for t in measured:
        weights[t] = 1.0
    counts = rng.integers(0, 30, size=tuple(ax.n for ax in axes))
    exact = pyramid(pad(counts, axes), axes)
    noise = {t: rng.standard_normal(exact[t].shape) * 3 for t in measured}

    def add_noise(t, y):
        y += noise[t]

    z = noisy_normal_sum(counts, axes, measured, weights, add_noise, slab_cells=slab, threads=threads)
    return z, collapse({t: exact[t] + noise[t] for t in measured}, axes)


@pytest.mark.parametrize("slab", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("threads", [1, 2])
def test_a_slab_cutting_a_coarser_block_keeps_the_cells_tuples_values(slab, threads):
    """The cells tuple, alone in its group at the finest first-axis level, is added to a
    coarser tuple's blocks that a slab boundary cuts (a copy at the slab's full shape): the
    sum keeps the cells' values (it once wrote the copy over them first, giving twice the
    coarser sum), on any slab and threads, bit for bit with :func:`collapse`."""
    axes = (chain_from_factors(8, [2, 2, 2], 8),)
    z, want = _sum_with_the_cells_alone_in_their_group(axes, [(0,), (1,), (2,), (3,)], slab, threads)
    np.testing.assert_array_equal(z.view(np.int64), want.view(np.int64))
    axes = (chain_from_factors(32, [2, 2, 2, 2, 2], 32), bary_levels(16))
    last = axes[1].count - 1
    z, want = _sum_with_the_cells_alone_in_their_group(axes, [(1, last), (5, last)], slab * 16, threads)
    np.testing.assert_array_equal(z.view(np.int64), want.view(np.int64))


@pytest.mark.parametrize("tile", [1, 5, 64, 1 << 30])
@pytest.mark.parametrize("threads", [1, 2])
def test_the_quarter_level_made_in_tiles_is_twice_halving_bit_for_bit(monkeypatch, tile, threads):
    """The first axis's level two halvings above the cells, made four rows at a time in tiles
    with one buffer: the bits of two whole halvings (floats of mixed magnitudes, where the
    order of the additions shows)."""
    import polars_dp.kernels.level_inference as LI

    monkeypatch.setattr(LI, "TILE_CELLS", tile)
    rng = np.random.default_rng(4)
    a = rng.standard_normal((16, 3, 10)) * 10.0 ** rng.integers(-8, 9, size=(16, 3, 10))
    out = np.empty((4, 3, 10))
    LI._quarter_into(out, a)
    want = LI._halve(LI._halve(a, 0), 0)
    np.testing.assert_array_equal(out.view(np.int64), want.view(np.int64))
    # and in the least squares, which makes that level when the plan asks for it
    axes = (bary_levels(16, 2), chain_from_factors(2, [2]), bary_levels(9))
    shape = tuple(ax.count for ax in axes)
    weights = np.where(rng.random(shape) < 0.5, rng.random(shape), 0.0)
    weights[-1, -1, -1] = 1.0
    measured = [t for t in np.ndindex(*shape) if weights[t] > 0]
    counts = rng.integers(0, 9, size=tuple(ax.n for ax in axes))
    exact = pyramid(pad(counts, axes), axes)
    noise = {t: rng.standard_normal(exact[t].shape) * 3 for t in measured}
    ref = gls({t: exact[t] + noise[t] for t in measured}, weights, axes)
    z = collapse({t: weights[t] * (exact[t] + noise[t]) for t in measured}, axes)
    got = gls_from_sum(z, weights, axes, slab_cells=18, threads=threads)
    np.testing.assert_array_equal(got.view(np.int64), ref.view(np.int64))


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("slab", [40, 10_000])
def test_quarter_made_with_the_normal_sum_gives_the_same_bits(threads, slab):
    """Asked for it, the normal sum also gives itself halved twice along the first axis, made
    per slab as the slabs are summed: the same bits as halving ``z`` twice, and the least
    squares that takes it (once) gives the same bits as the one that halves ``z`` itself."""
    from polars_dp.kernels.level_inference import _halve
    rng = np.random.default_rng(5)
    counts = rng.integers(0, 20, size=tuple(ax.n for ax in AXES))
    weights = np.zeros(tuple(ax.count for ax in AXES))
    weights[0, 1, 1, 2] = weights[1, 0, 2, 1] = weights[-1, -1, -1, -1] = weights[-2, 1, -1, 0] = 1.5
    measured = [t for t in np.ndindex(*weights.shape) if weights[t] > 0]
    noise = {t: rng.standard_normal(tuple(ax.length // ax.sizes[i] for ax, i in zip(AXES, t, strict=True)))
             for t in measured}

    def add_noise(t, y):
        y += noise[t]

    quarter: list = []
    z = noisy_normal_sum(counts, AXES, measured, weights, add_noise, slab_cells=slab, threads=threads,
                         quarter=quarter)
    plain = noisy_normal_sum(counts, AXES, measured, weights, add_noise, slab_cells=slab, threads=threads)
    np.testing.assert_array_equal(z.view(np.int64), plain.view(np.int64))
    assert len(quarter) == 1
    np.testing.assert_array_equal(quarter[0].view(np.int64), _halve(_halve(z, 0), 0).view(np.int64))
    got = gls_from_sum(z.copy(), weights, AXES, slab_cells=slab, threads=threads, quarter=quarter)
    assert not quarter  # taken
    want = gls_from_sum(z, weights, AXES, slab_cells=slab, threads=threads)
    np.testing.assert_array_equal(got.view(np.int64), want.view(np.int64))
