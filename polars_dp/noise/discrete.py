"""Exact samplers on integer arithmetic: discrete Laplace, Bernoulli(exp(-gamma)), PrivTree decisions.

See :mod:`polars_dp.noise` (Exact noise) for the algorithms and their proofs of exactness.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np

from polars_dp.compiled import sized
from polars_dp.errors import ParameterError
from polars_dp.noise import lookups
from polars_dp.noise.sources import MASK63, U64, NoiseSource

#: Draws generated per chunk (bounds the temporary memory of the samplers).
CHUNK = 1 << 20
#: Draws per block inside :func:`discrete_laplace`: its words and temporaries (about ten
#: passes of 8 bytes per draw) stay in cache instead of streaming through memory.
BLOCK = 1 << 16
#: Largest single inversion table (entries): scales up to TABLE_CAP / TAIL_SCALES use one table.
TABLE_CAP = 1 << 12
#: Larger scales split the magnitude into base-DIGIT digits (one table and one word per digit).
DIGIT = 1 << 11
#: Table length in units of the scale: the tail beyond it has probability <= e^-TAIL_SCALES.
TAIL_SCALES = 12
#: Bits of the guide table of every inversion table (2^GUIDE_BITS int64 entries).
GUIDE_BITS = 16
#: Largest scale of an int64 draw: ``P(|Y| >= 2^63) = 2 q^(2^63) / (1 + q) < 2 e^-128`` at
#: ``2^56``, so a draw never wraps in practice.  Decided from the public scale alone.
MAX_SCALE = 1 << 56


#: Largest scale of noise added to counts held in float64 (exact integers below ``2^53``):
#: ``P(|Y| >= 2^52) < 2 e^-128`` at ``2^45``.  For Basic under ``replace`` (sensitivity 2)
#: this is ``epsilon >= 2^-44``, about ``5.7e-14``.
MAX_COUNT_SCALE = 1 << 45


def check_scale(t: int, s: int, limit: int = MAX_SCALE) -> None:
    """ParameterError if the scale ``t/s`` exceeds ``limit`` (a public decision: the scale is
    a function of epsilon, the sensitivity and the domain only)."""
    if t > limit * s:
        raise ParameterError(
            f"the noise scale {float(Fraction(t, s)):.3g} exceeds 2^{limit.bit_length() - 1} = {limit:.3g}, "
            "the largest that exact noise represents (its draws would leave the integers it is added "
            "to); raise epsilon")



# ============================================================================ exact arithmetic
def _exp_pos_interval(a: int, b: int, prec: int) -> tuple[int, int]:
    """Integers ``lo <= exp(a/b) * 2^prec <= hi`` (``a >= 0``, ``b >= 1``) from the positive
    Taylor series, every term floored (lo) and the remainder bounded (hi)."""
    one = 1 << prec
    term = one
    total = one
    k = 0
    while True:
        k += 1
        term = term * a // (b * k)
        total += term
        # remainder after term k: <= term_{k+1} / (1 - a/(b(k+2))) once a/(b(k+2)) < 1/2
        if 2 * a < b * (k + 2) and term * a <= b * (k + 1):
            break
    # floored terms lose at most sum_{i<k} x^i/i! <= 3^ceil(x) units each; the remainder
    # after term k is <= 2 T_{k+1} <= 2 (1 + 3^ceil(x))
    return total, total + (k + 2) * 3 ** (-(-a // b)) + 2


def _q_pow_interval(s: int, t: int, m: int, prec: int) -> tuple[int, int]:
    """Integers ``lo <= q^m 2^prec <= hi`` for ``q = exp(-s/t)``."""
    if 10 * s * m >= 7 * prec * t:  # m s / t >= 0.7 prec > prec ln 2: q^m 2^prec < 1
        return 0, 1
    lo, hi = _exp_pos_interval(s * m, t, prec)
    return (1 << (2 * prec)) // hi, (1 << (2 * prec)) // lo + 1


def _floor_ratio(num: tuple[int, int], den: tuple[int, int], bits: int) -> int | None:
    """``floor(2^bits x)`` for ``x`` in ``[num_lo/den_hi, num_hi/den_lo]`` if that interval
    fixes it, else None (more precision needed)."""
    if den[0] <= 0:  # the denominator's interval still reaches 0: more precision needed
        return None
    lo = (num[0] << bits) // den[1]
    hi = (num[1] << bits) // den[0]
    return lo if lo == hi else None


@dataclass(frozen=True)
class _Law:
    """A family of thresholds ``x_j`` (decreasing in ``j``) of an inversion sampler, with
    ``q = exp(-s/t)``:

    * ``"two_sided"``: ``x_j = 2 q^j / (1 + q)`` (``P(|Y| >= j)`` of the discrete Laplace);
    * ``"two_sided_trunc"``: ``x_j = 2 (q^j - q^(c+1)) / ((1 + q)(1 - q^c))``, ``j = 1..c``
      (``P(W >= j)`` for ``W = 0`` if ``|Y| = 0`` else ``1 + ((|Y| - 1) mod c)``);
    * ``"geometric"``: ``x_j = q^j``;
    * ``"truncated"``: ``x_j = (q^j - q^c) / (1 - q^c)`` (geometric modulo ``c``).
    """

    kind: str
    t: int
    s: int
    c: int = 0

    def powers(self, prec: int) -> dict[str, tuple[int, int]]:
        pw = {"q1": _q_pow_interval(self.s, self.t, 1, prec)}
        if self.kind in ("truncated", "two_sided_trunc"):
            pw["qc"] = _q_pow_interval(self.s, self.t, self.c, prec)
            pw["qc1"] = _q_pow_interval(self.s, self.t, self.c + 1, prec)
        return pw

    def interval(self, j: int, prec: int, qj: tuple[int, int] | None = None,
                 pw: dict[str, tuple[int, int]] | None = None
                 ) -> tuple[tuple[int, int], tuple[int, int]]:
        """``(numerator, denominator)`` intervals of ``x_j``, both scaled by ``2^prec``."""
        one = 1 << prec
        pw = pw or self.powers(prec)
        qj = qj or _q_pow_interval(self.s, self.t, j, prec)
        q1 = pw["q1"]
        if self.kind == "geometric":
            return qj, (one, one)
        if self.kind == "two_sided":
            return (2 * qj[0], 2 * qj[1]), (one + q1[0], one + q1[1])
        qc = pw["qc"]
        if self.kind == "truncated":
            return (max(qj[0] - qc[1], 0), qj[1] - qc[0]), (one - qc[1], one - qc[0])
        qc1 = pw["qc1"]
        num = (2 * max(qj[0] - qc1[1], 0) << prec, 2 * (qj[1] - qc1[0]) << prec)
        return num, ((one + q1[0]) * (one - qc[1]), (one + q1[1]) * (one - qc[0]))

    def bits(self, j: int, nbits: int) -> int:
        """``floor(2^nbits x_j)``, exactly (precision raised until the interval decides)."""
        prec = nbits + 64
        while (value := _floor_ratio(*self.interval(j, prec), nbits)) is None:
            prec += 64
        return value


class InversionTable:
    """Thresholds ``F_j = floor(2^63 x_j)``, ``j = 1..L``, of one law, and a guide table.

    ``count_below(u)`` returns ``#{j : U < x_j}`` for ``U = (u + further bits) / 2^63``.  The
    guide (Chen and Asau's "guide table" for inversion) splits ``[0, 2^63)`` into ``2^GUIDE_BITS``
    buckets by the top bits of ``u``; a bucket that contains no threshold and lies above
    ``F_L`` fixes the answer, so most draws cost one table look-up.  A bucket that holds exactly
    one threshold ``F`` answers ``#{F' > end of bucket} + [u < F]`` with one comparison (the same
    value as the search for every ``u != F``: :meth:`resolve`).  The rest go through
    ``searchsorted`` and, when ``u`` equals a threshold, through exact bit refinement.
    """

    def __init__(self, law: _Law, length: int):
        self.law = law
        self.length = length
        prec = 192
        while (floors := self._build(prec)) is None:
            prec += 128
        if any(a <= b for a, b in itertools.pairwise(floors)):
            raise ParameterError(f"noise scale {law.t}/{law.s} is outside the supported range")
        self.ascending = np.array(floors[::-1], dtype=np.uint64)
        shift = 63 - GUIDE_BITS
        starts = np.arange(1 << GUIDE_BITS, dtype=np.uint64) << np.uint64(shift)
        ends = starts + np.uint64((1 << shift) - 1)
        at_least = length - np.searchsorted(self.ascending, starts, side="left")  # #{F >= start}
        above = length - np.searchsorted(self.ascending, ends, side="right")  # #{F > end}
        fixed = (at_least == above) & (above < length)
        self.guide = np.where(fixed, above, -1).astype(np.int64)
        single = at_least - above == 1  # the bucket holds one threshold, ascending[length - at_least]
        self.single_threshold = np.where(single, self.ascending[np.minimum(length - at_least, length - 1)],
                                         0).astype(np.uint64)
        self.single_base = np.where(single, above, -1).astype(np.int64)

    def _build(self, prec: int) -> list[int] | None:
        law = self.law
        pw = law.powers(prec)
        q1 = pw["q1"]
        lo, hi = q1
        out = []
        for j in range(1, self.length + 1):
            if j > 1:  # interval powers: floor the lower, round up the upper bound
                lo = lo * q1[0] >> prec
                hi = (hi * q1[1] >> prec) + 1
            num, den = law.interval(j, prec, qj=(lo, hi), pw=pw)
            value = _floor_ratio(num, den, 63)
            if value is None:
                return None
            out.append(value)
        return out

    def search(self, u: np.ndarray, src: NoiseSource) -> np.ndarray:
        """``#{j : U < x_j}`` by binary search, ties refined with further random bits."""
        idx = np.searchsorted(self.ascending, u, side="right")
        count = self.length - idx
        # the thresholds strictly ascend: u equals one exactly when it has one more on its right
        tie = (np.searchsorted(self.ascending, u, side="left") != idx).nonzero()[0]
        for i in tie:  # u == F_j: compare further bits of U and x_j (probability ~2^-50 per draw)
            j = int(count[i]) + 1
            level = 1
            while True:
                v = int(src.words(1)[0])
                want = self.law.bits(j, 63 + 64 * level) & (U64 - 1)
                if v != want:
                    if v < want:
                        count[i] += 1
                    break
                level += 1
        return count

    def resolve(self, u: np.ndarray, src: NoiseSource) -> np.ndarray:
        """:meth:`search`'s ``#{j : U < x_j}``, first by one comparison where ``u``'s bucket holds
        a single threshold ``F != u``: ``#{F' > u} = #{F' > end of bucket} + [u < F]``."""
        bucket = (u >> np.uint64(63 - GUIDE_BITS)).view(np.int64)
        thr = self.single_threshold.take(bucket, mode="clip")  # bucket < 2^GUIDE_BITS: in range
        count = self.single_base.take(bucket, mode="clip")
        count += u < thr
        hard = np.flatnonzero((count < 0) | (u == thr))  # no single threshold, or a tie
        if hard.size:
            count[hard] = self.search(u[hard], src)
        return count

    def count_below(self, u: np.ndarray, src: NoiseSource) -> np.ndarray:
        """``#{j : U < x_j}`` for 63-bit ``u`` (guide first, then :meth:`resolve`)."""
        count = self.guide.take((u >> np.uint64(63 - GUIDE_BITS)).view(np.int64), mode="clip")  # in range
        open_ = np.flatnonzero(count < 0)
        if open_.size:
            count[open_] = self.resolve(u[open_], src)
        return count


