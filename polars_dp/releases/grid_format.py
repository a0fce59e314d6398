"""Reading a grid release table back: cells located by their labels, parameters recomputed.

Rows are placed by their attribute (and hierarchy-level) columns, never by row order, and the
noise scale is recomputed from epsilon, the attributes and the neighbour relation; anything
else is a :class:`~polars_dp.ReleaseFormatError`.

A file still in the order ``write_parquet`` wrote it (C order of the cells) is read in batches
(:func:`counts_in_write_order`): every label column is checked, vectorised, to name exactly the
cell its row position names (dictionary columns by their codes, the dictionary compared once),
so the counts are copied in place without decoding a label per row, one batch in memory at a
time.  Anything else (another order, another encoding, a damaged file) goes to the general
path, which places rows by label and names what is wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
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


# ---------------------------------------------------------------------------- files in write order
#: Rows per batch when a grid file is read in write order.
READ_BATCH = 1 << 20

#: ``codes(array) -> int codes along the axis`` of one batch's column, or None (not checkable here).
_Codes = Callable[[pa.Array], "np.ndarray | None"]


def _string_codes(labels: list) -> _Codes:
    """Codes of a dictionary column whose dictionary is exactly ``labels`` (as written)."""
    expected = pa.array([str(x) for x in labels], pa.string())

    def codes(array: pa.Array) -> np.ndarray | None:
        if not pa.types.is_dictionary(array.type) or array.null_count:
            return None
        dictionary = array.dictionary
        if dictionary.type != pa.string():
            try:
                dictionary = dictionary.cast(pa.string())
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                return None
        if not dictionary.equals(expected):
            return None
        return array.indices.to_numpy(zero_copy_only=False)
    return codes


def _integer_codes(values: np.ndarray, offset: int, width: int, n: int) -> np.ndarray | None:
    """``(v - offset) / width`` when every value is one of ``offset + k width``, ``0 <= k < n``."""
    if not np.issubdtype(values.dtype, np.integer) or values.size == 0:
        return None if values.size else np.zeros(0, dtype=np.int64)
    lo, hi = int(values.min()), int(values.max())
    if lo < offset or hi > offset + (n - 1) * width:
        return None
    codes = values.astype(np.int64) - offset
    if width != 1:
        codes, rest = np.divmod(codes, width)
        if rest.any():
            return None
    return codes


def _plain_codes(attribute: Attribute) -> _Codes | None:
    """Codes of a plain (not dictionary) numeric label column, or None when this attribute's
    labels cannot be checked without a per-label lookup."""
    if isinstance(attribute, Nominal):
        labels = attribute.cell_labels()
        if isinstance(labels[0], str):
            return _string_codes(labels)
        arr = np.asarray(labels)
        if not np.issubdtype(arr.dtype, np.integer) or arr.min() < 0 or arr.max() >= 4 * arr.size + 1024:
            return None
        table = np.full(int(arr.max()) + 1, -1, dtype=np.int64)
        table[arr] = np.arange(arr.size)

        def nominal(array: pa.Array) -> np.ndarray | None:
            if array.null_count or pa.types.is_dictionary(array.type):
                return None
            codes = _integer_codes(array.to_numpy(zero_copy_only=False), 0, 1, table.size)
            if codes is None:
                return None
            codes = table[codes]
            return None if codes.size and codes.min() < 0 else codes
        return nominal
    if not attribute.integer:
        return None

    def ordinal(array: pa.Array) -> np.ndarray | None:
        if array.null_count or pa.types.is_dictionary(array.type):
            return None
        return _integer_codes(array.to_numpy(zero_copy_only=False), int(attribute.lo), int(attribute.width),
                              attribute.n_cells)
    return ordinal


def _level_checks(attribute: Nominal, column: str) -> list[tuple[str, _Codes, np.ndarray]]:
    """Per level column: its name, its codes reader and the code each leaf must carry."""
    out = []
    for lvl, labels in attribute.hierarchy.level_labels().items():
        texts = list(dict.fromkeys(str(x) for x in labels))
        pos = {t: i for i, t in enumerate(texts)}
        leaf_code = np.array([pos[str(x)] for x in labels], dtype=np.int64)
        out.append((f"{column}_{lvl}", _string_codes(texts), leaf_code))
    return out


class RowGroupColumns:
    """One row group of a Parquet file whose columns are decoded one at a time, on request
    (``num_rows``, ``column(name)``, as a record batch has): only one decoded column is held."""

    def __init__(self, file: Any, index: int):
        self.file, self.index = file, index
        self.num_rows = file.metadata.row_group(index).num_rows

    def column(self, name: str) -> pa.Array:
        table = self.file.read_row_group(self.index, columns=[name], use_threads=False)
        return table.column(0).combine_chunks()


def write_order_columns(attrs: tuple[Attribute, ...]) -> list[str]:
    """The columns :func:`counts_in_write_order` reads."""
    names = []
    for a in attrs:
        names.append(a.column)
        if isinstance(a, Nominal):
            names.extend(f"{a.column}_{lvl}" for lvl in a.hierarchy.level_labels())
    return [*names, "count"]


def counts_in_write_order(batches: Iterable[Any], attrs: tuple[Attribute, ...],
                          shape: tuple[int, ...]) -> np.ndarray | None:
    """The counts of a grid file whose rows are in the C order of the cells, or None.

    For the rows ``[a, b)`` of each batch, ``sum_k code_k stride_k`` (each column's codes, range
    checked) must equal ``a, ..., b - 1`` and every level column must carry its leaf's ancestor:
    then row ``i`` names cell ``i`` and its count is copied to ``counts[i]``.  Any other file
    (order, types, nulls, dictionaries, length) returns None without raising.
    """
    n_cells = int(np.prod(shape, dtype=np.int64))
    readers: list[tuple[str, _Codes, int, list]] = []
    stride = n_cells
    for a in attrs:
        stride //= a.n_cells
        reader = _plain_codes(a)
        if reader is None:
            return None
        levels = _level_checks(a, a.column) if isinstance(a, Nominal) else []
        readers.append((a.column, reader, stride, levels))
    counts: np.ndarray | None = None
    ramp = np.arange(min(READ_BATCH, n_cells), dtype=np.int64)
    flat = np.empty(ramp.size, dtype=np.int64)
    start = 0
    for batch in batches:
        m = batch.num_rows
        if m > ramp.size or start + m > n_cells:
            if start + m > n_cells:
                return None
            ramp = np.arange(m, dtype=np.int64)
            flat = np.empty(m, dtype=np.int64)
        f = flat[:m]
        f.fill(-start)
        for column, reader, step, levels in readers:
            codes = reader(batch.column(column))
            if codes is None or codes.size != m:
                return None
            f += codes * step if step != 1 else codes
            for name, level_reader, leaf_code in levels:
                got = level_reader(batch.column(name))
                if got is None or not np.array_equal(got, leaf_code[codes]):
                    return None
        if not np.array_equal(f, ramp[:m]):
            return None
        count = batch.column("count")
        if count.null_count or not (pa.types.is_floating(count.type) or pa.types.is_integer(count.type)):
            return None
        values = count.to_numpy(zero_copy_only=False)
        if counts is None:
            counts = np.empty(n_cells, dtype=values.dtype)  # the stored type (the constructor decides)
        elif values.dtype != counts.dtype:
            return None
        counts[start:start + m] = values
        start += m
    if start != n_cells or counts is None:
        return None
    return counts.reshape(shape)


__all__: list[str] = []  # private helpers of GridRelease.from_arrow
