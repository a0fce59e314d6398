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
import polars as pl

from polars_dp.domains import sql
from polars_dp.errors import DomainError, ParameterError

MAX_DIMENSIONS = 8


#: The smallest extent ``hi - lo`` of an axis: the cells per unit ``m / (hi - lo)`` of a grid of
#: up to ``2^63`` cells stays finite and a cell's width ``(hi - lo) / m`` a normal float64.
MIN_EXTENT = 2.0 ** -900


def _frozen(owner: np.ndarray) -> np.ndarray:
    """A read-only view of a read-only ``owner`` (a view cannot be made writeable again)."""
    owner.flags.writeable = False
    view = owner.view()
    view.flags.writeable = False
    return view


@dataclass(frozen=True)
class Box:
    """A public axis-aligned box: one closed ``(lo, hi)`` interval per named column (``lo`` and
    ``hi`` are read-only float64 copies: a declaration does not change after it is made)."""

    columns: tuple[str, ...]
    lo: np.ndarray
    hi: np.ndarray

    def __post_init__(self) -> None:
        for name in ("lo", "hi"):
            object.__setattr__(self, name, _frozen(np.array(getattr(self, name), dtype=np.float64)))

    @property
    def d(self) -> int:
        return len(self.columns)

    @property
    def width(self) -> np.ndarray:
        """``hi - lo`` per column (read-only, as the bounds)."""
        return _frozen(self.hi - self.lo)

    def to_json(self) -> list[list[float]]:
        return [[float(a), float(b)] for a, b in zip(self.lo, self.hi, strict=True)]

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Box) and self.columns == other.columns
                and np.array_equal(self.lo, other.lo) and np.array_equal(self.hi, other.hi))

    __hash__ = None  # type: ignore[assignment]  # unhashable: holds mutable numpy arrays


@dataclass(frozen=True)
class GridAxis:
    """One dimension of a box cut into ``m`` equal cells, as a counting axis.

    Point value ``x`` (as float64) lies in cell ``clip(floor((x - lo) * (m / (hi - lo))), 0,
    m - 1)``: the arithmetic of :func:`polars_dp.kernels.grid.grid_cells`, spelled for Polars and
    SQL with the same float64 operations, so every engine puts every point in the same cell.
    Null, NaN and values outside ``[lo, hi]`` get no cell (``clamp`` moves outside values onto
    the nearest face first).
    """

    column: str
    lo: float
    hi: float
    m: int
    kind: str = "spatial"

    @property
    def n_cells(self) -> int:
        return self.m

    @property
    def scale(self) -> float:
        return float(self.m / (np.float64(self.hi) - np.float64(self.lo)))

    def _check(self, dtype: pl.DataType) -> None:
        if not dtype.is_numeric():
            raise ParameterError(f"column {self.column!r} has type {dtype}; spatial columns must be numeric")

    def valid_expr(self, dtype: pl.DataType) -> pl.Expr:
        x = pl.col(self.column).cast(pl.Float64)
        return x.is_not_null() & x.is_not_nan()

    def index_expr(self, dtype: pl.DataType, *, clamp: bool = False) -> pl.Expr:
        self._check(dtype)
        x = pl.col(self.column).cast(pl.Float64)
        if clamp:
            x = x.clip(self.lo, self.hi)
        inside = x.is_not_nan() & (x >= self.lo) & (x <= self.hi)
        if self.m == 1:  # one cell: only validity matters (the row count of the box)
            idx = pl.lit(0, dtype=pl.Int64)
        else:
            idx = ((x - self.lo) * self.scale).floor().clip(0, self.m - 1).cast(pl.Int64)
        return pl.when(inside).then(idx).otherwise(None).cast(pl.Int64)

    def valid_sql(self, column_sql: str, dtype: pl.DataType, dialect: str) -> str:
        x = f"CAST({column_sql} AS DOUBLE)"
        return f"({x} IS NOT NULL AND NOT {sql.is_nan_sql(x)})"

    def index_sql(self, column_sql: str, dtype: pl.DataType, dialect: str, *, clamp: bool = False) -> str:
        self._check(dtype)
        x = f"CAST({column_sql} AS DOUBLE)"
        lo, hi = sql.double_sql(self.lo), sql.double_sql(self.hi)
        nan = sql.is_nan_sql(x)
        if clamp:
            x = f"(CASE WHEN {x} < {lo} THEN {lo} WHEN {x} > {hi} THEN {hi} ELSE {x} END)"
        raw = f"FLOOR(({x} - {lo}) * {sql.double_sql(self.scale)})"
        idx = (sql.double_sql(0) if self.m == 1
               else f"LEAST(GREATEST({raw}, {sql.double_sql(0)}), {sql.double_sql(self.m - 1)})")
        return f"(CASE WHEN NOT {nan} AND {x} >= {lo} AND {x} <= {hi} THEN CAST({idx} AS BIGINT) END)"

    def invalid_error(self, dtype: pl.DataType, nulls: int, nans: int, outside: int, example: object
                      ) -> DomainError | None:
        for count, what in ((nulls, "null"), (nans, "NaN")):
            if count:
                return DomainError(f"column {self.column!r} has {count} {what} value(s); drop or fill them "
                                   "first, or pass nulls='drop'")
        if outside:
            return DomainError(
                f"column {self.column!r} has {outside} value(s) outside the declared bounds "
                f"[{self.lo}, {self.hi}], e.g. {example!r}; declare wider bounds, or pass "
                "on_out_of_domain='clamp' (moves it onto the nearest edge) or 'drop' (drops the row)"
            )
        return None

    def domain_text(self) -> str:
        return f"[{self.lo}, {self.hi}]"


