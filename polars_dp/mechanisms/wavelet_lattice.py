"""Privelet's exact noise: integer lattice coefficients plus discrete Laplace (Canonne, Kamath, Steinke 2020).

The privacy argument is in :mod:`polars_dp.mechanisms.wavelet` ("Exact noise"): every
coefficient's integer numerator ``D(c) u(c)`` (Haar: ``D = 1``; nominal: ``D = 2 (f - 1)``;
the factors multiply across axes) gets discrete Laplace noise of scale ``D(c) lambda'``, so the
release spends ``Delta rho / lambda' <= epsilon``.  Everything after the noisy numerators (the
inverse transform and the division by ``D``: exact integer steps, then floating point) is
post-processing of the noisy numerators alone.

Nothing reads the data to refuse or to choose a path.  The numerators are summed in int64,
exact modulo ``2^64``; :func:`needs_wide` decides from the declared hierarchies alone (the
public :func:`lattice_bound` times :data:`MAX_TOTAL`) whether they may leave int64, and then
the float64 numerators are computed too and every noisy numerator is recovered exactly from
both (:func:`lattice_perturb`).  So the output law is the same for every dataset whose total
is at most :data:`MAX_TOTAL` (``2^53``, where the float64 count matrix stops being exact).

The pipeline is :func:`polars_dp.kernels.lattice_blocks.hn_lattice_inverse`, block by block,
writing over the counts.  Every block draws from a stream of its own
(:meth:`~polars_dp.noise.NoiseSource.block_streams`, keyed by the block's first coefficient), so
the blocks' noise is independent, the blocks run on every core, and a seed reproduces a release
for a given block size whatever the threads.  Within a block the draws are taken value by value
of ``D`` (each value's coefficients in C order), into one buffer that is read row by row.  On
the narrow lattice with a Haar last axis (the usual case) the forward along that axis is never
computed: ``lattice_perturb(...).noise_first`` draws the block's ``Z``, forms ``N = P Y + P H^-1(Z)``
exactly (``Y`` the int64 numerators along the other axes;
:func:`~polars_dp.kernels.wavelet_exact.haar_inverse_scaled`) and rounds ``N / P`` once
(:func:`~polars_dp.kernels.wavelet_exact.scaled_to_float`); then the division by the other
axes' ``D`` and their float inverse follow.  Otherwise: exact int64 forward, noise, ``X / D``
and the float64 inverse; on the wide lattice with a Haar last axis the division is done inside
that axis's inverse (``perturb.undivided``; bit for bit ``X / D`` then the inverse).
"""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Callable, Sequence
from fractions import Fraction

import numpy as np

from polars_dp.compiled import in_background
from polars_dp.counting.scatter import add_counts
from polars_dp.domains.attributes import Attribute, Nominal, Ordinal
from polars_dp.domains.hierarchy import Hierarchy
from polars_dp.kernels import compiled, lattice_blocks, parallel, scratch
from polars_dp.kernels.wavelet_exact import (
    SCALED_LIMIT,
    haar_inverse_scaled,
    hn_denominators,
    scaled_to_float,
)
from polars_dp.kernels.wavelets import coefficient_count, haar_padded_length
from polars_dp.noise import NoiseSource, discrete_laplace
from polars_dp.noise.discrete import warm_up_lookups
from polars_dp.plans.lattice import MAX_TOTAL, check_wide, lattice_bound, needs_wide

#: Cells per block of the exact pipeline (and of the in-place conversion to int64).
SLAB_CELLS = 1 << 21


def lattice_factors(attributes: Sequence[Attribute], transformed: Sequence[bool]) -> list[int]:
    """Every distinct ``D = prod_axes d`` of the coefficient array (a few values)."""
    per_axis = [sorted({int(v) for v in np.unique(d)}) for d in hn_denominators(attributes, transformed)]
    return sorted({int(np.prod(combo, dtype=np.int64)) for combo in itertools.product(*per_axis)})


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


_TWO64 = 2.0 ** 64
_BIG = 1 << 62


