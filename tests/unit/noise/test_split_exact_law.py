"""The split discrete Laplace (scales above TABLE_CAP / 12) maps words to values exactly as the
documented rule says, checked against a reference written from the math alone.

The reference below computes every threshold from scratch with 160-digit decimals
(``q = exp(-s/t)``; the digit law ``P(W >= j) = 2 (q^j - q^(c+1)) / ((1 + q)(1 - q^c))``; the
quotient law ``P(Q >= k) = q^(ck)``) and reads each value as the smallest ``m`` with
``U >= x_m`` (further words decide ``U`` at a tie with ``floor(2^63 x_m)``).  It follows the
bit layout of ``discrete._split_laplace``'s docstring: ``b_W`` = the top ``G`` bits, the sign =
bit ``63 - G``, ``r`` = the bits below; ``U_W`` = the 63 bits other than the sign; a bucket of
``U_W`` (or of ``U_Q``) decides when it holds no threshold floor (and, for the quotient, lies
above the tail); where ``b_W`` decides ``W >= 1``, ``U_Q`` = ``r`` then the top ``G`` bits of a
fresh word; elsewhere the quotient is a fresh geometric (its word's low 63 bits).  Above
``TABLE_CAP^2 / 12`` every draw's quotient (also for ``W = 0``, then unused) is a fresh
geometric (the base-2048 digits of :func:`geometric`), drawn after the digit.  Only the public parameters
``c = split_digit``, ``(G, H) = split_bits`` and the table length rule ``ceil(12 t / s)`` are
read from the module, never its tables.  Words are chosen at and around every kind of edge:
thresholds of both laws (below, equal: a tie, above), bucket starts and ends next to them,
``W = 0``, ``W = c``, the quotient's tail, both signs.  Each case also checks how many words the
sampler consumed, so reading the wrong bits or a needless fresh word fails too.
"""

from __future__ import annotations

import math
from decimal import ROUND_FLOOR, Context, Decimal, localcontext

import numpy as np
import pytest

from polars_dp import noise as N
from polars_dp.noise import discrete as D

CTX = Context(prec=160)
TWO63 = 1 << 63
M64 = (1 << 64) - 1


def _floor(x: Decimal, bits: int) -> int:
    return int(CTX.multiply(x, Decimal(1 << bits)).to_integral_value(rounding=ROUND_FLOOR, context=CTX))


class Law:
    """Thresholds ``x_1 > x_2 > ... > x_n`` (decimals) of one inversion."""

    def __init__(self, xs: list[Decimal]):
        self.xs = xs
        self.floors = [_floor(x, 63) for x in xs]

    def below(self, u: int, j: int, words: Words) -> bool:
        """``U < x_j`` for ``U = (u + further words) / 2^63`` (words read only at a tie)."""
        f = self.floors[j - 1]
        if u != f:
            return u < f
        level = 1
        while True:
            want = _floor(self.xs[j - 1], 63 + 64 * level) & M64
            v = words.next()
            if v != want:
                return v < want
            level += 1

    def count(self, u: int, words: Words) -> int:
        """``#{j : U < x_j}`` = (the smallest ``m`` with ``U >= x_m``) - 1, or ``n``."""
        lo, hi = 1, len(self.xs) + 1  # the answer m - 1 lies in [lo - 1, hi - 1]
        memo: dict[int, bool] = {}
        while lo < hi:
            mid = (lo + hi) // 2
            if mid not in memo:
                memo[mid] = self.below(u, mid, words)
            if memo[mid]:
                lo = mid + 1
            else:
                hi = mid
        return lo - 1

    def decided(self, bucket: int, bits: int, tail: bool) -> int | None:
        """The count shared by every ``u`` of the bucket if it holds no floor (and, with
        ``tail``, the count is below ``n``), else None."""
        start, end = bucket << (63 - bits), ((bucket + 1) << (63 - bits)) - 1
        if any(start <= f <= end for f in self.floors):
            return None
        k = sum(f > end for f in self.floors)
        return None if tail and k == len(self.floors) else k


class Words:
    def __init__(self, script: list[int]):
        self.script, self.used = script, 0

    def next(self) -> int:
        self.used += 1
        return self.script[self.used - 1]


