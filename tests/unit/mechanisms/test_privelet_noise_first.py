"""The narrow exact pipeline skips the last Haar axis's forward: ``P H^-1(D u + Z) = P Y + P H^-1(Z)``.

What these tests pin down:
* ``haar_inverse_scaled`` is ``P`` times the exact inverse (Python fractions), in int64 and on
  the Python-int path that very large noise takes;
* ``scaled_to_float`` is the correctly rounded ``N / P`` of ``N = P y + w`` and so a function
  of ``N`` alone (two splits of one ``N`` give the same bits; a double rounding would not);
* a release is a function of the noisy numerators ``X`` alone: data and noise with the same
  ``X`` give the same bits;
* the release equals the forward-then-inverse pipeline's within a few ulps (the same draws);
* the compiled kernels (when numba is installed) give the numpy kernels' bits.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import polars_dp.mechanisms.wavelet_lattice as privelet_exact
from polars_dp.kernels import parallel
from polars_dp.kernels import wavelet_exact as TE
from polars_dp.kernels import wavelets as T
from polars_dp.noise import noise_source
from tests.helpers.compiled import needs_compiled
from tests.helpers.samplers import with_out
from tests.helpers.wavelet_cases import CASES, INCOME


def exact_scaled_inverse(z: np.ndarray, m: int) -> np.ndarray:
    """``P x`` from the unnormalised Haar coefficients of each row, in fractions: the children
    of a node with sum ``s`` and detail ``d`` have sums ``(s + d)/2`` and ``(s - d)/2``."""
    p = z.shape[1]
    out = np.empty((z.shape[0], m), dtype=object)
    for r in range(z.shape[0]):
        sums = [Fraction(int(z[r, 0]))]
        k = 1
        while k < p:
            sums = [v for i, s in enumerate(sums)
                    for v in ((s + int(z[r, k + i])) / 2, (s - int(z[r, k + i])) / 2)]
            k *= 2
        out[r] = [int(v * p) if (v * p).denominator == 1 else v * p for v in sums[:m]]
    return out


@pytest.mark.parametrize(("m", "big"), [(301, 10**4), (16, 3), (1, 7), (300, 2**43), (300, 2**44),
                                        (300, 2**60), (5, 2**62)])
def test_scaled_inverse_is_p_times_the_exact_inverse(m, big):
    p = T.haar_padded_length(m)
    z = np.random.default_rng(m).integers(-big, big, size=(4, p), dtype=np.int64)
    got = TE.haar_inverse_scaled(z, m)
    want = exact_scaled_inverse(z, m)
    assert all(isinstance(v, int) for v in want.ravel())  # P clears every denominator
    # Python ints once |W| may pass 2^52 (float64's exact integers): only for huge noise
    assert (got.dtype == object) == (max(abs(int(v)) for v in z.ravel()) * p >= 2**52)
    assert [int(v) for v in got.ravel()] == [int(v) for v in want.ravel()]


def test_scaled_to_float_is_the_correctly_rounded_quotient_of_n():
    """``fl(N / P)`` for ``N = P y + w``, whatever the split of ``N`` into ``y`` and ``w``."""
    rng = np.random.default_rng(1)
    p = 512
    n = 20_000
    y = np.concatenate([rng.integers(-2**61, 2**61, n // 2), rng.integers(-2**20, 2**20, n // 2)])
    y[:50] = 2**53 + 1  # where rounding y first (then adding w / P) would round twice
    w = rng.integers(-2**40, 2**40, n)
    w[:50] = p // 2  # N / P = 2^53 + 1.5: the correctly rounded value is 2^53 + 2
    got = TE.scaled_to_float(y, w, p)
    want = np.array([(p * int(a) + int(b)) / p for a, b in zip(y, w, strict=True)])  # Python: exact
    assert np.array_equal(got.view(np.int64), want.view(np.int64))
    assert got[0] == 2.0**53 + 2
    shift = rng.integers(-2**30, 2**30, n)  # the same N split differently
    again = TE.scaled_to_float(y + shift, w - p * shift, p)
    assert np.array_equal(got.view(np.int64), again.view(np.int64))
    wide = TE.scaled_to_float(y, w.astype(object) * 2**20, p)  # the Python-int path
    want_wide = np.array([(p * int(a) + int(b) * 2**20) / p for a, b in zip(y, w, strict=True)])
    assert np.array_equal(wide.view(np.int64), want_wide.view(np.int64))


def test_release_is_a_function_of_the_noisy_numerators(monkeypatch):
    """Counts ``u``, ``u'`` and noise ``Z``, ``Z' = Z + H(u) - H(u')``: the same ``X = H u + Z``,
    so the same release, bit for bit (large counts, so that the last step rounds)."""
    attrs, tr = [INCOME], [True]
    rng = np.random.default_rng(4)
    u = rng.integers(0, 2**44, 301)  # total below 2^53; u + W / 512 needs up to 54 bits
    u2 = rng.integers(0, 2**44, 301)
    z = rng.integers(-10**6, 10**6, 512)
    z2 = z + TE.haar_forward_int(u) - TE.haar_forward_int(u2)
    outs = []
    for counts, noise in ((u, z), (u2, z2)):
        fixed = with_out(lambda src, t, s, size, v=noise: v.copy())
        monkeypatch.setattr(privelet_exact, "discrete_laplace", fixed)
        work = counts.astype(np.float64)
        privelet_exact.add_wavelet_noise_exact(work, attrs, tr, Fraction(7, 3), noise_source(1))
        outs.append(work)
    assert np.array_equal(outs[0].view(np.int64), outs[1].view(np.int64))
    exact = [Fraction(int(v)) for v in u]  # u + H^-1(z), exactly, then rounded once
    inv = exact_scaled_inverse(z[None], 301)[0]
    want = np.array([float(a + Fraction(b) / 512) for a, b in zip(exact, inv, strict=True)])
    assert np.array_equal(outs[0].view(np.int64), want.view(np.int64))


def _release(counts, attrs, transformed, slab, monkeypatch, *, plain: bool, seed: int = 3):
    monkeypatch.setattr(privelet_exact, "SLAB_CELLS", slab)
    real = privelet_exact.lattice_perturb
    if plain:  # the same perturb without its variants: forward, noise, inverse
        monkeypatch.setattr(privelet_exact, "lattice_perturb",
                            lambda *a: (lambda p: lambda *x, **k: p(*x, **k))(real(*a)))
    calls = []
    real_first = privelet_exact.haar_inverse_scaled

    def spy(z, m, axis=-1):
        calls.append(m)
        return real_first(z, m, axis)

    monkeypatch.setattr(privelet_exact, "haar_inverse_scaled", spy)
    monkeypatch.setenv("POLARS_DP_COMPILED", "0")
    work = counts.astype(np.float64)
    privelet_exact.add_wavelet_noise_exact(work, attrs, transformed, Fraction(7, 3), noise_source(seed))
    monkeypatch.undo()
    return work, calls


@pytest.mark.parametrize(("attrs", "transformed", "slab"), CASES)
def test_noise_first_matches_forward_then_inverse(monkeypatch, attrs, transformed, slab):
    """The same draws: the two post-processings of ``X`` agree to a few ulps."""
    counts = np.random.default_rng(5).poisson(3.0, tuple(a.n_cells for a in attrs))
    first, calls = _release(counts, attrs, transformed, slab, monkeypatch, plain=False)
    assert calls and set(calls) == {INCOME.n_cells}  # the last axis skipped its forward
    plain, calls = _release(counts, attrs, transformed, slab, monkeypatch, plain=True)
    assert not calls
    np.testing.assert_allclose(first, plain, rtol=0, atol=64 * np.spacing(np.abs(plain).max()))


@pytest.mark.parametrize("low", [2**45, 2**61])
def test_huge_draws_take_the_python_int_path(monkeypatch, low):
    """Draws with ``P max|Z| >= 2^52`` (a property of the noise alone: past float64's exact
    integers, or past int64) are inverted exactly in Python ints."""
    attrs, tr = [INCOME], [True]
    counts = np.random.default_rng(6).poisson(2.0, 301)
    noise = np.random.default_rng(7).integers(low, 2 * low, 512)
    monkeypatch.setattr(privelet_exact, "discrete_laplace", with_out(lambda src, t, s, size: noise.copy()))
    work = counts.astype(np.float64)
    privelet_exact.add_wavelet_noise_exact(work, attrs, tr, Fraction(7, 3), noise_source(1))
    inv = exact_scaled_inverse(noise[None], 301)[0]
    want = np.array([float(int(c) + Fraction(int(b), 512)) for c, b in zip(counts, inv, strict=True)])
    assert np.array_equal(work.view(np.int64), want.view(np.int64))


@needs_compiled
@pytest.mark.parametrize(("attrs", "transformed", "slab"), CASES)
def test_compiled_kernels_give_the_numpy_bits(monkeypatch, attrs, transformed, slab):
    counts = np.random.default_rng(8).poisson(50.0, tuple(a.n_cells for a in attrs))
    counts.reshape(-1)[7] = 2**52  # numerators y past 2^53 (total below it): the split of y matters
    monkeypatch.setattr(privelet_exact, "SLAB_CELLS", slab)
    outs = []
    for flag in ("1", "0"):
        monkeypatch.setenv("POLARS_DP_COMPILED", flag)
        work = counts.astype(np.float64)
        privelet_exact.add_wavelet_noise_exact(work, attrs, transformed, Fraction(7, 3), noise_source(2))
        outs.append(work)
    assert np.array_equal(outs[0].view(np.int64), outs[1].view(np.int64))


@pytest.mark.parametrize(("attrs", "transformed", "slab"), CASES)
@pytest.mark.parametrize("compiled_kernels", ["1", "0"])
def test_any_number_of_threads_gives_the_same_release(monkeypatch, attrs, transformed, slab,
                                                      compiled_kernels):
    """Every block draws from its own stream and writes only its own rows (and every column
    block of the outer axes its own columns): 1, 2 or 3 threads give the same bits."""
    counts = np.random.default_rng(10).poisson(6.0, tuple(a.n_cells for a in attrs))
    monkeypatch.setattr(privelet_exact, "SLAB_CELLS", slab)
    monkeypatch.setenv("POLARS_DP_COMPILED", compiled_kernels)
    outs = []
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("POLARS_DP_THREADS", threads)
        work = counts.astype(np.float64)
        privelet_exact.add_wavelet_noise_exact(work, attrs, transformed, Fraction(7, 3), noise_source(9))
        outs.append(work)
    assert all(np.array_equal(outs[0].view(np.int64), o.view(np.int64)) for o in outs[1:])


@pytest.mark.parametrize(("attrs", "transformed", "slab"), CASES)
def test_block_order_does_not_change_the_release(monkeypatch, attrs, transformed, slab):
    """Blocks taken in reverse order (one thread) give the same bits: a block's noise is a
    function of its start alone, not of the blocks drawn before it."""
    counts = np.random.default_rng(12).poisson(6.0, tuple(a.n_cells for a in attrs))
    monkeypatch.setattr(privelet_exact, "SLAB_CELLS", slab)
    monkeypatch.setenv("POLARS_DP_THREADS", "1")
    outs = []
    real_each = parallel.each
    for backwards in (False, True):
        if backwards:
            monkeypatch.setattr(parallel, "each", lambda fn, items, threads=1: real_each(
                fn, list(items)[::-1], threads))
        work = counts.astype(np.float64)
        privelet_exact.add_wavelet_noise_exact(work, attrs, transformed, Fraction(7, 3), noise_source(9))
        outs.append(work)
    assert np.array_equal(outs[0].view(np.int64), outs[1].view(np.int64))


def test_blocks_draw_from_distinct_streams(monkeypatch):
    """Two blocks of the same shape and denominators never repeat each other's draws."""
    attrs, transformed, slab = CASES[2]
    monkeypatch.setattr(privelet_exact, "SLAB_CELLS", slab)
    drawn = []
    real = privelet_exact.discrete_laplace

    def record(src, t, s, size):
        z = real(src, t, s, size)
        drawn.append(z.ravel().copy())
        return z

    monkeypatch.setattr(privelet_exact, "discrete_laplace", with_out(record))
    monkeypatch.setenv("POLARS_DP_THREADS", "1")
    counts = np.zeros(tuple(a.n_cells for a in attrs))
    privelet_exact.add_wavelet_noise_exact(counts, attrs, transformed, Fraction(7, 3), noise_source(9))
    assert len(drawn) > 2
    sizes = {}
    for z in drawn:
        sizes.setdefault(z.size, []).append(z)
    same = [zs for zs in sizes.values() if len(zs) > 1]
    assert same  # blocks of one shape exist, so the comparison below means something
    for zs in same:
        assert len({z.tobytes() for z in zs}) == len(zs)


@pytest.mark.parametrize("den_shape", [(1, 3, 4, 1), (1, 3, 1, 1), (1, 1, 1, 8), (1, 1, 1, 1)])
def test_draws_go_value_by_value_into_one_buffer(den_shape):
    """The rows with ``D = v`` take the next draws of the block's stream at scale ``v lambda'``,
    in C order, values in the order of ``factors``; ``which`` hands every row its own draws
    (each draw used once)."""
    shape, scale = (2, 3, 4, 8), Fraction(7, 3)
    den = np.random.default_rng(sum(den_shape)).choice([1, 2, 14, 28], den_shape)
    factors = sorted({int(v) for v in den.ravel()})
    drawn, which = privelet_exact._draws_by_value(noise_source(5), shape, den, scale, factors)
    full = np.broadcast_to(den, shape)
    width = shape[-1] if np.all(full == full[..., :1]) else 1
    row_den = full.reshape(-1, width)[:, 0]
    want = np.empty((row_den.size, width), dtype=np.int64)
    ref = noise_source(5)
    for v in factors:
        rows = np.flatnonzero(row_den == v)
        want[rows] = privelet_exact.discrete_laplace(ref, v * 7, 3, rows.size * width).reshape(-1, width)
    assert np.array_equal(drawn[which], want)
    assert np.array_equal(np.sort(which), np.arange(which.size))
