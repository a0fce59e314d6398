"""A grid release in DuckDB: a native cell table plus range-count table macros.

``release.to_duckdb(con, name)`` (:func:`register_grid`) creates

* ``name``: one row per cell, sorted by ``cell``: the attribute columns of
  ``release.to_arrow()`` (nominal: leaf label and one ``<column>_<level>`` column per
  hierarchy level), ``count``, the linear C-order ``cell`` index and ``prefix``, the inclusive
  d-dimensional prefix sum (``sum`` of ``count`` over cells ``<=`` this one on every axis);
* ``name_meta(key, value)``: the release metadata (JSON text, as in the Arrow schema
  metadata; :func:`read_release` re-attaches it) and a table comment;
* ``name_labels_<column>(label, start, stop, factor)`` per nominal attribute: every
  hierarchy label (as text; ``true``/``false`` for booleans) with its leaf range and the
  per-axis variance factor of that range;
* ``name_range_count(<col>_lo := ..., <col>_hi := ..., <nominal col> := ...)``: one row
  (``count``, ``std``), every predicate optional;
* ``name_range_counts(queries_table)``: one row per query (``id``, ``count``, ``std``) for a
  table with an ``id`` column and the predicate columns of the Python batch form; missing
  columns and NULLs mean the whole domain; other columns are ignored.

Both macros answer by inclusion-exclusion over the ``2^d`` corners of each query's box,
joined on ``prefix`` (the same arithmetic as :mod:`polars_dp.releases.grid_queries`).  A bad predicate
(unknown label, value outside the domain, ``lo > hi``) raises a DuckDB error naming the
column and value.

``std`` is the exact noise standard deviation ``sqrt(2 scale^2 prod_k f_k)`` (Privelet
paper, Theorem 3; Basic: ``f_k`` = cells in the range).  For an ordinal axis the mechanism
transformed, the factors of all ``n (n + 1) / 2`` ranges are stored in a table
``name_factors_<column>`` when that is at most :data:`MAX_FACTOR_ROWS` rows; beyond that the
SQL ``std`` is NULL (use ``release.range_counts(..., std=True)`` in Python).

Plain SQL works on the table too::

    SELECT sum(count) FROM name WHERE age BETWEEN 20 AND 30 AND occupation_group = 'Sales'
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from polars_dp.domains.attributes import FLOAT_TOLERANCE, Nominal, Ordinal
from polars_dp.errors import ParameterError
from polars_dp.releases.grid_queries import label_ranges
from polars_dp.releases.sql import (
    BATCH_WHERE,
    check_identifier,
    comment,
    ident,
    in_transaction,
    literal,
    metadata_table,
    number,
    render,
    small_table,
)

if TYPE_CHECKING:
    from polars_dp.releases.grid import GridRelease

#: Largest per-axis table of variance factors stored for a transformed ordinal axis.
MAX_FACTOR_ROWS = 1 << 21
#: Cells per Arrow batch streamed into DuckDB at registration.
BATCH_CELLS = 1 << 21


class _Axis:
    """SQL of one axis: start/stop cells and variance factor of a predicate, per query."""

    def __init__(self, release: GridRelease, name: str, axis: int):
        self.release = release
        self.axis = axis
        self.attribute = release.attributes[axis]
        self.name = name
        self.transformed = self.attribute.column in release.transformed

    @property
    def columns(self) -> list[str]:
        a = self.attribute
        return [a.column] if isinstance(a, Nominal) else [f"{a.column}_lo", f"{a.column}_hi"]

    def typed_columns(self) -> list[str]:
        sql_type = "VARCHAR" if isinstance(self.attribute, Nominal) else "DOUBLE"
        return [f"NULL::{sql_type} AS {ident(c)}" for c in self.columns]

    def labels_table(self) -> str:
        return f"{self.name}_labels_{self.attribute.column}"

    def factors_table(self) -> str:
        return f"{self.name}_factors_{self.attribute.column}"

    def stores_factors(self) -> bool:
        n = self.attribute.n_cells
        return (isinstance(self.attribute, Ordinal) and self.transformed
                and n * (n + 1) // 2 <= MAX_FACTOR_ROWS)

    def ranges(self, where: str) -> str:
        """``s<k>``, ``e<k>`` (and ``f<k>`` for nominal) columns of the ``box`` CTE."""
        k, a = self.axis, self.attribute
        if isinstance(a, Nominal):
            ref, lab = f"q.{ident(a.column)}", f"l{k}"
            root = float(self.release.axis_variance(k, np.array([0]), np.array([a.n_cells]))[0])
            unknown = (f"error({literal(a.column + ': ')} || CAST({ref} AS VARCHAR) || "
                       f"{literal(' is not a label of its hierarchy')} || {where})")
            return (f"CASE WHEN {ref} IS NULL THEN 0 WHEN {lab}.start IS NULL THEN {unknown} "
                    f"ELSE {lab}.start END AS s{k}, "
                    f"CASE WHEN {ref} IS NULL THEN {a.n_cells} ELSE {lab}.stop END AS e{k}, "
                    f"CASE WHEN {ref} IS NULL THEN {root!r} ELSE {lab}.factor END AS f{k}")
        raw_lo, raw_hi = (f"q.{ident(c)}" for c in self.columns)
        lo, hi = (f"TRY_CAST({ref} AS DOUBLE)" for ref in (raw_lo, raw_hi))

        def outside(ref: str, column: str) -> str:
            raw = raw_lo if ref == lo else raw_hi
            return (f"WHEN {ref} IS NULL THEN error({literal(column + ': ')} || CAST({raw} AS VARCHAR) || "
                    f"{literal(' is not a number')} || {where}) "
                    f"WHEN NOT ({ref} >= {number(a.lo)} AND {ref} <= {number(a.hi)}) THEN "
                    f"error({literal(column + ': ')} || {ref} || "
                    f"{literal(' is outside the declared domain ' + a.domain_text())} || {where}) ")

        def cell(ref: str) -> str:
            return (f"CAST(least(greatest(floor(({ref} - {number(a.lo)}) / {number(a.width)} "
                    f"+ {FLOAT_TOLERANCE!r}), 0), {a.n_cells - 1}) AS BIGINT)")

        empty = (f"WHEN {hi} IS NOT NULL AND {lo} > {hi} THEN error({literal(a.column + ': lo=')} || "
                 f"{lo} || ' > hi=' || {hi} || {literal('; the range is empty')} || {where}) ")
        return (f"CASE WHEN {raw_lo} IS NULL THEN 0 {outside(lo, self.columns[0])}{empty}"
                f"ELSE {cell(lo)} END AS s{k}, "
                f"CASE WHEN {raw_hi} IS NULL THEN {a.n_cells} {outside(hi, self.columns[1])}"
                f"ELSE {cell(hi)} + 1 END AS e{k}")

    def label_join(self) -> str:
        if not isinstance(self.attribute, Nominal):
            return ""
        k = self.axis
        return (f"\n    LEFT JOIN {ident(self.labels_table())} AS l{k} "
                f"ON l{k}.label = CAST(q.{ident(self.attribute.column)} AS VARCHAR)")

    def factor_join(self) -> str:
        if not self.stores_factors():
            return ""
        k = self.axis
        return (f"\nLEFT JOIN {ident(self.factors_table())} AS v{k} "
                f"ON v{k}.start = box.s{k} AND v{k}.stop = box.e{k}")

    def factor(self) -> str:
        """Per-axis variance factor ``f_k`` of the query's range (SQL)."""
        k = self.axis
        if isinstance(self.attribute, Nominal):
            return f"box.f{k}"
        if not self.transformed:
            return f"(box.e{k} - box.s{k})"
        return f"v{k}.factor" if self.stores_factors() else "NULL"


