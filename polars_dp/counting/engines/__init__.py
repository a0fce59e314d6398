"""One count-stage adapter per engine, all returning the same aggregate.

=====================================  =========================================
input                                  adapter
=====================================  =========================================
Polars DataFrame / LazyFrame,          :mod:`.polars` (streaming for LazyFrames)
pyarrow Table / RecordBatch
pyarrow RecordBatchReader, any         :mod:`.arrow` (batch by batch, read once)
``__arrow_c_stream__`` object
DuckDB relation                        :mod:`.duckdb` (GROUP BY inside DuckDB)
Spark DataFrame                        :mod:`.spark` (groupBy inside Spark)
=====================================  =========================================
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, overload

import numpy as np
import polars as pl
import pyarrow as pa
from duckdb import ColumnExpression, DuckDBPyRelation

from polars_dp.counting.aggregate import Counts
from polars_dp.counting.engines.arrow import as_reader, count_stream
from polars_dp.counting.engines.duckdb import count_duckdb
from polars_dp.counting.engines.polars import count_polars
from polars_dp.counting.engines.spark import count_spark
from polars_dp.counting.spec import CountSpec
from polars_dp.errors import ParameterError

ACCEPTED = ("a Polars DataFrame or LazyFrame, a pyarrow Table or RecordBatchReader, any object with "
            "__arrow_c_stream__ (Arrow PyCapsule stream), a DuckDB relation (duckdb.DuckDBPyRelation) "
            "or a Spark DataFrame (pyspark.sql.DataFrame)")


def is_spark(data: Any) -> bool:
    """A pyspark DataFrame (classic or Connect), recognised without importing pyspark."""
    cls = type(data)
    return cls.__module__.startswith("pyspark.sql") and cls.__name__ == "DataFrame"


def engine_of(data: Any) -> str:
    """``"polars"``, ``"arrow"``, ``"duckdb"`` or ``"spark"``; ParameterError for anything else."""
    if isinstance(data, (pl.DataFrame, pl.LazyFrame, pa.Table, pa.RecordBatch)):
        return "polars"
    if isinstance(data, DuckDBPyRelation):
        return "duckdb"
    if is_spark(data):
        return "spark"
    if isinstance(data, pa.RecordBatchReader) or hasattr(data, "__arrow_c_stream__"):
        return "arrow"
    name = f"{type(data).__module__}.{type(data).__name__}"
    raise ParameterError(f"unsupported input {name}; expected {ACCEPTED}")


@overload
def count(data: Any, spec: CountSpec, *, dense: Literal[True]) -> np.ndarray: ...
@overload
def count(data: Any, spec: CountSpec, *, dense: Literal[False]) -> tuple[np.ndarray, np.ndarray | None]: ...
def count(data: Any, spec: CountSpec, *, dense: bool) -> Counts:
    """Counts of ``spec`` over the rows of ``data``: the flat vector of all cells (``dense``;
    float64, or int64 with ``spec.integer``) or sorted unique int64 keys with their int64 counts."""
    engine = engine_of(data)
    if engine == "polars":
        if isinstance(data, (pa.Table, pa.RecordBatch)):
            data = pl.DataFrame(pl.from_arrow(data))
        return count_polars(data, spec, dense=dense)
    if engine == "duckdb":
        return count_duckdb(data, spec, dense=dense)
    if engine == "spark":
        return count_spark(data, spec, dense=dense)
    return count_stream(data, spec, dense=dense)


def point_columns(data: Any, columns: Sequence[str]) -> pl.LazyFrame:
    """The raw ``columns`` of any accepted input as a Polars LazyFrame (for mechanisms that need
    the points themselves rather than an aggregate; DuckDB and Spark send those columns only)."""
    engine = engine_of(data)
    if engine == "polars":
        if isinstance(data, (pa.Table, pa.RecordBatch)):
            data = pl.DataFrame(pl.from_arrow(data))
        return data.lazy()
    if engine == "arrow":
        reader = as_reader(data)
        CountSpec(()).check_names(columns, reader.schema.names)
        return pl.DataFrame(pl.from_arrow(reader.read_all())).lazy()
    if engine == "duckdb":
        CountSpec(()).check_names(columns, data.columns)
        table = data.select(*[ColumnExpression(c) for c in columns]).arrow().read_all()
        return pl.DataFrame(pl.from_arrow(table)).lazy()
    CountSpec(()).check_names(columns, data.columns)
    return pl.DataFrame(pl.from_arrow(data.select(*[data[c] for c in columns]).toArrow())).lazy()


def rereadable(data: Any, columns: Sequence[str]) -> Any:
    """``data`` itself when it can be read twice; an Arrow stream (read once) is replaced by a
    Polars frame of ``columns`` only, for mechanisms that need two passes."""
    if engine_of(data) == "arrow":
        return point_columns(data, columns).collect()
    return data


__all__ = ["ACCEPTED", "count", "engine_of", "point_columns", "rereadable"]
