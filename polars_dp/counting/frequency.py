"""The frequency matrix (data cube base cuboid) of a table, counted where the data lives.

One flat cell index per row (C order over the declared attributes: ``cell = sum_i idx_i *
stride_i``), as a Polars expression or compiled to SQL for DuckDB and Spark
(:mod:`polars_dp.counting.engines`).  Polars inputs are scattered with ``np.bincount`` into the
one result array (streamed batch by batch for LazyFrames); SQL engines group by the cell and
return only (cell, count).  The private rows are read once, here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from polars_dp.counting import engines
from polars_dp.counting.spec import CountSpec, strides
from polars_dp.domains.attributes import Attribute, as_attributes
from polars_dp.domains.size import check_domain_size  # the one size rule, re-exported here
from polars_dp.errors import ParameterError
from polars_dp.params import NULLS, ON_OUT_OF_DOMAIN, check_option


def as_lazy(frame: Any) -> pl.LazyFrame:
    """A LazyFrame over a Polars DataFrame/LazyFrame or a pyarrow Table."""
    if isinstance(frame, pl.LazyFrame):
        return frame
    if isinstance(frame, pl.DataFrame):
        return frame.lazy()
    if isinstance(frame, (pa.Table, pa.RecordBatch)):
        return pl.DataFrame(pl.from_arrow(frame)).lazy()
    raise ParameterError(
        f"expected a Polars DataFrame/LazyFrame or a pyarrow Table, got {type(frame).__name__}"
    )


def check_row_options(on_out_of_domain: str, nulls: str) -> None:
    """The row-wise options every mechanism takes: ``on_out_of_domain`` and ``nulls``."""
    check_option(on_out_of_domain, "on_out_of_domain", ON_OUT_OF_DOMAIN)
    check_option(nulls, "nulls", NULLS)


def frequency_matrix(frame: Any, attributes: Iterable[Attribute], *,
                     on_out_of_domain: str = "raise", nulls: str = "raise",
                     bytes_per_cell: int = 24, count_column: str | None = None,
                     integer: bool = False, room: int = 0) -> np.ndarray:
    """Dense d-dimensional count matrix (float64, or exact int64 with ``integer``; shape = cells
    per attribute, in order).

    ``frame`` is any input of :mod:`polars_dp.counting.engines` (Polars, Arrow, DuckDB, Spark);
    the count runs in that engine.  ``count_column`` names a column of non-negative integer
    counts (pre-aggregated rows, see :mod:`polars_dp.counting.spec`).  Raises DomainError naming
    the column and an offending value when a row is null, NaN or outside its declared domain
    (unless a row rule handles it: :mod:`polars_dp.domains.attributes`), and DomainTooLargeError
    before allocating a matrix that cannot fit in memory.

    ``room``: where the count allows (the parallel scatter of
    :class:`~polars_dp.counting.aggregate.Accumulator`), the counts are the last cells of a
    buffer (their ``base`` chain) with ``room`` int64 slots in front of them, never written, so
    that a consumer may build a larger result over the counts in place.
    """
    attrs = as_attributes(attributes)
    spec = CountSpec.make(attrs, on_out_of_domain=on_out_of_domain, nulls=nulls, count_column=count_column,
                          integer=integer)
    shape = spec.shape
    check_domain_size(shape, bytes_per_cell=bytes_per_cell, attributes=attrs)
    if room:
        spec = dataclasses.replace(spec, room=int(room))
    return engines.count(frame, spec, dense=True).reshape(shape)


__all__ = ["as_lazy", "check_domain_size", "frequency_matrix", "strides"]
