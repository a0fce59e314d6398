"""Range-count queries on a grid release: predicates -> per-axis cell ranges -> prefix sums.

A range-count query selects, on every axis ``k``, a contiguous range of cells
``[start_k, stop_k)``: an ordinal predicate ``(lo, hi)`` (inclusive, in value space) covers
whole bins (:func:`ordinal_ranges`); a nominal predicate names a hierarchy node (a leaf or
any group), whose leaves are contiguous in depth-first order (Privelet paper, Xiao et al.
2010, Sec. IV-B); an absent predicate is the whole axis.

Bin alignment: one rule for every domain.  A bin is a set of values of the declared domain
(``e_k = lo + k width``): in an integer domain (integer ``lo``, ``hi``, ``width``; whole
numbers only, see :mod:`polars_dp.domains.attributes`) the integers ``e_k .. e_k + width - 1``
(the last bin capped at ``hi``); in a float domain the half-open interval ``[e_k, e_{k+1})``
(the last one closed at the domain's ``hi``).  A query ``(lo, hi)`` counts the bins **all of
whose values lie in** ``[lo, hi]``, and it is aligned (answered exactly) when those bins cover
``[lo, hi]``.  So in an integer domain ``age=(20, 29)`` is the integers 20..29; in a float
domain a ``hi`` on a bin edge ``e_{k+1}`` ends the range at that edge: bin ``k`` (all of whose
values are ``< e_{k+1}``) is counted, the next bin is not (of it the range holds the single
value ``e_{k+1}``).  ``lat=(44.0, 45.0)`` is therefore the bins of 44 and 45 when declared
``Ordinal("lat", 44, 46)`` (whole degrees) and the bin ``[44, 45)`` when declared
``Ordinal("lat", 44.0, 46.0, width=1.0)``.  ``align`` says what to do with a bound inside a bin
(a non-integral bound of an integer domain is one): ``"exact"`` (default) raises
:class:`QueryError` naming the nearest aligned ranges, ``"outer"`` widens the range to the
whole bins holding its values (a range inside one bin, or the single value ``e_{k+1}``, gives
that bin) and ``"inner"`` narrows it to the whole bins inside it.  The rule is written once
(:mod:`polars_dp.domains.ranges`); the SQL macros take the same option and run the same
functions, rendered as SQL.

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

from polars_dp.domains import ranges as rule
from polars_dp.domains.attributes import Attribute, Nominal, Ordinal
from polars_dp.domains.expressions import NUMPY
from polars_dp.domains.hierarchy import Label
from polars_dp.domains.size import check_cell_indices
from polars_dp.errors import QueryError
from polars_dp.params import check_option

#: Extra columns of a batch query frame that are passed through to the answer by default; ``id``
#: is always allowed, beside any ``passthrough`` columns given (:func:`passthrough_columns`).
PASSTHROUGH = ("id",)
#: What to do with an ordinal bound inside a bin (see the module docstring).
ALIGN = ("exact", "outer", "inner")
#: The fix for a missing, null or repeated query id (Python, the SQL macros and the CLI).
ID_RULE = "give every query row its own id (an answer row is known by its id)"


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
            raise QueryError(rule.outside_text(NUMPY, attribute.column, value, attribute.domain_text()))
    if lo > hi:
        raise QueryError(rule.reversed_text(NUMPY, attribute.column, lo, hi))
    return lo, hi


# ---------------------------------------------------------------------- bin alignment
def cell_bounds(attribute: Ordinal, starts: np.ndarray, stops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The aligned inclusive ``(lo, hi)`` values of the cell ranges ``[start, stop)``
    (:func:`polars_dp.domains.ranges.bin_bounds`)."""
    starts, stops = np.asarray(starts, dtype=np.int64), np.asarray(stops, dtype=np.int64)
    return rule.bin_bounds(NUMPY, attribute, starts, stops)


