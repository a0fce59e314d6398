"""Counting in Polars: DataFrame, LazyFrame and pyarrow Table inputs.

The cell key is one Polars expression per row (the C-order flat index, or the per-axis cells
when the caller maps them to another key).  Dense counts of a DataFrame are taken in row
slices (:mod:`polars_dp.counting.slices`: numpy on the columns when every axis is an integer
affine rule, else the expressions on each slice), each added to the single result buffer
(:class:`~polars_dp.counting.aggregate.Accumulator`); a LazyFrame runs on the streaming engine
and is consumed batch by batch, each batch counted the same way, so no cell column of the
whole input is ever held.  Sparse counts (PrivTree's keys) take a DataFrame in one go.
Invalid rows are explained in a second pass (error path only).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import polars as pl

from polars_dp.counting.aggregate import Accumulator, Counts
from polars_dp.counting.invalid import invalid_error, polars_stats
from polars_dp.counting.slices import AffineAxis, affine_axes, affine_counter, frame_slices, slice_rows
from polars_dp.counting.spec import CountSpec, check_count_dtype, check_counts, strides

#: Rows per batch when a LazyFrame is streamed.
BATCH_ROWS = 1 << 21
#: Rows per slice when the cells of a DataFrame are Polars expressions (public: a constant).
EXPRESSION_SLICE_ROWS = 1 << 18


#: Column name -> Polars type: a frame's :class:`polars.Schema`, or those of the columns read.
Schema = Mapping[str, pl.DataType]


def column_types(frame: pl.DataFrame, spec: CountSpec) -> dict[str, pl.DataType]:
    """The types of the columns ``spec`` reads, from those columns alone (a DataFrame's whole
    :attr:`~polars.DataFrame.schema` is built in Python: about 90 us of a small release, cold);
    ColumnNotFoundError naming the frame's columns for a missing one."""
    try:
        return {c: frame.get_column(c).dtype for c in spec.columns}
    except pl.exceptions.ColumnNotFoundError:
        spec.check_columns(frame.columns)
        raise


def prepare(schema: Schema, spec: CountSpec) -> tuple[list[pl.Expr], pl.Expr | None, list[pl.DataType]]:
    """(key expressions, row filter of the row rules, column dtypes); checks columns and types."""
    spec.check_columns(list(schema))
    dtypes = [schema[a.column] for a in spec.axes]
    if spec.count_column:
        check_count_dtype(spec.count_column, schema[spec.count_column])
    idx = [a.index_expr(d, clamp=spec.clamp) for a, d in zip(spec.axes, dtypes, strict=True)]
    if spec.key is None:
        terms = [e if s == 1 else e * s for e, s in zip(idx, strides(spec.shape), strict=True)]
        flat = terms[0]
        for term in terms[1:]:
            flat = flat + term
        keys = [flat.alias("_cell")]
    else:
        keys = [e.alias(f"_i{k}") for k, e in enumerate(idx)]
    if spec.count_column:
        keys.append(pl.col(spec.count_column).alias("_w"))
    return keys, row_filter(spec, dtypes, idx), dtypes


def plan_cells(schema: Schema, spec: CountSpec, dense: bool
               ) -> tuple[list[pl.Expr], pl.Expr | None, list[pl.DataType], list[AffineAxis] | None]:
    """:func:`prepare`'s (keys, row filter, dtypes) and, for dense counts whose axes are all
    integer affine rules (:func:`~polars_dp.counting.slices.affine_axes`), those rules; then no
    expression is built (such columns and declarations raise nothing in :func:`prepare`)."""
    spec.check_columns(list(schema))
    dtypes = [schema[a.column] for a in spec.axes]
    affine = affine_axes(spec, dtypes) if dense else None
    if affine is not None:
        return [], None, dtypes, affine
    return (*prepare(schema, spec), None)


