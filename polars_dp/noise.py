"""Privacy parameters, the random bit source, and the only noise samplers of polars-dp.

Neighbour relations
-------------------
``"replace"``
    Two tables are neighbours when one row is *modified* (the Privelet paper's setting,
    Xiao et al. 2010, Sec. III).  A histogram then changes in two cells by 1 each:
    L1 sensitivity 2.
``"add_remove"``
    Two tables are neighbours when one row is added or removed (the PrivTree paper's
    setting, Zhang et al. 2016, Sec. 2).  A histogram changes in one cell by 1:
    L1 sensitivity 1.

Randomness (:class:`NoiseSource`, :func:`noise_source`)
-------------------------------------------------------
Without a seed every random bit is cryptographic: a ChaCha20 keystream computed by
OpenSSL through pyca ``cryptography`` (a widely audited library), keyed per source with 256
fresh bits from :func:`os.urandom`.  ChaCha20 is the generator inside Linux's own
``getrandom(2)``; run in process it delivers about 3 GB/s here, against 0.35 GB/s for
``os.urandom`` (23 ns per 64-bit word, more than numpy's whole float Laplace draw), and the
samplers below need one or two words per draw.  The key is replaced after ``fork`` (a child
never replays its parent's stream) and every 2^32 words.  Without ``cryptography`` the source
falls back to reading :func:`os.urandom` in bulk.  A ``seed`` gives a PCG64
stream instead: reproducible, for tests and experiments only (anyone who knows the seed
can subtract the noise), and every release made with one records ``seeded = true``.
:func:`make_rng` still returns a plain numpy Generator for non-noise uses (workload
generation, sampling from a released model).

Exact noise (``noise="exact"``, the default)
--------------------------------------------
Every sample is decided by integer comparisons of random words; no floating-point
``log``/``exp`` is on that path (Mironov, CCS 2012, shows why floating-point Laplace
leaks).

* :func:`discrete_laplace` draws the two-sided geometric ``P(Y = y) = (1-q)/(1+q) q^|y|``,
  ``q = exp(-s/t)``, for a rational scale ``t/s``, by *exact inversion*: the magnitude
  ``M`` satisfies ``P(M >= m) = 2 q^m / (1 + q)`` (m >= 1), so with a uniform
  ``U in [0, 1)`` made of 63 random bits, ``M = #{m : U < S_m}``.  The thresholds
  ``floor(2^63 S_m)`` are integers computed once per scale with rigorous big-integer
  interval arithmetic (a positive Taylor series for ``exp(s/t)``, never floats).  Because
  ``S_m`` is irrational (Lindemann), ``U < S_m`` is decided by the first 63 bits unless they
  equal ``floor(2^63 S_m)``; then further random words are compared with further bits of
  ``S_m`` (probability about ``2^-50`` per draw, but handled exactly).  The tail
  ``M >= L`` (probability ``<= e^-12``) adds a geometric drawn the same way (memorylessness).
  The 64th bit is the sign.  A guide table (Chen and Asau 1974) indexed by the top 17 bits
  answers most draws with one look-up; buckets that hold a threshold fall back to
  ``searchsorted``.  Scales above ``TABLE_CAP / 12`` (about 341) take a second word: the first
  gives ``|Y| = 0`` or ``1 + (|Y| - 1) mod 2048``, the second the geometric quotient (the base-c
  digits of a geometric are independent).  This is the note's exact inversion taken to its
  end: about one word per draw instead of CKS's 6 to 9 uniforms, and as fast as numpy's float
  sampler.  The thresholds are computed once per scale (cached) by a Python loop over at most
  ``TABLE_CAP`` entries.
* :func:`bernoulli_exp` is the Canonne-Kamath-Steinke (NeurIPS 2020, Alg. 1) Bernoulli
  ``exp(-gamma)`` for rational ``gamma = num/den``: ``floor(gamma)`` Bernoulli(``e^-1``)
  trials, then ``K`` = first ``k`` with ``A_k = 0``, ``A_k ~ Bernoulli(frac/k)`` drawn as a
  uniform integer below ``den * k`` (unbiased rejection), and the answer is "``K`` odd".
* :func:`privtree_decision` decides PrivTree's ``b + Lap(lambda) > theta`` exactly:
  with ``x = theta - b``, ``E ~ Bernoulli(exp(-|x|/lambda))`` and a fair bit ``H``, split
  = ``H and E`` if ``x >= 0`` else ``not (H and E)``; ``P = e^(-x/lambda)/2`` resp.
  ``1 - e^(x/lambda)/2``, the Laplace tail (note §5c).

Scales are rationals: :func:`exact_scale` rounds ``sensitivity / epsilon`` *up* to the grid
``2^-GRID_BITS`` (computed from the exact binary value of the float epsilon), so the
discrete Laplace mechanism with integer-valued queries of L1 sensitivity ``Delta`` is
``Delta / scale <= epsilon``-DP by the pmf ratio ``exp(|a - b| / scale)``.  Mechanisms record
``epsilon_effective = Delta / scale``.

Float noise (``noise="float"``)
-------------------------------
:func:`laplace` keeps numpy's floating-point Laplace (seeded: ``Generator.laplace`` on PCG64,
bit for bit the samples of earlier versions; unseeded: the same inverse-CDF formula on OS
random bits).  It is for experiments and comparisons; its releases record ``noise = float``.
"""