def ordinal_ranges(attribute: Ordinal, lo: np.ndarray, lo_given: np.ndarray, hi: np.ndarray,
                   hi_given: np.ndarray, align: str = "exact", where: Any = None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Cell ranges ``[start, stop)`` of inclusive ordinal ranges ``[lo, hi]`` (values inside
    the domain, ``lo <= hi``; ``*_given`` False = open side), aligned as ``align`` says
    (:mod:`polars_dp.domains.ranges`, the rule the SQL macros apply too).

    ``where(i)`` describes query ``i`` in error messages.
    """
    align = check_option(align, "align", ALIGN)
    lo = np.where(lo_given, lo, attribute.lo)
    hi = np.where(hi_given, hi, attribute.hi)
    cells = rule.cell_ranges(NUMPY, rule.bin_positions(NUMPY, attribute, lo, hi))

    def fail(text: str, i: int) -> QueryError:
        return QueryError(text + (f" ({where(i)})" if where else ""))

    def asked(i: int) -> tuple[Any, Any]:
        return (lo[i] if lo_given[i] else None), (hi[i] if hi_given[i] else None)

    bad = np.flatnonzero(~cells.aligned)
    if align == "exact" and bad.size:
        i = int(bad[0])
        raise fail(rule.unaligned_text(NUMPY, attribute, *asked(i), cells.row(i)), i)
    starts, stops = rule.chosen(NUMPY, cells, align)
    empty = np.flatnonzero(starts >= stops)
    if empty.size:
        i = int(empty[0])
        raise fail(rule.no_bin_text(NUMPY, attribute, *asked(i), align), i)
    return starts, stops


def predicate_ranges(attributes: Sequence[Attribute], predicates: Mapping[str, Any],
                     align: str = "exact") -> tuple[np.ndarray, np.ndarray]:
    """Cell ranges ``(starts, stops)`` (shape (d,)) of one query given as ``column=predicate``.

    Ordinal: ``(lo, hi)`` inclusive (``None`` for an open side), aligned to bins as
    ``align`` says; nominal: a hierarchy label; ``None`` or an absent column: the whole axis.
    DomainTooLargeError for an axis whose cells int64 cannot index
    (:func:`~polars_dp.domains.size.check_cell_indices`).
    """
    align = check_option(align, "align", ALIGN)
    check_cell_indices(attributes)
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
            if isinstance(predicate, (list, tuple, set, frozenset, dict)):
                raise QueryError(f"{column}: give one label (a category or a node of its hierarchy), got "
                                 f"{predicate!r}; a node covers its whole subtree, and a union of labels "
                                 "is the sum of their counts")
            starts[axis], stops[axis] = a.leaf_range(predicate)
        else:
            lo, hi = _ordinal_pair(a, predicate)  # a (lo, hi) pair from here on
            s, t = ordinal_ranges(a, np.array([lo]), np.array([predicate[0] is not None]), np.array([hi]),
                                  np.array([predicate[1] is not None]), align)
            starts[axis], stops[axis] = int(s[0]), int(t[0])
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


def row_text(queries: pl.DataFrame, row: int) -> str:
    """How an error names query ``row`` of a batch: by its id, else by its position."""
    if "id" in queries.columns:
        return f"query id={queries['id'][row]!r}"
    return f"query row {row}"


def _ordinal_values(attribute: Ordinal, series: pl.Series, queries: pl.DataFrame
                    ) -> tuple[np.ndarray, np.ndarray]:
    """``(values, given)`` of a ``_lo``/``_hi`` column (null: not given); QueryError names the
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
        raise QueryError(f"{rule.outside_text(NUMPY, series.name, series[row], attribute.domain_text())} "
                         f"({row_text(queries, row)})")
    return raw, present


def _nominal_ranges(attribute: Nominal, series: pl.Series, queries: pl.DataFrame
                    ) -> tuple[np.ndarray, np.ndarray]:
    dtype = series.dtype
    if isinstance(dtype, (pl.Categorical, pl.Enum)):
        series, dtype = series.cast(pl.String), pl.String()
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
            message = rule.not_a_label_text(NUMPY, attribute.column, value)
        except QueryError as exc:  # the hierarchy's own sentence, with its "did you mean" hint
            message = str(exc)
        raise QueryError(f"{message} ({row_text(queries, row)})")
    starts = joined["start"].fill_null(0).to_numpy()
    stops = joined["stop"].fill_null(attribute.n_cells).to_numpy()
    return starts, stops


def passthrough_columns(passthrough: str | Iterable[str] = PASSTHROUGH) -> set[str]:
    """The columns a batch query frame may hold beside its predicate columns: ``id`` (always)
    and ``passthrough``, one column name or several."""
    return set(PASSTHROUGH) | ({passthrough} if isinstance(passthrough, str) else set(passthrough))


def check_query_columns(attributes: Sequence[Attribute], columns: Iterable[str],
                        passthrough: str | Iterable[str] = PASSTHROUGH) -> None:
    """QueryError for a column that is neither a predicate column nor passed through
    (:func:`passthrough_columns`: ``id`` always is)."""
    known = predicate_columns(attributes)
    keep = passthrough_columns(passthrough)
    for column in columns:
        if column not in known and column not in keep:
            raise QueryError(
                f"query column {column!r} is not a predicate of this release; predicate columns: "
                f"{list(known)} (pass passthrough=[...] to keep other columns)"
            )


def query_ranges(attributes: Sequence[Attribute], queries: pl.DataFrame, *,
                 passthrough: str | Iterable[str] = PASSTHROUGH, align: str = "exact"
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Cell ranges ``(starts, stops)`` (shape (queries, d)) of a batch query frame; ordinal
    ranges aligned to bins as ``align`` says (module docstring); DomainTooLargeError as
    :func:`predicate_ranges`."""
    align = check_option(align, "align", ALIGN)
    attributes = tuple(attributes)
    check_cell_indices(attributes)
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
        absent = (np.full(n, a.lo), np.zeros(n, dtype=bool))
        lo, lo_given = _ordinal_values(a, queries[lo_col], queries) if lo_col in queries.columns else absent
        absent = (np.full(n, a.hi), np.zeros(n, dtype=bool))
        hi, hi_given = _ordinal_values(a, queries[hi_col], queries) if hi_col in queries.columns else absent
        bad = np.flatnonzero(lo_given & hi_given & (lo.astype(np.float64) > hi.astype(np.float64)))
        if bad.size:
            row = int(bad[0])
            text = rule.reversed_text(NUMPY, a.column, queries[lo_col][row], queries[hi_col][row])
            raise QueryError(f"{text} ({row_text(queries, row)})")
        starts[:, axis], stops[:, axis] = ordinal_ranges(
            a, lo, lo_given, hi, hi_given, align, lambda row: row_text(queries, row))
    return starts, stops


def check_query_ids(queries: pl.DataFrame) -> None:
    """QueryError when an ``id`` column holds a null or a repeated id.

    One rule for every surface: the id, when a batch has one, is the key of its answers (the
    SQL macros return ``id`` and the answer only, so an id must be present and distinct);
    ``sql/query_checks.sql`` refuses the same batches in DuckDB.  A batch without ``id`` is
    answered row by row, in order."""
    if "id" not in queries.columns:
        return
    ids = queries["id"]
    if ids.null_count():
        raise QueryError(f"{ids.null_count()} query row(s) have a null id; {ID_RULE}")
    if ids.n_unique() < ids.len():
        repeated = (ids.value_counts(name="n", sort=True).filter(pl.col("n") > 1).row(0))
        raise QueryError(f"query id {repeated[0]!r} appears {repeated[1]} times; {ID_RULE}")


def as_query_frame(queries: Any) -> pl.DataFrame:
    """A Polars DataFrame of queries from a DataFrame, LazyFrame, dict of columns or list of rows,
    with its ids checked (:func:`check_query_ids`)."""
    if isinstance(queries, pl.LazyFrame):
        frame = queries.collect()
    elif isinstance(queries, pl.DataFrame):
        frame = queries
    else:
        try:
            frame = pl.DataFrame(queries)
        except (TypeError, ValueError) as exc:
            raise QueryError(
                f"queries must be a Polars DataFrame (one row per query), got {type(queries).__name__}: "
                f"{exc}"
            ) from None
    check_query_ids(frame)
    return frame


__all__ = ["ALIGN", "ID_RULE", "PASSTHROUGH", "as_query_frame", "cell_bounds", "check_query_columns",
           "check_query_ids", "label_ranges",
           "label_text", "ordinal_ranges", "passthrough_columns",
           "predicate_columns", "predicate_ranges", "query_ranges", "row_text"]
