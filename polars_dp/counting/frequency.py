"""The frequency matrix (data cube base cuboid) of a table, computed by Polars.

One flat cell index per row is built as a Polars expression (C order over the declared
attributes: ``cell = sum_i idx_i * stride_i``), grouped with ``group_by("cell").len()``
(the streaming engine for lazy inputs; on a single integer key it is several times faster
and leaner than grouping on the attribute columns), and scattered once into a dense numpy
array.  Only that aggregate leaves Polars: the private rows are read once, here.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from polars_dp.domains.attributes import Attribute, as_attributes
from polars_dp.errors import ColumnNotFoundError, DomainError, DomainTooLargeError, ParameterError
from polars_dp.params import NULLS, ON_OUT_OF_DOMAIN, check_option


def as_lazy(frame: Any) -> pl.LazyFrame:
    """A LazyFrame over a Polars DataFrame/LazyFrame or a pyarrow Table."""
    if isinstance(frame, pl.LazyFrame):
        return frame
    if isinstance(frame, pl.DataFrame):
        return frame.lazy()
    if isinstance(frame, (pa.Table, pa.RecordBatch)):
        return pl.from_arrow(frame).lazy()
    raise ParameterError(
        f"expected a Polars DataFrame/LazyFrame or a pyarrow Table, got {type(frame).__name__}"
    )


def check_row_options(on_out_of_domain: str, nulls: str) -> None:
    """The row-wise options every mechanism takes: ``on_out_of_domain`` and ``nulls``."""
    check_option(on_out_of_domain, "on_out_of_domain", ON_OUT_OF_DOMAIN)
    check_option(nulls, "nulls", NULLS)


def total_memory_bytes() -> int:
    """Physical memory of this machine (falls back to 8 GiB where it cannot be read)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 8 << 30


def check_domain_size(shape: tuple[int, ...], *, bytes_per_cell: int = 24,
                      attributes: Iterable[Attribute] = ()) -> int:
    """Number of cells of ``shape``; raise DomainTooLargeError before anything is allocated
    when ``cells * bytes_per_cell`` exceeds physical memory."""
    n = 1
    for s in shape:
        n *= int(s)
    need = n * bytes_per_cell
    have = total_memory_bytes()
    if need > have:
        dims = " x ".join(f"{a.column}={a.n_cells}" for a in attributes) or str(shape)
        raise DomainTooLargeError(
            f"the declared domain has {n:,} cells ({dims}); working on it needs about "
            f"{need / 2**30:.1f} GiB but this machine has {have / 2**30:.1f} GiB. "
            "Use coarser bins (a larger width), fewer attributes or a smaller hierarchy."
        )
    return n


def strides(shape: tuple[int, ...]) -> list[int]:
    """Row-major (C order) strides in cells."""
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= s
    return out[::-1]


def _check_columns(schema: pl.Schema, attrs: tuple[Attribute, ...]) -> None:
    missing = [a.column for a in attrs if a.column not in schema]
    if missing:
        raise ColumnNotFoundError(
            f"column {missing[0]!r} is not in the input; available columns: {list(schema.names())}"
        )


def cell_index_frame(frame: Any, attributes: Iterable[Attribute], *,
                     on_out_of_domain: str = "raise", nulls: str = "raise"
                     ) -> tuple[pl.LazyFrame, pl.Expr, tuple[Attribute, ...]]:
    """Validate options and columns; return (lazy input, flat cell expression, attributes).

    Rows whose cell is null are invalid (null, NaN or outside the domain); with
    ``nulls="drop"`` rows with a null/NaN in a declared column are filtered out first.
    """
    check_row_options(on_out_of_domain, nulls)
    attrs = as_attributes(attributes)
    lf = as_lazy(frame)
    schema = lf.collect_schema()
    _check_columns(schema, attrs)
    clamp = on_out_of_domain == "clamp"
    if clamp and all(a.kind != "ordinal" for a in attrs):
        raise ParameterError(
            f"on_out_of_domain='clamp' applies to ordinal attributes only; {attrs[0].column!r} "
            "is nominal (add its missing categories to the hierarchy instead)"
        )
    if nulls == "drop":
        lf = lf.filter(pl.all_horizontal(a.valid_expr(schema[a.column]) for a in attrs))
    shape = tuple(a.n_cells for a in attrs)
    flat = pl.lit(0, dtype=pl.Int64)
    for a, stride in zip(attrs, strides(shape), strict=True):
        flat = flat + a.index_expr(schema[a.column], clamp=clamp) * stride
    return lf, flat.alias("cell"), attrs


def frequency_matrix(frame: Any, attributes: Iterable[Attribute], *,
                     on_out_of_domain: str = "raise", nulls: str = "raise",
                     bytes_per_cell: int = 24) -> np.ndarray:
    """Dense d-dimensional count matrix (float64, shape = cells per attribute, in order).

    Raises DomainError naming the column and an offending value when a row is null, NaN
    or outside its declared domain (unless an opt-in handles it), and DomainTooLargeError
    before allocating a matrix that cannot fit in memory.
    """
    lf, flat, attrs = cell_index_frame(frame, attributes, on_out_of_domain=on_out_of_domain,
                                       nulls=nulls)
    shape = tuple(a.n_cells for a in attrs)
    n_cells = check_domain_size(shape, bytes_per_cell=bytes_per_cell, attributes=attrs)
    agg = lf.select(flat).group_by("cell").len().collect(engine="streaming")
    if agg["cell"].null_count():
        raise _explain_invalid(lf, attrs, on_out_of_domain)
    counts = np.zeros(n_cells, dtype=np.float64)
    counts[agg["cell"].to_numpy()] = agg["len"].to_numpy()
    return counts.reshape(shape)


def _explain_invalid(lf: pl.LazyFrame, attrs: tuple[Attribute, ...], on_out_of_domain: str
                     ) -> DomainError:
    """Second pass, on the error path only: which column, how many rows, which value."""
    schema = lf.collect_schema()
    clamp = on_out_of_domain == "clamp"
    for a in attrs:
        dtype = schema[a.column]
        col = pl.col(a.column)
        stats = lf.select(
            (~a.valid_expr(dtype)).sum().alias("missing"),
            (a.valid_expr(dtype) & a.index_expr(dtype, clamp=clamp).is_null()).sum().alias("outside"),
            col.filter(a.valid_expr(dtype) & a.index_expr(dtype, clamp=clamp).is_null())
            .first().cast(pl.String).alias("example"),
        ).collect()
        missing, outside, example = stats.row(0)
        if missing:
            what = "null or NaN" if dtype.is_float() else "null"
            return DomainError(
                f"column {a.column!r} has {missing} {what} value(s); drop or fill them first, "
                "or pass nulls='drop' (drops those rows; each row is kept or dropped on its own, "
                "so the privacy guarantee is unchanged)"
            )
        if outside:
            fix = ("declare a wider domain or pass on_out_of_domain='clamp'"
                   if a.kind == "ordinal" else "add the value to the hierarchy or filter it out")
            return DomainError(
                f"column {a.column!r} has {outside} value(s) outside the declared domain "
                f"{a.domain_text()}, e.g. {example!r}; {fix}"
            )
    return DomainError("some rows fall outside the declared domain")  # pragma: no cover


__all__ = ["as_lazy", "cell_index_frame", "check_domain_size", "frequency_matrix", "strides"]
