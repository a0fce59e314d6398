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
samplers below need about one word per draw.  The key is replaced in a child after ``fork``
(an :func:`os.register_at_fork` hook: a child never replays its parent's stream, whatever its
PID) and every 2^32 words.  Without ``cryptography`` the source
falls back to reading :func:`os.urandom` in bulk.  A ``seed`` gives a PCG64
stream instead: reproducible, for tests and experiments only (anyone who knows the seed
can subtract the noise), and every release made with one records ``seeded = true``.
A mechanism that draws in independent blocks (the exact wavelet pipeline, on every core) takes
one source per block from :meth:`NoiseSource.block_streams`: a freshly keyed ChaCha20 source
each, or with a seed PCG64 children of a 128-bit root drawn from the seeded stream
(``SeedSequence(root, spawn_key=(k,))``).
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
  The 64th bit is the sign.  A guide table (Chen and Asau 1974) indexed by the sign and the
  top bits of ``U`` (about ``2^8`` buckets per threshold, at most 16 bits; int16 entries, so
  that it stays in cache) answers most draws with one look-up; buckets that hold a threshold
  fall back to ``searchsorted``.  Scales above ``TABLE_CAP / 12`` (about 341) split the magnitude into a
  digit ``W = 1 + (|Y| - 1) mod c`` (or 0) and a geometric quotient ``Q`` (the base-c digits
  of a geometric are independent), ``c`` about ``sqrt(12 scale)``: one word's top 16 bits
  decide ``W``, the next bit is the sign, and the bits below, independent of the bucket that
  decided ``W``, decide ``Q``; two look-ups in signed tables give ``Y`` for all but about
  ``2 sqrt(12 scale) / 2^16`` of the draws, which finish exactly from the same word (fresh
  bits where it has none left).  This is the note's exact inversion taken to its
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
  ``1 - e^(x/lambda)/2``, the Laplace tail (Canonne, Kamath, Steinke 2020, Alg. 1 draws E).

Scales are rationals: :func:`exact_scale` rounds ``sensitivity / epsilon`` *up* to the grid
``2^-GRID_BITS`` (computed from the exact binary value of the float epsilon), so the
discrete Laplace mechanism with integer-valued queries of L1 sensitivity ``Delta`` is
``Delta / scale <= epsilon``-DP by the pmf ratio ``exp(|a - b| / scale)``.  Mechanisms record
``epsilon_effective = Delta / scale``.  Scales past ``MAX_COUNT_SCALE = 2^45`` (noise added
to float64 counts) or ``MAX_SCALE = 2^56`` (int64 draws) are refused with ParameterError, from
the public scale alone: beyond them a draw could leave the integers it is held in (probability
below ``2 e^-128`` at the limits).

Float noise (``noise="float"``)
-------------------------------
:func:`laplace` keeps numpy's floating-point Laplace (seeded: ``Generator.laplace`` on PCG64,
bit for bit the samples of earlier versions; unseeded: the same inverse-CDF formula on OS
random bits).  It is for experiments and comparisons; its releases record ``noise = float``.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from polars_dp.errors import ParameterError
from polars_dp.noise.calibration import (
    GRID_BITS,
    NEIGHBOURS,
    NOISE_KINDS,
    Neighbours,
    NoiseKind,
    check_epsilon,
    check_fraction,
    check_neighbours,
    check_noise,
    exact_scale,
    grid_ceil,
    histogram_sensitivity,
    laplace_scale,
    noise_params,
)
from polars_dp.noise.discrete import (
    MAX_COUNT_SCALE,
    MAX_SCALE,
    add_discrete_laplace,
    bernoulli_exp,
    check_scale,
    discrete_laplace,
    draw_discrete_laplace,
    geometric,
    inversion_table,  # noqa: F401  (the exact-pmf tests read the inversion tables)
    inversion_table_length,  # noqa: F401
    privtree_decision,
)
from polars_dp.noise.sources import NoiseSource, SeedLike, as_source, make_rng, noise_source


# ============================================================================ float Laplace
def laplace(rng: np.random.Generator | NoiseSource, scale: float | np.ndarray,
            size: int | tuple[int, ...] | None = None) -> np.ndarray:
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


def add_noise(values: np.ndarray, scale: float | Fraction, src: NoiseSource, noise: str) -> None:
    """``values += noise`` in place: exact discrete Laplace (``values`` hold integers) or float
    Laplace of ``scale``; one independent draw per entry."""
    if check_noise(noise) == "exact":
        add_discrete_laplace(values, Fraction(scale), src)
    else:
        values += laplace(src, float(scale), values.shape)


def sample_noise(src: NoiseSource, scale: float | Fraction, size: int | tuple[int, ...],
                 noise: str) -> np.ndarray:
    """Noise of ``scale`` for counts: exact discrete Laplace (int64; scale at most
    :data:`MAX_COUNT_SCALE`, as the counts it is added to are float64) or float Laplace.  The
    mechanisms' sampler: ``size`` may come from the data, so it never picks the kernels."""
    if check_noise(noise) == "exact":
        scale = Fraction(scale)
        check_scale(scale.numerator, scale.denominator, MAX_COUNT_SCALE)
        return draw_discrete_laplace(src, scale.numerator, scale.denominator, size)
    return laplace(src, float(scale), size)


__all__ = [
    "SeedLike",
    "GRID_BITS",
    "MAX_COUNT_SCALE",
    "MAX_SCALE",
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
    "check_scale",
    "check_fraction",
    "check_neighbours",
    "check_noise",
    "discrete_laplace",
    "draw_discrete_laplace",
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
