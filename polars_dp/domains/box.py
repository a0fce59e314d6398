"""Spatial domains: a public axis-aligned box, one closed ``(lo, hi)`` interval per column.

The box is a public declaration (like an ordinal attribute's ``lo``/``hi``): never derived
from the private points.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from polars_dp.errors import ParameterError

MAX_DIMENSIONS = 8


@dataclass(frozen=True)
class Box:
    """A public axis-aligned box: one closed ``(lo, hi)`` interval per named column."""

    columns: tuple[str, ...]
    lo: np.ndarray
    hi: np.ndarray

    @property
    def d(self) -> int:
        return len(self.columns)

    @property
    def width(self) -> np.ndarray:
        return self.hi - self.lo

    def to_json(self) -> list[list[float]]:
        return [[float(a), float(b)] for a, b in zip(self.lo, self.hi, strict=True)]

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Box) and self.columns == other.columns
                and np.array_equal(self.lo, other.lo) and np.array_equal(self.hi, other.hi))

    __hash__ = None


def as_box(columns: str | Sequence[str], bounds: Any) -> Box:
    """Validate ``columns`` (1 to 8 distinct names) and ``bounds`` (one finite ``lo < hi`` pair
    per column, as a sequence aligned with ``columns`` or a mapping column -> pair)."""
    cols = (columns,) if isinstance(columns, str) else tuple(columns)
    if not cols or not all(isinstance(c, str) and c for c in cols):
        raise ParameterError(f"columns must be one or more non-empty column names, got {columns!r}")
    if len(set(cols)) != len(cols):
        raise ParameterError(f"columns {cols} repeat a name; give each column once")
    if len(cols) > MAX_DIMENSIONS:
        raise ParameterError(f"{len(cols)} columns given; spatial mechanisms support 1 to {MAX_DIMENSIONS}")
    if isinstance(bounds, Mapping):
        missing = [c for c in cols if c not in bounds]
        if missing:
            raise ParameterError(f"bounds has no (lo, hi) for column {missing[0]!r}")
        pairs = [bounds[c] for c in cols]
    else:
        try:
            pairs = list(bounds)
        except TypeError:
            raise ParameterError(f"bounds must be one (lo, hi) pair per column, got {bounds!r}") from None
        if len(cols) == 1 and len(pairs) == 2 and not isinstance(pairs[0], (tuple, list, np.ndarray)):
            pairs = [pairs]
        if len(pairs) != len(cols):
            raise ParameterError(
                f"bounds has {len(pairs)} pair(s) but there are {len(cols)} columns {cols}; "
                "give one (lo, hi) per column, in the same order"
            )
    lo, hi = [], []
    for c, pair in zip(cols, pairs, strict=True):
        try:
            a, b = (float(v) for v in pair)
        except (TypeError, ValueError):
            raise ParameterError(f"bounds of {c!r} need a (lo, hi) pair of numbers, not {pair!r}") from None
        if not (math.isfinite(a) and math.isfinite(b)):
            raise ParameterError(f"bounds of {c!r} must be finite, got ({a}, {b})")
        if not a < b:
            raise ParameterError(f"bounds of {c!r}: lo={a} must be < hi={b}")
        lo.append(a)
        hi.append(b)
    return Box(cols, np.array(lo), np.array(hi))


__all__ = ["MAX_DIMENSIONS", "Box", "as_box"]
