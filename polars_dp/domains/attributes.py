"""Public attribute declarations: how a column's values map to cells of the frequency matrix.

The domain is public: nothing here looks at the data to choose a bound, a bin or a
category.  Every attribute turns its column into an ``Int64`` cell index with a Polars
expression; the index is null where the value is null, NaN or outside the domain, and the
caller (:mod:`polars_dp.counting`) reports such rows with a :class:`DomainError` naming the
column, or handles them by the opt-ins below.

Row-wise opt-ins.  Each is a function of one row alone (the row is kept, moved to another
cell, or dropped, whatever the other rows hold), so a neighbouring table still changes at
most one row's cell and every sensitivity bound, hence the guarantee, stays as stated:

* ``nulls="drop"``: rows with a null or NaN in any declared column (or a null in
  ``count_column``) are left out.
* ``on_out_of_domain="clamp"``: ordinal values below ``lo`` (``-inf`` included) go to the first
  cell, above ``hi`` (``+inf``, and integers past int64 such as a UInt64 ``2^64 - 1``) to the
  last, and a non-integral value in an integer domain to the bin of its floor.  A nominal
  value outside the categories has no nearest category: its row is dropped (as with
  ``"drop"``), so in a table mixing both kinds the ordinal values are clamped and the rows
  with an unknown category are left out.
* ``on_out_of_domain="drop"``: rows with a value outside the domain of any declared column
  (ordinal or nominal) are left out.

With ``nulls="drop"`` and ``on_out_of_domain`` ``"clamp"`` or ``"drop"`` no row can make a
count fail; without them every such row is a :class:`DomainError` naming the column.

An integer domain (integer ``lo``, ``hi`` and ``width``) holds whole numbers only: a
non-integral value (``20.5``) in a float column is outside it, refused like any other
out-of-domain value unless ``on_out_of_domain`` is ``"clamp"`` (floored) or ``"drop"``.  Data
with fractions need float bounds (``Ordinal("lat", 44.0, 46.0, width=1.0)``), whose bins are
half-open intervals.  Integer columns are read exactly in int64: a value of a wider type
(UInt64 past ``2^63 - 1``, Int128) is outside every domain that int64 can hold (clamped to
it under ``"clamp"``), never a cast error.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import polars as pl

from polars_dp.domains import sql
from polars_dp.domains.hierarchy import Hierarchy, Label
from polars_dp.errors import DomainError, ParameterError, QueryError

if TYPE_CHECKING:
    from polars.expr.whenthen import ChainedThen, Then

#: Values this many cell widths below a float bin boundary count as on it (absorbs the
#: rounding of decimal widths such as 0.1; integer domains use exact integer arithmetic).
FLOAT_TOLERANCE = 1e-9
#: Nominal string attributes with at most this many leaves are matched by comparisons.
SMALL_NOMINAL = 8


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def _check_number(value: Any, what: str, column: str) -> float | int:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ParameterError(f"{what} of {column!r} must be a number, got {value!r}")
    if not math.isfinite(float(value)):
        raise ParameterError(f"{what} of {column!r} must be finite, got {value!r}")
    return value.item() if isinstance(value, (np.integer, np.floating)) else value


#: The int64 range: integer columns of a wider type are saturated to it (or nulled) first.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _wide(dtype: pl.DataType) -> bool:
    """Whether an integer dtype holds values outside int64 (UInt64, Int128, UInt128)."""
    return dtype.is_integer() and dtype not in (pl.Int8, pl.Int16, pl.Int32, pl.Int64,
                                                pl.UInt8, pl.UInt16, pl.UInt32)


def int64_expr(column: str, dtype: pl.DataType, *, saturate: bool = False) -> pl.Expr:
    """``pl.col(column)`` of an integer ``dtype`` as Int64, never a cast error: a value past
    int64 becomes null (outside every domain), or with ``saturate`` the nearest int64 (a value
    that ``clamp`` then moves onto the domain's nearest bound)."""
    col = pl.col(column)
    if not _wide(dtype):
        return col.cast(pl.Int64)
    if not saturate:
        return col.cast(pl.Int64, strict=False)
    lower = None if dtype.is_unsigned_integer() else INT64_MIN
    return col.clip(lower, INT64_MAX).cast(pl.Int64)


class AttributeBase:
    """Base class of attribute declarations (one axis of the frequency matrix); annotate with
    :data:`Attribute`, the closed union of its two kinds."""

    column: str
    kind: str
    n_cells: int

    def index_expr(self, dtype: pl.DataType, *, clamp: bool = False) -> pl.Expr:
        """Int64 cell index of ``pl.col(self.column)``; null where the value is invalid."""
        raise NotImplementedError

    def valid_expr(self, dtype: pl.DataType) -> pl.Expr:
        """True where the value is not null and (for floats) not NaN."""
        expr = pl.col(self.column).is_not_null()
        if dtype.is_float():
            expr = expr & pl.col(self.column).is_not_nan()
        return expr

    def index_sql(self, column_sql: str, dtype: pl.DataType, dialect: str, *, clamp: bool = False) -> str:
        """The SQL twin of :meth:`index_expr` for ``dialect`` ("duckdb" or "spark"): a BIGINT
        expression over the (quoted) column, NULL where the value is invalid.  ``dtype`` is the
        column's type as Polars would see it (:func:`polars_dp.domains.sql.dtype_from_engine`)."""
        raise NotImplementedError

    def valid_sql(self, column_sql: str, dtype: pl.DataType, dialect: str) -> str:
        """The SQL twin of :meth:`valid_expr`."""
        expr = f"({column_sql} IS NOT NULL)"
        if dtype.is_float():
            expr = f"({expr} AND NOT {sql.is_nan_sql(column_sql)})"
        return expr

    def invalid_error(self, dtype: pl.DataType, nulls: int, nans: int, outside: int, example: Any
                      ) -> DomainError | None:
        """The error for ``nulls`` null, ``nans`` NaN and ``outside`` out-of-domain values
        (``example`` one of the latter), or None when there are none."""
        if nulls or nans:
            what = "null or NaN" if dtype.is_float() else "null"
            return DomainError(
                f"column {self.column!r} has {nulls + nans} {what} value(s); drop or fill them first, "
                "or pass nulls='drop' (drops those rows; each row is kept or dropped on its own, "
                "so the privacy guarantee is unchanged)"
            )
        if outside:
            fix = ("declare a wider domain, or pass on_out_of_domain='clamp' (moves it to the nearest "
                   "cell) or 'drop' (drops the row)" if self.kind == "ordinal" else
                   "add the value to the declared categories or hierarchy, or pass "
                   "on_out_of_domain='drop' (drops the row)")
            return DomainError(
                f"column {self.column!r} has {outside} value(s) outside the declared domain "
                f"{self.domain_text()}, e.g. {example!r}; {fix}"
            )
        return None

    def cell_labels(self) -> np.ndarray | list:
        """One label per cell (ordinal: bin lower value; nominal: leaf label)."""
        raise NotImplementedError

    def domain_text(self) -> str:
        raise NotImplementedError

    def to_json(self) -> dict:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.to_json() == other.to_json()

    def __hash__(self) -> int:
        return hash(repr(self.to_json()))


class Ordinal(AttributeBase):
    """An ordered attribute with a public domain ``[lo, hi]`` cut into bins of ``width``.

    A value ``v`` with ``lo <= v <= hi`` falls in cell ``floor((v - lo) / width)``; there are
    ``floor((hi - lo) / width) + 1`` cells, the last one possibly narrower than ``width``.
    Integer bounds and width use exact integer arithmetic; otherwise floats are used and a
    value within ``FLOAT_TOLERANCE`` widths below a boundary counts as on it.

    >>> import polars_dp as pdp
    >>> age = pdp.Ordinal("age", 0, 99, width=10)   # cells [0, 10), ..., [80, 90), [90, 99]
    >>> age.n_cells, age.value_to_cell([0, 9, 10, 99]).tolist()
    (10, [0, 0, 1, 9])
    """

    kind = "ordinal"

    def __init__(self, column: str, lo: float, hi: float, width: float = 1):
        if not isinstance(column, str) or not column:
            raise ParameterError(f"column must be a non-empty string, got {column!r}")
        self.column = column
        self.lo = _check_number(lo, "lo", column)
        self.hi = _check_number(hi, "hi", column)
        self.width = _check_number(width, "width", column)
        if self.width <= 0:
            raise ParameterError(f"width of {column!r} must be > 0, got {width!r}")
        if self.hi < self.lo:
            raise ParameterError(f"hi < lo for {column!r}: [{lo!r}, {hi!r}] is empty; swap them")
        self.integer = _is_int(self.lo) and _is_int(self.hi) and _is_int(self.width)
        if self.integer:
            self.n_cells = int((self.hi - self.lo) // self.width) + 1
        else:
            cells = (self.hi - self.lo) / self.width + FLOAT_TOLERANCE
            if not math.isfinite(cells):
                raise ParameterError(
                    f"[{lo!r}, {hi!r}] in bins of {width!r} gives too many cells for {column!r}; "
                    "use a wider bin"
                )
            self.n_cells = math.floor(cells) + 1

    def _exact(self, dtype: pl.DataType) -> bool:
        """Whether cells are computed in exact integer arithmetic (else float64)."""
        if not (dtype.is_numeric() or dtype == pl.Boolean):
            raise ParameterError(
                f"column {self.column!r} has type {dtype}; an Ordinal attribute needs numbers "
                "(cast it, or declare it Nominal)"
            )
        return self.integer and dtype.is_integer()

    def index_sql(self, column_sql: str, dtype: pl.DataType, dialect: str, *, clamp: bool = False) -> str:
        exact = self._exact(dtype)
        num: Callable[[Any], str] = sql.int_sql if exact else sql.double_sql
        lo, hi = num(self.lo), num(self.hi)
        if exact and clamp:  # compared in the column's own type, then cast: no value is out of range
            value = (f"CAST((CASE WHEN {column_sql} < {lo} THEN {lo} WHEN {column_sql} > {hi} THEN {hi} "
                     f"ELSE {column_sql} END) AS BIGINT)")
        elif exact:  # NULL (outside the domain) past int64, never a cast error
            value = sql.bigint_sql(column_sql, dialect)
        else:
            value = f"CAST({column_sql} AS DOUBLE)"
            if clamp:
                value = f"(CASE WHEN {value} < {lo} THEN {lo} WHEN {value} > {hi} THEN {hi} ELSE {value} END)"
        if exact:
            idx = sql.int_div_sql(f"{value} - {lo}", sql.int_sql(int(self.width)), dialect)
        else:
            tol = sql.double_sql(FLOAT_TOLERANCE)
            raw = f"FLOOR(({value} - {lo}) / {sql.double_sql(self.width)} + {tol})"
            idx = f"LEAST(GREATEST({raw}, {sql.double_sql(0)}), {sql.double_sql(self.n_cells - 1)})"
        inside = f"{value} >= {lo} AND {value} <= {hi}"
        if self.integer and not exact and not clamp:  # whole numbers only (module docstring)
            inside = f"{inside} AND FLOOR({value}) = {value}"
        if dtype.is_float():  # NaN sorts above every number in both engines: test it first
            inside = f"NOT {sql.is_nan_sql(column_sql)} AND {inside}"
        return f"(CASE WHEN {inside} THEN CAST({idx} AS BIGINT) END)"

    def index_expr(self, dtype: pl.DataType, *, clamp: bool = False) -> pl.Expr:
        col = pl.col(self.column)
        exact = self._exact(dtype)
        value = int64_expr(self.column, dtype, saturate=clamp) if exact else col.cast(pl.Float64)
        if clamp:
            value = value.clip(self.lo, self.hi)
        if exact:
            idx = value if self.lo == 0 else value - self.lo
            idx = idx if self.width == 1 else idx // self.width
        else:
            idx = ((value - self.lo) / self.width + FLOAT_TOLERANCE).floor()
            idx = idx.clip(0, self.n_cells - 1).cast(pl.Int64)
        inside = (value >= self.lo) & (value <= self.hi)
        if self.integer and not exact and not clamp:  # whole numbers only (module docstring)
            inside = inside & (value.floor() == value)
        if dtype.is_float():
            inside = inside & value.is_not_nan()
        return pl.when(inside).then(idx).otherwise(None).cast(pl.Int64)

    def value_to_cell(self, values: Any) -> np.ndarray:
        """Cell index of each value (numpy, same arithmetic as :meth:`index_expr`).

        Raises :class:`QueryError` for values outside ``[lo, hi]``.
        """
        v = np.asarray(values)
        bad = ~((v >= self.lo) & (v <= self.hi))
        if np.any(bad):
            raise QueryError(
                f"{self.column}: {v[bad].flat[0]!r} is outside the declared domain {self.domain_text()}"
            )
        if self.integer and np.issubdtype(v.dtype, np.integer):
            return (v.astype(np.int64) - self.lo) // self.width
        idx = np.floor((v.astype(np.float64) - self.lo) / self.width + FLOAT_TOLERANCE)
        return np.clip(idx, 0, self.n_cells - 1).astype(np.int64)

    def invalid_error(self, dtype: pl.DataType, nulls: int, nans: int, outside: int, example: Any
                      ) -> DomainError | None:
        if self.integer and outside and not (nulls or nans) and not dtype.is_integer():
            return DomainError(
                f"column {self.column!r} has {outside} value(s) outside the declared integer domain "
                f"{self.domain_text()} (whole numbers only), e.g. {example!r}; round the column, declare "
                f"float bounds such as Ordinal({self.column!r}, {float(self.lo)!r}, {float(self.hi)!r}, "
                f"width={float(self.width)!r}), widen the domain, or pass on_out_of_domain='clamp' "
                "(which also floors fractions) or 'drop'"
            )
        return super().invalid_error(dtype, nulls, nans, outside, example)

    def cell_labels(self) -> np.ndarray:
        k = np.arange(self.n_cells, dtype=np.int64)
        if self.integer:
            return self.lo + k * self.width
        # rounded to 12 significant digits so that 0.1 * 3 reads as 0.3 (labels only; cells
        # are found by index arithmetic, never by comparing labels)
        edges = self.lo + k.astype(np.float64) * self.width
        magnitude = max(abs(self.lo), abs(self.hi), abs(self.width))
        return np.round(edges, 12 - math.floor(math.log10(magnitude)))

    def domain_text(self) -> str:
        w = "" if self.width == 1 else f" in bins of {self.width}"
        return f"[{self.lo}, {self.hi}]{w}"

    def to_json(self) -> dict:
        return {"kind": "ordinal", "column": self.column, "lo": self.lo, "hi": self.hi,
                "width": self.width}

    def __repr__(self) -> str:
        w = "" if self.width == 1 else f", width={self.width!r}"
        return f"Ordinal({self.column!r}, {self.lo!r}, {self.hi!r}{w})"


class Nominal(AttributeBase):
    """An unordered attribute whose values are the leaves of a public :class:`Hierarchy`.

    Give either ``hierarchy`` (a :class:`Hierarchy` or the nested dict accepted by
    :meth:`Hierarchy.from_dict`) or ``categories`` (a flat hierarchy: root plus leaves).
    Cells follow the hierarchy's depth-first leaf order.

    >>> import polars_dp as pdp
    >>> sex = pdp.Nominal("sex", categories=["f", "m"])
    >>> country = pdp.Nominal("country", {"europe": ["fr", "de"], "asia": ["jp"]})
    >>> sex.n_cells, country.n_cells, country.leaf_range("europe")   # cells [0, 2) of the leaves
    (2, 3, (0, 2))
    """

    kind = "nominal"

    def __init__(self, column: str, hierarchy: Hierarchy | Mapping | Sequence | None = None, *,
                 categories: Iterable[Label] | None = None):
        if not isinstance(column, str) or not column:
            raise ParameterError(f"column must be a non-empty string, got {column!r}")
        if (hierarchy is None) == (categories is None):
            raise ParameterError(
                f"Nominal({column!r}) needs exactly one of hierarchy=... or categories=[...]"
            )
        if categories is not None:
            if isinstance(categories, (str, bytes)):
                raise ParameterError(f"categories of {column!r} must be a list, not a string")
            hierarchy = Hierarchy.flat(categories)
        elif not isinstance(hierarchy, Hierarchy):
            hierarchy = Hierarchy.from_dict(cast(Mapping | Sequence, hierarchy))
        self.column = column
        self.hierarchy: Hierarchy = hierarchy
        self.n_cells = hierarchy.n_leaves
        types = {type(x) for x in hierarchy.leaves}
        if len(types) > 1:
            raise ParameterError(
                f"leaves of {column!r} mix types {sorted(t.__name__ for t in types)}; use one type"
            )
        self._leaf_type = types.pop()

    def _check_dtype(self, dtype: pl.DataType) -> None:
        if self._leaf_type is bool and dtype != pl.Boolean:
            raise ParameterError(f"column {self.column!r} has type {dtype} but its categories are booleans")
        if self._leaf_type not in (str, bool) and not dtype.is_integer():
            raise ParameterError(
                f"column {self.column!r} has type {dtype} but its categories are integers; "
                "declare string categories or cast the column"
            )

    def _contiguous_start(self) -> int | None:
        """``a`` when the integer leaves are exactly ``a, a+1, ..., a+n-1`` in this order."""
        leaves = self.hierarchy.leaves
        if self._leaf_type in (str, bool):
            return None
        a = int(leaves[0])
        return a if all(int(x) == a + i for i, x in enumerate(leaves)) else None

    def index_sql(self, column_sql: str, dtype: pl.DataType, dialect: str, *, clamp: bool = False) -> str:
        self._check_dtype(dtype)
        if self._leaf_type is str:
            return sql.lookup_sql(f"CAST({column_sql} AS {sql.string_type(dialect)})",
                                  list(self.hierarchy.leaves), dialect)
        if self._leaf_type is bool:
            cases = " ".join(f"WHEN {column_sql} = {sql.literal_sql(v, dialect)} THEN {sql.int_sql(i)}"
                             for i, v in enumerate(self.hierarchy.leaves))
            return f"(CASE {cases} END)"
        value = sql.bigint_sql(column_sql, dialect)
        a = self._contiguous_start()
        if a is not None:
            b = a + self.n_cells - 1
            return (f"(CASE WHEN {value} >= {sql.int_sql(a)} AND {value} <= {sql.int_sql(b)} "
                    f"THEN {value} - {sql.int_sql(a)} END)")
        return sql.lookup_sql(value, [int(x) for x in self.hierarchy.leaves], dialect)

    def index_expr(self, dtype: pl.DataType, *, clamp: bool = False) -> pl.Expr:
        col = pl.col(self.column)
        self._check_dtype(dtype)
        if self._leaf_type is str:
            value = col.cast(pl.String)
            leaves = list(self.hierarchy.leaves)
            if len(leaves) <= SMALL_NOMINAL:  # a few comparisons beat a hash lookup
                pairs = list(enumerate(leaves))
                if isinstance(dtype, (pl.Categorical, pl.Enum)):
                    # compared by code, without a String cast per row (18x faster); an Enum
                    # row can only hold one of its categories, so the other leaves are skipped
                    present = (set(dtype.categories.to_list()) if isinstance(dtype, pl.Enum)
                               else set(leaves))
                    if present.intersection(leaves):
                        value = col
                        pairs = [(i, leaf) for i, leaf in pairs if leaf in present]
                expr: Then | ChainedThen = pl.when(value == pairs[0][1]).then(pairs[0][0])
                for i, leaf in pairs[1:]:
                    expr = expr.when(value == leaf).then(i)
                return expr.otherwise(None).cast(pl.Int64)
            # an Enum cast is a hash lookup; unknown labels become null
            return value.cast(pl.Enum(cast(list[str], leaves)), strict=False).to_physical().cast(pl.Int64)
        if self._leaf_type is bool:
            value = col
        else:
            value = int64_expr(self.column, dtype)
            a = self._contiguous_start()
            if a is not None:  # leaves a..a+n-1 in order: the cell is value - a
                inside = (value >= a) & (value <= a + self.n_cells - 1)
                return pl.when(inside).then(value if a == 0 else value - a).otherwise(None).cast(pl.Int64)
        return value.replace_strict(
            list(self.hierarchy.leaves), list(range(self.n_cells)), default=None,
            return_dtype=pl.Int64,
        )

    def cell_labels(self) -> list:
        return list(self.hierarchy.leaves)

    def leaf_range(self, label: Label) -> tuple[int, int]:
        """``[start, stop)`` cells under a hierarchy node label; QueryError names the column."""
        try:
            return self.hierarchy.leaf_range(label)
        except QueryError as exc:
            raise QueryError(f"{self.column}: {exc}") from None

    def domain_text(self) -> str:
        leaves = self.hierarchy.leaves
        shown = ", ".join(map(repr, leaves[:8])) + (", ..." if len(leaves) > 8 else "")
        return f"{{{shown}}} ({len(leaves)} categories)"

    def to_json(self) -> dict:
        return {"kind": "nominal", "column": self.column, "hierarchy": self.hierarchy.to_json()}

    def __repr__(self) -> str:
        return f"Nominal({self.column!r}, {self.hierarchy!r})"


#: An attribute declaration: exactly one of the two kinds (``isinstance(a, Attribute)`` works).
Attribute = Ordinal | Nominal


def attribute_from_json(obj: Mapping) -> Attribute:
    """Inverse of ``Attribute.to_json``."""
    kind = obj.get("kind")
    if kind == "ordinal":
        return Ordinal(obj["column"], obj["lo"], obj["hi"], obj["width"])
    if kind == "nominal":
        return Nominal(obj["column"], Hierarchy.from_json(obj["hierarchy"]))
    raise ParameterError(f"unknown attribute kind {kind!r}")


def as_attributes(attributes: Attribute | Iterable[Attribute]) -> tuple[Attribute, ...]:
    """Normalise one attribute or a sequence of them; reject repeats and non-attributes."""
    if isinstance(attributes, Attribute):
        attributes = [attributes]
    if isinstance(attributes, (str, bytes)) or not isinstance(attributes, Iterable):
        raise ParameterError(
            "attributes must be a list of pdp.Ordinal / pdp.Nominal declarations, "
            f"got {attributes!r}"
        )
    attrs = tuple(attributes)
    if not attrs:
        raise ParameterError("declare at least one attribute")
    for a in attrs:
        if not isinstance(a, Attribute):
            raise ParameterError(
                f"{a!r} is not an attribute declaration; wrap columns in pdp.Ordinal(...) "
                "or pdp.Nominal(...) with their public domain"
            )
    seen: set[str] = set()
    for a in attrs:
        if a.column in seen:
            raise ParameterError(f"column {a.column!r} is declared twice")
        seen.add(a.column)
    return attrs


__all__ = ["FLOAT_TOLERANCE", "INT64_MAX", "INT64_MIN", "Attribute", "AttributeBase", "Nominal", "Ordinal",
           "as_attributes", "attribute_from_json", "int64_expr"]