@lru_cache(maxsize=256)
def inversion_table(kind: str, t: int, s: int, c: int, length: int) -> InversionTable:
    return InversionTable(_Law(kind, t, s, c), length)


def inversion_table_length(t: int, s: int) -> int:
    """Entries to reach ``q^L <= e^-TAIL_SCALES`` (``L >= TAIL_SCALES * t / s``), at least 1."""
    return max(1, -(-TAIL_SCALES * t // s))


def _check_ratio(t: int, s: int) -> tuple[int, int]:
    if isinstance(t, bool) or isinstance(s, bool) or int(t) != t or int(s) != s or t < 1 or s < 1:
        raise ParameterError(f"an exact scale t/s needs integers t, s >= 1, got {t!r}/{s!r}")
    g = math.gcd(int(t), int(s))
    return int(t) // g, int(s) // g


def geometric(src: NoiseSource, t: int, s: int, n: int) -> np.ndarray:
    """``n`` draws of ``G`` with ``P(G >= j) = q^j``, ``q = exp(-s/t)`` (exact, int64).

    If ``L = ceil(12 t / s) <= TABLE_CAP``, ``G`` is read by inversion from one table and the
    tail ``G >= L`` recurses (memorylessness).  Otherwise ``G = low + c * high`` with
    ``c = DIGIT``, ``low`` the truncated geometric on ``[0, c)`` and ``high`` a geometric of
    ratio ``q^c`` (the base-``c`` digits of a geometric are independent).
    """
    t, s = _check_ratio(t, s)
    check_scale(t, s)
    out = np.zeros(n, dtype=np.int64)
    length = inversion_table_length(t, s)
    if length <= TABLE_CAP:
        tab = inversion_table("geometric", t, s, 0, length)
        out = tab.count_below(src.words(n) & MASK63, src)
        todo = np.flatnonzero(out == length)
        while todo.size:
            g = tab.count_below(src.words(todo.size) & MASK63, src)
            out[todo] += g
            todo = todo[g == length]
        return out
    tab = inversion_table("truncated", t, s, DIGIT, DIGIT - 1)
    out += tab.count_below(src.words(n) & MASK63, src)
    out += DIGIT * geometric(src, t, s * DIGIT, n)
    return out


def discrete_laplace(src: NoiseSource, t: int, s: int, size: int | tuple[int, ...],
                     out: np.ndarray | None = None) -> np.ndarray:
    """I.i.d. discrete Laplace (two-sided geometric) with scale ``t/s``, as int64:
    ``P(Y = y) = (1 - q)/(1 + q) q^|y|``, ``q = exp(-s/t)``.  Exact (module docstring).

    Scales up to ``TABLE_CAP / 12`` (about 341): one 64-bit word per draw; the top bit is the
    sign, the other 63 bits ``U`` give the magnitude ``M = #{m : U < 2 q^m / (1 + q)}``; the
    signed guide table (indexed by the sign and the top ``GUIDE_BITS`` bits of ``U``) returns
    ``+-M`` directly unless the bucket holds a threshold or the tail (then
    :meth:`InversionTable.search`, and a geometric for ``M >= L``).  Larger scales split the
    magnitude into a digit and a quotient, both read from the same word in the common case
    (:func:`_split_laplace`, whose docstring has the exactness argument).
    Scales above :data:`MAX_SCALE` are refused (ParameterError).  ``out`` (a C-contiguous int64
    array of ``prod(size)`` values) receives the draws instead of a new array: the same draws.
    The look-ups run compiled or in numpy (the same draws) as :func:`polars_dp.compiled.sized`
    decides from ``size``, the caller's public request, unless an enclosing block chose.
    """
    shape = (size,) if isinstance(size, (int, np.integer)) else tuple(size)
    with sized(int(np.prod(shape, dtype=np.int64))):
        return draw_discrete_laplace(src, t, s, shape, out)


def draw_discrete_laplace(src: NoiseSource, t: int, s: int, size: int | tuple[int, ...],
                          out: np.ndarray | None = None) -> np.ndarray:
    """:func:`discrete_laplace` on the kernels of the enclosing block, whatever ``size``: for a
    caller whose sizes may come from the data (a mechanism), which must not pick the kernels."""
    t, s = _check_ratio(t, s)
    check_scale(t, s)
    shape = (size,) if isinstance(size, (int, np.integer)) else tuple(size)
    n = int(math.prod(shape))
    if out is None:
        out = np.empty(n, dtype=np.int64)
    elif out.dtype != np.int64 or out.size != n or not out.flags.c_contiguous:
        raise ParameterError(f"out must be a C-contiguous int64 array of {n} values, got {out.dtype} "
                             f"{out.shape}")
    else:
        out = out.reshape(n)
    length = inversion_table_length(t, s)
    if length > TABLE_CAP:
        _split_laplace(src, t, s, out)
        return out.reshape(shape)
    tab = inversion_table("two_sided", t, s, 0, length)
    signed, shift = _signed_guide(tab)
    # an open bucket of GUIDE_BITS bits holds a threshold (resolve's shortcut answers most such
    # draws); a coarser one mostly holds none at GUIDE_BITS, which resolve would search anyway
    finish = tab.resolve if shift == 63 - GUIDE_BITS else tab.search
    narrow = np.empty(min(n, BLOCK), dtype=SIGNED_GUIDE)  # the look-ups before widening
    for a in range(0, n, BLOCK):
        m = min(BLOCK, n - a)
        w = src.words(m)
        y = out[a:a + m]
        open_ = lookups.guide(w, signed, shift, _OPEN, y)  # compiled, or None
        if open_ is None:
            idx = w >> shift
            found = narrow[:m]
            np.take(signed, idx.view(np.int64), out=found, mode="clip")  # idx < signed.size: in range
            np.copyto(y, found)
            open_ = (found == _OPEN).nonzero()[0]
        if open_.size:
            wo = w[open_]
            mag = finish(wo & MASK63, src)  # the same magnitudes either way, ties refined alike
            tail = (mag == length).nonzero()[0]
            if tail.size:
                mag[tail] += geometric(src, t, s, tail.size)
            y[open_] = np.where(wo >> np.uint64(63) == 1, -mag, mag)
    return out.reshape(shape)


#: The signed guide's type: it holds ``+-M`` for ``M < L <= TABLE_CAP`` and the marker
#: :data:`_OPEN`, in a quarter of int64's bytes.
SIGNED_GUIDE = np.int16
#: Marks an open bucket of the signed guide (no magnitude reaches it: ``TABLE_CAP < 2^15``).
_OPEN = int(np.iinfo(SIGNED_GUIDE).min)

# ---------------------------------------------------------------------------- split sampler
#: Markers in the split tables (int32): a digit bucket that decides ``W = 0`` (so ``Y = 0``),
#: an open digit bucket, an open quotient bucket.  Decided entries are ``|S W| <= c <= 2^12``
#: and ``|S c Q| < c TABLE_CAP <= 2^24`` (``c <= TABLE_CAP``, ``Q < L <= TABLE_CAP``), so
#: ``first + second >= _BAD`` exactly when a look-up hit a marker (then the sum is at least
#: ``2^29 - 2^24 - 2^12``; never past ``2^30 + 2^29 < 2^31``: no int32 overflow).
_ZERO_W = 1 << 29
_OPEN_W = 1 << 30
_OPEN_Q = 1 << 29
_BAD = 1 << 28
#: Draws of the split sampler whose rare cases are finished together (16 blocks: finishing
#: costs a few dozen numpy calls, whatever the number of draws it finishes).
SPLIT_GROUP = 1 << 20
#: Draws per block of the split sampler (measured: 2^14 and 2^15 are no faster).
SPLIT_BLOCK = BLOCK


def split_digit(t: int, s: int) -> int:
    """The digit base ``c`` of the split sampler at scale ``t/s > TABLE_CAP / 12``: about
    ``sqrt(12 t / s)``, so that the digit table (``c`` thresholds) and the quotient table
    (``ceil(12 t / (s c))`` thresholds) have about the same length and leave about as few
    buckets open; at most ``TABLE_CAP``.  A function of the public scale alone."""
    return max(1, min(TABLE_CAP, math.isqrt(-(-TAIL_SCALES * t // s))))


def split_bits(t: int, s: int) -> tuple[int, int]:
    """Bits ``(G, H)`` of the digit's and the quotient's buckets at scale ``t/s`` (public):
    about ``sqrt(12 t/s) / 2^G`` of the draws find their bucket open; 17 bits halve that at the
    price of tables twice as large (1 MiB each), which measured faster only above about 1.5e5."""
    return (16, 16) if t < 150_000 * s else (17, 17)


@dataclass(frozen=True)
class _SplitTables:
    """The tables of the split sampler at one scale (see :func:`_split_laplace`)."""

    c: int
    bits_w: int  # G: bits of b_W
    bits_q: int  # H: bits of b_Q
    digit: InversionTable  # W: "two_sided_trunc", c thresholds, W in 0..c (no tail)
    quotient: InversionTable | None  # Q: "geometric" of q^c, or None (fresh words, huge scales)
    first: np.ndarray  # int32 [2 b_W + S]: +-W, or _ZERO_W / _OPEN_W
    second: np.ndarray  # int32 [S 2^H + b_Q]: +-c Q, or _OPEN_Q (zeros when quotient is None)


def _bucket_counts(tab: InversionTable, bits: int, tail: bool) -> tuple[np.ndarray, np.ndarray]:
    """For the ``2^bits`` buckets ``[b 2^(63-bits), (b+1) 2^(63-bits))`` of a 63-bit ``u``:
    whether the bucket holds no threshold ``F_j`` (and, with ``tail``, lies above ``F_L``),
    and ``#{j : F_j > end of bucket}``, which is then ``#{j : U < x_j}`` for every ``U`` in
    the bucket."""
    shift = 63 - bits
    starts = np.arange(1 << bits, dtype=np.uint64) << np.uint64(shift)
    ends = starts + np.uint64((1 << shift) - 1)
    at_least = tab.length - np.searchsorted(tab.ascending, starts, side="left")  # #{F >= start}
    above = tab.length - np.searchsorted(tab.ascending, ends, side="right")  # #{F > end}
    fixed = at_least == above
    if tail:
        fixed &= above < tab.length
    return fixed, above


@lru_cache(maxsize=64)
def _split_tables(t: int, s: int) -> _SplitTables:
    c = split_digit(t, s)
    bits_w, bits_q = split_bits(t, s)
    digit = inversion_table("two_sided_trunc", t, s, c, c)
    fixed, w = _bucket_counts(digit, bits_w, tail=False)
    first = np.empty(2 << bits_w, dtype=np.int32)
    first[0::2] = np.where(fixed, np.where(w == 0, _ZERO_W, w), _OPEN_W)  # sign bit 0: +W
    first[1::2] = np.where(fixed, np.where(w == 0, _ZERO_W, -w), _OPEN_W)  # sign bit 1: -W
    t2, s2 = _check_ratio(t, s * c)
    length = inversion_table_length(t2, s2)
    if length > TABLE_CAP:  # scales above about TABLE_CAP^2 / 12: the quotient from fresh words
        return _SplitTables(c, bits_w, bits_q, digit, None, first, np.zeros(2 << bits_q, dtype=np.int32))
    quotient = inversion_table("geometric", t2, s2, 0, length)
    fixed, q = _bucket_counts(quotient, bits_q, tail=True)
    second = np.concatenate([np.where(fixed, c * q, _OPEN_Q),  # sign bit 0: +c Q
                             np.where(fixed, -c * q, _OPEN_Q)]).astype(np.int32)  # sign bit 1
    return _SplitTables(c, bits_w, bits_q, digit, quotient, first, second)


def _split_laplace(src: NoiseSource, t: int, s: int, out: np.ndarray) -> None:
    """``out[:] =`` i.i.d. discrete Laplace draws of scale ``t/s > TABLE_CAP / 12``, exactly.

    **The split.**  With ``M = |Y|`` and a digit base ``c`` (:func:`split_digit`), let ``W = 0``
    if ``M = 0`` else ``1 + (M - 1) mod c``, and ``Q = (M - 1) div c``.  Given ``M >= 1``,
    ``M - 1`` is Geometric(``q``), whose base-``c`` digit and quotient are independent:
    ``P(W >= j) = x_j = 2 (q^j - q^(c+1)) / ((1 + q)(1 - q^c))`` (``j = 1..c``, law
    ``"two_sided_trunc"``) and ``Q`` is Geometric(``q^c``), ``P(Q >= k) = q^(ck)``.  So
    ``Y = S (W + c Q)`` with a fair sign ``S`` and ``W, Q, S`` independent (``Y = 0`` when
    ``W = 0``, whatever ``Q`` and ``S``).  Each of ``W, Q`` is read by exact inversion from
    a 63-bit uniform: ``W = #{j : U_W < x_j}``, ``Q = #{k : U_Q < q^(ck)}``, with thresholds
    ``F = floor(2^63 x)`` (exact floors, ties refined by further words: :class:`InversionTable`).

    **The bits of one word** ``w`` (``G, H`` from :func:`split_bits`), from the top:
    ``b_W`` = bits ``63 .. 64-G``; the sign ``S`` = bit ``63-G``; ``r`` = the ``63-G`` bits
    below it, whose top ``H`` bits are ``b_Q``.  ``U_W = b_W r`` (the 63 bits other than the
    sign).  A bucket ``b_W`` is *decided* when the ``U_W``-interval it spans holds no
    threshold ``F_j``: then ``W = #{F_j > end of bucket}`` for every ``U_W`` in it (``u < F_j``
    for all of them, or ``u > F_j`` and so ``U_W >= (F_j + 1)/2^63 > x_j``).  Whether ``b_W`` is
    decided, and ``W`` when it is, are functions of ``b_W`` alone.  Given ``b_W``, ``r`` and
    ``S`` are uniform and independent of it; so where ``b_W`` decides, ``r`` is the leading
    ``63-G`` bits of ``U_Q`` (``G`` fresh bits complete it when needed), and ``Q``'s bucket
    ``b_Q`` (top ``H`` bits of ``U_Q``) is decided, a function of ``b_Q`` alone, when it holds no
    threshold and lies above the tail ``F_L`` (``P <= e^-12``; ``Q >= L`` recurses by
    memorylessness).  Where ``b_W`` is open, ``r`` goes to ``W`` (``U_W``, then the search) and
    ``Q`` takes fresh words (:func:`geometric`).  Conditional on any ``b_W``, ``Q`` is
    Geometric(``q^c``) and independent of ``W``, so it is so unconditionally; ``S`` is a bit
    nobody else reads.

    **The tables** make a decided draw two look-ups and an add: ``first[2 b_W + S] = S W``
    (``_ZERO_W`` for ``W = 0``, ``_OPEN_W`` for an open ``b_W``), indexed by ``w >> (63 - G)``;
    ``second[S 2^H + b_Q] = S c Q`` (``_OPEN_Q`` for an open ``b_Q``), indexed by the ``H + 1``
    bits ``S b_Q``.  ``Y = first + second`` unless a marker shows (the sum is then ``>= _BAD``);
    those draws (about ``c / 2^G + L / 2^H``, i.e. ``2 sqrt(12 t/s) / 2^16``, of them) are
    finished from the same word by the rules above.  Above about ``TABLE_CAP^2 / 12`` the
    quotient's table would be too long: ``second`` is zero and every draw (``W = 0`` too, its
    ``Q`` unused) takes ``Q`` from fresh words (:func:`geometric`), after the digits.  Which
    path a draw takes depends on the public scale and its random words only.
    """
    tabs = _split_tables(t, s)
    c = tabs.c
    n = out.size
    t2, s2 = _check_ratio(t, s * c)
    shift_a = np.uint64(63 - tabs.bits_w)
    shift_b = np.uint64(63 - tabs.bits_w - tabs.bits_q)
    mask_b = np.uint64((2 << tabs.bits_q) - 1)
    size = min(n, SPLIT_BLOCK)
    idx = np.empty(size, dtype=np.uint64)  # scratch reused by every block
    first = np.empty(size, dtype=np.int32)
    second = np.empty(size, dtype=np.int32)
    for g in range(0, n, SPLIT_GROUP):  # the rare draws are finished once per group of blocks
        pending_pos, pending_w = [], []
        for a in range(g, min(n, g + SPLIT_GROUP), SPLIT_BLOCK):
            m = min(SPLIT_BLOCK, n - a)
            w = src.words(m)
            y = out[a:a + m]
            bad = lookups.two_tables(w, tabs.first, tabs.second, shift_a, shift_b, mask_b, _BAD, y)
            if bad is None:  # not compiled: the same look-ups in numpy
                i, f, h = idx[:m], first[:m], second[:m]
                np.right_shift(w, shift_a, out=i)
                np.take(tabs.first, i.view(np.int64), out=f, mode="clip")  # i < 2^(G + 1): in range
                np.right_shift(w, shift_b, out=i)
                np.bitwise_and(i, mask_b, out=i)
                np.take(tabs.second, i.view(np.int64), out=h, mode="clip")  # i < 2^(H + 1)
                np.add(f, h, out=y)
                bad = np.flatnonzero(y >= _BAD)
            if bad.size:
                pending_w.append(w[bad])
                bad += a
                pending_pos.append(bad)
        if pending_pos:
            _split_finish(src, tabs, np.concatenate(pending_w), np.concatenate(pending_pos), out, t2, s2)
        if tabs.quotient is None:  # |Y| = W + c Q, Q from fresh words (sign(0) = 0 keeps Y = 0)
            y = out[g:g + SPLIT_GROUP]
            high = geometric(src, t2, s2, y.size)
            high *= np.sign(y)
            high *= c
            y += high


def _split_finish(src: NoiseSource, tabs: _SplitTables, w: np.ndarray, pos: np.ndarray,
                  out: np.ndarray, t2: int, s2: int) -> None:
    """``out[pos]`` for the draws of :func:`_split_laplace` whose look-ups hit a marker,
    finished from their words ``w`` (the rules in its docstring)."""
    c = tabs.c
    below = 63 - tabs.bits_w  # bits below the sign bit
    rest = np.uint64((1 << below) - 1)
    top = w >> np.uint64(below)  # 2 b_W + S
    f = tabs.first.take(top.view(np.int64), mode="clip")
    negative = (top & np.uint64(1)).astype(bool)  # the sign bit
    mag = np.zeros(w.size, dtype=np.int64)  # |Y|; stays 0 where b_W decides W = 0
    opened = np.flatnonzero(f == _OPEN_W)
    if opened.size:  # W from the 63 bits other than the sign; Q (if W >= 1) from fresh words
        wo = w[opened]
        m = tabs.digit.resolve(((wo >> np.uint64(below + 1)) << np.uint64(below)) | (wo & rest), src)
        if tabs.quotient is not None:
            nz = np.flatnonzero(m)
            if nz.size:  # as geometric(src, t2, s2, nz.size): the fresh words' low 63 bits
                m[nz] += c * _quotients(src, tabs.quotient, src.words(nz.size) & MASK63, t2, s2, True)
        mag[opened] = m
    q_open = np.flatnonzero(f < _ZERO_W)  # b_W decided W >= 1, so b_Q was open
    if q_open.size and tabs.quotient is not None:  # U_Q = r, then G fresh bits
        fill = src.words(q_open.size) >> np.uint64(64 - tabs.bits_w)
        quo = _quotients(src, tabs.quotient, ((w[q_open] & rest) << np.uint64(tabs.bits_w)) | fill, t2, s2)
        quo *= c
        quo += np.abs(f[q_open])
        mag[q_open] = quo
    out[pos] = np.where(negative, -mag, mag)


def _quotients(src: NoiseSource, tab: InversionTable, u: np.ndarray, t2: int, s2: int,
               fresh: bool = False) -> np.ndarray:
    """``#{k : U < q^(ck)}`` for 63-bit ``u`` (ties refined), ``Q >= L`` continued by
    memorylessness with :func:`geometric`.  ``fresh``: ``u`` uniform (its guide first), else
    from open buckets (straight to :meth:`InversionTable.resolve`); the same value either way."""
    quo = tab.count_below(u, src) if fresh else tab.resolve(u, src)
    tail = np.flatnonzero(quo == tab.length)
    if tail.size:  # Q >= L: Q = L + Q'
        quo[tail] += geometric(src, t2, s2, tail.size)
    return quo


def signed_guide_bits(length: int) -> int:
    """Bits ``B`` of ``U`` that index the signed guide of a table of ``length`` thresholds: about
    ``2^8`` buckets per threshold (at most ``length / 2^(B-1)`` of the draws, about 0.4 %, find
    their bucket open), between 10 and :data:`GUIDE_BITS`.  Public: the scale decides it."""
    return max(10, min(GUIDE_BITS, (length - 1).bit_length() + 8))


@lru_cache(maxsize=256)
def _signed_guide(tab: InversionTable) -> tuple[np.ndarray, np.uint64]:
    """``([+guide, -guide], shift)``: the guide of the top ``B`` bits of ``U``
    (:func:`signed_guide_bits`; a bucket decided when it holds no threshold and lies above
    ``F_L``, its value ``#{F_j > end of bucket} < L <= TABLE_CAP``), as :data:`SIGNED_GUIDE`,
    open buckets marked ``_OPEN``, indexed by the sign bit and those bits, ``w >> shift``.  Small
    (at most ``2^11 L`` bytes: 32 KiB at scale 2, 256 KiB from scale 11), so that a small release
    finds it in cache however cold it starts."""
    bits = signed_guide_bits(tab.length)
    fixed, above = _bucket_counts(tab, bits, tail=True)
    signed = np.concatenate([np.where(fixed, above, _OPEN), np.where(fixed, -above, _OPEN)])
    return signed.astype(SIGNED_GUIDE), np.uint64(63 - bits)


def warm_up_lookups() -> None:
    """Compile the samplers' two look-ups (:mod:`polars_dp.noise.lookups`) for the table types
    the samplers pass (:data:`SIGNED_GUIDE`, the split tables' int32), on fixed words of zeros:
    nothing is drawn.  For a mechanism's warm-up, so that its first release compiles nothing."""
    words, out = np.zeros(4, dtype=np.uint64), np.empty(4, dtype=np.int64)
    lookups.guide(words, np.zeros(2, dtype=SIGNED_GUIDE), np.uint64(62), _OPEN, out)
    table = np.zeros(4, dtype=np.int32)
    lookups.two_tables(words, table, table, np.uint64(62), np.uint64(61), np.uint64(3), _BAD, out)


def add_discrete_laplace(values: np.ndarray, scale: Fraction, src: NoiseSource) -> None:
    """``values += DLap(scale)`` in place, chunk by chunk (``values`` float64 or int64,
    C-contiguous; float64 values hold integers exactly below 2^53, so their scale is capped at
    :data:`MAX_COUNT_SCALE`, int64 ones at :data:`MAX_SCALE`)."""
    scale = Fraction(scale)
    check_scale(scale.numerator, scale.denominator,
                MAX_COUNT_SCALE if values.dtype.kind == "f" else MAX_SCALE)
    flat = values.reshape(-1)
    if not np.may_share_memory(flat, values):  # a reshape is a view of values or a new array
        raise ParameterError("add_discrete_laplace needs a contiguous array")
    for a in range(0, flat.size, CHUNK):
        b = min(flat.size, a + CHUNK)
        flat[a:b] += draw_discrete_laplace(src, scale.numerator, scale.denominator, b - a)



# ============================================================================ Bernoulli(exp(-gamma))
def _bernoulli_exp_unit(src: NoiseSource, num: np.ndarray, den: int) -> np.ndarray:
    """CKS Bernoulli(exp(-num/den)) for ``0 <= num <= den``: ``K`` = first ``k`` with
    ``A_k = 0``, ``A_k ~ Bernoulli(num / (den k))``; returns ``K`` odd.  Lockstep rounds.

    ``A_k`` is "a uniform integer below ``den k`` is below ``num``"; bounds past ``2^64`` (huge
    ``lambda``) and Python-int ``num`` (object arrays) are compared as exact Python ints."""
    out = np.empty(num.size, dtype=bool)
    alive = np.arange(num.size)
    wide = num.dtype == object
    k = 1
    while alive.size:
        u = src.integers_below(den * k, alive.size)
        if wide or u.dtype == object:
            a = (u.astype(object) < num[alive].astype(object)).astype(bool)
        else:
            a = u < num[alive].astype(np.uint64)
        out[alive[~a]] = k % 2 == 1
        alive = alive[a]
        k += 1
    return out


def _exact_ints(num: object) -> np.ndarray:
    """``num`` as int64, or as an object array of Python ints if any entry leaves int64."""
    arr = np.asarray(num)
    if arr.dtype == object:
        return arr.reshape(-1)
    return arr.astype(np.int64).reshape(-1)


def bernoulli_exp(src: NoiseSource, num: np.ndarray, den: int) -> np.ndarray:
    """Exact Bernoulli(``exp(-num/den)``) per element (``num >= 0`` integers, ``den >= 1``).

    Canonne, Kamath, Steinke 2020, Alg. 1: ``exp(-gamma) = exp(-1)^floor(gamma) *
    exp(-frac(gamma))``, each factor an independent CKS trial, stopping at the first failure.
    ``num`` may be an object array of Python ints (values past int64): the law is the same.
    """
    num = _exact_ints(num)
    den = int(den)
    if den < 1 or np.any((num < 0).astype(bool)):
        raise ParameterError("bernoulli_exp needs num >= 0 and den >= 1")
    if num.dtype == object or den >= 1 << 63:
        num = num.astype(object)
        whole, frac = num // den, num % den
    else:
        whole, frac = num // den, num % den
    out = np.ones(num.size, dtype=bool)
    alive = np.flatnonzero((whole > 0).astype(bool))
    k = 0
    while alive.size:
        ok = _bernoulli_exp_unit(src, np.ones(alive.size, dtype=np.int64), 1)
        out[alive[~ok]] = False
        k += 1
        alive = alive[ok & (whole[alive] > k).astype(bool)]
    idx = np.flatnonzero(out & (frac > 0).astype(bool))
    out[idx[~_bernoulli_exp_unit(src, frac[idx], den)]] = False
    return out


def privtree_decision(src: NoiseSource, x: np.ndarray, lam: int) -> np.ndarray:
    """Exact ``P[Lap(lam) > x]`` events, ``x`` and ``lam`` on one integer grid (``x = theta - b``
    scaled by ``2^k``, ``lam`` likewise): ``H and E`` if ``x >= 0`` else ``not (H and E)`` with
    ``E ~ Bernoulli(exp(-|x|/lam))``, ``H`` a fair bit.  ``x`` int64 or an object array of
    Python ints (scores past the int64 grid): the same law either way."""
    x = _exact_ints(x)
    he = bernoulli_exp(src, np.abs(x), int(lam)) & src.fair_bits(x.size)
    return np.where((x >= 0).astype(bool), he, ~he)


__all__ = ["BLOCK", "CHUNK", "SIGNED_GUIDE", "InversionTable", "MAX_COUNT_SCALE", "MAX_SCALE",
           "add_discrete_laplace", "bernoulli_exp", "check_scale", "discrete_laplace",
           "draw_discrete_laplace", "geometric", "inversion_table", "inversion_table_length",
           "privtree_decision", "signed_guide_bits", "split_bits", "split_digit", "warm_up_lookups"]