def grid_axes(box: Box, m: int) -> tuple[GridAxis, ...]:
    """The ``m``-per-side grid of ``box`` as counting axes (C order = ``box.columns`` order)."""
    return tuple(GridAxis(c, float(box.lo[j]), float(box.hi[j]), int(m)) for j, c in enumerate(box.columns))


def as_box(columns: str | Sequence[str], bounds: Any) -> Box:
    """Validate ``columns`` (1 to 8 distinct names) and ``bounds`` (one finite ``lo < hi`` pair
    per column whose extent ``hi - lo`` is finite too, as a sequence aligned with ``columns`` or a
    mapping column -> pair).  Public inputs only: checked before any data is read."""
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
            if any(isinstance(v, (str, bytes, bool, np.bool_)) for v in pair):
                raise TypeError  # text and truth values are not coordinates
            a, b = (float(v) for v in pair)
        except (TypeError, ValueError):
            raise ParameterError(f"bounds of {c!r} need a (lo, hi) pair of numbers, not {pair!r}") from None
        if not (math.isfinite(a) and math.isfinite(b)):
            raise ParameterError(f"bounds of {c!r} must be finite, got ({a}, {b})")
        if not a < b:
            raise ParameterError(f"bounds of {c!r}: lo={a} must be < hi={b}")
        if not math.isfinite(b - a):
            raise ParameterError(f"bounds of {c!r}: the extent hi - lo = {b} - ({a}) overflows float64; "
                                 "declare narrower bounds (|hi - lo| below 1.8e308)")
        if b - a < MIN_EXTENT:
            raise ParameterError(f"bounds of {c!r}: the extent hi - lo = {b - a:.3g} is too small for the "
                                 f"float64 cell arithmetic (cells per unit m / (hi - lo) would overflow); "
                                 f"rescale the column or declare bounds at least {MIN_EXTENT:.3g} wide")
        lo.append(a)
        hi.append(b)
    return Box(cols, np.array(lo), np.array(hi))


__all__ = ["MAX_DIMENSIONS", "MIN_EXTENT", "Box", "GridAxis", "as_box", "grid_axes"]
