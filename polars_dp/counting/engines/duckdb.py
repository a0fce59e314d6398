"""Counting a DuckDB relation inside DuckDB (out of core, within the connection's memory limit).

Only the (cell, count) aggregate is fetched, as Arrow record batches scattered straight into the
result (no whole-result table or DataFrame).  A missing column raises
:class:`~polars_dp.errors.ColumnNotFoundError` before any query runs.
"""

from __future__ import annotations

import uuid
from typing import Any

from polars_dp.counting.aggregate import Counts
from polars_dp.counting.engines import sql as sqlgen
from polars_dp.counting.invalid import invalid_error, stats_from_row
from polars_dp.counting.spec import CountSpec

#: Aggregate rows per fetched Arrow record batch.
FETCH_ROWS = 1 << 20


def count_duckdb(rel: Any, spec: CountSpec, *, dense: bool) -> Counts:
    dtypes = sqlgen.column_dtypes(spec, rel.columns, [str(t) for t in rel.types])
    view = f"_polars_dp_rows_{uuid.uuid4().hex}"
    query = sqlgen.aggregate_sql(spec, dtypes, "duckdb", view)
    reader = rel.query(view, query).arrow(FETCH_ROWS)
    result = sqlgen.finish_batches(reader, spec, dense=dense)
    if result is None:
        del reader
        row = rel.query(view, sqlgen.stats_sql(spec, dtypes, "duckdb", view)).fetchall()[0]
        raise invalid_error(spec, dtypes, stats_from_row(row, len(spec.axes)))
    return result


__all__ = ["FETCH_ROWS", "count_duckdb"]
