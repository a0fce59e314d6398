"""Range-count queries on a grid release: predicates -> per-axis cell ranges -> prefix sums.

A range-count query selects, on every axis ``k``, a contiguous range of cells
``[start_k, stop_k)``: an ordinal predicate ``(lo, hi)`` (inclusive, in value space) covers
the cells from the one holding ``lo`` to the one holding ``hi``; a nominal predicate names a
hierarchy node (a leaf or any group), whose leaves are contiguous in depth-first order
(Privelet paper, Xiao et al. 2010, Sec. IV-B); an absent predicate is the whole axis.

Answers come from the summed-area (prefix-sum) array by inclusion-exclusion over the ``2^d``
corners of the box (:mod:`polars_dp.kernels.prefix`).

Every answer is post-processing of the release (no privacy cost).

Batch queries are a Polars frame: ``<col>_lo`` / ``<col>_hi`` columns for an ordinal
attribute and a ``<col>`` column for a nominal one; a null (or an absent column) means
unrestricted.  A nominal column's dtype selects the labels it can name: a String column
names group labels and leaves by their text (:func:`label_text`; a string label wins over
the text of a non-string leaf), an integer or Boolean column names leaves of that type.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl

from polars_dp.domains.attributes import Attribute, Nominal, Ordinal
from polars_dp.domains.hierarchy import Label
from polars_dp.errors import QueryError

#: Extra columns of a batch query frame that are passed through to the answer by default.
PASSTHROUGH = ("id",)


# ---------------------------------------------------------------------- labels
def label_text(label: Label) -> str:
    """Text form of a hierarchy label, as SQL casts it (``True`` -> ``'true'``)."""
    if isinstance(label, bool):
        return "true" if label else "false"
    return str(label)


def label_ranges(attribute: Nominal, dtype: pl.DataType | None = None) -> dict[Any, tuple[int, int]]:
    """Every label a query column of ``dtype`` may name, with its leaf range ``[start, stop)``.

    ``dtype=None`` or String: text keys (string labels first, then the text of other
    leaves when it does not clash); integer: integer leaves; Boolean: boolean leaves.
    """
    labels = attribute.hierarchy.labels
    if dtype is None or dtype == pl.String:
        out = {x: attribute.leaf_range(x) for x in labels if isinstance(x, str)}
        for x in labels:
            if not isinstance(x, str):
                out.setdefault(label_text(x), attribute.leaf_range(x))
        return out
    if dtype == pl.Boolean:
        return {x: attribute.leaf_range(x) for x in labels if isinstance(x, bool)}
    return {x: attribute.leaf_range(x) for x in labels
            if isinstance(x, int) and not isinstance(x, bool)}


# ---------------------------------------------------------------------- single query
def _ordinal_pair(attribute: Ordinal, predicate: Any) -> tuple[Any, Any]:
    if not (isinstance(predicate, (tuple, list)) and len(predicate) == 2):
        raise QueryError(
            f"{attribute.column}: give an inclusive (lo, hi) pair of numbers, got {predicate!r}"
        )
    lo, hi = predicate
    for name, value in (("lo", lo), ("hi", hi)):
        if value is not None and (isinstance(value, bool)
                                  or not isinstance(value, (int, float, np.integer, np.floating))):
            raise QueryError(f"{attribute.column}: {name}={value!r} is not a number")
    lo = attribute.lo if lo is None else lo
    hi = attribute.hi if hi is None else hi
    for value in (lo, hi):
        if not attribute.lo <= value <= attribute.hi:
            raise QueryError(
                f"{attribute.column}: {value!r} is outside the declared domain {attribute.domain_text()}"
            )
    if lo > hi:
        raise QueryError(f"{attribute.column}: lo={lo!r} > hi={hi!r}; the range is empty")
    return lo, hi


def predicate_ranges(attributes: Sequence[Attribute], predicates: Mapping[str, Any]
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Cell ranges ``(starts, stops)`` (shape (d,)) of one query given as ``column=predicate``.

    Ordinal: ``(lo, hi)`` inclusive (``None`` for an open side); nominal: a hierarchy label;
    ``None`` or an absent column: the whole axis.
    """
    columns = [a.column for a in attributes]
    starts = np.zeros(len(attributes), dtype=np.int64)
    stops = np.array([a.n_cells for a in attributes], dtype=np.int64)
    for column, predicate in predicates.items():
        if column not in columns:
            raise QueryError(f"{column!r} is not an attribute of this release; attributes: {columns}")
        if predicate is None:
            continue
        axis = columns.index(column)
        a = attributes[axis]
        if isinstance(a, Nominal):
            starts[axis], stops[axis] = a.leaf_range(predicate)
        else:
            lo, hi = _ordinal_pair(a, predicate)
            starts[axis] = int(a.value_to_cell(lo))
            stops[axis] = int(a.value_to_cell(hi)) + 1
    return starts, stops


