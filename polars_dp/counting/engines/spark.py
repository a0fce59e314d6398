"""Counting a Spark DataFrame in Spark (classic or Spark Connect).

The cell expression is the Spark SQL spelling of the declarations (``F.expr``), grouped with
``groupBy(cell)`` in Spark; the aggregate is collected as Arrow.  A missing column raises
:class:`~polars_dp.errors.ColumnNotFoundError` before any job runs.
"""

from __future__ import annotations

import uuid
from typing import Any

from polars_dp.counting.aggregate import Counts
from polars_dp.counting.engines import sql as sqlgen
from polars_dp.counting.invalid import invalid_error, stats_from_row
from polars_dp.counting.spec import CountSpec
from polars_dp.errors import ParameterError


def count_spark(df: Any, spec: CountSpec, *, dense: bool) -> Counts:
    if not hasattr(df, "toArrow"):  # DataFrame.toArrow came with pyspark 4.0
        raise ParameterError("counting a Spark DataFrame needs pyspark >= 4.0 (DataFrame.toArrow); "
                             "upgrade it: pip install 'polars-dp[spark]'")
    fields = {f.name: f.dataType.typeName() for f in df.schema.fields}
    dtypes = sqlgen.column_dtypes(spec, list(fields), list(fields.values()))
    view = f"_polars_dp_rows_{uuid.uuid4().hex}"
    df.createOrReplaceTempView(view)
    session = df.sparkSession
    try:
        agg = session.sql(sqlgen.aggregate_sql(spec, dtypes, "spark", view)).toArrow()
        result = sqlgen.finish_batches(agg.to_batches(), spec, dense=dense)
        if result is None:
            row = session.sql(sqlgen.stats_sql(spec, dtypes, "spark", view)).collect()[0]
            raise invalid_error(spec, dtypes, stats_from_row(list(row), len(spec.axes)))
    finally:
        session.catalog.dropTempView(view)
    return result


__all__ = ["count_spark"]
