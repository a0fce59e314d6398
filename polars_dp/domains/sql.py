"""SQL spelling of the public domain declarations, for the engines that count in SQL.

Two dialects: ``"duckdb"`` and ``"spark"`` (Spark SQL, used through ``F.expr``).  Every
literal is spelled so that the engine computes with exactly the value Python holds: doubles
as ``CAST('<repr>' AS DOUBLE)`` (``repr`` round-trips, and a bare ``0.1`` would be a
DECIMAL in both engines), integers as BIGINT, strings quoted for the dialect.  Only public
declarations (bounds, widths, category labels) are turned into SQL text; no data is.
"""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from polars_dp.errors import ParameterError

DIALECTS = ("duckdb", "spark")


def check_dialect(dialect: str) -> str:
    if dialect not in DIALECTS:
        raise ParameterError(f"dialect must be one of {DIALECTS}, got {dialect!r}")
    return dialect


def quote_ident(name: str, dialect: str) -> str:
    """A column name quoted for ``dialect`` (``"x"`` in DuckDB, ```x``` in Spark)."""
    if check_dialect(dialect) == "spark":
        return "`" + name.replace("`", "``") + "`"
    return '"' + name.replace('"', '""') + '"'


def string_type(dialect: str) -> str:
    return "STRING" if check_dialect(dialect) == "spark" else "VARCHAR"


def double_sql(value: float) -> str:
    """A DOUBLE literal holding exactly ``float(value)``."""
    x = float(value)
    if not math.isfinite(x):
        raise ParameterError(f"{value!r} is not a finite number")
    return f"CAST('{x!r}' AS DOUBLE)"


def int_sql(value: int) -> str:
    return f"CAST({int(value)} AS BIGINT)"


def literal_sql(value: Any, dialect: str) -> str:
    """A label (str, int or bool) as a SQL literal of ``dialect``."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return int_sql(value)
    if isinstance(value, str):
        if check_dialect(dialect) == "spark":  # Spark reads backslash escapes in literals
            return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
        return "'" + value.replace("'", "''") + "'"
    raise ParameterError(f"cannot spell {value!r} as a SQL literal")


def bigint_sql(value_sql: str, dialect: str) -> str:
    """An integer column as BIGINT, NULL where its value does not fit (a DuckDB UBIGINT past
    ``2^63 - 1`` or a HUGEINT; Spark has no integer type wider than BIGINT): never a cast error."""
    cast = "CAST" if check_dialect(dialect) == "spark" else "TRY_CAST"
    return f"{cast}({value_sql} AS BIGINT)"


def exact_sum_sql(value_sql: str, dialect: str) -> str:
    """``SUM`` of a BIGINT expression that cannot overflow: DuckDB sums BIGINT into a HUGEINT
    (128 bits); Spark's BIGINT sum would wrap, so it sums DECIMAL(38, 0)."""
    if check_dialect(dialect) == "spark":
        return f"SUM(CAST({value_sql} AS DECIMAL(38, 0)))"
    return f"SUM({value_sql})"


def int_div_sql(num: str, den: str, dialect: str) -> str:
    """Integer division (truncating; callers only divide non-negative numbers)."""
    op = "div" if check_dialect(dialect) == "spark" else "//"
    return f"(({num}) {op} ({den}))"


def lookup_sql(value_sql: str, keys: list, dialect: str) -> str:
    """Position (0-based, BIGINT) of ``value_sql`` in ``keys``; NULL where it is absent."""
    pairs = [(literal_sql(k, dialect), int_sql(i)) for i, k in enumerate(keys)]
    if check_dialect(dialect) == "spark":
        body = ", ".join(f"{k}, {v}" for k, v in pairs)
        return f"try_element_at(map({body}), {value_sql})"
    body = ", ".join(f"{k}: {v}" for k, v in pairs)
    return f"(MAP {{{body}}}[{value_sql}])"


def is_nan_sql(value_sql: str) -> str:
    return f"isnan({value_sql})"


def dtype_from_engine(type_name: str) -> pl.DataType:
    """The Polars dtype whose rules apply to an engine column type (DuckDB or Spark name).

    Integers map to Int64, floats to Float64, decimals to Decimal, text and enums to String;
    anything else keeps a dtype that the declarations reject with a clear message.
    """
    t = type_name.lower()
    if t.startswith("decimal"):
        return pl.Decimal(38, 0)
    base = t.split("(")[0].strip()
    if base in {"tinyint", "smallint", "integer", "int", "bigint", "hugeint", "utinyint", "usmallint",
                "uinteger", "ubigint", "uhugeint", "bytetype", "shorttype", "integertype", "longtype",
                "byte", "short", "long", "int8", "int16", "int32", "int64"}:
        return pl.Int64()
    if base in {"float", "double", "real", "floattype", "doubletype"}:
        return pl.Float64()
    if base in {"varchar", "string", "text", "enum", "char", "stringtype", "chartype", "varchartype"}:
        return pl.String()
    if base in {"boolean", "bool", "booleantype"}:
        return pl.Boolean()
    if base in {"date", "datetype"}:
        return pl.Date()
    if base.startswith("timestamp"):
        return pl.Datetime()
    return pl.Binary()


__all__ = ["DIALECTS", "bigint_sql", "double_sql", "dtype_from_engine", "exact_sum_sql", "int_div_sql",
           "int_sql", "is_nan_sql", "literal_sql", "lookup_sql", "quote_ident", "string_type"]