# ---------------------------------------------------------------------- batch queries
def predicate_columns(attributes: Sequence[Attribute]) -> dict[str, tuple[int, str]]:
    """Batch frame column -> (axis, role) with role ``lo``, ``hi`` or ``label``."""
    out: dict[str, tuple[int, str]] = {}
    for axis, a in enumerate(attributes):
        if isinstance(a, Nominal):
            out[a.column] = (axis, "label")
        else:
            out[f"{a.column}_lo"] = (axis, "lo")
            out[f"{a.column}_hi"] = (axis, "hi")
    return out


def _row_text(queries: pl.DataFrame, row: int) -> str:
    if "id" in queries.columns:
        return f"query id={queries['id'][row]!r}"
    return f"query row {row}"


def _ordinal_cells(attribute: Ordinal, series: pl.Series, queries: pl.DataFrame) -> np.ndarray:
    """Cell of every value of a ``_lo``/``_hi`` column (null -> -1); QueryError names the
    column, the value and the query."""
    if not series.dtype.is_numeric():
        raise QueryError(
            f"column {series.name!r} has type {series.dtype}; it must hold numbers in "
            f"{attribute.domain_text()}"
        )
    exact = attribute.integer and series.dtype.is_integer()
    values = series.cast(pl.Int64 if exact else pl.Float64)
    present = values.is_not_null().to_numpy()
    raw = values.fill_null(attribute.lo).to_numpy()
    inside = (raw >= attribute.lo) & (raw <= attribute.hi)
    bad = np.flatnonzero(present & ~inside)
    if bad.size:
        row = int(bad[0])
        raise QueryError(
            f"{series.name}: {series[row]!r} is outside the declared domain "
            f"{attribute.domain_text()} ({_row_text(queries, row)})"
        )
    cells = attribute.value_to_cell(raw)
    return np.where(present, cells, -1)


def _nominal_ranges(attribute: Nominal, series: pl.Series, queries: pl.DataFrame
                    ) -> tuple[np.ndarray, np.ndarray]:
    dtype = series.dtype
    if isinstance(dtype, (pl.Categorical, pl.Enum)):
        series, dtype = series.cast(pl.String), pl.String
    if not (dtype == pl.String or dtype == pl.Boolean or dtype.is_integer()):
        raise QueryError(
            f"column {series.name!r} has type {dtype}; a nominal predicate is a hierarchy label "
            "(String, or the leaves' integer/Boolean type)"
        )
    mapping = label_ranges(attribute, dtype)
    keys = list(mapping)
    key_dtype = pl.String if dtype == pl.String else (pl.Boolean if dtype == pl.Boolean else pl.Int64)
    source = series.cast(key_dtype)
    lookup = pl.DataFrame({
        "key": pl.Series(keys, dtype=key_dtype),
        "start": [r[0] for r in mapping.values()],
        "stop": [r[1] for r in mapping.values()],
    }, schema={"key": key_dtype, "start": pl.Int64, "stop": pl.Int64})
    joined = pl.DataFrame({"key": source}).join(lookup, on="key", how="left", maintain_order="left")
    unknown = np.flatnonzero((source.is_not_null() & joined["start"].is_null()).to_numpy())
    if unknown.size:
        row = int(unknown[0])
        value = series[row]
        try:
            attribute.leaf_range(value)
            hint = ""
        except QueryError as exc:
            hint = f"; {exc}"
        raise QueryError(
            f"{attribute.column}: {value!r} is not a label of its hierarchy{hint} "
            f"({_row_text(queries, row)})"
        )
    starts = joined["start"].fill_null(0).to_numpy()
    stops = joined["stop"].fill_null(attribute.n_cells).to_numpy()
    return starts, stops