from __future__ import annotations

import itertools
import math
import numbers
import os
import secrets
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Literal, TypeAlias

import numpy as np

from polars_dp.errors import ParameterError

try:  # the default cryptographic bit source (falls back to os.urandom without it)
    from cryptography.hazmat.primitives.ciphers import Cipher as _Cipher
    from cryptography.hazmat.primitives.ciphers.algorithms import ChaCha20 as _ChaCha20
except ImportError:  # pragma: no cover - exercised only without the package
    _Cipher = _ChaCha20 = None

Neighbours: TypeAlias = Literal["replace", "add_remove"]
NEIGHBOURS: tuple[str, ...] = ("replace", "add_remove")
NoiseKind: TypeAlias = Literal["exact", "float"]
NOISE_KINDS: tuple[str, ...] = ("exact", "float")

SeedLike: TypeAlias = "int | np.random.SeedSequence | np.random.Generator | None"

#: Exact scales are multiples of ``2^-GRID_BITS`` (rounded up).
GRID_BITS = 20
#: Draws generated per chunk (bounds the temporary memory of the samplers).
CHUNK = 1 << 20
#: Largest single inversion table (entries): scales up to TABLE_CAP / TAIL_SCALES use one table.
TABLE_CAP = 1 << 12
#: Larger scales split the magnitude into base-DIGIT digits (one table and one word per digit).
DIGIT = 1 << 11
#: Table length in units of the scale: the tail beyond it has probability <= e^-TAIL_SCALES.
TAIL_SCALES = 12
#: Bits of the guide table of every inversion table (2^GUIDE_BITS int64 entries).
GUIDE_BITS = 16

_MASK63 = np.uint64((1 << 63) - 1)
_U64 = 1 << 64


# ============================================================================ parameters
def check_neighbours(neighbours: str) -> str:
    """Return ``neighbours`` if it names a supported relation, else raise ParameterError."""
    if neighbours not in NEIGHBOURS:
        raise ParameterError(
            f"neighbours={neighbours!r} is not a neighbour relation; use 'replace' "
            "(modify one row) or 'add_remove' (add or remove one row)"
        )
    return neighbours


def check_noise(noise: str) -> str:
    """Return ``noise`` if it is ``"exact"`` or ``"float"``, else raise ParameterError."""
    if not isinstance(noise, str) or noise not in NOISE_KINDS:
        raise ParameterError(
            f"noise={noise!r} is not a noise kind; use 'exact' (integer-lattice noise from exact "
            "samplers, the default) or 'float' (numpy's floating-point Laplace, for experiments)"
        )
    return noise


