"""Privacy calibration: neighbour relations, epsilon checks and exact (rational) noise scales.

See :mod:`polars_dp.noise` for the neighbour relations and why scales are rounded up.
"""

from __future__ import annotations

import math
import numbers
from fractions import Fraction
from functools import lru_cache
from typing import Any, Literal, TypeAlias

import numpy as np

from polars_dp.errors import ParameterError

Neighbours: TypeAlias = Literal["replace", "add_remove"]
NEIGHBOURS: tuple[str, ...] = ("replace", "add_remove")
NoiseKind: TypeAlias = Literal["exact", "float"]
NOISE_KINDS: tuple[str, ...] = ("exact", "float")

#: Exact scales are multiples of ``2^-GRID_BITS`` (rounded up).
GRID_BITS = 20

# ============================================================================ parameters
def check_neighbours(neighbours: str) -> str:
    """Return ``neighbours`` if it names a supported relation, else raise ParameterError."""
    if neighbours not in NEIGHBOURS:
        raise ParameterError(
            f"neighbours={neighbours!r} is not a neighbour relation; use 'replace' "
            "(modify one row) or 'add_remove' (add or remove one row)"
        )
    return neighbours


def check_noise(noise: str) -> NoiseKind:
    """Return ``noise`` if it is ``"exact"`` or ``"float"``, else raise ParameterError."""
    if not isinstance(noise, str) or noise not in NOISE_KINDS:
        raise ParameterError(
            f"noise={noise!r} is not a noise kind; use 'exact' (integer-lattice noise from exact "
            "samplers, the default) or 'float' (numpy's floating-point Laplace, for experiments)"
        )
    return "exact" if noise == "exact" else "float"


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
    epsilon``.  A function of the two numbers' values alone (public inputs), remembered for the
    last :data:`SCALE_CACHE` pairs: equal numbers (``1``, ``1.0``, ``Fraction(1)``) are one
    entry, as they give one scale."""
    return _remembered(_exact_scale, sensitivity, epsilon)


#: Pairs ``(sensitivity, epsilon)`` whose exact scale :func:`exact_scale` keeps.
SCALE_CACHE = 1024


def _remembered(cached: Any, *args: object) -> Any:
    """``cached(*args)`` (an :func:`~functools.lru_cache` of public numbers), computed without
    the cache when a number's type is unhashable."""
    try:
        return cached(*args)
    except TypeError:
        return cached.__wrapped__(*args)


@lru_cache(maxsize=SCALE_CACHE)
def _exact_scale(sensitivity: int | Fraction, epsilon: float | Fraction) -> Fraction:
    eps = Fraction(epsilon)
    if eps <= 0:
        raise ParameterError(f"epsilon must be > 0, got {epsilon!r}")
    return grid_ceil(Fraction(sensitivity) / eps)


def laplace_scale(sensitivity: int | Fraction, epsilon: float | Fraction, noise: str) -> float | Fraction:
    """Scale of the counts' noise: an exact rational (``noise="exact"``) or ``Delta/epsilon``."""
    if check_noise(noise) == "exact":
        return exact_scale(sensitivity, epsilon)
    return float(sensitivity) / float(epsilon)



def noise_params(sensitivity: int | Fraction, scale: float | Fraction, noise: str,
                 prefix: str = "") -> dict[str, object]:
    """What a release records about one noise scale: for exact noise the rational scale and
    the epsilon actually spent, ``sensitivity / scale`` (a new dict each call, its entries
    remembered as :func:`exact_scale`'s are: public numbers only)."""
    if check_noise(noise) != "exact":
        return {}
    entries = _remembered(_exact_entries, sensitivity, scale)
    return {f"{prefix}noise_scale_exact": entries[0], f"{prefix}epsilon_effective": entries[1]}


@lru_cache(maxsize=SCALE_CACHE)
def _exact_entries(sensitivity: int | Fraction, scale: float | Fraction) -> tuple[str, float]:
    exact = Fraction(scale)
    return f"{exact.numerator}/{exact.denominator}", float(Fraction(sensitivity) / exact)



__all__ = ["GRID_BITS", "NEIGHBOURS", "NOISE_KINDS", "Neighbours", "NoiseKind", "check_epsilon",
           "check_fraction", "check_neighbours", "check_noise", "exact_scale", "grid_ceil",
           "histogram_sensitivity", "laplace_scale", "noise_params"]
