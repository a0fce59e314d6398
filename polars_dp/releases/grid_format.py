"""Reading a grid release table back: cells located by their labels (the parameters are checked
by re-planning, :meth:`polars_dp.releases.base.Release._replan`).

Rows are placed by their attribute (and hierarchy-level) columns, never by row order; anything
else is a :class:`~polars_dp.ReleaseFormatError`.

The label columns of a cell (:func:`label_columns`, the one layout the writer and the readers
share): a nominal attribute's leaf ``<column>`` (and one ``<column>_<level>`` per hierarchy
level); an ordinal attribute whose cells are single values (integer domain, width 1) that value,
``<column>``; a binned ordinal attribute (:func:`polars_dp.domains.ranges.is_binned`) the bin's
range as a query takes it, ``<column>_lo`` and ``<column>_hi``
(:func:`polars_dp.domains.ranges.bin_bounds`): in an integer domain both inclusive (the whole
numbers ``lo..hi``), in a float domain half-open ``[lo, hi)`` (the last bin closed at the
domain's ``hi``).  Tables written before the ranges were labelled carry one ``<column>`` with each
bin's lower value: :func:`table_label_columns` is the one adapter that still reads them.

A file still in the order ``write_parquet`` wrote it (C order of the cells) is read in batches
(:func:`counts_in_write_order`): every label column is checked, vectorised, to name exactly the
cell its row position names (dictionary columns by their codes, the dictionary compared once),
so the counts are copied in place without decoding a label per row, one batch in memory at a
time.  Anything else (another order, another encoding, a damaged file) goes to the general
path, which places rows by label and names what is wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from polars_dp.arrow_arrays import buffer_values
from polars_dp.domains.attributes import Attribute, Nominal
from polars_dp.domains.queries import cell_bounds
from polars_dp.domains.ranges import is_binned
from polars_dp.errors import ReleaseFormatError


# ---------------------------------------------------------------------------- label columns
def label_columns(attribute: Attribute) -> list[str]:
    """The columns labelling a cell of ``attribute`` (module docstring; the hierarchy-level
    columns of a nominal attribute come beside them)."""
    if isinstance(attribute, Nominal) or not is_binned(attribute):
        return [attribute.column]
    return [f"{attribute.column}_lo", f"{attribute.column}_hi"]


def cell_label_values(attribute: Attribute) -> list[np.ndarray | list]:
    """The label of every cell along ``attribute``, one array per :func:`label_columns` entry."""
    if isinstance(attribute, Nominal) or not is_binned(attribute):
        return [attribute.cell_labels()]
    cells = np.arange(attribute.n_cells, dtype=np.int64)
    return list(cell_bounds(attribute, cells, cells + 1))


def table_label_columns(attribute: Attribute, names: Iterable[str]) -> list[str]:
    """The label columns of ``attribute`` in a table with columns ``names``: :func:`label_columns`,
    or, for a table written before binned cells were labelled by their range (no
    ``<column>_lo`` / ``<column>_hi``, a ``<column>`` holding each bin's lower value), that one
    column: the legacy adapter, whose labels are the first of :func:`cell_label_values`."""
    names = set(names)
    current = label_columns(attribute)
    if all(c in names for c in current) or attribute.column not in names:
        return current
    return [attribute.column]


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


def _check_bin_ends(table: pa.Table, column: str, attribute: Attribute, codes: np.ndarray) -> None:
    """The ``<column>_hi`` column must hold the upper end of each row's bin."""
    values = table.column(column).to_numpy()
    expected = np.asarray(cell_label_values(attribute)[1])[codes]
    bad = ~(values == expected) if np.issubdtype(values.dtype, np.number) else np.ones(len(codes), bool)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise ReleaseFormatError(
            f"grid release column {column!r} holds {table.column(column)[row].as_py()!r} but that row's bin "
            f"ends at {expected[row].item()!r}; the table was edited")


def _level_codes(labels: list) -> tuple[list[str], np.ndarray]:
    """A level column's dictionary as written (each label's text once, in leaf order) and the
    index into it of each leaf's label."""
    texts = list(dict.fromkeys(str(x) for x in labels))
    pos = {t: i for i, t in enumerate(texts)}
    return texts, np.array([pos[str(x)] for x in labels], dtype=np.int64)


def _check_level_column(table: pa.Table, column: str, attribute: Nominal, labels: list, leaf: np.ndarray
                        ) -> None:
    """The ``<column>_<level>`` column must name each row's ancestor at that level."""
    if column not in table.column_names:
        raise ReleaseFormatError(f"grid release has no {column!r} column")
    texts, leaf_code = _level_codes(labels)
    got, bad = _dictionary_codes(table.column(column), _nominal_lookup(texts))
    if bad.any() or not np.array_equal(got, leaf_code[leaf]):
        raise ReleaseFormatError(f"grid release column {column!r} disagrees with the hierarchy of "
                                 f"{attribute.column}; the table was edited")


def counts_by_label(table: pa.Table, attrs: tuple[Attribute, ...], shape: tuple[int, ...]) -> np.ndarray:
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
        columns = table_label_columns(a, table.column_names)
        codes = _label_codes(table, columns[0], a)
        if len(columns) == 2:
            _check_bin_ends(table, columns[1], a, codes)
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
#: Rows per record batch when a grid file is read in write order (about 0.3 MB decoded at a
#: time), and the bytes of file read at a time (``ParquetFile(buffer_size=...)``).  Row groups
#: are read one by one: a reader over the whole file reads ahead and holds far more.
READ_BATCH = 1 << 13
READ_BUFFER = 1 << 18


def write_order_batches(file: pq.ParquetFile, columns: list[str]) -> Iterator[pa.RecordBatch]:
    """The record batches of ``columns``, one row group at a time, single-threaded; after each
    group the Arrow pool hands its freed pages back (``release_unused``), so the reader's peak
    is about one group's decoding, not the allocator's retention over the whole file."""
    pool = pa.default_memory_pool()
    for group in range(file.metadata.num_row_groups):
        yield from file.iter_batches(batch_size=READ_BATCH, row_groups=[group], columns=columns,
                                     use_threads=False)
        pool.release_unused()


#: ``values(array) -> numbers to compare with the expected labels`` of one batch's column, or
#: None (not checkable here: nulls, another type or dictionary).
_Values = Callable[[pa.Array], "np.ndarray | None"]


def _dictionary_indices(labels: list) -> _Values:
    """Indices of a dictionary column whose dictionary is exactly ``labels`` (as written)."""
    expected = [str(x) for x in labels]  # compared as a list: ``pa.array`` would import pandas

    def values(array: pa.Array) -> np.ndarray | None:
        if not pa.types.is_dictionary(array.type) or array.null_count:
            return None
        dictionary = array.dictionary
        if dictionary.type != pa.string():
            try:
                dictionary = dictionary.cast(pa.string())
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                return None
        if len(dictionary) != len(expected) or dictionary.to_pylist() != expected:
            return None
        return buffer_values(array.indices)
    return values


def _plain_values(kinds: str) -> _Values:
    """The values of a plain (not dictionary, no nulls) column whose numpy kind is in ``kinds``."""
    def values(array: pa.Array) -> np.ndarray | None:
        out = buffer_values(array)
        return out if out is not None and out.dtype.kind in kinds else None
    return values


def _label_check(attribute: Attribute, labels: np.ndarray | list) -> tuple[_Values, np.ndarray] | None:
    """``(values reader, label of each cell along the axis)`` of a label column holding
    ``labels`` (one per cell), or None when they cannot be compared without a per-label lookup."""
    if isinstance(attribute, Nominal) and isinstance(labels[0], str):
        return _dictionary_indices(list(labels)), np.arange(len(labels), dtype=np.int64)
    arr = np.asarray(labels)
    kinds = "iu" if isinstance(attribute, Nominal) or attribute.integer else "f"
    return (_plain_values(kinds), arr) if arr.dtype.kind in kinds else None


def _runs_match(values: np.ndarray, start: int, step: int, expected: np.ndarray) -> bool:
    """Whether ``values[j] == expected[((start + j) // step) % n]`` for rows inside one period
    ``step n``: a partial run at each end compared with one label, the whole runs between as
    a ``(runs, step)`` view against one label per run (no per-row index array)."""
    n, end = expected.size, start + values.size
    b0 = min(-(-start // step) * step, end)
    b1 = max(end // step * step, b0)
    if b0 > start and not (values[:b0 - start] == expected[(start // step) % n]).all():
        return False
    if b1 > b0:
        runs = expected[np.arange(b0 // step, b1 // step) % n]
        if not (values[b0 - start:b1 - start].reshape(-1, step) == runs[:, None]).all():
            return False
    return end <= b1 or bool((values[b1 - start:] == expected[(b1 // step) % n]).all())


def _pattern_matches(values: np.ndarray, start: int, step: int, expected: np.ndarray) -> bool:
    """Whether the rows ``start, start + 1, ...`` carry the labels of the C-order cells along an
    axis of stride ``step``: ``values[j] == expected[((start + j) // step) % n]``.  Whole periods
    (``step n`` rows) are one broadcast comparison of a ``(periods, n, step)`` view; the
    partial periods at both ends go to :func:`_runs_match`.  One pass, no index array."""
    period, end = step * expected.size, start + values.size
    p0 = min(-(-start // period) * period, end)
    p1 = max(end // period * period, p0)
    if p0 > start and not _runs_match(values[:p0 - start], start, step, expected):
        return False
    if p1 > p0:
        block = values[p0 - start:p1 - start].reshape(-1, expected.size, step)
        if not (block == expected[None, :, None]).all():
            return False
    return end <= p1 or _runs_match(values[p1 - start:], p1, step, expected)


def write_order_columns(attrs: tuple[Attribute, ...], names: Iterable[str]) -> list[str]:
    """The columns :func:`counts_in_write_order` reads in a file with columns ``names``."""
    names = list(names)
    out = []
    for a in attrs:
        out.extend(table_label_columns(a, names))
        if isinstance(a, Nominal):
            out.extend(f"{a.column}_{lvl}" for lvl in a.hierarchy.level_labels())
    return [*out, "count"]


def counts_in_write_order(batches: Iterable[Any], attrs: tuple[Attribute, ...],
                          shape: tuple[int, ...], names: Iterable[str]) -> np.ndarray | None:
    """The counts of a grid file whose rows are in the C order of the cells, or None.

    Row ``r`` of the file must carry, in every attribute column of stride ``s_k`` (``n_k``
    cells), the label of cell ``(r // s_k) mod n_k`` (dictionary columns by their index into
    the dictionary as written, compared once per batch), and in every level column the
    ancestor of that leaf (:func:`_pattern_matches`, vectorised): then row ``r`` names cell
    ``r`` and its count is copied to ``counts[r]``.  ``names``: the file's columns (which label
    layout it has, :func:`table_label_columns`).  Any other file (order, types, nulls,
    dictionaries, length) returns None without raising.
    """
    n_cells = int(np.prod(shape, dtype=np.int64))
    checks: list[tuple[str, _Values, int, np.ndarray]] = []
    stride = n_cells
    names = list(names)
    for a in attrs:
        stride //= a.n_cells
        for column, labels in zip(table_label_columns(a, names), cell_label_values(a), strict=False):
            check = _label_check(a, labels)
            if check is None:
                return None
            checks.append((column, check[0], stride, check[1]))
        if isinstance(a, Nominal):  # each level column: the dictionary index each leaf must carry
            for lvl, labels in a.hierarchy.level_labels().items():
                texts, leaf_code = _level_codes(labels)
                checks.append((f"{a.column}_{lvl}", _dictionary_indices(texts), stride, leaf_code))
    counts: np.ndarray | None = None
    start = 0
    for batch in batches:
        m = batch.num_rows
        if start + m > n_cells:
            return None
        for column, reader, step, expected in checks:
            values = reader(batch.column(column))
            if values is None or values.size != m or not _pattern_matches(values, start, step, expected):
                return None
        values = buffer_values(batch.column("count"))
        if values is None:
            return None
        if counts is None:
            counts = np.empty(n_cells, dtype=values.dtype)  # the stored type (the constructor decides)
        elif values.dtype != counts.dtype:
            return None
        counts[start:start + m] = values
        start += m
    if start != n_cells or counts is None:
        return None
    return counts.reshape(shape)


__all__ = ["cell_label_values", "counts_by_label", "label_columns",
           "table_label_columns"]  # helpers of GridRelease's table and its readers