def histogram_sensitivity(neighbours: str) -> int:
    """L1 sensitivity of a frequency matrix: 2 under ``replace``, 1 under ``add_remove``."""
    return 2 if check_neighbours(neighbours) == "replace" else 1


def _real(value: object, name: str, what: str) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ParameterError(f"{name} must be {what}, got {value!r} of type {type(value).__name__}")
    return float(value)


def check_epsilon(epsilon: float, name: str = "epsilon") -> float:
    """Return ``epsilon`` as a float if it is a real number (not a bool or a string), finite and > 0."""
    value = _real(epsilon, name, "a positive number")
    if not math.isfinite(value) or value <= 0:
        raise ParameterError(f"{name} must be a finite number > 0, got {epsilon!r}")
    return value


def check_fraction(value: float, name: str) -> float:
    """Return ``value`` if it is a real number strictly between 0 and 1, else raise ParameterError."""
    v = _real(value, name, "a number in (0, 1)")
    if not 0.0 < v < 1.0:
        raise ParameterError(f"{name} must lie strictly between 0 and 1, got {value!r}")
    return v


def grid_ceil(x: Fraction, bits: int = GRID_BITS) -> Fraction:
    """The smallest multiple of ``2^-bits`` that is ``>= x`` (exact)."""
    return Fraction(math.ceil(Fraction(x) * (1 << bits)), 1 << bits)


def exact_scale(sensitivity: int | Fraction, epsilon: float | Fraction) -> Fraction:
    """``sensitivity / epsilon`` rounded up to the ``2^-GRID_BITS`` grid, from the exact
    binary value of a float ``epsilon``; the mechanism then spends ``sensitivity / scale <=
    epsilon``."""
    eps = Fraction(epsilon)
    if eps <= 0:
        raise ParameterError(f"epsilon must be > 0, got {epsilon!r}")
    return grid_ceil(Fraction(sensitivity) / eps)


def laplace_scale(sensitivity: int | Fraction, epsilon: float | Fraction, noise: str) -> float | Fraction:
    """Scale of the counts' noise: an exact rational (``noise="exact"``) or ``Delta/epsilon``."""
    if check_noise(noise) == "exact":
        return exact_scale(sensitivity, epsilon)
    return float(sensitivity) / float(epsilon)


# ============================================================================ randomness
_ZERO_CHUNK = 1 << 24


@lru_cache(maxsize=1)
def _zero_block() -> memoryview:
    return memoryview(bytes(_ZERO_CHUNK))


def _zero_bytes(n: int) -> memoryview:
    return _zero_block()[:n]


