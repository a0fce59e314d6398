"""Privelet's exact noise: integer lattice coefficients plus discrete Laplace (Canonne, Kamath, Steinke 2020).

The privacy argument is in :mod:`polars_dp.mechanisms.privelet` ("Exact noise"): every
coefficient's integer numerator ``D(c) u(c)`` (Haar: ``D = 1``; nominal: ``D = 2 (f - 1)``;
the factors multiply across axes) gets discrete Laplace noise of scale ``D(c) lambda'``, so the
release spends ``Delta rho / lambda' <= epsilon``.  Everything after the noisy numerators (the
division by ``D`` and the inverse transform) is post-processing in floating point of the noisy
coefficients alone.

The pipeline is :func:`polars_dp.kernels.wavelet_blocks.hn_lattice_inverse`: exact int64
forward transform, noise, float64 inverse, block by block in the C order of the coefficient
array, writing over the counts (peak memory about 1.4x the count array on top of it).  Within a
block the draws are taken value by value of ``D`` (each value's coefficients in C order), so a
seed reproduces a release for a given block size.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from fractions import Fraction

import numpy as np

from polars_dp.domains.attributes import Attribute, Nominal
from polars_dp.errors import ParameterError
from polars_dp.kernels import wavelet_blocks
from polars_dp.kernels.wavelet_exact import hn_denominators
from polars_dp.noise import NoiseSource, discrete_laplace

#: Cells per block of the exact pipeline (and of the in-place conversion to int64).
SLAB_CELLS = 1 << 21


def _lattice_bound(attributes: Sequence[Attribute], transformed: Sequence[bool]) -> int:
    """``max |D u| / total``: the nominal lattice multiplies leaf sums by at most ``2 f_max``."""
    bound = 1
    for a, t in zip(attributes, transformed, strict=True):
        if t and isinstance(a, Nominal):
            bound *= 2 * int(a.hierarchy.fanouts.max())
    return bound


def lattice_factors(attributes: Sequence[Attribute], transformed: Sequence[bool]) -> list[int]:
    """Every distinct ``D = prod_axes d`` of the coefficient array (a few values)."""
    per_axis = [sorted({int(v) for v in np.unique(d)}) for d in hn_denominators(attributes, transformed)]
    return sorted({int(np.prod(combo, dtype=np.int64)) for combo in itertools.product(*per_axis)})


#: Up to this many runs of equal ``D`` per block are noised slice by slice (else by row index).
MAX_RUNS = 256


def _rows_of_equal_denominator(shape: tuple[int, ...], denominators: np.ndarray) -> tuple[int, np.ndarray]:
    """``(R, D per row)``: the block viewed as rows of ``R`` cells along which ``D`` is constant
    (the trailing axes where ``denominators`` has length 1)."""
    den = np.asarray(denominators)
    den = den.reshape((1,) * (len(shape) - den.ndim) + den.shape)
    k = len(shape)
    while k > 0 and den.shape[k - 1] == 1:
        k -= 1
    run = int(np.prod(shape[k:], dtype=np.int64))
    rows = np.broadcast_to(den[(...,) + (0,) * (len(shape) - k)], shape[:k]).reshape(-1)
    return run, rows


def lattice_perturb(scale: Fraction, src: NoiseSource, factors: Sequence[int]
                    ) -> Callable[[np.ndarray, np.ndarray, int], np.ndarray]:
    """``perturb`` for :func:`~polars_dp.kernels.wavelet_blocks.hn_lattice_inverse`: the integer
    numerators ``D u`` of a block get ``DLap(D lambda')`` each, then ``(D u + Z) / D``.

    The draws are taken value by value of ``D``, each value's coefficients in C order.  The
    numerators (a fresh int64 array) are overwritten; the result is a float64 view of them.
    """

    def perturb(numerators: np.ndarray, denominators: np.ndarray, start: int) -> np.ndarray:
        noisy = np.ascontiguousarray(numerators, dtype=np.int64)
        if noisy is numerators and not noisy.flags.writeable:
            noisy = noisy.copy()
        run, row_den = _rows_of_equal_denominator(noisy.shape, denominators)
        rows = noisy.reshape(-1, run)
        cut = np.flatnonzero(np.diff(row_den)) + 1  # runs of rows with one D
        bounds = np.r_[0, cut, row_den.size]
        for value in factors:
            if not np.any(row_den == value):
                continue
            t, s = value * scale.numerator, scale.denominator
            if bounds.size - 1 <= MAX_RUNS:
                a_b = [(a, b) for a, b in itertools.pairwise(bounds.tolist()) if row_den[a] == value]
                z = discrete_laplace(src, t, s, sum(b - a for a, b in a_b) * run)
                used = 0
                for a, b in a_b:
                    n = (b - a) * run
                    rows[a:b] += z[used:used + n].reshape(b - a, run)
                    used += n
            else:
                which = np.flatnonzero(row_den == value)
                rows[which] += discrete_laplace(src, t, s, (which.size, run))
        out = noisy.view(np.float64)
        np.divide(noisy, np.broadcast_to(denominators, noisy.shape), out=out)  # post-processing
        return out

    return perturb


def add_wavelet_noise_exact(counts: np.ndarray, attributes: Sequence[Attribute], transformed: Sequence[bool],
                            scale: Fraction, src: NoiseSource,
                            advance: Callable[[int], None] | None = None) -> None:
    """``counts <- inverse_HN((D u + Z) / D)`` in place, ``Z ~ DLap(D lambda')`` per coefficient.

    ``counts`` (float64 holding integers) is converted to int64 in place, block by block, and
    overwritten by the release.  Refused (ParameterError) when ``total x lattice factor`` reaches
    2^52, where the integer numerators would no longer be exact.
    """
    scale = Fraction(scale)
    total = float(counts.sum())  # counts are >= 0
    if total * _lattice_bound(attributes, transformed) >= 2.0**52:
        raise ParameterError("the counts are too large for exact lattice noise (total x lattice factor "
                             ">= 2^52); use noise='float'")
    counts = np.ascontiguousarray(counts)
    ints = counts.view(np.int64)
    flat_f, flat_i = counts.reshape(-1), ints.reshape(-1)
    for a in range(0, flat_f.size, SLAB_CELLS):
        flat_i[a:a + SLAB_CELLS] = flat_f[a:a + SLAB_CELLS]  # exact: integers below 2^53
    perturb = lattice_perturb(scale, src, lattice_factors(attributes, transformed))
    wavelet_blocks.hn_lattice_inverse(ints, attributes, transformed, perturb, out=counts,
                                      slab_cells=SLAB_CELLS, advance=advance)


__all__ = ["add_wavelet_noise_exact", "lattice_factors", "lattice_perturb"]
