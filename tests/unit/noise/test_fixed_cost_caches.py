"""What a small release computes once instead of per release, and that it is the same.

The exact scales and their record entries are kept per value of their public inputs, the
signed guide of the discrete Laplace sampler is a small table whose every decided entry is the
exact inversion's answer: each test compares
against the computation done afresh, and against a different input that must not share it.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from polars_dp.errors import ParameterError
from polars_dp.noise import calibration as C
from polars_dp.noise import discrete as D
from polars_dp.noise import noise_source

EPSILONS = [0.1, 0.3, 0.7, 1.0, 1.3, 2.5, 1e-3]


def fresh_scale(sensitivity: int, epsilon: float) -> Fraction:
    """``sensitivity / epsilon`` rounded up to the 2^-20 grid, computed here."""
    x = Fraction(sensitivity) / Fraction(epsilon) * (1 << C.GRID_BITS)
    return Fraction(-(-x.numerator // x.denominator), 1 << C.GRID_BITS)


def test_exact_scale_is_kept_per_value_and_never_shared_across_inputs():
    C._exact_scale.cache_clear()
    got = {(s, e): C.exact_scale(s, e) for s in (1, 2) for e in EPSILONS}
    assert got == {(s, e): fresh_scale(s, e) for s in (1, 2) for e in EPSILONS}
    assert len(set(got.values())) == len(got)  # distinct inputs, distinct scales
    misses = C._exact_scale.cache_info().misses
    assert misses == len(got)
    for (s, e), scale in got.items():  # the same values again: kept, and the same scales
        assert C.exact_scale(s, e) == scale
        assert C.exact_scale(Fraction(s), Fraction(e)) == scale  # an equal number: one entry
    info = C._exact_scale.cache_info()
    assert info.misses == misses and info.hits == 2 * len(got)


def test_exact_scale_refusals_are_not_kept():
    for _ in range(2):
        with pytest.raises(ParameterError, match="epsilon must be > 0"):
            C.exact_scale(2, -1.0)


@pytest.mark.parametrize("prefix", ["", "leaf_"])
def test_noise_params_are_new_dicts_with_the_fresh_entries(prefix):
    for s in (1, 2):
        for e in EPSILONS:
            scale = fresh_scale(s, e)
            first = C.noise_params(s, scale, "exact", prefix)
            assert first == {f"{prefix}noise_scale_exact": f"{scale.numerator}/{scale.denominator}",
                             f"{prefix}epsilon_effective": float(Fraction(s) / scale)}
            first["changed"] = 1  # a caller's dict: the next answer is unaffected
            assert "changed" not in C.noise_params(s, scale, "exact", prefix)
    assert C.noise_params(2, Fraction(2), "float") == {}


SCALES = [(1, 1), (2, 1), (3, 1), (7, 2), (10, 1), (1, 3), (341, 1)]


@pytest.mark.parametrize(("t", "s"), SCALES)
def test_signed_guide_is_small_and_every_decided_bucket_is_the_inversion(t, s):
    length = D.inversion_table_length(t, s)
    tab = D.inversion_table("two_sided", t, s, 0, length)
    signed, shift = D._signed_guide(tab)
    bits = 63 - int(shift)
    assert bits == D.signed_guide_bits(length) and signed.size == 2 << bits
    assert signed.dtype == np.int16
    assert signed.nbytes <= min(2048 * length, 1 << 18)  # 32 KiB at scale 2 (int64 at 2^16: 1 MiB)
    rng = np.random.default_rng(t * 100 + s)
    starts = np.arange(1 << bits, dtype=np.uint64) << shift
    ends = starts + ((np.uint64(1) << shift) - np.uint64(1))
    f = tab.ascending
    u = np.concatenate([rng.integers(0, 1 << 63, 100_000, dtype=np.uint64), starts, ends,
                        f, f - np.uint64(1), f + np.uint64(1)]) & D.MASK63
    for sign in (0, 1):
        w = u | (np.uint64(sign) << np.uint64(63))
        entry = signed[(w >> shift).astype(np.int64)].astype(np.int64)
        decided = entry != D._OPEN
        assert decided.mean() > (0.99 if length <= 128 else 0.9)  # few open buckets
        magnitude = tab.search(u[decided], noise_source(1))  # no word is a threshold where decided
        assert np.array_equal(entry[decided], -magnitude if sign else magnitude)


@pytest.mark.parametrize(("t", "s"), SCALES)
def test_draws_are_the_inversion_of_their_words(t, s):
    """Each draw is ``+-#{m : U < x_m}`` of its own word (the signed guide or the search)."""
    n = 30_000
    draws = D.discrete_laplace(noise_source(6), t, s, n)
    words = noise_source(6).words(n)
    length = D.inversion_table_length(t, s)
    tab = D.inversion_table("two_sided", t, s, 0, length)
    magnitude = tab.search(words & D.MASK63, noise_source(1))
    assert (magnitude < length).all()  # this seed draws no tail: one word per draw
    assert np.array_equal(draws, np.where(words >> np.uint64(63) == 1, -magnitude, magnitude))
