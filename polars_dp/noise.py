"""Privacy parameters and the only source of randomness in polars-dp.

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

Randomness
----------
:func:`make_rng` is the only constructor of generators.  Without a seed it draws 128 bits
from the operating system's CSPRNG (:mod:`secrets`).  A ``seed`` makes a release
reproducible; it is meant for tests and experiments, **not for production**: anyone who
knows the seed can subtract the noise.

Laplace noise is drawn with numpy's floating-point sampler.  Floating-point Laplace
samples have known side channels (Mironov, CCS 2012); treat releases accordingly.
"""

from __future__ import annotations

import math
import secrets
from typing import Literal, TypeAlias

import numpy as np

from polars_dp.errors import ParameterError

Neighbours: TypeAlias = Literal["replace", "add_remove"]
NEIGHBOURS: tuple[str, ...] = ("replace", "add_remove")

SeedLike: TypeAlias = "int | np.random.SeedSequence | np.random.Generator | None"


def check_neighbours(neighbours: str) -> str:
    """Return ``neighbours`` if it names a supported relation, else raise ParameterError."""
    if neighbours not in NEIGHBOURS:
        raise ParameterError(
            f"neighbours={neighbours!r} is not a neighbour relation; use 'replace' "
            "(modify one row) or 'add_remove' (add or remove one row)"
        )
    return neighbours


def histogram_sensitivity(neighbours: str) -> int:
    """L1 sensitivity of a frequency matrix: 2 under ``replace``, 1 under ``add_remove``."""
    return 2 if check_neighbours(neighbours) == "replace" else 1


def check_epsilon(epsilon: float, name: str = "epsilon") -> float:
    """Return ``epsilon`` as a float if it is finite and > 0, else raise ParameterError."""
    try:
        value = float(epsilon)
    except (TypeError, ValueError):
        raise ParameterError(f"{name} must be a positive number, got {epsilon!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise ParameterError(f"{name} must be a finite number > 0, got {epsilon!r}")
    return value


def check_fraction(value: float, name: str) -> float:
    """Return ``value`` if it lies strictly between 0 and 1, else raise ParameterError."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ParameterError(f"{name} must be a number in (0, 1), got {value!r}") from None
    if not 0.0 < v < 1.0:
        raise ParameterError(f"{name} must lie strictly between 0 and 1, got {value!r}")
    return v


def make_rng(seed: SeedLike = None) -> np.random.Generator:
    """A numpy Generator (PCG64).

    ``None`` seeds from 128 bits of OS entropy (:func:`secrets.randbits`).  An int or
    SeedSequence gives a reproducible stream (tests and experiments only, never for a
    production release).  An existing Generator is returned as is, so callers can thread
    one stream through many releases.
    """
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None:
        return np.random.Generator(np.random.PCG64(np.random.SeedSequence(secrets.randbits(128))))
    if isinstance(seed, np.random.SeedSequence):
        return np.random.Generator(np.random.PCG64(seed))
    if isinstance(seed, (bool, float)) or not isinstance(seed, (int, np.integer)):
        raise ParameterError(f"seed must be an int, a numpy Generator or None, got {seed!r}")
    if seed < 0:
        raise ParameterError(f"seed must be >= 0, got {seed}")
    return np.random.Generator(np.random.PCG64(int(seed)))


def laplace(rng: np.random.Generator, scale: float | np.ndarray, size=None) -> np.ndarray:
    """I.i.d. Laplace(0, scale) draws: density exp(-|x|/scale) / (2 scale), variance 2 scale².

    ``scale`` may be an array (one magnitude per output, e.g. Privelet's lambda / W(c));
    every output gets its own independent draw.
    """
    scale_arr = np.asarray(scale, dtype=np.float64)
    if np.any(~np.isfinite(scale_arr)) or np.any(scale_arr <= 0):
        raise ParameterError("Laplace scale must be finite and > 0")
    if size is None:
        size = scale_arr.shape
    return rng.laplace(0.0, 1.0, size=size) * scale_arr


__all__ = [
    "NEIGHBOURS",
    "Neighbours",
    "check_epsilon",
    "check_fraction",
    "check_neighbours",
    "histogram_sensitivity",
    "laplace",
    "make_rng",
]
