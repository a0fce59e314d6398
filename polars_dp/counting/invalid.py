"""Why rows have no cell: per-axis counts of nulls, NaNs and out-of-domain values.

Computed only on the error path (a second pass in Polars, DuckDB and Spark; the rest of the
stream for Arrow streams, which cannot be read twice), with the same definitions in every
engine, so the same input raises the same :class:`~polars_dp.errors.DomainError`.  The example
value is the smallest offending value as text (deterministic in every engine).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from polars_dp.counting.spec import CountSpec
from polars_dp.domains import sql
from polars_dp.errors import DomainError

#: Per axis: (nulls, NaNs, outside, example) with example None when nothing is outside.
Stats = list[tuple[int, int, int, Any]]


def polars_stats(frame: pl.LazyFrame | pl.DataFrame, spec: CountSpec, schema: Mapping[str, pl.DataType]
                 ) -> Stats:
    exprs = []
    for k, a in enumerate(spec.axes):
        dtype = schema[a.column]
        col = pl.col(a.column)
        valid = a.valid_expr(dtype)
        outside = valid & a.index_expr(dtype, clamp=spec.clamp).is_null()
        nan = col.cast(pl.Float64).is_nan() if dtype.is_float() else pl.lit(False)
        exprs += [col.is_null().sum().alias(f"n{k}"), nan.sum().alias(f"f{k}"),
                  outside.sum().alias(f"o{k}"), col.filter(outside).cast(pl.String).min().alias(f"e{k}")]
    row = frame.lazy().select(exprs).collect().row(0)
    return [(int(row[4 * k] or 0), int(row[4 * k + 1] or 0), int(row[4 * k + 2] or 0), row[4 * k + 3])
            for k in range(len(spec.axes))]


def sql_stats_select(spec: CountSpec, dtypes: Sequence[pl.DataType], dialect: str) -> str:
    """The SELECT list of one aggregate query computing :data:`Stats` (4 columns per axis)."""
    parts = []
    for a, dtype in zip(spec.axes, dtypes, strict=True):
        c = sql.quote_ident(a.column, dialect)
        idx = a.index_sql(c, dtype, dialect, clamp=spec.clamp)
        outside = f"({a.valid_sql(c, dtype, dialect)} AND {idx} IS NULL)"
        nan = sql.is_nan_sql(f"CAST({c} AS DOUBLE)") if dtype.is_float() else "FALSE"
        parts += [f"SUM(CASE WHEN {c} IS NULL THEN 1 ELSE 0 END)",
                  f"SUM(CASE WHEN {nan} THEN 1 ELSE 0 END)",
                  f"SUM(CASE WHEN {outside} THEN 1 ELSE 0 END)",
                  f"MIN(CASE WHEN {outside} THEN CAST({c} AS {sql.string_type(dialect)}) END)"]
    return ", ".join(parts)


def stats_from_row(row: Sequence[Any], n_axes: int) -> Stats:
    return [(int(row[4 * k] or 0), int(row[4 * k + 1] or 0), int(row[4 * k + 2] or 0), row[4 * k + 3])
            for k in range(n_axes)]


def merge_stats(a: Stats | None, b: Stats) -> Stats:
    if a is None:
        return b
    out = []
    for (n1, f1, o1, e1), (n2, f2, o2, e2) in zip(a, b, strict=True):
        e = e2 if e1 is None else e1 if e2 is None else min(e1, e2)
        out.append((n1 + n2, f1 + f2, o1 + o2, e))
    return out


def invalid_error(spec: CountSpec, dtypes: Sequence[pl.DataType], stats: Stats) -> DomainError:
    """The error for the first axis (in declaration order) with an invalid value."""
    for a, dtype, s in zip(spec.axes, dtypes, stats, strict=True):
        err = a.invalid_error(dtype, *s)
        if err is not None:
            return err
    return DomainError("some rows fall outside the declared domain")  # pragma: no cover


__all__ = ["Stats", "invalid_error", "merge_stats", "polars_stats", "sql_stats_select", "stats_from_row"]
