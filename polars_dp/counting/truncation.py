"""Contribution bounding: each identifier keeps at most ``k`` rows, in the engine holding them.

The rule and why it keeps every neighbour relation on identifiers are in
:mod:`polars_dp.domains.privacy_unit`: an identifier keeps its ``k`` rows of smallest keyed
hash of the columns the release reads, the key drawn per release by the mechanism.  Not a row
rule (a row's fate depends on its identifier's other rows), so it runs before the count, on
the whole input:

* Polars DataFrame / LazyFrame (and pyarrow Tables): ``filter(hash(seed=key).rank("ordinal")
  .over(id) <= k)``, lazily (one extra scan of the identifier column checks for nulls);
* an Arrow stream is read into a Polars frame first (a stream cannot be read twice, and the
  rank of a row needs every row of its identifier);
* DuckDB: ``QUALIFY row_number() OVER (PARTITION BY id ORDER BY hash(key, columns)) <= k``
  inside DuckDB (a relation out);
* Spark: ``row_number()`` over ``Window.partitionBy(id).orderBy(xxhash64(key, columns))``
  ``<= k`` inside Spark (a DataFrame out).

A null identifier is a :class:`~polars_dp.errors.DomainError`, or its rows are dropped under
``nulls="drop"``; a missing one a :class:`~polars_dp.errors.ColumnNotFoundError`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import polars as pl
import pyarrow as pa

from polars_dp.counting.engines import engine_of, point_columns
from polars_dp.counting.spec import CountSpec
from polars_dp.domains import sql
from polars_dp.domains.privacy_unit import Rows
from polars_dp.errors import DomainError


def _null_ids(column: str, nulls: int) -> DomainError:
    return DomainError(f"privacy unit column {column!r} has {nulls} null value(s); every row needs its "
                       "individual's identifier; fill them, or pass nulls='drop' (drops those rows)")


def _polars(frame: pl.DataFrame | pl.LazyFrame, unit: Rows, key: int, columns: Sequence[str],
            drop_nulls: bool) -> pl.DataFrame | pl.LazyFrame:
    ident = str(unit.id_column)
    CountSpec.check_names([ident, *columns], frame.collect_schema().names())
    if drop_nulls:
        frame = frame.filter(pl.col(ident).is_not_null())
    else:
        nulls = frame.lazy().select(pl.col(ident).null_count()).collect().item()
        if nulls:
            raise _null_ids(ident, nulls)
    wanted = list(dict.fromkeys([ident, *columns]))
    rank = pl.struct(wanted).hash(seed=key).rank("ordinal").over(ident)
    return frame.filter(rank <= unit.max_per)


def _duckdb(rel: Any, unit: Rows, key: int, columns: Sequence[str], drop_nulls: bool) -> Any:
    ident = str(unit.id_column)
    CountSpec.check_names([ident, *columns], rel.columns)
    view = f"_polars_dp_unit_{uuid.uuid4().hex}"
    c = sql.quote_ident(ident, "duckdb")
    if not drop_nulls:
        nulls = rel.query(view, f"SELECT COUNT(*) FROM {view} WHERE {c} IS NULL").fetchall()[0][0]
        if nulls:
            raise _null_ids(ident, nulls)
    hashed = ", ".join(sql.quote_ident(x, "duckdb") for x in dict.fromkeys([ident, *columns]))
    where = f" WHERE {c} IS NOT NULL" if drop_nulls else ""
    return rel.query(view, f"SELECT * FROM {view}{where} QUALIFY row_number() OVER (PARTITION BY {c} "
                           f"ORDER BY hash({key}::UBIGINT, {hashed})) <= {unit.max_per}")


def _spark(df: Any, unit: Rows, key: int, columns: Sequence[str], drop_nulls: bool) -> Any:
    from pyspark.sql import Window  # optional dependency: present with a Spark input
    from pyspark.sql import functions as F

    ident = str(unit.id_column)
    CountSpec.check_names([ident, *columns], df.columns)
    if drop_nulls:
        df = df.where(df[ident].isNotNull())
    else:
        nulls = df.where(df[ident].isNull()).count()
        if nulls:
            raise _null_ids(ident, nulls)
    signed = key - (1 << 64) if key >= 1 << 63 else key  # the key as a Spark bigint
    order = F.xxhash64(F.lit(signed), *(df[c] for c in dict.fromkeys([ident, *columns])))
    rank = F.row_number().over(Window.partitionBy(df[ident]).orderBy(order))
    name = f"_polars_dp_rank_{uuid.uuid4().hex}"
    return df.withColumn(name, rank).where(F.col(name) <= unit.max_per).drop(name)


def truncate(data: Any, unit: Rows, key: int, columns: Sequence[str], *, nulls: str = "raise") -> Any:
    """``data`` with at most ``unit.max_per`` rows per ``unit.id_column`` (module docstring), an
    input of the same engine (an Arrow stream: a Polars frame); ``data`` itself for ``Rows()``.
    ``key`` is the release's 64-bit hash key, ``columns`` those the release reads."""
    if not unit.truncates:
        return data
    engine = engine_of(data)
    drop = nulls == "drop"
    if engine == "spark":
        return _spark(data, unit, key, columns, drop)
    if engine == "duckdb":
        return _duckdb(data, unit, key, columns, drop)
    if engine == "arrow":
        data = point_columns(data, []).collect()
    elif isinstance(data, (pa.Table, pa.RecordBatch)):
        data = pl.DataFrame(pl.from_arrow(data))
    return _polars(data, unit, key, columns, drop)


__all__ = ["truncate"]