class Scripted(N.NoiseSource):
    """Returns the script's words in order, and counts them."""

    def __init__(self, script: list[int]):
        super().__init__(np.random.default_rng(0))
        self.script, self.used = script, 0

    def words(self, n: int) -> np.ndarray:
        out = np.array(self.script[self.used:self.used + n], dtype=np.uint64)
        assert out.size == n, "the sampler read past the script"
        self.used += n
        return out


def _q(t: int, s: int) -> Decimal:
    return CTX.exp(CTX.divide(Decimal(-s), Decimal(t)))


def _powers(q: Decimal, n: int) -> list[Decimal]:
    out, p = [], Decimal(1)
    for _ in range(n):
        p = CTX.multiply(p, q)
        out.append(p)
    return out


def _length(t: int, s: int) -> int:
    return max(1, -(-12 * t // s))


class Reference:
    """The documented word -> value rule of the split sampler at scale ``t/s``."""

    def __init__(self, t: int, s: int):
        g = math.gcd(t, s)
        self.t, self.s = t // g, s // g
        self.c = D.split_digit(self.t, self.s)
        self.bw, self.bq = D.split_bits(self.t, self.s)
        q, c = _q(self.t, self.s), self.c
        pw = _powers(q, c + 1)
        with localcontext(CTX):  # every operation at 160 digits
            den = (1 + q) * (1 - pw[c - 1])
            self.digit = Law([2 * (pw[j - 1] - pw[c]) / den for j in range(1, c + 1)])
        self.q_len = _length(self.t, self.s * c)
        self.geo: dict[tuple[int, int], tuple[str, Law, int]] = {}
        self.quotient = self._geometric_law(self.t, self.s * c) if self.q_len <= D.TABLE_CAP else None

    def _geometric_law(self, t: int, s: int) -> tuple[str, Law, int]:
        """:func:`geometric`'s first inversion at ``t/s``: one table of ``ceil(12 t/s)``
        entries, or the truncated digit mod 2048 of the base-2048 split."""
        g = math.gcd(t, s)
        t, s = t // g, s // g
        if (t, s) not in self.geo:
            q, n = _q(t, s), _length(t, s)
            if n <= D.TABLE_CAP:
                self.geo[t, s] = ("table", Law(_powers(q, n)), n)
            else:
                pw = _powers(q, 2048)
                with localcontext(CTX):
                    xs = [(pw[j - 1] - pw[-1]) / (1 - pw[-1]) for j in range(1, 2048)]
                self.geo[t, s] = ("digits", Law(xs), 2047)
        return self.geo[t, s]

    def geometric(self, t: int, s: int, words: Words) -> int:
        kind, law, n = self._geometric_law(t, s)
        if kind == "table":  # G >= n: G = n + G' (memorylessness)
            g = law.count(words.next() & (TWO63 - 1), words)
            return g + self.geometric(t, s, words) if g == n else g
        low = law.count(words.next() & (TWO63 - 1), words)
        return low + 2048 * self.geometric(t, s * 2048, words)

    def quotient_from(self, u: int, words: Words) -> int:
        _, law, n = self.quotient
        g = law.count(u, words)
        return g + self.geometric(self.t, self.s * self.c, words) if g == n else g

    def draw(self, words: Words) -> int:
        w = words.next()
        below = 63 - self.bw
        b_w, negative, rest = w >> (64 - self.bw), (w >> below) & 1, w & ((1 << below) - 1)
        u_w = (b_w << below) | rest
        digit = self.digit.decided(b_w, self.bw, tail=False)
        if self.quotient is None:  # huge scales: every draw's quotient from fresh words, after W
            digit = self.digit.count(u_w, words) if digit is None else digit
            quo = self.geometric(self.t, self.s * self.c, words)  # drawn (and unused) for W = 0 too
            if digit == 0:
                return 0
        elif digit is not None:  # the bucket decides W; r is free for the quotient
            if digit == 0:
                return 0
            b_q = rest >> (below - self.bq)
            quo = self.quotient[1].decided(b_q, self.bq, tail=True)
            if quo is None:  # U_Q = r, then the top G bits of a fresh word
                quo = self.quotient_from((rest << self.bw) | (words.next() >> (64 - self.bw)), words)
        else:  # r went to W (the search); the quotient from fresh words
            digit = self.digit.count(u_w, words)
            if digit == 0:
                return 0
            quo = self.quotient_from(words.next() & (TWO63 - 1), words)
        mag = digit + self.c * quo
        return -mag if negative else mag


def _word(ref: Reference, u_w: int, negative: int) -> int:
    below = 63 - ref.bw
    return ((u_w >> below) << (below + 1)) | (negative << below) | (u_w & ((1 << below) - 1))


def cases(ref: Reference, seed: int) -> list[list[int]]:
    """First words (and the words after them) at and around the edges of both laws."""
    rng = np.random.default_rng(seed)

    def rand(k: int) -> list[int]:
        return [int(v) for v in rng.integers(0, 1 << 64, k, dtype=np.uint64)]

    below = 63 - ref.bw
    size_w = 1 << below
    out: list[list[int]] = [rand(12) for _ in range(40)]
    c = ref.c
    js = sorted({1, 2, 3, c // 3, c // 2, c - 1, c} - {0})
    for j in js:
        f = ref.digit.floors[j - 1]
        tie = _floor(ref.digit.xs[j - 1], 127) & M64
        for u in (f - 1, f, f + 1):
            for neg in (0, 1):
                out.append([_word(ref, u, neg)] + rand(11))
        out.append([_word(ref, f, 0), tie - 1] + rand(10))  # the tie, decided by the next word
        out.append([_word(ref, f, 1), tie + 1] + rand(10))
        out.append([_word(ref, f, 0), tie, 0] + rand(9))  # a tie on the next word too
        b = f >> below
        for bb in (b - 1, b + 1):  # decided buckets next to a threshold: both ends
            if 0 <= bb < 1 << ref.bw:
                out.append([_word(ref, bb * size_w, 1)] + rand(11))
                out.append([_word(ref, bb * size_w + size_w - 1, 0)] + rand(11))
    out.append([_word(ref, TWO63 - 1, 1)] + rand(11))  # W = 0
    out.append([_word(ref, 0, 0)] + rand(11))  # W = c, the smallest U
    if ref.quotient is not None:  # U_Q = r + a fresh word, at the quotient's edges
        law, n = ref.quotient[1], ref.quotient[2]
        # decided digit buckets with W >= 1: below F_1 and not holding a threshold
        decided = [b for b in (ref.digit.floors[0] >> below) - 1 - rng.integers(0, 50, 8)
                   if ref.digit.decided(int(b), ref.bw, tail=False)]
        assert decided, "no decided digit bucket found"
        for k in sorted({1, 2, n // 2, n - 1, n}):
            p = law.floors[k - 1]
            tie = _floor(law.xs[k - 1], 127) & M64
            bucket_q = p >> (63 - ref.bq)
            for b in decided[:3]:
                rest, fill = p >> ref.bw, p & ((1 << ref.bw) - 1)
                for dv in (-1, 0, 1):
                    v = (fill + dv) % (1 << ref.bw)
                    out.append([_word(ref, (int(b) << below) | rest, int(b) & 1), v << (64 - ref.bw),
                                tie] + rand(9))
                out.append([_word(ref, (int(b) << below) | rest, 1), fill << (64 - ref.bw), tie - 1]
                           + rand(9))
                for bq in (bucket_q - 1, bucket_q + 1):  # decided quotient buckets beside it
                    if 0 <= bq < 1 << ref.bq:
                        lo = (bq << (63 - ref.bq)) >> ref.bw
                        hi = (((bq + 1) << (63 - ref.bq)) - 1) >> ref.bw
                        out.append([_word(ref, (int(b) << below) | lo, 0)] + rand(11))
                        out.append([_word(ref, (int(b) << below) | hi, 1)] + rand(11))
        b = int(decided[0])
        out.append([_word(ref, b << below, 0), 0] + rand(10))  # U_Q = 0: the quotient's tail
    return out


SCALES = [(400, 1), (924, 1), (8316, 1), (100_003, 7), (300_000, 1), (2_000_000, 1), (1 << 40, 1)]


@pytest.mark.parametrize(("t", "s"), SCALES, ids=lambda v: str(v))
def test_split_words_map_to_the_reference_values(t, s):
    assert D.inversion_table_length(t, s) > D.TABLE_CAP  # the split path
    ref = Reference(t, s)
    for script in cases(ref, t % 1000):
        src, words = Scripted(script), Words(script)
        got = int(D.discrete_laplace(src, t, s, 1)[0])
        want = ref.draw(words)
        assert (got, src.used) == (want, words.used), (t, s, script[:3])


def test_the_cases_reach_every_path():
    """The edges above do drive the sampler into each rule (so the test above checks them)."""
    ref = Reference(8316, 1)
    below = 63 - ref.bw
    paths = set()
    for script in cases(ref, 1):
        w = script[0]
        b_w, rest = w >> (64 - ref.bw), w & ((1 << below) - 1)
        digit = ref.digit.decided(b_w, ref.bw, tail=False)
        if digit is None:
            paths.add("digit open")
        elif digit == 0:
            paths.add("zero")
        elif ref.quotient[1].decided(rest >> (below - ref.bq), ref.bq, tail=True) is None:
            paths.add("quotient open")
        else:
            paths.add("both decided")
        words = Words(script)
        ref.draw(words)
        if words.used >= 3:
            paths.add("ties or tail")
    assert paths == {"digit open", "zero", "quotient open", "both decided", "ties or tail"}


# ---------------------------------------------------------------------------- single table (small scales)
class SingleReference(Reference):
    """Scales up to TABLE_CAP / 12: the top bit is the sign, the low 63 bits ``U`` give
    ``M = #{m <= L : U < 2 q^m / (1 + q)}``, ``L = ceil(12 t / s)``; ``M = L`` continues with
    ``L + G``, ``G`` the geometric of ratio ``q`` from fresh words (memorylessness)."""

    def __init__(self, t: int, s: int):
        g = math.gcd(t, s)
        self.t, self.s = t // g, s // g
        self.n = _length(self.t, self.s)
        q = _q(self.t, self.s)
        with localcontext(CTX):
            self.law = Law([2 * p / (1 + q) for p in _powers(q, self.n)])
        self.geo = {}

    def draw(self, words: Words) -> int:
        w = words.next()
        mag = self.law.count(w & (TWO63 - 1), words)
        if mag == self.n:
            mag += self.geometric(self.t, self.s, words)
        return -mag if w >> 63 else mag


@pytest.mark.parametrize(("t", "s"), [(2, 1), (7, 3), (1, 5), (66, 1), (341, 1)], ids=lambda v: str(v))
def test_single_table_words_map_to_the_reference_values(t, s):
    """Small scales keep the one-table inversion: every word at, below and above each
    threshold floor (and its bucket's ends), with a tie word either side, and random words."""
    ref = SingleReference(t, s)
    rng = np.random.default_rng(t)
    scripts = [[int(v) for v in rng.integers(0, 1 << 64, 10, dtype=np.uint64)] for _ in range(60)]
    width = 1 << (63 - D.GUIDE_BITS)
    picks = sorted({1, 2, ref.n // 2, ref.n - 1, ref.n} - {0})
    for j in picks:
        f = ref.law.floors[j - 1]
        tie = _floor(ref.law.xs[j - 1], 127) & M64
        rest = [int(v) for v in rng.integers(0, 1 << 64, 8, dtype=np.uint64)]
        for u in (f - 1, f, f + 1, (f // width) * width, (f // width) * width + width - 1):
            for sign in (0, 1 << 63):
                scripts.append([u | sign, tie - 1] + rest)
                scripts.append([u | sign, tie + 1] + rest)
    scripts.append([0, 0] + scripts[0])  # U = 0: the tail, continued from fresh words
    for script in scripts:
        src, words = Scripted(script), Words(script)
        got = int(D.discrete_laplace(src, t, s, 1)[0])
        assert (got, src.used) == (ref.draw(words), words.used), (t, s, script[:2])