def _variance(release: GridRelease, axes: list[_Axis]) -> str:
    """SQL of a range's noise variance ``2 scale^2 prod_k f_k``; NULL when the noise model has no
    exact error bar (a post-processed release)."""
    model = release.noise_model
    if not hasattr(model, "unit_variance"):
        return "NULL::DOUBLE"
    return " * ".join([f"{model.unit_variance()!r}", *(ax.factor() for ax in axes)])


def _answers(release: GridRelease, name: str, axes: list[_Axis], queries: str, where: str) -> str:
    d = len(axes)
    strides = np.asarray(release.counts.strides, dtype=np.int64) // release.counts.itemsize
    bit = "((c.corner >> {k}) & 1) = 1"
    corner_cell = " + ".join(
        f"(CASE WHEN {bit.format(k=k)} THEN box.e{k} - 1 ELSE box.s{k} - 1 END) * {int(strides[k])}"
        for k in range(d))
    corner_valid = " AND ".join(f"({bit.format(k=k)} OR box.s{k} > 0)" for k in range(d))
    variance = _variance(release, axes)
    return render(
        "grid_answers.sql",
        table=ident(name),
        queries=queries,
        typed_columns=", ".join(c for ax in axes for c in ax.typed_columns()),
        ranges=",\n           ".join(ax.ranges(where) for ax in axes),
        label_joins="".join(ax.label_join() for ax in axes),
        d=d,
        n_corners=1 << d,
        corner_cell=corner_cell,
        corner_valid=corner_valid,
        variance=variance,
        factor_joins="".join(ax.factor_join() for ax in axes),
    )


