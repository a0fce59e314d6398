"""The samplers against independent references and their worst cases: a known-answer test of
the ChaCha20 source, fork safety, the split discrete Laplace on the draws that reach the
search, the public scale limits, and exact PrivTree decisions past the int64 grid."""

from __future__ import annotations

import math
import os
import struct
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from polars_dp import noise as N
from polars_dp.errors import ParameterError
from polars_dp.noise import discrete as D
from polars_dp.noise import sources as S

ALPHA = 1e-6  # false-failure probability of each statistical check


# ============================================================================ ChaCha20 known answer
def _rotl(v: int, c: int) -> int:
    return ((v << c) & 0xFFFFFFFF) | (v >> (32 - c))


def _quarter(x: list[int], a: int, b: int, c: int, d: int) -> None:
    x[a] = (x[a] + x[b]) & 0xFFFFFFFF
    x[d] = _rotl(x[d] ^ x[a], 16)
    x[c] = (x[c] + x[d]) & 0xFFFFFFFF
    x[b] = _rotl(x[b] ^ x[c], 12)
    x[a] = (x[a] + x[b]) & 0xFFFFFFFF
    x[d] = _rotl(x[d] ^ x[a], 8)
    x[c] = (x[c] + x[d]) & 0xFFFFFFFF
    x[b] = _rotl(x[b] ^ x[c], 7)


def chacha20_block(key: bytes, counter: int, nonce: bytes) -> bytes:
    """RFC 8439 Sec. 2.3, in plain Python (independent of OpenSSL)."""
    state = [0x61707865, 0x3320646E, 0x79622D32, 0x6B206574, *struct.unpack("<8I", key), counter,
             *struct.unpack("<3I", nonce)]
    x = list(state)
    for _ in range(10):
        _quarter(x, 0, 4, 8, 12)
        _quarter(x, 1, 5, 9, 13)
        _quarter(x, 2, 6, 10, 14)
        _quarter(x, 3, 7, 11, 15)
        _quarter(x, 0, 5, 10, 15)
        _quarter(x, 1, 6, 11, 12)
        _quarter(x, 2, 7, 8, 13)
        _quarter(x, 3, 4, 9, 14)
    return struct.pack("<16I", *[(a + b) & 0xFFFFFFFF for a, b in zip(x, state, strict=True)])


def test_reference_chacha20_matches_rfc8439_block_vector():
    key = bytes(range(32))
    nonce = bytes.fromhex("000000090000004a00000000")
    out = chacha20_block(key, 1, nonce)
    assert out.hex() == ("10f1e7e4d13b5915500fdd1fa32071c4c7d1f4c733c068030422aa9ac3d46c4e"
                         "d2826446079faa0914c2d705d98b02a2b5129cd1de164eb9cbd083e8a2503c4e")


@pytest.mark.skipif(S._ChaCha20 is None, reason="needs the cryptography package")
def test_noise_source_is_chacha20_of_its_os_key(monkeypatch):
    """With ``os.urandom`` patched to known bytes, the cryptographic source's words are the
    ChaCha20 keystream (counter 0) of that key and nonce, word for word."""
    feed = iter([bytes(range(100, 132)), bytes(range(7, 19))])
    calls = []

    def urandom(n: int) -> bytes:
        out = next(feed)
        assert len(out) == n
        calls.append(n)
        return out

    monkeypatch.setattr(S.os, "urandom", urandom)
    src = N.NoiseSource()
    assert src.kind == "chacha20"
    got = np.concatenate([src.words(5), src.words(27)])  # across calls and block boundaries
    assert calls == [32, 12]
    key, nonce = bytes(range(100, 132)), bytes(range(7, 19))
    stream = b"".join(chacha20_block(key, i, nonce) for i in range(4))
    np.testing.assert_array_equal(got, np.frombuffer(stream, dtype="<u8"))