def _recover(residues: np.ndarray, approx: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``float(X)`` of integers ``X`` given ``X mod 2^64`` (int64 ``residues``) and a float64
    ``approx`` with ``|approx - X| < 2^62``: ``X = r + 2^64 k``, ``k = round((approx - r) / 2^64)``.
    Written as ``float(r) + 2^64 k`` (``float(r)`` itself, correctly rounded, when ``k = 0``), a
    function of ``X`` alone.  ``out`` may alias ``approx``."""
    r = residues.astype(np.float64)
    np.subtract(approx, r, out=out)
    out *= 1.0 / _TWO64
    np.rint(out, out=out)
    out *= _TWO64
    out += r
    return out


def _draws_by_value(own: NoiseSource, shape: tuple[int, ...], denominators: np.ndarray, scale: Fraction,
                    factors: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """``DLap(D lambda')`` for every coefficient of a block (``shape``, ``D`` broadcast from
    ``denominators``), drawn from ``own`` value by value of ``D`` (in the order of
    ``factors``), each value's coefficients in C order, into one buffer.

    Returns ``(drawn, which)``: ``drawn`` int64 rows along the block's last axis (rows of one
    coefficient when ``D`` varies along it), and row ``k`` of the block is ``drawn[which[k]]``.
    Which rows take which draws is a function of ``shape`` and ``denominators`` alone."""
    run, row_den = _rows_of_equal_denominator(shape, denominators)
    width = min(run, shape[-1]) if shape else 1  # run: a multiple of the last axis, or 1
    row_den = np.repeat(row_den, run // width)
    drawn = scratch.empty((row_den.size, width), np.int64)
    which = np.empty(row_den.size, dtype=np.int64)
    used = 0
    for value in factors:
        rows = np.flatnonzero(row_den == value)
        if rows.size:
            t, s = value * scale.numerator, scale.denominator
            discrete_laplace(own, t, s, rows.size * width, out=drawn[used:used + rows.size])
            which[rows] = np.arange(used, used + rows.size)
            used += rows.size
    return drawn, which


def lattice_perturb(scale: Fraction, src: NoiseSource, factors: Sequence[int]
                    ) -> Callable[..., np.ndarray]:
    """``perturb`` for :func:`~polars_dp.kernels.lattice_blocks.hn_lattice_inverse`: the integer
    numerators ``D u`` of a block get ``DLap(D lambda')`` each, then ``X / D`` with
    ``X = D u + Z`` the exact noisy numerator.

    ``X`` is summed in int64, exact modulo ``2^64``.  When it may lie outside int64 it is
    recovered from a float64 approximation within ``2^62`` (:func:`_recover`): on the wide path
    (``approx``, the float numerators, given) always; on the narrow path (``|D u| < 2^62``)
    only when a draw reaches ``2^62`` (a property of the noise, not of the data), from the
    exact partial sums.  Either way the value divided by ``D`` is ``float(X)`` when
    ``|X| < 2^63``, and a fixed function of ``X`` beyond: post-processing of ``X`` alone.

    The block that starts at flat coefficient ``start`` draws from a stream of its own,
    ``src.block_streams()(start)`` (independent across blocks), value by value of ``D``, each
    value's coefficients in C order.  So a block's noise depends on its start alone, and the
    pipeline may run blocks in any order or at once (the attribute ``by_block``).  The
    numerators (a fresh int64 array) are overwritten; the result is a float64 view of them.
    """
    streams = src.block_streams()

    def draw_rows(shape: tuple[int, ...], denominators: np.ndarray, start: int
                  ) -> tuple[np.ndarray, np.ndarray]:
        """The draws ``Z`` of the block at ``start`` (:func:`_draws_by_value`)."""
        return _draws_by_value(streams(start), shape, denominators, scale, factors)

    def draw(shape: tuple[int, ...], denominators: np.ndarray, start: int) -> np.ndarray:
        """``Z`` of the block at ``start`` (int64, ``shape``), its rows put in place."""
        drawn, which = draw_rows(shape, denominators, start)
        if np.array_equal(which, np.arange(which.size)):  # public: the denominators' layout
            return drawn.reshape(shape)
        z = scratch.empty(shape, np.int64)
        np.take(drawn, which, axis=0, out=z.reshape(drawn.shape))
        return z

    def noisy(numerators: np.ndarray, denominators: np.ndarray, start: int, approx: np.ndarray | None
              ) -> tuple[np.ndarray, np.ndarray]:
        """``(X mod 2^64 as int64, X)``: ``X`` is that int64 array itself (exact) unless a value
        needed recovering, then float64 ``float(X)`` (:func:`_recover`)."""
        noisy = np.ascontiguousarray(numerators, dtype=np.int64)
        if noisy is numerators and not noisy.flags.writeable:
            noisy = noisy.copy()
        z = draw(noisy.shape, denominators, start)
        near = None if approx is None else np.ascontiguousarray(approx, dtype=np.float64)
        if near is None and z.size and (int(z.max()) >= _BIG or int(z.min()) <= -_BIG):
            near = noisy.astype(np.float64)  # exact sums: within 2^10 of X
        noisy += z  # modulo 2^64
        if near is None:
            return noisy, noisy
        near += z
        return noisy, _recover(noisy, near, near)

    def perturb(numerators: np.ndarray, denominators: np.ndarray, start: int,
                approx: np.ndarray | None = None) -> np.ndarray:
        ints, x = noisy(numerators, denominators, start, approx)
        out = ints.view(np.float64)
        np.divide(x, np.broadcast_to(denominators, x.shape), out=out)  # post-processing
        return out

    def undivided(numerators: np.ndarray, denominators: np.ndarray, start: int,
                  approx: np.ndarray | None = None) -> np.ndarray:
        """``X`` itself (int64, or float64 ``float(X)`` after a recovery): ``perturb`` without
        the division, which the pipeline folds into the first Haar inverse."""
        return noisy(numerators, denominators, start, approx)[1]

    def noise_first(partial: np.ndarray, denominators: np.ndarray, start: int, m: int) -> np.ndarray:
        """The block's coefficients inverted along its last (Haar, ``m`` cells, ``P``
        coefficients) axis, from ``partial``, the integer numerators ``Y`` along every other
        transformed axis (cells along the last).

        ``X = D u + Z`` with ``Z`` drawn exactly as :func:`perturb` draws it (the same draws,
        the same order), and ``P H^-1(X)`` along the last axis is ``N = P Y + W``,
        ``W = P H^-1(Z)``: an exact linear function of ``X``.  The result ``g(N) / D``
        (:func:`scaled_to_float`, then the division by the other axes' ``D``) is
        post-processing of ``X`` alone.  The Haar forward of the counts is never computed,
        and each row's ``W`` is formed and used while it is in cache
        (:func:`~polars_dp.kernels.compiled.noise_first_rows`, or the numpy kernels).
        ``|Y| < 2^62`` on the narrow lattice; ``W`` leaves int64 only when the noise is that
        large (:func:`haar_inverse_scaled` then works in Python ints: the same values).
        """
        p = haar_padded_length(m)
        rows = int(np.prod(partial.shape[:-1], dtype=np.int64))
        out = scratch.empty(partial.shape)
        y = np.ascontiguousarray(partial, dtype=np.int64).reshape(rows, m)
        den = np.ascontiguousarray(np.broadcast_to(np.asarray(denominators, dtype=np.float64),
                                                   partial.shape[:-1] + (1,))).reshape(rows)
        drawn, which = draw_rows(partial.shape[:-1] + (p,), denominators, start)
        flat = out.reshape(rows, m)
        if compiled.noise_first_rows(drawn, which, y, den, flat, SCALED_LIMIT):
            return out  # the same bits as below, in one pass per row
        scaled_to_float(y, haar_inverse_scaled(drawn[which], m), p, flat)
        if np.any(den != 1):  # public: the declared hierarchies
            np.divide(flat, den[:, None], out=flat)
        return out

    perturb.undivided = undivided  # type: ignore[attr-defined]  # read by hn_lattice_inverse
    perturb.by_block = True  # type: ignore[attr-defined]  # read by hn_lattice_inverse
    perturb.noise_first = noise_first  # type: ignore[attr-defined]  # read by hn_lattice_inverse
    return perturb


def add_wavelet_noise_exact(counts: np.ndarray, attributes: Sequence[Attribute], transformed: Sequence[bool],
                            scale: Fraction, src: NoiseSource,
                            advance: Callable[[int], None] | None = None) -> np.ndarray:
    """``inverse_HN(X / D)`` written over ``counts``, ``X = D u + Z``, ``Z ~ DLap(D lambda')`` per
    coefficient; returns the release (float64, the memory of ``counts``).

    ``counts`` (int64, or float64 holding integers that are converted to int64 in place block by
    block; total at most :data:`MAX_TOTAL`) is consumed.  Nothing here reads the data to
    choose a path or to refuse: the int64 numerators are exact modulo ``2^64``; when the public
    :func:`lattice_bound` allows ``|D u| >= 2^62`` (:func:`needs_wide`) the float64 numerators are
    computed too and every ``X`` is recovered exactly from both (:func:`lattice_perturb`); a
    lattice so wide that the float numerators could be off by ``2^61`` is refused from the
    declared hierarchies alone (:func:`check_wide`).
    """
    scale = Fraction(scale)
    wide = needs_wide(attributes, transformed)
    if wide:
        check_wide(attributes, transformed)
    if counts.dtype == np.int64:
        ints = np.ascontiguousarray(counts)
    else:
        floats = np.ascontiguousarray(counts, dtype=np.float64)
        ints = floats.view(np.int64)
        flat_f, flat_i = floats.reshape(-1), ints.reshape(-1)

        def to_int(a: int) -> None:
            flat_i[a:a + SLAB_CELLS] = flat_f[a:a + SLAB_CELLS]  # exact: integers below 2^53

        parallel.each(to_int, range(0, flat_f.size, SLAB_CELLS), parallel.thread_count())
    release = ints.view(np.float64)
    perturb = lattice_perturb(scale, src, lattice_factors(attributes, transformed))
    lattice_blocks.hn_lattice_inverse(ints, attributes, transformed, perturb, out=release,
                                      slab_cells=SLAB_CELLS, advance=advance, approximate=wide)
    return release


def warm_up() -> None:
    """Load the exact pipeline's compiled kernels (numba's import and its disk cache, about a
    second in a fresh process) by calling them on tiny arrays of zeros, with the argument types
    of a release: the count scatter, both sampler look-ups (on fixed words: nothing is drawn),
    the nominal and outer Haar kernels (the blocked pipeline with no noise), the noise-first
    rows.  Public constants only; nothing of it reaches a release."""
    if not compiled.enabled():
        return
    for dtype in (np.int64, np.float64):
        add_counts(np.empty(4, dtype=dtype), np.zeros(1, dtype=np.int64), zero=True)
    warm_up_lookups()
    rows = np.zeros((2, 4), dtype=np.int64)
    compiled.noise_first_rows(rows, np.zeros(2, dtype=np.int64), rows[:, :3].copy(), np.ones(2),
                              np.empty((2, 3)), SCALED_LIMIT)
    tree = Hierarchy.from_dict({"g0": ["a", "b"], "g1": ["c", "d", "e"]})
    attrs: list[Attribute] = [Ordinal("w0", 0, 4), Nominal("w1", tree), Ordinal("w2", 0, 200)]
    inner = math.prod(coefficient_count(a) for a in attrs[1:])
    counts = np.zeros(tuple(a.n_cells for a in attrs), dtype=np.int64)
    lattice_blocks.hn_lattice_inverse(counts, attrs, [True] * 3, lambda num, den, start: num / den,
                                      slab_cells=inner, threads=1)


def warm_up_in_background() -> threading.Thread | None:
    """:func:`warm_up` in a daemon thread, started before the counts; join it before the
    transform (:func:`polars_dp.compiled.in_background`: None when the compiled kernels are
    off or not wanted here; a failure in it is dropped)."""
    return in_background(warm_up)


__all__ = ["MAX_TOTAL", "add_wavelet_noise_exact", "check_wide", "lattice_bound", "lattice_factors",
           "lattice_perturb", "needs_wide", "warm_up", "warm_up_in_background"]