def row_filter(spec: CountSpec, dtypes: list[pl.DataType], idx: list[pl.Expr]) -> pl.Expr | None:
    """The rows the row rules keep (None: every row), each judged on its own: with
    ``nulls="drop"`` no null or NaN (nor a null count); the values an axis drops when outside
    its domain (:meth:`CountSpec.drops_outside`) have a cell; a count is not negative where
    negative counts count 0.  Rows these rules keep may still lack a cell (a null under
    ``nulls="raise"``): the count then explains them with a DomainError."""
    if not spec.drops_rows:
        return None
    keep = []
    for a, d, i in zip(spec.axes, dtypes, idx, strict=True):
        valid = a.valid_expr(d)
        if spec.drops_outside(a):
            keep.append(i.is_not_null() if spec.drop_nulls else i.is_not_null() | ~valid)
        elif spec.drop_nulls:
            keep.append(valid)
    if spec.count_column:
        w = pl.col(spec.count_column)
        if spec.drops_negative_counts:
            keep.append(w >= 0 if spec.drop_nulls else (w >= 0) | w.is_null())
        elif spec.drop_nulls:
            keep.append(w.is_not_null())
    return pl.all_horizontal(keep)


def add_batch(acc: Accumulator, batch: pl.DataFrame, spec: CountSpec) -> bool:
    """Add one batch of key columns; False (nothing added) when a row has no cell."""
    if spec.key is None:
        cell = batch["_cell"]
        if cell.null_count():
            return False
        keys = cell.to_numpy()
    else:
        cols = [batch[f"_i{k}"] for k in range(len(spec.axes))]
        if any(c.null_count() for c in cols):
            return False
        keys = spec.keys_from_axes([c.to_numpy() for c in cols])
    weights = None
    if spec.count_column:
        w = batch["_w"]
        check_counts(spec.count_column, w.null_count(), w.min())
        weights = w.to_numpy()
    acc.add(keys, weights)
    return True


def add_frame(acc: Accumulator, frame: pl.DataFrame, spec: CountSpec, keys: list[pl.Expr],
              drop: pl.Expr | None, affine: list[AffineAxis] | None) -> bool:
    """Add the rows of ``frame`` (its raw columns) slice by slice; False (stopped there) when a
    row has no cell.  ``affine``: the numpy rule of :func:`~polars_dp.counting.slices.affine_axes`
    (``frame`` needs only those columns), else the key expressions and row filter of
    :func:`prepare` on each slice.  The counts are the same whatever the slicing (see
    :mod:`polars_dp.counting.slices`)."""
    if affine is not None:
        for cells in affine_counter(frame, affine, spec.clamp, slice_rows(len(affine))):
            if cells is None:
                return False
            acc.add(cells)
        return True
    for part in frame_slices(frame, EXPRESSION_SLICE_ROWS):
        if not add_batch(acc, (part if drop is None else part.filter(drop)).select(keys), spec):
            return False
    return True


def count_polars(frame: pl.DataFrame | pl.LazyFrame, spec: CountSpec, *, dense: bool
                 ) -> Counts:
    schema = column_types(frame, spec) if isinstance(frame, pl.DataFrame) else frame.lazy().collect_schema()
    keys, drop, dtypes, affine = plan_cells(schema, spec, dense)

    def rows() -> pl.LazyFrame:
        """The input as a query, less the rows the row rules drop (built only when read)."""
        lf = frame.lazy()
        return lf if drop is None else lf.filter(drop)

    acc = Accumulator(spec.n_cells, dense, spec.integer, spec.room)
    batches: Iterable[pl.DataFrame]
    if isinstance(frame, pl.DataFrame) and dense:  # eager: no query-plan overhead, in slices
        batches = [frame]
        complete = add_frame(acc, frame, spec, keys, drop, affine)
    elif isinstance(frame, pl.DataFrame):
        batches = [(frame if drop is None else frame.filter(drop)).select(keys)]
        complete = add_batch(acc, batches[0], spec)
    elif affine is not None:  # the raw columns streamed, each batch counted in slices
        batches = rows().select([a.column for a in affine]).collect_batches(
            chunk_size=BATCH_ROWS, maintain_order=False, engine="streaming")
        complete = all(add_frame(acc, batch, spec, keys, None, affine) for batch in batches)
    else:
        batches = rows().select(keys).collect_batches(chunk_size=BATCH_ROWS, maintain_order=False,
                                                      engine="streaming")
        complete = all(add_batch(acc, batch, spec) for batch in batches)
    if not complete:
        del batches  # stops the stream before the second (error-path) pass
        raise invalid_error(spec, dtypes, polars_stats(rows(), spec, schema))
    return acc.dense() if dense else acc.sparse()


__all__ = ["BATCH_ROWS", "EXPRESSION_SLICE_ROWS", "Schema", "add_batch", "add_frame", "column_types",
           "count_polars", "plan_cells", "prepare", "row_filter"]