def check_query_columns(attributes: Sequence[Attribute], columns: Iterable[str],
                        passthrough: Iterable[str] = PASSTHROUGH) -> None:
    """QueryError for a column that is neither a predicate column nor passed through."""
    known = predicate_columns(attributes)
    keep = set(passthrough)
    for column in columns:
        if column not in known and column not in keep:
            raise QueryError(
                f"query column {column!r} is not a predicate of this release; predicate columns: "
                f"{list(known)} (pass passthrough=[...] to keep other columns)"
            )


def query_ranges(attributes: Sequence[Attribute], queries: pl.DataFrame, *,
                 passthrough: Iterable[str] = PASSTHROUGH) -> tuple[np.ndarray, np.ndarray]:
    """Cell ranges ``(starts, stops)`` (shape (queries, d)) of a batch query frame."""
    attributes = tuple(attributes)
    check_query_columns(attributes, queries.columns, passthrough)
    n = queries.height
    starts = np.zeros((n, len(attributes)), dtype=np.int64)
    stops = np.tile(np.array([a.n_cells for a in attributes], dtype=np.int64), (n, 1))
    for axis, a in enumerate(attributes):
        if isinstance(a, Nominal):
            if a.column in queries.columns:
                starts[:, axis], stops[:, axis] = _nominal_ranges(a, queries[a.column], queries)
            continue
        lo_col, hi_col = f"{a.column}_lo", f"{a.column}_hi"
        lo = _ordinal_cells(a, queries[lo_col], queries) if lo_col in queries.columns else None
        hi = _ordinal_cells(a, queries[hi_col], queries) if hi_col in queries.columns else None
        if lo is not None and hi is not None:
            bad = np.flatnonzero((lo >= 0) & (hi >= 0) & (queries[lo_col].cast(pl.Float64).to_numpy()
                                                          > queries[hi_col].cast(pl.Float64).to_numpy()))
            if bad.size:
                row = int(bad[0])
                raise QueryError(
                    f"{a.column}: lo={queries[lo_col][row]!r} > hi={queries[hi_col][row]!r}; "
                    f"the range is empty ({_row_text(queries, row)})"
                )
        if lo is not None:
            starts[:, axis] = np.where(lo >= 0, lo, 0)
        if hi is not None:
            stops[:, axis] = np.where(hi >= 0, hi + 1, a.n_cells)
    return starts, stops


def as_query_frame(queries: Any) -> pl.DataFrame:
    """A Polars DataFrame of queries from a DataFrame, LazyFrame, dict of columns or list of rows."""
    if isinstance(queries, pl.LazyFrame):
        return queries.collect()
    if isinstance(queries, pl.DataFrame):
        return queries
    try:
        return pl.DataFrame(queries)
    except (TypeError, ValueError) as exc:
        raise QueryError(
            f"queries must be a Polars DataFrame (one row per query), got {type(queries).__name__}: {exc}"
        ) from None


__all__ = ["PASSTHROUGH", "as_query_frame", "check_query_columns", "label_ranges", "label_text",
           "predicate_columns", "predicate_ranges", "query_ranges"]
