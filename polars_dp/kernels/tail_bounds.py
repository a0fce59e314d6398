"""Tail bounds for a weighted sum of independent (discrete) Laplace variables.

The noise of a range count of a grid release is ``X = sum_c b_c Z_c`` over the noisy
coefficients ``c``, independent and symmetric, ``Z_c ~ DLap(s_c)`` on the integers
(``P(k) ∝ exp(-|k| / s_c)``, exact noise) or ``Lap(s_c)`` (float noise).  Write
``beta_c = |b_c| s_c`` (the coefficient's Laplace magnitude in the answer).  This module
returns a half-width ``a`` with ``P(|X| > a) <= alpha``.

Proof
-----
1. *A discrete Laplace is dominated by the continuous one in its moment generating function.*
   With ``q = exp(-c)``, ``c = 1/s`` and ``t = x c``, ``|x| < 1``:
   ``E exp(t Z) = (1-q)^2 / ((1-q e^t)(1-q e^-t))`` and ``1 / (1 - s^2 t^2)`` is the continuous
   one.  Both denominators expand to ``e^-c (2 cosh c - 2 cosh xc)`` and
   ``(1-q)^2 = e^-c 2 (cosh c - 1)``, so the claim is ``cosh(xc) - 1 <= x^2 (cosh c - 1)``:
   true term by term, ``x^{2k} <= x^2`` in ``sum_k (xc)^{2k} / (2k)!``.  Hence
   ``log E exp(t b_c Z_c) <= phi(t^2 beta_c^2)`` with ``phi(y) = -log(1 - y)``, for
   ``|t| < 1 / beta_c`` (equality for continuous noise).
2. *Chernoff.*  For ``0 < t < 1 / M``, ``M = max_c beta_c``, independence gives
   ``P(X > a) <= exp(-t a + Psi(t))`` with ``Psi(t) = sum_c phi(t^2 beta_c^2)``, and by symmetry
   ``P(|X| > a) <= 2 exp(-t a + Psi(t))``.  Setting the right side to ``alpha``:
   ``a(t) = (Psi(t) + log(2/alpha)) / t`` is a valid half-width for *every* such ``t``; this
   module evaluates ``a(t)`` on a grid of ``t`` and keeps the smallest (any grid is valid;
   a finer one is only tighter).
3. *Many terms.*  ``phi`` is convex with ``phi(0) = 0``, so on ``[0, y_max]``
   ``phi(y) <= y phi(y_max) / y_max``; with ``y_max = t^2 M^2`` this gives
   ``Psi(t) <= k phi(t^2 M^2)``, ``k = V / M^2``, ``V = sum_c beta_c^2``.  It needs only ``V`` (the
   variance factors) and ``M`` (a product of per-axis maxima), and is used when the terms are
   too many to list; it is exact for equal weights (Basic).
4. *One term exactly, the others by their MGF.*  Let ``Y = b Z`` be one term with ``beta = M``
   and ``W`` the others.  For every real ``x``, ``P(Y > x) <= C exp(-x / M)`` with ``C = 1/2``
   (continuous: ``1 - y/2 <= 1/(2y)`` for ``y = e^{x/M} < 1``) or ``C = 1/(1 + q)`` (integers,
   ``q = e^{-1/s}``: ``P(Z >= k) = q^k / (1+q)`` for ``k >= 1`` and, for ``x < 0``,
   ``q r (1 - r) <= 1 - r`` with ``r = q^k``); ``C <= 1 / (1 + e^{-1/lambda'})`` whatever the
   lattice factor, since ``s >= lambda'``.  As ``min(1, y) <= y^theta`` for ``theta`` in
   ``(0, 1]``, conditioning on ``W`` gives ``P(Y + W > a) <= C^theta e^{-theta a / M}
   E e^{theta W / M}`` and, by step 1, ``log E e^{theta W/M} <= Psi_rest(theta) =
   sum_{c != max} phi(theta^2 beta_c^2 / M^2)``.  Hence, two-sided,
   ``a(theta) = M (log C + (log(2/alpha) + Psi_rest(theta)) / theta)`` is valid for every
   ``theta``; it improves on step 2 for every ``t = theta / M`` (the largest term contributes
   ``theta log C < 0`` instead of ``phi(theta^2) > 0``), and is what this module minimises, over
   a grid of ``theta``.  With many terms ``Psi_rest`` is bounded by the chord of step 3 through
   the second largest ``beta``: ``Psi_rest(theta) <= (V/M^2 - 1) phi(theta^2 r^2) / r^2``,
   ``r = beta_2 / M``.
5. *A single term* has the exact law: ``P(|b Z| > a) = exp(-a/(|b| s))`` (continuous) or, on the
   integers, ``P(|Z| > k) = 2 q^{k+1} / (1 + q)``: the smallest such ``k`` times ``|b|``.
6. *Chebyshev.*  ``Var X <= 2 V`` (``Var Lap(s) = 2 s^2``; ``Var DLap(s) = 2 q / (1 - q)^2 =
   1 / (2 sinh^2(1 / 2s)) <= 2 s^2``), so ``P(|X| > a) <= 2 V / a^2`` and ``a = sqrt(2 V /
   alpha)`` is valid whatever the terms.  Steps 2-3 need a bound ``M`` on the largest magnitude
   and give about ``M log(2/alpha)`` however small ``V`` is; where only ``M >= max beta`` is
   known (spatial leaves: every weight at most 1), a box covering a sliver of one leaf has
   ``V`` far below ``M^2``, and this is the tighter one.  :func:`chernoff_half_width` keeps the
   smaller of the two (each is valid, so the smaller is).

Written once
------------
The bound is a function of an ops namespace (:mod:`polars_dp.domains.expressions`):
:func:`laplace_sum_half_width` (steps 2-5) and :func:`chernoff_half_width` (steps 1-3).  Numpy
evaluates it for the Python answers; the DuckDB macros are the same function rendered as SQL
(per-query term lists as DuckDB lists, the grid of ``theta`` and the listed terms as lambdas),
so Python and SQL agree to rounding (``phi(y) = -log(1 - y)`` in both, ``inf`` at ``y = 1``).
Every step is an upper bound for every ``theta`` of the public grid, so the half-width stays
valid whatever the grid; the grid and the choice between listed terms and the chord
(:func:`lists_terms`, from the public number of terms per axis) are those of the numpy code
before it was written over ops, so the intervals are as tight as before.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from polars_dp.domains.expressions import NUMPY, Ops

#: Grid of ``theta = t M`` in ``(0, 1)`` (logistic spacing; ``1`` is added).
_U_GRID = 1.0 / (1.0 + np.exp(-np.linspace(-14.0, 12.0, 105)))


def _phi_of(ops: Ops, y: Any) -> Any:
    """``phi(y) = -log(1 - y)`` for ``0 <= y <= 1`` (``inf`` at 1), written with ops."""
    return ops.where(y < 1.0, 0.0 - ops.ln(ops.where(y < 1.0, 1.0 - y, 1.0)), ops.inf)


def single_term_width(ops: Ops, scale: float, alpha: Any, noise: str) -> Any:
    """Step 5 for a unit weight: the exact ``(1 - alpha)`` half-width of ``Z ~ Lap(scale)``
    (``scale log(1/alpha)``) or ``DLap(scale)``: the smallest integer ``k >= 0`` with
    ``P(|Z| > k) = 2 q^{k+1} / (1 + q) <= alpha``, ``q = e^{-1/scale}``.  ``k`` is the ceiling
    of ``log(alpha (1+q)/2) / log q`` less one, then checked against the condition once in each
    direction (the float error of the ceiling is far below one step)."""
    if noise != "exact":
        return scale * ops.ln(1.0 / alpha)
    q = math.exp(-1.0 / scale)
    if q <= 0.0:
        return 0.0 * alpha
    k = ops.greatest(ops.ceil(ops.ln(alpha * ((1.0 + q) / 2.0)) / math.log(q)) - 1.0, 0.0)
    k = ops.where(2.0 * ops.power(q, k + 1.0) / (1.0 + q) > alpha, k + 1.0, k)
    return ops.where((k > 0.0) & (2.0 * ops.power(q, k) / (1.0 + q) <= alpha), k - 1.0, k)


def single_term_accuracy(weight: np.ndarray, scale: float, alpha: float, noise: str) -> np.ndarray:
    """Exact ``(1 - alpha)`` half-width of ``weight * Z``, ``Z ~ Lap(scale)`` or ``DLap(scale)``
    (:func:`single_term_width` on numpy)."""
    width = single_term_width(NUMPY, scale, np.float64(alpha), noise)
    return np.asarray(weight, dtype=np.float64) * float(width)


class AxisWeights(NamedTuple):
    """The weights of one axis's terms, each carried by one coefficient (weights ``>= 0``), as
    :func:`laplace_sum_half_width` reads them: per query the largest (``top``), the second largest
    counting repeats (``second``), the sum of squares (``squares``) and, where the product set of
    terms is listed, the list itself (``terms``; ``None`` otherwise).  A transformed axis states
    them without its list where it can (a Haar axis from its scalar terms, its variance factor the
    sum of squares; a nominal one from its label's row)."""

    top: Any
    second: Any
    squares: Any
    terms: Any = None

    @classmethod
    def of(cls, ops: Ops, weights: Any) -> AxisWeights:
        """From a list of weights per query (``ops`` list functions)."""
        w = ops.let(weights)
        top = ops.let(ops.lmax(w))
        return cls(top, ops.lsecond(w, top), ops.ldot(w, w), w)


def laplace_sum_half_width(ops: Ops, axes: Sequence[tuple[Any, Any]], scale: float, alpha: Any,
                           noise: str, listed: bool) -> Any:
    """The half-width of :func:`laplace_sum_accuracy` written once over an ops namespace
    (:mod:`polars_dp.domains.expressions`): :data:`~polars_dp.domains.expressions.NUMPY`
    evaluates it (the Python answers), ``SQL`` renders it for the DuckDB macros with list
    functions only, so both compute the same doubles step by step.

    ``axes``: per axis of one query (numpy: of a batch) either ``(weights, None)``, a list of
    weights each carried by one coefficient (a transformed axis; numpy: ``(queries, terms)``) or
    its :class:`AxisWeights` (the list needed only where ``listed``), or ``(weight, cells)``,
    one weight carried by ``cells`` values (an axis the noise does not transform: weight 1 on
    each of its cells; numpy: ``(queries,)``).  ``listed``: whether the
    product set of terms is listed (step 4 with the terms; a public decision from the number of
    terms per axis), besides the chord bound through ``V``, ``M`` and the second largest
    magnitude (steps 3-4).  Step 5 where there is one term; 0 where there is none.

    Per axis only its largest weight, ``sum w^2`` and its second largest weight are needed
    (:class:`AxisWeights`: list functions, no per-term function, or stated by the axis without
    its list); the minimum over the public grid of ``theta``
    is found by :func:`~polars_dp.domains.expressions.grid_min` (``(log(2/alpha) + Psi(theta))
    / theta`` is quasi-convex in ``theta`` for a convex ``Psi`` with ``Psi(0) = 0``: its slope
    has the sign of ``theta Psi' - Psi - log(2/alpha)``, non-decreasing), the grid's minimum
    from 15 of its 106 points."""
    log_term = ops.let(ops.ln(2.0 / alpha))
    log_c = math.log(0.5 if noise != "exact" else 1.0 / (1.0 + math.exp(-1.0 / scale)))
    big_m: Any = float(scale)
    v: Any = float(scale) ** 2
    n_terms: Any = 1.0  # the number of terms with a non-zero weight, or 2 where at least 2
    second: Any = 0.0  # second largest beta / M over the product set (1 on ties)
    tops = []
    axes = [(AxisWeights.of(ops, w) if cells is None and not isinstance(w, AxisWeights) else w, cells)
            for w, cells in axes]
    for w, cells in axes:
        if cells is None:  # weights >= 0, one coefficient each
            top, below, squares = ops.let(w.top), ops.let(w.second), ops.let(w.squares)
            count = ops.where(top > 0.0, ops.where(below > 0.0, 2.0, 1.0), 0.0)
        else:  # one weight on `cells` values: ties unless one cell
            top, cells = ops.let(w), ops.let(cells)
            below = ops.where(cells > 1.0, top, 0.0)
            squares = cells * top * top
            count = ops.where(top > 0.0, cells, 0.0)
        tops.append(top)
        big_m = ops.let(big_m * top)
        v = ops.let(v * squares)
        n_terms = ops.let(n_terms * count)
        second = ops.let(ops.greatest(second, below / ops.where(top > 0.0, top, 1.0)))
    live = big_m > 0.0
    safe_m = ops.where(live, big_m, 1.0)
    rest_sq = ops.let(ops.greatest(v / (safe_m * safe_m) - 1.0, 0.0))
    r2 = ops.let(second * second)
    safe_r2 = ops.where(r2 > 0.0, r2, 1.0)

    def chord(theta: Any) -> Any:  # step 3: Psi_rest <= (k - 1) phi(theta^2 r2^2) / r2^2
        y = theta * theta * r2
        return ops.where(r2 > 0.0, ops.where(y < 1.0, rest_sq * _phi_of(ops, y) / safe_r2, ops.inf), 0.0)

    grid = np.r_[_U_GRID, 1.0]
    out = ops.let(big_m * (log_c + ops.grid_min(grid, lambda th: (log_term + chord(th)) / th)))
    if listed and any(cells is None for _, cells in axes):  # the listed terms (steps 1, 2, 4)
        # (with no listed axis every term has magnitude M: the chord is Psi_rest exactly)
        out = ops.least(out, _listed_width(ops, axes, tops, big_m, log_c, log_term, grid))
    single = live & (ops.abs(n_terms - 1.0) < 0.5)  # step 5: the exact law
    out = ops.where(single, big_m / scale * single_term_width(ops, scale, alpha, noise), out)
    return ops.where(live, out, 0.0)


def _listed_width(ops: Ops, axes: Sequence[tuple[Any, Any]], tops: Sequence[Any], big_m: Any,
                  log_c: float, log_term: Any, grid: np.ndarray) -> Any:
    """Step 4 over the listed product set of terms: each term's ``beta / M`` (``rel``, a list
    where an axis is listed, else one value per query) and how many coefficients carry it
    (``cells``: the product of the unlisted axes' cells, the same for every term), less the
    largest term (its first occurrence), taken exactly."""
    rel: Any = None
    is_list = False
    cells: Any = 1.0
    for (w, c), top in zip(axes, tops, strict=True):
        safe = ops.where(top > 0.0, top, 1.0)
        if c is None:
            wn = ops.lmap(lambda w_, safe=safe: w_ / ops.each(safe), w.terms)
            if rel is None:
                rel = ops.let(wn)
            elif is_list:
                rel = ops.let(ops.cross(rel, wn))
            else:
                rel = ops.let(ops.lmap(lambda y, x=rel: ops.each(x) * y, wn))
            is_list = True
        else:
            wn = w / safe
            cells = cells * c
            if rel is None:
                rel = ops.let(wn)
            elif is_list:
                rel = ops.let(ops.lmap(lambda x, y=wn: x * ops.each(y), rel))
            else:
                rel = ops.let(rel * wn)
    cells = ops.let(cells)
    if is_list:
        rest = ops.let(ops.minus_first(ops.lmap(lambda r: ops.each(cells), rel),
                                       ops.lmap(lambda r: r >= 1.0 - 1e-12, rel)))  # that term exactly

        def psi(theta: Any) -> Any:
            return ops.lsum(ops.lmap(lambda r, m_: ops.where(
                m_ > 0.0, m_ * _phi_of(ops, ops.least((ops.each(theta) * r) * (ops.each(theta) * r), 1.0)),
                0.0), rel, rest))
    else:
        rest = ops.let(cells - ops.where(rel >= 1.0 - 1e-12, 1.0, 0.0))

        def psi(theta: Any) -> Any:
            y = ops.least((theta * rel) * (theta * rel), 1.0)
            return ops.where(rest > 0.0, rest * _phi_of(ops, y), 0.0)

    return big_m * (log_c + ops.grid_min(grid, lambda th: (log_term + psi(th)) / th))


def laplace_sum_accuracy(axis_terms: Sequence[tuple[np.ndarray, np.ndarray]], scale: float, alpha: float,
                         noise: str = "exact", max_terms: int = 4096, chunk: int = 1 << 20) -> np.ndarray:
    """Half-width ``a`` per query with ``P(|noise| > a) <= alpha`` (see the module docstring):
    :func:`laplace_sum_half_width` on numpy, in chunks of queries.

    ``axis_terms``: per axis ``(weights, multiplicities)`` of shape ``(queries, T_axis)``
    (:func:`polars_dp.kernels.wavelet_variance.range_weights`: ``T_axis = 1``, one weight on
    ``multiplicities`` values, which may also be given as a number and a ``(queries,)`` array;
    ``T_axis > 1``, every multiplicity 1, or ``None``); the noise
    terms are their products over axes, each with Laplace magnitude ``scale * prod weights``.
    Terms are listed when ``prod T_axis <= max_terms`` (:func:`lists_terms`), else bounded
    through ``V``, ``M`` and the second largest magnitude (step 3).
    """
    axes: list[tuple[np.ndarray, np.ndarray | None]] = []
    for w, m in axis_terms:
        w = np.asarray(w, dtype=np.float64)
        if w.ndim == 2 and w.shape[1] > 1:
            if m is not None and not np.all(np.asarray(m) == 1):
                raise ValueError("each listed weight of an axis must be carried by one coefficient")
            axes.append((w, None))
        else:
            w, m = np.broadcast_arrays(w, np.asarray(1.0 if m is None else m, dtype=np.float64))
            axes.append((w[:, 0], m[:, 0]) if w.ndim == 2 else (w, m))
    q = axes[0][0].shape[0]
    widths = [1 if m is not None else w.shape[1] for w, m in axes]
    listed = lists_terms(widths, max_terms)
    step = max(1, chunk // (int(np.prod(widths)) if listed else sum(widths)))
    out = np.empty(q)
    with np.errstate(divide="ignore", invalid="ignore"):
        for i in range(0, q, step):
            sl = slice(i, i + step)
            out[sl] = laplace_sum_half_width(
                NUMPY, [(w[sl], None if m is None else m[sl]) for w, m in axes], scale, np.float64(alpha),
                noise, listed)
    return out


def lists_terms(widths: Sequence[int], max_terms: int = 4096) -> bool:
    """Whether the product set of terms (``prod widths``) is small enough to list."""
    return int(np.prod(widths)) <= max_terms


def chernoff_half_width(ops: Ops, variance_units: Any, bound: float, log_term: Any) -> Any:
    """Steps 1-3 written once over an ops namespace (:mod:`polars_dp.domains.expressions`):
    ``bound min_u (k phi(u^2) + log_term) / u`` over the public grid ``u`` of ``_U_GRID``,
    ``k = variance_units / bound^2``, ``log_term = log(2/alpha)``, or step 6's ``sqrt(2 V /
    alpha) = sqrt(variance_units exp(log_term))`` where that is smaller; 0 where ``k = 0``.

    ``phi(u^2)`` is a constant per grid point (computed here once), so the rule is plain
    arithmetic and a ``least`` over the grid: :data:`~polars_dp.domains.expressions.NUMPY`
    evaluates it on arrays (the Python answers), ``SQL`` renders it for the DuckDB macros (no
    function beyond ``least``), the same doubles step by step.  Every grid point gives a valid
    half-width (step 2), so the minimum over the grid is valid."""
    k = variance_units / (bound * bound)
    widths = [(k * float(-np.log1p(-(u * u))) + log_term) / float(u) for u in _U_GRID]
    chebyshev = ops.power(variance_units * ops.exp(log_term), 0.5)
    return ops.where(k > 0, ops.smallest(bound * ops.smallest(*widths), chebyshev), 0.0)


def chernoff_accuracy(variance_units: np.ndarray, bound: float, alpha: float) -> np.ndarray:
    """Half-width from steps 1-3 and 6 alone, given ``V`` (``variance_units``, the sum of squared
    Laplace magnitudes) and an upper bound ``bound`` on every term's magnitude: the smaller of
    ``a = bound min_u (k phi(u^2) + log(2/alpha)) / u``, ``k = V / bound^2`` (valid for any bound
    >= the largest magnitude; used where the largest is not computed, e.g. spatial leaves with
    weights <= 1) and ``sqrt(2 V / alpha)``: :func:`chernoff_half_width` on numpy."""
    v = np.asarray(variance_units, dtype=np.float64)
    return np.asarray(chernoff_half_width(NUMPY, v, bound, math.log(2.0 / alpha)), dtype=np.float64)


__all__ = ["AxisWeights", "chernoff_accuracy", "chernoff_half_width", "laplace_sum_half_width", "lists_terms",
           "single_term_width", "laplace_sum_accuracy", "single_term_accuracy"]
