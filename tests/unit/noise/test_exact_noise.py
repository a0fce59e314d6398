"""Exact samplers of polars_dp.noise: pmf tests on >= 10^6 draws, exactness of the thresholds,
the bit sources, and parameter checks."""

from __future__ import annotations

import math
import os
from decimal import Decimal, getcontext
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from polars_dp import noise as N
from polars_dp.errors import ParameterError
from polars_dp.noise.discrete import split_digit
from tests.helpers.noise import ALPHA, assert_dlap, chi2_pvalue

DRAWS = 1_000_000


@pytest.mark.parametrize(("t", "s"), [(1, 1), (7, 3), (30, 1), (1, 5), (528, 1), (100_003, 7)])
def test_discrete_laplace_pmf(t, s):
    """Chi-square against the exact pmf on 10^6 draws (single table, sub-unit scale, base-c
    digits for scales above TABLE_CAP / 12, nested digits for the largest)."""
    y = N.discrete_laplace(N.noise_source(100 + t), t, s, DRAWS)
    assert y.dtype == np.int64
    assert_dlap(y, t / s, alternatives=t / s >= 0.5)


def dlap_cdf(scale_t: int, scale_s: int, y: np.ndarray) -> np.ndarray:
    """``P(Y <= y)`` of the discrete Laplace: ``1 - q^(y+1)/(1+q)`` for ``y >= 0``, else
    ``q^-y / (1+q)`` (sum of the geometric pmf)."""
    q = math.exp(-scale_s / scale_t)
    yf = y.astype(np.float64)
    return np.where(y >= 0, 1 - q ** (yf + 1) / (1 + q), q ** (-yf) / (1 + q))


@pytest.mark.parametrize(("t", "s", "seed"), [(924, 1, 1), (8316, 1, 2), (8316, 1, None), (300_000, 1, 3)])
def test_split_scales_fit_the_exact_law(t, s, seed):
    """The census scales on the split path, 10^6 draws.  (a) Chi-square against the exact pmf,
    one cell per value with expectation >= 5 plus two tail cells: asymptotically chi2 with
    (cells - 1) degrees of freedom, rejected when p < ALPHA = 1e-6 (and it must reject 1/2, 2
    and 1/1.5 times the scale).  (b) Kolmogorov distance to the exact CDF at every integer:
    by the Dvoretzky-Kiefer-Wolfowitz inequality with Massart's constant,
    ``P(sup |F_n - F| > e) <= 2 exp(-2 n e^2)``, a finite-sample bound (no asymptotics; it also
    holds for discrete laws), so ``e = sqrt(ln(2 / ALPHA) / (2 n))`` (0.0027 here) is exceeded
    with probability <= ALPHA.  ``seed=None`` is the ChaCha20 source (not reproducible; the
    same false-failure bound)."""
    y = N.discrete_laplace(N.noise_source(seed), t, s, DRAWS)
    if t / s <= 10_000:  # at 3e5 no value reaches 5 expected draws: only (b)
        assert_dlap(y, t / s)
    v, counts = np.unique(y, return_counts=True)
    ecdf = np.cumsum(counts) / y.size
    cdf = dlap_cdf(t, s, v)
    gap = max(float(np.max(np.abs(ecdf - cdf))),  # F_n jumps at the draws: check both sides
              float(np.max(np.abs(np.concatenate([[0.0], ecdf[:-1]]) - dlap_cdf(t, s, v - 1)))))
    bound = math.sqrt(math.log(2 / ALPHA) / (2 * y.size))
    assert gap < bound, (gap, bound)