def _check_name(name: str, release: GridRelease) -> None:
    check_identifier(name)
    clash = {"cell", "prefix"} & {c.lower() for c in release._table(0, 1).schema.names}
    if clash:
        raise ParameterError(
            f"the release has a column named {sorted(clash)[0]!r}, which the DuckDB table uses for "
            "its cell index / prefix sum; rename the attribute"
        )


def _cell_batches(release: GridRelease) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """The release table plus ``cell`` and ``prefix``, in slabs of the leading axis."""
    shape = release.shape
    inner = release.n_cells // shape[0]
    rows = max(1, BATCH_CELLS // max(inner, 1))
    inclusive = release.prefix[(slice(1, None),) * len(shape)]

    def slab(r0: int) -> pa.Table:
        r1 = min(r0 + rows, shape[0])
        start, stop = r0 * inner, r1 * inner
        table = release._table(start, stop)
        table = table.append_column("cell", pa.array(np.arange(start, stop, dtype=np.int64)))
        return table.append_column("prefix", pa.array(np.ascontiguousarray(inclusive[r0:r1]).reshape(-1)))

    first = slab(0)

    def batches() -> Iterator[pa.RecordBatch]:
        yield from first.to_batches()
        for r0 in range(rows, shape[0], rows):
            yield from slab(r0).to_batches()

    return first.schema, batches()


def lookup_tables(con: Any, release: GridRelease, axes: list[_Axis]) -> None:
    for ax in axes:
        a, k = ax.attribute, ax.axis
        if isinstance(a, Nominal):
            mapping = label_ranges(a)
            starts = np.array([r[0] for r in mapping.values()], dtype=np.int64)
            stops = np.array([r[1] for r in mapping.values()], dtype=np.int64)
            data = pa.table({"label": pa.array(list(mapping), pa.string()), "start": starts, "stop": stops,
                             "factor": release.axis_variance(k, starts, stops)})
            small_table(con, f"__pdp_labels_{k}", ax.labels_table(), data)
        elif ax.stores_factors():
            starts, stops = np.triu_indices(a.n_cells + 1, k=1)
            data = pa.table({"start": starts.astype(np.int64), "stop": stops.astype(np.int64),
                             "factor": release.axis_variance(k, starts, stops)})
            small_table(con, f"__pdp_factors_{k}", ax.factors_table(), data)


def register_grid(con: Any, name: str, release: GridRelease) -> Any:
    """Create the table, metadata, lookup tables and macros of ``release`` in ``con`` (see the
    module doc); all in one transaction.  Returns the DuckDB relation of the table ``name``.
    """
    _check_name(name, release)
    axes = [_Axis(release, name, k) for k in range(len(release.attributes))]
    schema, batches = _cell_batches(release)
    source, meta_source = f"__pdp_source_{name}", f"__pdp_meta_{name}"
    preserve = con.execute("SELECT current_setting('preserve_insertion_order')").fetchall()[0][0]
    params = ", ".join(f"{ident(c)} := NULL" for ax in axes for c in ax.columns)
    single_source = "(SELECT 0 AS id, " + ", ".join(
        f"{ident(c)} AS {ident(c)}" for ax in axes for c in ax.columns) + ")"

    def build() -> None:
        con.execute(render("grid_register.sql", table=ident(name), source=ident(source),
                           order_by="" if preserve else " ORDER BY cell",
                           meta_table=ident(f"{name}_meta"), meta_source=ident(meta_source),
                           comment=comment(release, name, f", noise_scale={release.noise_scale}")))
        lookup_tables(con, release, axes)
        con.execute(render(
            "grid_macros.sql", name=name,
            single_macro=ident(f"{name}_range_count"), batch_macro=ident(f"{name}_range_counts"),
            parameters=params,
            single_answers=_answers(release, name, axes, single_source, "''"),
            batch_answers=_answers(release, name, axes, "query_table(queries)", BATCH_WHERE),
        ))

    in_transaction(con, {source: pa.RecordBatchReader.from_batches(schema, batches),
                          meta_source: metadata_table(release)}, build)
    return con.table(name)


__all__ = ["BATCH_CELLS", "MAX_FACTOR_ROWS", "register_grid"]
