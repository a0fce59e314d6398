"""Counting an Arrow stream (pyarrow RecordBatchReader or any ``__arrow_c_stream__`` object).

The stream is read once, batch by batch (each batch viewed as a Polars DataFrame without a
copy, dense counts taken in its row slices as for a DataFrame), never materialised.  A stream
cannot be read twice, so once a batch has a row without a cell the remaining batches are only
scanned for the error's statistics.
"""

from __future__ import annotations

from typing import Any

import polars as pl
import pyarrow as pa

from polars_dp.counting.aggregate import Accumulator, Counts
from polars_dp.counting.engines.polars import add_batch, add_frame, plan_cells
from polars_dp.counting.invalid import Stats, invalid_error, merge_stats, polars_stats
from polars_dp.counting.spec import CountSpec


def as_reader(data: Any) -> pa.RecordBatchReader:
    if isinstance(data, pa.RecordBatchReader):
        return data
    return pa.RecordBatchReader.from_stream(data)


def count_stream(data: Any, spec: CountSpec, *, dense: bool) -> Counts:
    reader = as_reader(data)
    schema = pl.DataFrame(pl.from_arrow(reader.schema.empty_table())).schema
    keys, drop, dtypes, affine = plan_cells(schema, spec, dense)
    acc = Accumulator(spec.n_cells, dense, spec.integer, spec.room)
    stats: Stats | None = None
    for record_batch in reader:
        frame = pl.DataFrame(pl.from_arrow(record_batch))
        if stats is None and dense and add_frame(acc, frame, spec, keys, drop, affine):
            continue
        kept = frame if drop is None else frame.filter(drop)
        if stats is None and not dense and add_batch(acc, kept.select(keys), spec):
            continue
        stats = merge_stats(stats, polars_stats(kept, spec, schema))
    if stats is not None:
        raise invalid_error(spec, dtypes, stats)
    return acc.dense() if dense else acc.sparse()


__all__ = ["as_reader", "count_stream"]