# ============================================================================ fork
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_with_the_parents_pid_does_not_replay(monkeypatch):
    """A child re-keys after ``fork`` whatever its PID: here ``getpid`` is pinned so the child
    sees its parent's PID (as a grandchild can once its parent is gone)."""
    monkeypatch.setattr(S.os, "getpid", lambda: 4242)
    src = N.noise_source(None)
    src.words(4)  # key the stream before forking
    generation = S._fork_generation
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        try:
            os.write(w, src.words(4).tobytes() + struct.pack("<q", S._fork_generation))
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    data = os.read(r, 40)
    child, child_generation = np.frombuffer(data[:32], dtype=np.uint64), struct.unpack("<q", data[32:])[0]
    assert child_generation == generation + 1
    assert not np.array_equal(child, src.words(4))


# ============================================================================ split discrete Laplace
class _FirstWords(N.NoiseSource):
    """A seeded source whose first call returns the given words, later calls ordinary words."""

    def __init__(self, seed: int, first: np.ndarray):
        super().__init__(np.random.Generator(np.random.PCG64(seed)))
        self.first = first

    def words(self, n: int) -> np.ndarray:
        if self.first is not None:
            out, self.first = self.first, None
            assert out.size == n
            return out
        return super().words(n)


def open_first_words(t: int, per_digit: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(words, digit)``: for every digit value ``W = 1..c`` of the split sampler at scale
    ``t`` (``c = split_digit(t, 1)``), ``per_digit`` first words whose ``U_W`` (the 63 bits
    other than the sign bit ``63 - G``) is uniform on the part of ``W``'s interval
    ``[F_(W+1), F_W)`` that lies in open digit buckets (those holding ``F_W`` or
    ``F_(W+1)``: the draws sent to the search, whose quotient takes fresh words), with a
    random sign bit."""
    c = D.split_digit(t, 1)
    g, _ = D.split_bits(t, 1)
    tab = D.inversion_table("two_sided_trunc", t, 1, c, c)
    f = [int(v) for v in tab.ascending[::-1]] + [0]  # F_1 > F_2 > ... > F_c > F_(c+1) := 0
    bucket = 1 << (63 - g)
    pieces = []
    for j in range(1, c + 1):
        lo, hi = f[j], f[j - 1]
        start = (hi // bucket) * bucket  # the open bucket holding F_W
        if j == c and start > 0:  # below F_c's bucket W = c is decided (F_(c+1) = 0 is no threshold)
            pieces.append((0, 0, start, hi - start))
        elif lo // bucket == hi // bucket:
            pieces.append((lo, hi - lo, 0, 0))
        else:  # the open bucket holding F_(W+1), and the one holding F_W
            pieces.append((lo, (lo // bucket + 1) * bucket - lo, start, hi - start))
    a1, n1, a2, n2 = (np.array(v, dtype=np.int64) for v in zip(*pieces, strict=True))
    rng = np.random.Generator(np.random.PCG64(seed))
    digit = np.repeat(np.arange(1, c + 1), per_digit)
    i = digit - 1
    u = rng.integers(0, n1[i] + n2[i])
    u_w = np.where(u < n1[i], a1[i] + u, a2[i] + (u - n1[i])).astype(np.uint64)
    below = np.uint64(63 - g)
    sign = rng.integers(0, 2, size=u_w.size).astype(np.uint64) << below
    words = ((u_w >> below) << (below + np.uint64(1))) | sign | (u_w & np.uint64((1 << (63 - g)) - 1))
    return words, digit


def split_quotient_check(t: int, per_digit: int, seed: int) -> dict[str, float]:
    """Quotients of the split sampler given each digit ``W`` (first words on open buckets):
    ``c_W`` draws with quotient >= 1 out of ``n_W``; each ``c_W`` is Binomial(``n_W``, ``p``),
    ``p = q^c``, when the quotient is independent of the digit.  Returns the chi-square
    ``T = sum_W (c_W - n_W p)^2 / (n_W p (1 - p))``, its mean and sd (term variance
    ``2 + (1 - 6 p (1 - p)) / (n_W p (1 - p))``), the number of digits with ``c_W = 0`` and
    the bound ``sum_W (1 - p)^n_W`` on its expectation."""
    words, digit = open_first_words(t, per_digit, seed)
    c = D.split_digit(t, 1)
    y = np.concatenate([N.discrete_laplace(_FirstWords(seed + a, words[a:a + D.SPLIT_BLOCK]), t, 1,
                                           words[a:a + D.SPLIT_BLOCK].size)
                        for a in range(0, words.size, D.SPLIT_BLOCK)])  # one call per block of first words
    m = np.abs(y) - 1
    assert np.array_equal(m % c + 1, digit), "the first words did not fix the digit"
    n_w = np.bincount(digit, minlength=c + 1)[1:].astype(np.float64)
    c_w = np.bincount(digit, weights=(m >= c).astype(np.float64), minlength=c + 1)[1:]
    p = math.exp(-c / t)
    v = p * (1 - p)
    return {"T": float(((c_w - n_w * p) ** 2 / (n_w * v)).sum()), "mean": float(n_w.size),
            "sd": math.sqrt(float((2 + (1 - 6 * v) / (n_w * v)).sum())),
            "zeros": int((c_w == 0).sum()), "zeros_bound": float(((1 - p) ** n_w).sum())}


@pytest.mark.parametrize(("t", "per_digit"), [(342, 9000), (5000, 300)])
def test_split_quotient_is_independent_of_every_digit_on_open_buckets(t, per_digit):
    """Worst case of the split sampler: every first word lies in an open bucket (the search
    path), ``per_digit`` draws for every digit value, each digit tested on its own (pooling
    the digits of one bucket would hide a dependence).  Chebyshev: ``P(T >= E T + 1000 sd) <=
    10^-6``; Markov: ``P(some c_W = 0) <= sum_W (1 - p)^n_W``, below ``10^-6`` here."""
    r = split_quotient_check(t, per_digit, t)
    assert r["zeros_bound"] < ALPHA
    assert r["zeros"] == 0, r
    assert r["T"] < r["mean"] + 1000 * r["sd"], r


# ============================================================================ public scale limits
def test_int64_draws_refuse_scales_past_2_to_56_and_do_not_wrap():
    y = N.discrete_laplace(N.noise_source(5), 1 << 56, 1, 20_000)
    assert abs(np.std(y.astype(np.float64)) / (math.sqrt(2) * 2.0**56) - 1) < 0.05
    with pytest.raises(ParameterError, match="exceeds 2\\^56"):
        N.discrete_laplace(N.noise_source(5), (1 << 76) + 1, 1 << 20, 10)
    with pytest.raises(ParameterError, match="exceeds 2\\^56"):
        N.geometric(N.noise_source(5), (1 << 56) + 1, 1, 10)


def test_count_noise_refuses_scales_past_2_to_45():
    counts = np.zeros(20_000)
    N.add_noise(counts, Fraction(1 << 45), N.noise_source(6), "exact")
    assert abs(np.std(counts) / (math.sqrt(2) * 2.0**45) - 1) < 0.05
    with pytest.raises(ParameterError, match="exceeds 2\\^45"):
        N.add_noise(np.zeros(3), Fraction((1 << 65) + 1, 1 << 20), N.noise_source(6), "exact")
    with pytest.raises(ParameterError, match="exceeds 2\\^45"):
        N.sample_noise(N.noise_source(6), Fraction((1 << 65) + 1, 1 << 20), 3, "exact")
    ints = np.zeros(3, dtype=np.int64)  # int64 values hold the int64 limit
    N.add_noise(ints, Fraction((1 << 65) + 1, 1 << 20), N.noise_source(6), "exact")


def test_basic_extreme_epsilons_release_or_refuse_from_the_scale_alone():
    import polars as pl

    import polars_dp as pdp

    df = pl.DataFrame({"x": list(range(11))})
    attrs = [pdp.Ordinal("x", 0, 10)]
    limit = 2.0**-44  # replace: scale 2 / epsilon <= 2^45
    rel = df.dp.basic(attrs, epsilon=limit, seed=1)
    assert rel.epsilon == limit
    for eps in (math.nextafter(limit, 0.0), 1e-20, 1e-150, 1e-200):
        with pytest.raises(ParameterError, match="exceeds 2\\^45"):
            df.dp.basic(attrs, epsilon=eps, seed=1)
    df.dp.basic(attrs, epsilon=2.0**-45, neighbours="add_remove", seed=1)  # scale 1 / eps
    with pytest.raises(ParameterError):
        df.dp.basic(attrs, epsilon=math.nextafter(2.0**-45, 0.0), neighbours="add_remove", seed=1)
    big = df.dp.basic(attrs, epsilon=1e300, seed=1)  # the smallest scale, 2^-20, is fine
    assert big.epsilon == 1e300


def test_exact_tables_survive_tiny_epsilon_ratios():
    """The interval arithmetic raises its precision instead of dividing by zero."""
    tab = D.InversionTable(D._Law("truncated", 10**150, 1, D.DIGIT), 4)
    assert tab.ascending.size == 4


# ============================================================================ wide integers
def test_integers_below_wide_bounds_are_uniform_python_ints():
    src = N.noise_source(11)
    bound = 3 << 70
    x = src.integers_below(bound, 30_000)
    assert x.dtype == object and all(0 <= v < bound for v in x)
    thirds = np.bincount(np.array([v * 3 // bound for v in x], dtype=np.int64), minlength=3)
    assert stats.chisquare(thirds).pvalue > ALPHA
    top = src.integers_below(1 << 64, 4)
    assert top.dtype == np.uint64


def test_privtree_decision_past_int64_is_the_laplace_tail():
    """``x`` and ``lambda`` far past int64 (object arrays): ``P[split] = 1 - e^(x/lambda)/2``."""
    lam = 1 << 70
    x = np.array([-lam] * 40_000 + [lam // 2] * 40_000, dtype=object)
    split = N.privtree_decision(N.noise_source(9), x, lam)
    halves = (split[:40_000].mean(), 1 - math.exp(-1) / 2), (split[40_000:].mean(), math.exp(-0.5) / 2)
    for got, want in halves:
        assert abs(got - want) < 5.5 * math.sqrt(want * (1 - want) / 40_000)


# ============================================================================ block streams
def test_seeded_block_streams_are_reproducible_and_distinct():
    """Seeded: the same seed gives the same stream per block, blocks differ from each other and
    from the parent's own later words, and the construction is numpy's child seeding."""
    a, b = N.noise_source(11).block_streams(), N.noise_source(11).block_streams()
    first = [a(k).words(64) for k in (0, 5, 1 << 40)]
    np.testing.assert_array_equal(first[1], b(5).words(64))
    assert len({w.tobytes() for w in first}) == 3
    parent = N.noise_source(11)
    root_words = parent.words(2)
    root = (int(root_words[0]) << 64) | int(root_words[1])
    want = np.random.PCG64(np.random.SeedSequence(root, spawn_key=(5,))).random_raw(64)
    np.testing.assert_array_equal(first[1], want)
    assert not np.array_equal(parent.words(64), first[0])
    assert a(3).seeded and a(3).kind == "pcg64 (seeded)"


@pytest.mark.skipif(S._ChaCha20 is None, reason="needs the cryptography package")
def test_cryptographic_block_streams_are_keyed_afresh(monkeypatch):
    """Unseeded: every block's stream is a new ChaCha20 source with its own key from the OS."""
    asked = []
    real = S.os.urandom

    def urandom(n: int) -> bytes:
        asked.append(n)
        return real(n)

    streams = N.NoiseSource().block_streams()
    monkeypatch.setattr(S.os, "urandom", urandom)
    one, two = streams(0), streams(0)
    assert not one.seeded and one.kind == "chacha20"
    assert not np.array_equal(one.words(8), two.words(8))
    assert asked == [32, 12, 32, 12]  # a key and a nonce for each
