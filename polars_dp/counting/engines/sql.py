"""The count stage as one SQL query, for the engines that count where the data lives.

``SELECT <flat cell> AS cell, COUNT(*) (or SUM(count column)) FROM rows [WHERE valid]
GROUP BY cell``: the flat cell is compiled from the public declarations
(:meth:`index_sql <polars_dp.domains.attributes.Attribute.index_sql>` of every axis, times its
C-order stride); it is NULL for a row without a cell, and a NULL group sends the caller to the
statistics query of :mod:`polars_dp.counting.invalid`.  Only the (cell, count) aggregate leaves
the engine.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from polars_dp.arrow_arrays import array_values
from polars_dp.counting.aggregate import COUNT_BOUND, Accumulator, Counts
from polars_dp.counting.invalid import sql_stats_select
from polars_dp.counting.spec import CountSpec, check_count_dtype, check_counts, strides
from polars_dp.domains import sql
from polars_dp.domains.attributes import INT64_MIN


def column_dtypes(spec: CountSpec, names: Sequence[str], types: Sequence[str]) -> list[pl.DataType]:
    """Check the columns exist and map the axes' engine types to Polars dtypes."""
    spec.check_columns(list(names))
    by_name = dict(zip(names, types, strict=True))
    if spec.count_column:
        check_count_dtype(spec.count_column, sql.dtype_from_engine(by_name[spec.count_column]))
    return [sql.dtype_from_engine(by_name[a.column]) for a in spec.axes]


def where_sql(spec: CountSpec, dtypes: Sequence[pl.DataType], dialect: str) -> str:
    """The SQL twin of :func:`polars_dp.counting.engines.polars.row_filter`."""
    if not spec.drops_rows:
        return ""
    conds = []
    for a, d in zip(spec.axes, dtypes, strict=True):
        c = sql.quote_ident(a.column, dialect)
        valid = a.valid_sql(c, d, dialect)
        if spec.drops_outside(a):
            has_cell = f"({a.index_sql(c, d, dialect, clamp=spec.clamp)} IS NOT NULL)"
            conds.append(has_cell if spec.drop_nulls else f"({has_cell} OR NOT {valid})")
        elif spec.drop_nulls:
            conds.append(valid)
    if spec.count_column:
        w = sql.quote_ident(spec.count_column, dialect)
        if spec.drops_negative_counts:
            conds.append(f"({w} >= 0)" if spec.drop_nulls else f"({w} >= 0 OR {w} IS NULL)")
        elif spec.drop_nulls:
            conds.append(f"({w} IS NOT NULL)")
    return " WHERE " + " AND ".join(conds)


def cell_sql(spec: CountSpec, dtypes: Sequence[pl.DataType], dialect: str) -> str:
    terms = []
    for a, d, s in zip(spec.axes, dtypes, strides(spec.shape), strict=True):
        idx = a.index_sql(sql.quote_ident(a.column, dialect), d, dialect, clamp=spec.clamp)
        terms.append(idx if s == 1 else f"{idx} * {sql.int_sql(s)}")
    return " + ".join(terms)


def aggregate_sql(spec: CountSpec, dtypes: Sequence[pl.DataType], dialect: str, table: str) -> str:
    bound = sql.int_sql(COUNT_BOUND)
    if spec.count_column:  # each row's count capped at the bound, summed exactly, the sum capped
        c = sql.quote_ident(spec.count_column, dialect)
        low = sql.int_sql(INT64_MIN)  # a HUGEINT below int64 stays negative, without a cast error
        w = f"CAST((CASE WHEN {c} > {bound} THEN {bound} WHEN {c} < {low} THEN {low} ELSE {c} END) AS BIGINT)"
        total = f"LEAST({sql.exact_sum_sql(w, dialect)}, {bound})"
        counts = (f"CAST({total} AS BIGINT) AS n, MIN({w}) AS n_min, "
                  f"CAST(SUM(CASE WHEN {c} IS NULL THEN 1 ELSE 0 END) AS BIGINT) AS n_null")
    else:
        counts = f"CAST(LEAST(COUNT(*), {bound}) AS BIGINT) AS n"
    return (f"SELECT {cell_sql(spec, dtypes, dialect)} AS cell, {counts} "
            f"FROM {table}{where_sql(spec, dtypes, dialect)} GROUP BY 1")


def stats_sql(spec: CountSpec, dtypes: Sequence[pl.DataType], dialect: str, table: str) -> str:
    return f"SELECT {sql_stats_select(spec, dtypes, dialect)} FROM {table}{where_sql(spec, dtypes, dialect)}"


def finish_batches(batches: Iterable[pa.RecordBatch], spec: CountSpec, *, dense: bool
                   ) -> Counts | None:
    """The engine's (cell, n) rows, a stream of Arrow record batches, turned into the aggregate the
    caller wants, each batch scattered straight into the result (dense: one array of
    ``spec.dense_dtype``, the cells being unique); None when a batch holds a NULL cell (the
    caller explains the invalid rows)."""
    out = np.zeros(spec.n_cells, dtype=spec.dense_dtype) if dense else None
    acc = None if dense else Accumulator(spec.n_cells, dense=False)
    nulls, low = 0, None
    for batch in batches:
        cell = batch.column("cell")
        if cell.null_count:
            return None
        n = batch.column("n")
        cells = array_values(cell).astype(np.int64, copy=False)
        counts = array_values(n.fill_null(0) if n.null_count else n)
        if spec.count_column:
            nulls += int(pc.sum(batch.column("n_null")).as_py() or 0)
            m = pc.min(batch.column("n_min")).as_py()
            low = m if low is None or (m is not None and m < low) else low
        if out is not None:
            out[cells] = counts
        elif acc is not None:
            if spec.key is not None:
                cells = spec.keys_from_axes(spec.axes_from_flat(cells))
            acc.add(cells, counts.astype(np.float64))
    if spec.count_column:
        check_counts(spec.count_column, nulls, low)
    if out is not None:
        return out
    assert acc is not None  # not dense
    return acc.sparse()


__all__ = ["aggregate_sql", "cell_sql", "column_dtypes", "finish_batches", "stats_sql", "where_sql"]