class NoiseSource:
    """Random 64-bit words for the samplers, and a flag saying whether they are seeded.

    ``NoiseSource()`` is cryptographic: a ChaCha20 keystream (pyca ``cryptography``, i.e.
    OpenSSL) under a fresh 256-bit key from :func:`os.urandom`, re-keyed after ``fork`` and
    every ``2^32`` words; without ``cryptography`` it reads :func:`os.urandom` directly.
    ``NoiseSource(generator)`` takes words from a numpy Generator (``bit_generator.random_raw``),
    which is what a seed gives.  :attr:`generator` is that Generator (None when cryptographic).
    """

    def __init__(self, generator: np.random.Generator | None = None):
        self.generator = generator
        self.seeded = generator is not None
        self._cipher = None
        self._pid = -1
        self._left = 0

    def _keystream(self, nbytes: int) -> np.ndarray | None:
        if _ChaCha20 is None:
            return None
        if self._cipher is None or self._pid != os.getpid() or self._left < nbytes:
            # fresh key, zero 32-bit block counter: at most 2^32 words (2^29 blocks) per key
            key, nonce = os.urandom(32), bytes(4) + os.urandom(12)
            self._cipher = _Cipher(_ChaCha20(key, nonce), mode=None).encryptor()
            self._pid = os.getpid()
            self._left = 8 << 32
        self._left -= nbytes
        out = np.empty(nbytes + 64, dtype=np.uint8)  # update_into wants room for a block
        zeros = _zero_bytes(min(nbytes, _ZERO_CHUNK))
        for a in range(0, nbytes, _ZERO_CHUNK):
            m = min(_ZERO_CHUNK, nbytes - a)
            self._cipher.update_into(zeros[:m], out[a:a + m + 64])
        return out[:nbytes]

    @property
    def kind(self) -> str:
        """``"pcg64 (seeded)"``, ``"chacha20"`` or ``"os.urandom"``."""
        if self.seeded:
            return "pcg64 (seeded)"
        return "os.urandom" if _ChaCha20 is None else "chacha20"

    def words(self, n: int) -> np.ndarray:
        """``n`` independent uniform uint64 words."""
        n = int(n)
        if self.generator is not None:
            return np.asarray(self.generator.bit_generator.random_raw(n), dtype=np.uint64)
        stream = self._keystream(8 * n)
        if stream is None:
            return np.frombuffer(os.urandom(8 * n), dtype=np.uint64)
        return stream.view(np.uint64)

    def integers_below(self, bound: int, n: int) -> np.ndarray:
        """``n`` uniform integers in ``[0, bound)`` (``1 <= bound <= 2^63``) by rejection:
        a word ``w`` is kept iff ``w < floor(2^64 / bound) * bound``, then ``w mod bound``."""
        bound = int(bound)
        if not 1 <= bound <= 1 << 63:
            raise ParameterError(f"integers_below needs 1 <= bound <= 2^63, got {bound}")
        out = np.empty(n, dtype=np.uint64)
        limit = (_U64 // bound) * bound
        todo = np.arange(n)
        while todo.size:
            w = self.words(todo.size)
            if limit < _U64:
                ok = w < np.uint64(limit)
                out[todo[ok]] = w[ok] % np.uint64(bound)
                todo = todo[~ok]
            else:
                out[todo] = w % np.uint64(bound)
                break
        return out

    def fair_bits(self, n: int) -> np.ndarray:
        """``n`` independent fair booleans."""
        w = self.words(-(-n // 64))
        return np.unpackbits(w.view(np.uint8))[:n].astype(bool)

    def __repr__(self) -> str:
        return f"NoiseSource({self.kind})"


def make_rng(seed: SeedLike = None) -> np.random.Generator:
    """A numpy Generator (PCG64) for randomness that is not privacy noise.

    ``None`` seeds from 128 bits of OS entropy (:func:`secrets.randbits`).  An int or
    SeedSequence gives a reproducible stream.  An existing Generator is returned as is.
    Mechanisms use :func:`noise_source` instead.
    """
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None:
        return np.random.Generator(np.random.PCG64(np.random.SeedSequence(secrets.randbits(128))))
    if isinstance(seed, np.random.SeedSequence):
        return np.random.Generator(np.random.PCG64(seed))
    if isinstance(seed, (bool, float, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise ParameterError(f"seed must be an int, a numpy Generator or None, got {seed!r}")
    if seed < 0:
        raise ParameterError(f"seed must be >= 0, got {seed}")
    return np.random.Generator(np.random.PCG64(int(seed)))


def noise_source(seed: SeedLike | NoiseSource = None) -> NoiseSource:
    """The random source of a mechanism: the OS CSPRNG for ``None``, else a seeded PCG64
    stream (:func:`make_rng`; the release is then marked ``seeded``)."""
    if isinstance(seed, NoiseSource):
        return seed
    if seed is None:
        return NoiseSource()
    return NoiseSource(make_rng(seed))


def as_source(rng: np.random.Generator | NoiseSource | None) -> NoiseSource:
    """A NoiseSource for ``rng`` (a Generator is wrapped and counts as seeded)."""
    if isinstance(rng, NoiseSource):
        return rng
    if rng is None:
        return NoiseSource()
    if isinstance(rng, np.random.Generator):
        return NoiseSource(rng)
    raise ParameterError(f"expected a NoiseSource or a numpy Generator, got {rng!r}")


# ============================================================================ float Laplace
def laplace(rng: np.random.Generator | NoiseSource, scale: float | np.ndarray, size=None) -> np.ndarray:
    """I.i.d. floating-point Laplace(0, scale) draws (``noise="float"``): density
    ``exp(-|x|/scale) / (2 scale)``, variance ``2 scale^2``.

    ``scale`` may be an array (one magnitude per output).  A Generator (or a seeded source)
    uses ``Generator.laplace``; the OS source applies numpy's inverse CDF
    (``log(2U)`` / ``-log(2 - 2U)``) to 53-bit uniforms from OS random words.
    """
    scale_arr = np.asarray(scale, dtype=np.float64)
    if np.any(~np.isfinite(scale_arr)) or np.any(scale_arr <= 0):
        raise ParameterError("Laplace scale must be finite and > 0")
    if size is None:
        size = scale_arr.shape
    gen = rng if isinstance(rng, np.random.Generator) else as_source(rng).generator
    if gen is not None:
        return gen.laplace(0.0, 1.0, size=size) * scale_arr
    src = as_source(rng)
    n = int(np.prod(size, dtype=np.int64))
    u = (src.words(n) >> np.uint64(11)).astype(np.float64) * 2.0**-53
    while np.any(zero := u == 0.0):
        u[zero] = (src.words(int(zero.sum())) >> np.uint64(11)).astype(np.float64) * 2.0**-53
    x = np.where(u >= 0.5, -np.log(2.0 - 2.0 * u), np.log(2.0 * u))
    return x.reshape(size) * scale_arr


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


class _Table:
    """Thresholds ``F_j = floor(2^63 x_j)``, ``j = 1..L``, of one law, and a guide table.

    ``count_below(u)`` returns ``#{j : U < x_j}`` for ``U = (u + further bits) / 2^63``.  The
    guide (Chen and Asau's "guide table" for inversion) splits ``[0, 2^63)`` into ``2^GUIDE_BITS``
    buckets by the top bits of ``u``; a bucket that contains no threshold and lies above
    ``F_L`` fixes the answer, so most draws cost one table look-up.  The rest go through
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
        tie = np.flatnonzero(idx > 0)
        tie = tie[self.ascending[idx[tie] - 1] == u[tie]]
        for i in tie:  # u == F_j: compare further bits of U and x_j (probability ~2^-50 per draw)
            j = int(count[i]) + 1
            level = 1
            while True:
                v = int(src.words(1)[0])
                want = self.law.bits(j, 63 + 64 * level) & (_U64 - 1)
                if v != want:
                    if v < want:
                        count[i] += 1
                    break
                level += 1
        return count

    def count_below(self, u: np.ndarray, src: NoiseSource) -> np.ndarray:
        """``#{j : U < x_j}`` for 63-bit ``u`` (guide first, then :meth:`search`)."""
        count = self.guide[u >> np.uint64(63 - GUIDE_BITS)]
        open_ = np.flatnonzero(count < 0)
        if open_.size:
            count[open_] = self.search(u[open_], src)
        return count


@lru_cache(maxsize=256)
def _table(kind: str, t: int, s: int, c: int, length: int) -> _Table:
    return _Table(_Law(kind, t, s, c), length)


def _table_length(t: int, s: int) -> int:
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
    out = np.zeros(n, dtype=np.int64)
    length = _table_length(t, s)
    if length <= TABLE_CAP:
        tab = _table("geometric", t, s, 0, length)
        out = tab.count_below(src.words(n) & _MASK63, src)
        todo = np.flatnonzero(out == length)
        while todo.size:
            g = tab.count_below(src.words(todo.size) & _MASK63, src)
            out[todo] += g
            todo = todo[g == length]
        return out
    tab = _table("truncated", t, s, DIGIT, DIGIT - 1)
    out += tab.count_below(src.words(n) & _MASK63, src)
    out += DIGIT * geometric(src, t, s * DIGIT, n)
    return out


def discrete_laplace(src: NoiseSource, t: int, s: int, size: int | tuple[int, ...]) -> np.ndarray:
    """I.i.d. discrete Laplace (two-sided geometric) with scale ``t/s``, as int64:
    ``P(Y = y) = (1 - q)/(1 + q) q^|y|``, ``q = exp(-s/t)``.  Exact (module docstring).

    One 64-bit word per draw: the top bit is the sign, the other 63 bits ``U`` give the
    magnitude ``M = #{m : U < 2 q^m / (1 + q)}``; the signed guide table (indexed by the sign
    and the top ``GUIDE_BITS`` bits of ``U``) returns ``+-M`` directly unless the bucket holds a
    threshold or the tail (then :meth:`_Table.search`, and a geometric for ``M >= L``).
    Scales above ``TABLE_CAP / 12`` read ``W = 0`` (``M = 0``) or ``1 + (M - 1) mod c`` from the
    first word and add ``c * Geometric(q^c)`` from a second one (``c = DIGIT``).
    """
    t, s = _check_ratio(t, s)
    shape = (size,) if isinstance(size, (int, np.integer)) else tuple(size)
    n = int(np.prod(shape, dtype=np.int64))
    out = np.empty(n, dtype=np.int64)
    length = _table_length(t, s)
    split = length > TABLE_CAP
    tab = _table("two_sided_trunc", t, s, DIGIT, DIGIT) if split else _table("two_sided", t, s, 0, length)
    signed = _signed_guide(tab)
    shift = np.uint64(63 - GUIDE_BITS)
    for a in range(0, n, CHUNK):
        m = min(CHUNK, n - a)
        w = src.words(m)
        y = signed[w >> shift]
        open_ = np.flatnonzero(y == _OPEN)
        if open_.size:
            wo = w[open_]
            mag = tab.search(wo & _MASK63, src)
            if not split:
                tail = np.flatnonzero(mag == length)
                if tail.size:
                    mag[tail] += geometric(src, t, s, tail.size)
            y[open_] = np.where(wo >> np.uint64(63) == 1, -mag, mag)
        if split:  # |Y| = W + c * high when W >= 1 (sign(0) = 0 leaves Y = 0 alone)
            high = geometric(src, t, s * DIGIT, m)
            high *= np.sign(y)
            y += high * DIGIT
        out[a:a + m] = y
    return out.reshape(shape)


_OPEN = np.iinfo(np.int64).min


@lru_cache(maxsize=256)
def _signed_guide(tab: _Table) -> np.ndarray:
    """``[+guide, -guide]``, open buckets marked ``_OPEN``: indexed by ``w >> (63 - GUIDE_BITS)``."""
    g = np.where(tab.guide < 0, _OPEN, tab.guide)
    return np.concatenate([g, np.where(g == _OPEN, _OPEN, -g)])


def add_discrete_laplace(values: np.ndarray, scale: Fraction, src: NoiseSource) -> None:
    """``values += DLap(scale)`` in place, chunk by chunk (``values`` float64 or int64,
    C-contiguous; float64 values hold integers exactly below 2^53)."""
    scale = Fraction(scale)
    flat = values.reshape(-1)
    if not np.shares_memory(flat, values):
        raise ParameterError("add_discrete_laplace needs a contiguous array")
    for a in range(0, flat.size, CHUNK):
        b = min(flat.size, a + CHUNK)
        flat[a:b] += discrete_laplace(src, scale.numerator, scale.denominator, b - a)


def add_noise(values: np.ndarray, scale: float | Fraction, src: NoiseSource, noise: str) -> None:
    """``values += noise`` in place: exact discrete Laplace (``values`` hold integers) or float
    Laplace of ``scale``; one independent draw per entry."""
    if check_noise(noise) == "exact":
        add_discrete_laplace(values, Fraction(scale), src)
    else:
        values += laplace(src, float(scale), values.shape)


def noise_params(sensitivity: int | Fraction, scale: float | Fraction, noise: str,
                 prefix: str = "") -> dict[str, object]:
    """What a release records about one noise scale: for exact noise the rational scale and
    the epsilon actually spent, ``sensitivity / scale``."""
    if check_noise(noise) != "exact":
        return {}
    scale = Fraction(scale)
    return {f"{prefix}noise_scale_exact": f"{scale.numerator}/{scale.denominator}",
            f"{prefix}epsilon_effective": float(Fraction(sensitivity) / scale)}


def sample_noise(src: NoiseSource, scale: float | Fraction, size: int | tuple[int, ...],
                 noise: str) -> np.ndarray:
    """Noise of ``scale`` for counts: exact discrete Laplace (int64) or float Laplace."""
    if check_noise(noise) == "exact":
        scale = Fraction(scale)
        return discrete_laplace(src, scale.numerator, scale.denominator, size)
    return laplace(src, float(scale), size)


# ============================================================================ Bernoulli(exp(-gamma))
def _bernoulli_exp_unit(src: NoiseSource, num: np.ndarray, den: int) -> np.ndarray:
    """CKS Bernoulli(exp(-num/den)) for ``0 <= num <= den``: ``K`` = first ``k`` with
    ``A_k = 0``, ``A_k ~ Bernoulli(num / (den k))``; returns ``K`` odd.  Lockstep rounds."""
    out = np.empty(num.size, dtype=bool)
    alive = np.arange(num.size)
    k = 1
    while alive.size:
        a = src.integers_below(den * k, alive.size) < num[alive].astype(np.uint64)
        out[alive[~a]] = k % 2 == 1
        alive = alive[a]
        k += 1
    return out


def bernoulli_exp(src: NoiseSource, num: np.ndarray, den: int) -> np.ndarray:
    """Exact Bernoulli(``exp(-num/den)``) per element (``num >= 0`` int64, ``den >= 1``).

    Canonne, Kamath, Steinke 2020, Alg. 1: ``exp(-gamma) = exp(-1)^floor(gamma) *
    exp(-frac(gamma))``, each factor an independent CKS trial, stopping at the first failure.
    """
    num = np.asarray(num, dtype=np.int64).reshape(-1)
    den = int(den)
    if den < 1 or np.any(num < 0):
        raise ParameterError("bernoulli_exp needs num >= 0 and den >= 1")
    whole, frac = num // den, num % den
    out = np.ones(num.size, dtype=bool)
    alive = np.flatnonzero(whole > 0)
    k = 0
    while alive.size:
        ok = _bernoulli_exp_unit(src, np.ones(alive.size, dtype=np.int64), 1)
        out[alive[~ok]] = False
        k += 1
        alive = alive[ok & (whole[alive] > k)]
    idx = np.flatnonzero(out & (frac > 0))
    out[idx[~_bernoulli_exp_unit(src, frac[idx], den)]] = False
    return out


def privtree_decision(src: NoiseSource, x: np.ndarray, lam: int) -> np.ndarray:
    """Exact ``P[Lap(lam) > x]`` events, ``x`` and ``lam`` on one integer grid (``x = theta - b``
    scaled by ``2^k``, ``lam`` likewise): ``H and E`` if ``x >= 0`` else ``not (H and E)`` with
    ``E ~ Bernoulli(exp(-|x|/lam))``, ``H`` a fair bit."""
    x = np.asarray(x, dtype=np.int64).reshape(-1)
    he = bernoulli_exp(src, np.abs(x), int(lam)) & src.fair_bits(x.size)
    return np.where(x >= 0, he, ~he)


__all__ = [
    "GRID_BITS",
    "NEIGHBOURS",
    "NOISE_KINDS",
    "Neighbours",
    "NoiseKind",
    "NoiseSource",
    "add_discrete_laplace",
    "add_noise",
    "as_source",
    "bernoulli_exp",
    "check_epsilon",
    "check_fraction",
    "check_neighbours",
    "check_noise",
    "discrete_laplace",
    "exact_scale",
    "geometric",
    "grid_ceil",
    "histogram_sensitivity",
    "laplace",
    "laplace_scale",
    "make_rng",
    "noise_params",
    "noise_source",
    "privtree_decision",
    "sample_noise",
]
