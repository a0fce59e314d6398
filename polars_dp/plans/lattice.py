"""Privelet's exact lattice decided from the declared domain: its path, its width and its largest draw.

The lattice pipeline (:mod:`polars_dp.mechanisms.wavelet_lattice`) adds ``DLap(D lambda')`` to
every integer numerator ``D u`` (``D = prod 2 (f - 1)`` over nominal axes).  Everything it
decides before the data lives here, so that a plan refuses before any data is read or any
budget is charged: whether the numerators may leave int64 (:func:`needs_wide`), whether the
float64 recovery of a wide lattice is still exact (:func:`check_wide`), and the largest
factor ``D`` a draw is scaled by (:func:`max_lattice_factor`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from polars_dp.domains.attributes import Attribute, Nominal
from polars_dp.errors import ParameterError
from polars_dp.kernels.wavelet_exact import float_error_steps, float_magnitude_factor, nominal_denominators

#: The exact path's public bound on the total count ``T`` (rows, or the sum of ``count_column``):
#: the float64 frequency matrix holds exact integers only up to ``2^53``.
MAX_TOTAL = 1 << 53

#: Below this bound on ``|D u|`` the numerators are exact in int64 with room for noise below it.
NARROW_LIMIT = 1 << 62


def lattice_bound(attributes: Sequence[Attribute], transformed: Sequence[bool]) -> int:
    """``L`` with ``|D u| <= L x total`` for every coefficient (public).

    Along a nominal axis the numerator map has entries ``f - 1`` (cells under ``N``), ``-1``
    (the rest of the parent's cells), ``0`` or, for the root, ``1``; Haar entries are ``+-1``.
    The HN numerators are the tensor product, whose largest entry is the product of the axes'
    largest, so for non-negative cells ``|D u| <= prod max(f_max - 1, 1) x total``.  (Only the
    final value matters: the int64 steps before it are exact modulo ``2^64``.)"""
    return math.prod(max(int(a.hierarchy.fanouts.max()) - 1, 1)
                     for a, t in zip(attributes, transformed, strict=True) if t and isinstance(a, Nominal))


def needs_wide(attributes: Sequence[Attribute], transformed: Sequence[bool]) -> bool:
    """Whether ``|D u|`` may reach ``2^62`` for a total up to :data:`MAX_TOTAL` (public inputs only)."""
    return lattice_bound(attributes, transformed) * MAX_TOTAL >= NARROW_LIMIT


def check_wide(attributes: Sequence[Attribute], transformed: Sequence[bool]) -> None:
    """Refuse (from the public domain alone) a lattice whose float64 numerators could be off by
    ``2^61`` or more: the rounding of the float forward is at most ``gamma_M x K x MAX_TOTAL``
    with ``M`` the roundings per path and ``K`` the magnitude factor
    (:func:`~polars_dp.kernels.wavelet_exact.float_error_steps`,
    :func:`~polars_dp.kernels.wavelet_exact.float_magnitude_factor`), ``gamma_M < 1.01 M 2^-53``."""
    steps, factor = 0, 1
    for a, t in zip(attributes, transformed, strict=True):
        if t:
            steps += float_error_steps(a)
            factor *= float_magnitude_factor(a)
    if 2 * steps * factor >= 1 << 61:  # 1.01 M K 2^-53 x 2^53, with room for the noise's roundings
        raise ParameterError(
            f"the declared hierarchies make the exact lattice too wide (fanout product x leaves = "
            f"{steps * factor:.3g} >= 2^60); use fewer or smaller nominal axes, list some in "
            "untransformed=[...], or noise='float'"
        )


def max_lattice_factor(attributes: Sequence[Attribute], transformed: Sequence[bool]) -> int:
    """The largest ``D`` of the coefficient array: the product of every axis's largest
    denominator (1 on Haar and untransformed axes, so only the transformed nominal axes are
    read: their denominators are per hierarchy node, never per cell of an ordinal axis)."""
    return math.prod(int(nominal_denominators(a.hierarchy).max())
                     for a, t in zip(attributes, transformed, strict=True) if t and isinstance(a, Nominal))


__all__ = ["MAX_TOTAL", "NARROW_LIMIT", "check_wide", "lattice_bound", "max_lattice_factor", "needs_wide"]
