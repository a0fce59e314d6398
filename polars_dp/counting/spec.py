"""What the count stage computes, independent of the engine holding the rows.

A :class:`CountSpec` lists the public counting axes (:class:`~polars_dp.domains.attributes.Attribute`
or :class:`~polars_dp.domains.box.GridAxis`: each maps a column to a cell index, null where the
value is invalid), the row options, an optional count column, and the key of the aggregate:

* ``key=None``: the C-order flat cell ``sum_i idx_i * stride_i`` (frequency matrices, grids);
* ``key=f``: ``f(per-axis cell arrays)`` -> int64 keys, e.g. Morton codes for PrivTree (the
  caller passes the function, so this layer needs no geometry).

Every engine returns the same aggregate, (key, count) pairs over the valid rows (or the dense
vector of counts over the flat keys), and raises the same typed errors.

Row rules (:mod:`polars_dp.domains.attributes`): ``nulls="drop"`` leaves out a row with a null
or NaN in a declared column or a null count; ``on_out_of_domain="drop"`` a row with a value
outside its axis's domain, ``"clamp"`` moves it to the nearest cell (a nominal value, which has
none, is dropped).  Each rule looks at one row only.

Pre-aggregated input (``count_column``): each row stands for ``count`` individuals.  The
guarantee of every mechanism holds, with its stated neighbour relation on individuals, when
each individual contributes to exactly one row with weight 1 (the rows are the groups of a
``GROUP BY`` over a table with one row per individual); counts must be non-negative integers
(an integer column type).  A negative count cannot come from such a table: by default it is a
:class:`DomainError`; under ``on_out_of_domain="drop"`` or ``"clamp"`` the row counts 0 (dropped,
the same as clamping the count to the domain ``[0, inf)``).  A neighbour on individuals
changes one row's count by one (two rows' under ``replace``), and ``c -> max(c, 0)`` is applied
to each row on its own and is 1-Lipschitz, so each cell still moves by at most one per changed
row: the sensitivity, hence the guarantee, is unchanged (and on a table from a ``GROUP BY``
the rule never applies).  A count column of a non-integer type is refused from its type alone, before any
row is read.  Every cell's count saturates at :data:`~polars_dp.counting.aggregate.COUNT_BOUND`
(``2^53``), see :mod:`polars_dp.counting.aggregate`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from polars_dp.errors import ColumnNotFoundError, DomainError, ParameterError
from polars_dp.params import NULLS, ON_OUT_OF_DOMAIN, check_option


def strides(shape: tuple[int, ...]) -> list[int]:
    """Row-major (C order) strides in cells."""
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= s
    return out[::-1]


@dataclass(frozen=True)
class CountSpec:
    """Axes, row options, count column and aggregate key of one count stage."""

    axes: tuple[Any, ...]
    clamp: bool = False
    drop_nulls: bool = False
    count_column: str | None = None
    key: Callable[[list[np.ndarray]], np.ndarray] | None = None
    integer: bool = False  # dense counts as int64 (exact) instead of float64
    drop_outside: bool = False  # on_out_of_domain="drop"
    #: int64 slots left unused in front of dense counts in their buffer where the count allows
    #: (:class:`~polars_dp.counting.aggregate.Accumulator`): room for a consumer's larger result
    room: int = 0

    def drops_outside(self, axis: Any) -> bool:
        """Whether rows with a value outside ``axis``'s domain are dropped: under ``"drop"``,
        and under ``"clamp"`` for a nominal axis (no nearest category)."""
        return self.drop_outside or (self.clamp and axis.kind == "nominal")

    @property
    def drops_negative_counts(self) -> bool:
        """Whether a row with a negative count counts 0 (``"drop"`` or ``"clamp"``)."""
        return self.drop_outside or self.clamp

    @property
    def drops_rows(self) -> bool:
        """Whether any row rule may leave a row out (the engines then filter the rows)."""
        return (self.drop_nulls or any(self.drops_outside(a) for a in self.axes)
                or (self.count_column is not None and self.drops_negative_counts))

    @staticmethod
    def make(axes: Sequence[Any], *, on_out_of_domain: str = "raise", nulls: str = "raise",
             count_column: str | None = None,
             key: Callable[[list[np.ndarray]], np.ndarray] | None = None,
             integer: bool = False) -> CountSpec:
        check_option(on_out_of_domain, "on_out_of_domain", ON_OUT_OF_DOMAIN)
        check_option(nulls, "nulls", NULLS)
        if count_column is not None and (not isinstance(count_column, str) or not count_column):
            raise ParameterError(f"count_column must be a column name or None, got {count_column!r}")
        if count_column is not None and count_column in {a.column for a in axes}:
            raise ParameterError(f"count_column {count_column!r} is also a declared attribute")
        return CountSpec(tuple(axes), on_out_of_domain == "clamp", nulls == "drop", count_column, key,
                         bool(integer), on_out_of_domain == "drop")

    @property
    def dense_dtype(self) -> np.dtype:
        """The dtype of the dense counts: int64 with ``integer``, else float64."""
        return np.dtype(np.int64 if self.integer else np.float64)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(a.n_cells) for a in self.axes)

    @property
    def n_cells(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def columns(self) -> list[str]:
        cols = [a.column for a in self.axes]
        return cols + ([self.count_column] if self.count_column else [])

    def check_columns(self, names: Sequence[str]) -> None:
        self.check_names(self.columns, names)

    @staticmethod
    def check_names(wanted: Sequence[str], names: Sequence[str]) -> None:
        """ColumnNotFoundError for the first of ``wanted`` not among ``names``."""
        missing = [c for c in wanted if c not in names]
        if missing:
            raise ColumnNotFoundError(
                f"column {missing[0]!r} is not in the input; available columns: {list(names)}"
            )

    def keys_from_axes(self, idx: Sequence[np.ndarray]) -> np.ndarray:
        """Aggregate keys (int64) from per-axis cell arrays."""
        if self.key is not None:
            return self.key(list(idx))
        flat = np.zeros(len(idx[0]), dtype=np.int64)
        for i, s in zip(idx, strides(self.shape), strict=True):
            flat += i * s
        return flat

    def axes_from_flat(self, flat: np.ndarray) -> list[np.ndarray]:
        """Per-axis cells of C-order flat keys."""
        return [(flat // s) % n for s, n in zip(strides(self.shape), self.shape, strict=True)]


def check_count_dtype(column: str, dtype: pl.DataType) -> None:
    """A count column must hold integers."""
    if not dtype.is_integer():
        raise DomainError(
            f"count column {column!r} has type {dtype}; counts must be non-negative integers "
            "(cast it to an integer type)"
        )


def check_counts(column: str, nulls: int, minimum: Any) -> None:
    """DomainError naming ``column`` for null or negative counts."""
    if nulls:
        raise DomainError(f"count column {column!r} has {nulls} null value(s); counts must be "
                          "non-negative integers; fill them, or pass nulls='drop' (drops those rows)")
    if minimum is not None and minimum < 0:
        raise DomainError(f"count column {column!r} has a negative count ({minimum}); counts must be "
                          "non-negative integers; fix them, or pass on_out_of_domain='drop' (such a row "
                          "counts 0)")


__all__ = ["CountSpec", "check_count_dtype", "check_counts", "strides"]
