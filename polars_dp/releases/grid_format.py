"""Reading a grid release table back: cells located by their labels, parameters recomputed.

Rows are placed by their attribute (and hierarchy-level) columns, never by row order, and the
noise scale is recomputed from epsilon, the attributes and the neighbour relation; anything
else is a :class:`~polars_dp.ReleaseFormatError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from polars_dp.domains.attributes import Attribute, Nominal
from polars_dp.errors import PolarsDPError, ReleaseFormatError
from polars_dp.plans import PriveletPlan
from polars_dp.releases.integrity import (
    check_equal,
    check_noise_scale,
)


def _check_grid_parameters(attrs: tuple[Attribute, ...], scale: float, common: Mapping[str, Any]) -> None:
    """The declared parameters against the plan rebuilt from the metadata (attributes, epsilon,
    neighbours, noise and the transformed columns): ``rho``, ``sensitivity`` and the noise
    scale (:func:`check_noise_scale` against the plan's ``Delta rho / epsilon``).  No formula is
    repeated here: the plan (:class:`polars_dp.plans.GridPlan`) is the one calibration."""
    params = common["params"]
    columns = [a.column for a in attrs]
    transformed = params.get("transformed", [])
    if not isinstance(transformed, list) or any(c not in columns for c in transformed):
        raise ReleaseFormatError(f"release metadata field 'params.transformed' must list attribute "
                                 f"columns {columns}, got {transformed!r}")
    untransformed = [c for c in columns if c not in transformed]
    try:
        plan = PriveletPlan(attrs, epsilon=common["epsilon"], neighbours=common["neighbours"],
                            untransformed=untransformed, noise=common.get("noise", "float"))
    except PolarsDPError as exc:
        raise ReleaseFormatError(f"release metadata field 'params.transformed' is invalid: {exc}") from None
    if "rho" in params:
        check_equal("params.rho", params["rho"], plan.rho)
    if "sensitivity" in params:
        check_equal("params.sensitivity", params["sensitivity"], plan.sensitivity)
    check_noise_scale("noise_scale", scale, plan.nominal_scale)


def _dictionary_codes(column: pa.ChunkedArray, lookup: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, bad)`` per row of ``lookup`` (values -> ``(codes, bad)``) applied to the column;
    a dictionary column is looked up once per dictionary entry, then indexed (no per-row strings)."""
    if pa.types.is_dictionary(column.type):
        array = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
        if array.null_count:
            return np.zeros(len(array), dtype=np.int64), ~np.asarray(array.is_valid())
        codes, bad = lookup(array.dictionary)
        indices = array.indices.to_numpy(zero_copy_only=False)
        return codes[indices], bad[indices]
    return lookup(column)


def _nominal_lookup(labels: list) -> Any:
    def lookup(values: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
        series = pl.Series(values) if not isinstance(values, pl.Series) else values
        if isinstance(series.dtype, (pl.Categorical, pl.Enum)):
            series = series.cast(pl.String)
        try:
            codes = series.replace_strict(list(labels), list(range(len(labels))), default=None,
                                          return_dtype=pl.Int64)
        except (pl.exceptions.PolarsError, TypeError, ValueError):
            codes = pl.Series([None] * len(series), dtype=pl.Int64)
        return codes.fill_null(0).to_numpy().astype(np.int64), codes.is_null().to_numpy()
    return lookup


def _label_codes(table: pa.Table, column: str, attribute: Attribute) -> np.ndarray:
    """Cell index along ``attribute`` of every row, from its label column; a label that is
    not one of the attribute's cells is a ReleaseFormatError."""
    if column not in table.column_names:
        raise ReleaseFormatError(f"grid release has no {column!r} column")
    data = table.column(column)
    if isinstance(attribute, Nominal):
        codes, bad = _dictionary_codes(data, _nominal_lookup(attribute.cell_labels()))
    else:
        values = data.to_numpy()
        if not np.issubdtype(values.dtype, np.number):
            raise ReleaseFormatError(f"grid release column {column!r} has type {data.type}, not numbers")
        if attribute.integer and np.issubdtype(values.dtype, np.integer):  # labels lo + k width
            offset = values.astype(np.int64) - attribute.lo
            codes = offset // attribute.width
            bad = (offset % attribute.width != 0) | (codes < 0) | (codes >= attribute.n_cells)
            codes = np.clip(codes, 0, attribute.n_cells - 1)
        else:
            labels = np.asarray(attribute.cell_labels())
            codes = np.clip(np.searchsorted(labels, values), 0, len(labels) - 1)
            bad = ~(labels[codes] == values)
    if bad.any():
        raise ReleaseFormatError(
            f"grid release column {column!r} holds {data[int(np.flatnonzero(bad)[0])].as_py()!r}, which is "
            f"not a cell of {attribute.column} {attribute.domain_text()}; the table was edited"
        )
    return codes.astype(np.int64)


def _check_level_column(table: pa.Table, column: str, attribute: Nominal, labels: list, leaf: np.ndarray
                        ) -> None:
    """The ``<column>_<level>`` column must name each row's ancestor at that level."""
    if column not in table.column_names:
        raise ReleaseFormatError(f"grid release has no {column!r} column")
    texts = list(dict.fromkeys(str(x) for x in labels))
    expected = np.array([texts.index(str(x)) for x in labels], dtype=np.int64)[leaf]
    got, bad = _dictionary_codes(table.column(column), _nominal_lookup(texts))
    if bad.any() or not np.array_equal(got, expected):
        raise ReleaseFormatError(f"grid release column {column!r} disagrees with the hierarchy of "
                                 f"{attribute.column}; the table was edited")


def _counts_by_label(table: pa.Table, attrs: tuple[Attribute, ...], shape: tuple[int, ...]) -> np.ndarray:
    """The counts array, each row placed at the cell its label columns name (row order is not
    trusted); refuses a table that misses or repeats a cell, or whose level columns disagree
    with the hierarchy."""
    if "count" not in table.column_names:
        raise ReleaseFormatError("grid release has no 'count' column")
    n_cells = int(np.prod(shape, dtype=np.int64))
    if table.num_rows != n_cells:
        raise ReleaseFormatError(
            f"grid release has {table.num_rows} rows but its metadata declares shape {list(shape)} "
            f"({n_cells} cells): rows were removed or added"
        )
    flat = np.zeros(table.num_rows, dtype=np.int64)
    for a in attrs:
        codes = _label_codes(table, a.column, a)
        flat = flat * a.n_cells + codes
        if isinstance(a, Nominal):
            for lvl, labels in a.hierarchy.level_labels().items():
                _check_level_column(table, f"{a.column}_{lvl}", a, labels, codes)
    seen = np.bincount(flat, minlength=n_cells)
    if np.any(seen != 1):
        cell = int(np.flatnonzero(seen != 1)[0])
        raise ReleaseFormatError(
            f"grid release has {int(seen[cell])} rows for cell {np.unravel_index(cell, shape)} (each cell "
            "must appear once): rows were removed or repeated"
        )
    count = table.column("count").to_numpy()
    if not np.issubdtype(count.dtype, np.number):
        raise ReleaseFormatError(f"grid release column 'count' has type {count.dtype}, not numbers")
    counts = np.empty(n_cells, dtype=count.dtype)  # the stored type (the constructor decides)
    counts[flat] = count
    return counts.reshape(shape)


__all__: list[str] = []  # private helpers of GridRelease.from_arrow