def test_split_digit_and_quotient_are_independent():
    """Above TABLE_CAP / 12 the quotient reads the bits the digit's look-up left unused:
    the digit and the quotient must stay independent (a contingency table on 10^6 draws)."""
    c = split_digit(5000, 1)
    y = np.abs(N.discrete_laplace(N.noise_source(77), 5000, 1, DRAWS))
    m = y[y > 0] - 1
    digit_half = (m % c) >= c // 2
    quotient = np.minimum(m // c, 3)
    table = np.array([[np.sum((digit_half == d) & (quotient == k)) for k in range(4)] for d in (False, True)])
    assert stats.chi2_contingency(table).pvalue > ALPHA


def test_discrete_laplace_symmetry_and_tail():
    """Sign is a fair bit for non-zero draws; the tail beyond the table follows q^m."""
    t, s = 3, 1
    y = N.discrete_laplace(N.noise_source(5), t, s, DRAWS)
    nz = y[y != 0]
    assert stats.binomtest(int((nz > 0).sum()), nz.size, 0.5).pvalue > ALPHA
    length = N.inversion_table_length(t, s)
    q = math.exp(-s / t)
    beyond = int((np.abs(y) >= length - 5).sum())
    p = 2 * q ** (length - 5) / (1 + q)
    assert stats.binomtest(beyond, y.size, p).pvalue > ALPHA


@pytest.mark.parametrize(("t", "s"), [(5, 1), (6000, 1)])
def test_geometric_pmf(t, s):
    g = N.geometric(N.noise_source(9), t, s, DRAWS)
    q = math.exp(-s / t)
    p = chi2_pvalue(g, lambda v: np.where(v >= 0, (1 - q) * q ** np.maximum(v, 0), 0.0))
    assert p > ALPHA


def _reference_floor(kind: str, t: int, s: int, j: int, c: int = 0, bits: int = 63) -> int:
    getcontext().prec = 80
    q = (-Decimal(s) / Decimal(t)).exp()
    if kind == "two_sided":
        x = 2 * q**j / (1 + q)
    elif kind == "geometric":
        x = q**j
    elif kind == "truncated":
        x = (q**j - q**c) / (1 - q**c)
    else:
        x = 2 * (q**j - q ** (c + 1)) / ((1 + q) * (1 - q**c))
    return int((x * (1 << bits)).to_integral_value(rounding="ROUND_FLOOR"))


@pytest.mark.parametrize(("kind", "t", "s", "c", "length"), [
    ("two_sided", 7, 3, 0, 28), ("geometric", 100, 1, 0, 1200), ("truncated", 9000, 1, 2048, 2047),
    ("two_sided_trunc", 9000, 1, 2048, 2048),
])
def test_thresholds_match_an_80_digit_reference(kind, t, s, c, length):
    tab = N.inversion_table(kind, t, s, c, length)
    floors = tab.ascending[::-1]
    for j in (1, 2, length // 2, length):
        assert int(floors[j - 1]) == _reference_floor(kind, t, s, j, c)
        assert tab.law.bits(j, 127) >> 64 == int(floors[j - 1])
        assert tab.law.bits(j, 127) == _reference_floor(kind, t, s, j, c, bits=127)


class ScriptedSource(N.NoiseSource):
    """Returns scripted words (then PCG64 words): drives the sampler into its rare paths."""

    def __init__(self, script):
        super().__init__(np.random.default_rng(0))
        self.script = list(script)

    def words(self, n):
        head, self.script = self.script[:n], self.script[n:]
        rest = super().words(n - len(head))
        return np.concatenate([np.array(head, dtype=np.uint64), rest])


def test_ties_are_refined_with_further_bits():
    """u equal to a threshold floor is decided by the next 64 bits of U against those of x_j."""
    tab = N.inversion_table("geometric", 5, 1, 0, 60)
    j = 3
    f = int(tab.ascending[::-1][j - 1])
    nxt = tab.law.bits(j, 127) & ((1 << 64) - 1)
    below = tab.count_below(np.array([f], dtype=np.uint64), ScriptedSource([nxt - 1]))
    above = tab.count_below(np.array([f], dtype=np.uint64), ScriptedSource([nxt + 1]))
    assert (int(below[0]), int(above[0])) == (j, j - 1)
    # equal next word: a third word decides
    third = tab.law.bits(j, 191) & ((1 << 64) - 1)
    again = tab.count_below(np.array([f], dtype=np.uint64), ScriptedSource([nxt, third - 1]))
    assert int(again[0]) == j


def test_discrete_laplace_tie_on_first_word():
    t, s = 7, 3
    tab = N.inversion_table("two_sided", t, s, 0, N.inversion_table_length(t, s))
    f = int(tab.ascending[::-1][0])  # threshold of |Y| >= 1
    nxt = tab.law.bits(1, 127) & ((1 << 64) - 1)
    sign = 1 << 63
    y = N.discrete_laplace(ScriptedSource([f | sign, nxt - 1]), t, s, 1)
    z = N.discrete_laplace(ScriptedSource([f | sign, nxt + 1]), t, s, 1)
    assert (int(y[0]), int(z[0])) == (-1, 0)


@pytest.mark.parametrize(("num", "den"), [(0, 7), (3, 7), (7, 7), (17, 5), (1, 1_000_003), (40, 3)])
def test_bernoulli_exp_probability(num, den):
    n = 400_000
    b = N.bernoulli_exp(N.noise_source(num + den), np.full(n, num), den)
    p = math.exp(-num / den)
    assert stats.binomtest(int(b.sum()), n, p).pvalue > ALPHA


def test_bernoulli_exp_mixed_vector_is_per_element():
    gammas = np.array([0, 1, 2, 5, 9, 13, 30])
    reps = 150_000
    b = N.bernoulli_exp(N.noise_source(3), np.repeat(gammas, reps), 6).reshape(gammas.size, reps)
    for g, row in zip(gammas, b, strict=True):
        assert stats.binomtest(int(row.sum()), reps, math.exp(-g / 6)).pvalue > ALPHA


def test_privtree_decision_is_the_laplace_tail():
    """P[Lap(lam) > x] = e^(-x/lam)/2 for x >= 0 and 1 - e^(x/lam)/2 below."""
    lam = 3 << 10  # lambda = 3 on the 2^-10 grid
    xs = np.array([-9, -3, -1, 0, 1, 2, 5, 12]) << 10
    reps = 150_000
    split = N.privtree_decision(N.noise_source(4), np.repeat(xs, reps), lam).reshape(xs.size, reps)
    for x, row in zip(xs / 1024, split, strict=True):
        p = 0.5 * math.exp(-x / 3) if x >= 0 else 1 - 0.5 * math.exp(x / 3)
        assert stats.binomtest(int(row.sum()), reps, p).pvalue > ALPHA


def test_exact_scale_rounds_up_on_the_grid():
    lam = N.exact_scale(2, 0.3)
    assert lam >= Fraction(2) / Fraction(0.3)
    assert lam - Fraction(2) / Fraction(0.3) < Fraction(1, 1 << N.GRID_BITS)
    assert (lam * (1 << N.GRID_BITS)).denominator == 1
    assert N.exact_scale(1, 0.5) == 2
    assert N.exact_scale(2, 0.1) == 20  # float 0.1 is a little above 1/10


def test_seeded_sources_reproduce_and_cryptographic_ones_differ():
    a = N.discrete_laplace(N.noise_source(7), 5, 1, 1000)
    b = N.discrete_laplace(N.noise_source(7), 5, 1, 1000)
    np.testing.assert_array_equal(a, b)
    assert N.noise_source(7).seeded and not N.noise_source(None).seeded
    c = N.noise_source(None).words(8)
    d = N.noise_source(None).words(8)
    assert not np.array_equal(c, d)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_does_not_replay_the_parent_stream():
    src = N.noise_source(None)
    src.words(4)  # key the stream before forking
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.write(w, src.words(4).tobytes())
        os._exit(0)
    os.waitpid(pid, 0)
    child = np.frombuffer(os.read(r, 32), dtype=np.uint64)
    assert not np.array_equal(child, src.words(4))


def test_cryptographic_words_are_uniform_bits():
    w = N.noise_source(None).words(1 << 16)
    ones = np.unpackbits(w.view(np.uint8)).sum()
    n = w.size * 64
    assert abs(ones - n / 2) < stats.norm.isf(ALPHA / 2) * math.sqrt(n / 4)


def test_integers_below_is_uniform():
    src = N.noise_source(11)
    for bound in (3, 1000, (1 << 63) - 25):
        x = src.integers_below(bound, 200_000)
        assert int(x.max()) < bound
    x = src.integers_below(6, 600_000)
    counts = np.bincount(x.astype(np.int64), minlength=6)
    assert stats.chisquare(counts).pvalue > ALPHA


def test_float_laplace_seeded_is_numpy_and_unseeded_is_laplace():
    np.testing.assert_array_equal(N.laplace(N.noise_source(3), 2.0, 50),
                                  np.random.default_rng(3).laplace(0.0, 1.0, 50) * 2.0)
    x = N.laplace(N.noise_source(None), 2.0, 200_000)
    assert stats.kstest(x, stats.laplace(scale=2.0).cdf).pvalue > ALPHA


@pytest.mark.parametrize("bad", [True, "1.0", None, [1.0], np.bool_(True), float("nan"), 0, -1.0])
def test_check_epsilon_refuses_non_numbers(bad):
    with pytest.raises(ParameterError):
        N.check_epsilon(bad)


@pytest.mark.parametrize("bad", ["Exact", "laplace", None, 1, True])
def test_check_noise_refuses_unknown_kinds(bad):
    with pytest.raises(ParameterError, match="noise="):
        N.check_noise(bad)
