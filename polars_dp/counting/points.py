"""Points of the spatial mechanisms: counts per grid cell (any engine) or the points themselves.

:func:`grid_counts` and :func:`finest_cells` count the points per cell of a public grid of the
box in the engine holding them (:mod:`polars_dp.counting.engines`); :func:`collect_weighted_points`
reads the point columns of a Polars input into numpy (exact references for experiments).

Only the declared columns are collected (streaming engine on a LazyFrame).  A null, NaN or a
value outside the declared box raises :class:`DomainError` by default.  Opt-ins, each a rule
on one row alone (so the guarantee is unchanged): ``nulls="drop"`` drops rows with a null/NaN
in a declared column or a null count; ``on_out_of_domain="clamp"`` moves outside values
(``+-inf`` included) onto the nearest face of the box and ``"drop"`` drops their rows; under
either, a negative count counts 0 (:mod:`polars_dp.counting.spec`).  Counts are capped per row
and per cell at :data:`~polars_dp.counting.aggregate.COUNT_BOUND`
(:mod:`polars_dp.counting.aggregate`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl

from polars_dp.counting import engines
from polars_dp.counting.aggregate import COUNT_BOUND, row_weights
from polars_dp.counting.frequency import check_row_options
from polars_dp.counting.spec import CountSpec, check_count_dtype, check_counts
from polars_dp.domains.attributes import int64_expr
from polars_dp.domains.box import Box, grid_axes
from polars_dp.errors import ColumnNotFoundError, ParameterError


def collect_weighted_points(frame: Any, box: Box, *, on_out_of_domain: str = "raise", nulls: str = "raise",
                            count_column: str | None = None) -> tuple[list[np.ndarray], np.ndarray | None]:
    """One float64 numpy array per column of ``box`` (the private points, read once; any input
    of :mod:`polars_dp.counting.engines`) and the counts of ``count_column`` (None without one), each
    capped at :data:`~polars_dp.counting.aggregate.COUNT_BOUND` and held as float64 (exact), so that
    sums of them never wrap."""
    check_row_options(on_out_of_domain, nulls)
    wanted = [*box.columns, *([count_column] if count_column else [])]
    lf = engines.point_columns(frame, wanted)
    schema = lf.collect_schema()
    for c in wanted:
        if c not in schema:
            raise ColumnNotFoundError(f"column {c!r} is not in the input; columns: {schema.names()}")
    for c in box.columns:
        if not schema[c].is_numeric():
            raise ParameterError(f"column {c!r} has type {schema[c]}; spatial columns must be numeric")
    if count_column:
        check_count_dtype(count_column, schema[count_column])
    weight = (int64_expr(count_column, schema[count_column], saturate=True).clip(upper_bound=COUNT_BOUND)
              .alias("_w") if count_column else None)
    lf = lf.select(*(pl.col(c).cast(pl.Float64) for c in box.columns), *([weight] if count_column else []))
    keep = []
    for j, c in enumerate(box.columns):
        v = pl.col(c)
        if nulls == "drop":
            keep.append(v.is_not_null() & v.is_not_nan())
        if on_out_of_domain == "drop":  # a null or NaN is left to the nulls rule
            keep.append(((v >= box.lo[j]) & (v <= box.hi[j])) | v.is_null() | v.is_nan())
    if count_column and nulls == "drop":
        keep.append(pl.col("_w").is_not_null())
    if count_column and on_out_of_domain != "raise":  # a negative count counts 0
        keep.append((pl.col("_w") >= 0).fill_null(True))
    if keep:
        lf = lf.filter(pl.all_horizontal(keep))
    df = lf.collect(engine="streaming")
    weights = None
    if count_column:
        w = df["_w"]
        check_counts(count_column, w.null_count(), w.min())
        weights = row_weights(w.to_numpy())
    out = []
    for j, (c, axis) in enumerate(zip(box.columns, grid_axes(box, 1), strict=True)):
        s = df[c]
        x = s.to_numpy()
        lo, hi = box.lo[j], box.hi[j]
        outside = (x < lo) | (x > hi)
        if on_out_of_domain == "clamp":
            x, outside = np.clip(x, lo, hi), np.zeros(0, dtype=bool)
        error = axis.invalid_error(schema[c], s.null_count(), int(np.count_nonzero(np.isnan(x))),
                                   int(np.count_nonzero(outside)), x[outside][0] if outside.any() else None)
        if error is not None:
            raise error
        out.append(x)
    return out, weights


def grid_counts(data: Any, box: Box, m: int, *, on_out_of_domain: str = "raise", nulls: str = "raise",
                count_column: str | None = None) -> np.ndarray:
    """Points per cell of the ``m``-per-side grid of ``box``: flat float64, C order over
    ``box.columns`` (cell rule of :func:`polars_dp.kernels.grid.grid_cells`)."""
    spec = CountSpec.make(grid_axes(box, m), on_out_of_domain=on_out_of_domain, nulls=nulls,
                          count_column=count_column)
    return engines.count(data, spec, dense=True)


def finest_cells(data: Any, box: Box, bits: int, key: Callable[[list[np.ndarray]], np.ndarray], *,
                 on_out_of_domain: str = "raise", nulls: str = "raise", count_column: str | None = None
                 ) -> tuple[np.ndarray, np.ndarray | None]:
    """Points snapped to the ``2^bits``-per-side grid of ``box``: sorted int64 keys
    ``key(per-dimension cells)`` (e.g. Morton codes) and their int64 counts, or the sorted
    keys of all points with ``None`` (one per key) when an engine returned them in one piece
    (:meth:`~polars_dp.counting.aggregate.Accumulator.sparse`)."""
    spec = CountSpec.make(grid_axes(box, 1 << bits), on_out_of_domain=on_out_of_domain, nulls=nulls,
                          count_column=count_column, key=key)
    return engines.count(data, spec, dense=False)


__all__ = ["collect_weighted_points", "finest_cells", "grid_counts"]
