"""A grid release in DuckDB: a native cell table plus range-count table macros.

``release.to_duckdb(con, name)`` (:func:`register_grid`) creates

* ``name``: a view with one row per cell, in cell order: the columns of
  ``release.to_arrow()`` (nominal: leaf label and one ``<column>_<level>`` column per
  hierarchy level; ``count``) and a comment.  It reads the internal table
  ``__pdp_name_cells``, which holds only the linear C-order ``cell`` index, ``count`` and
  ``prefix``, the inclusive d-dimensional prefix sum (``sum`` of ``count`` over cells ``<=`` this
  one on every axis) that the macros read; a cell's labels are derived from its number
  (position ``(cell // stride) % n`` along each axis) in the internal per-attribute tables
  ``__pdp_name_axis_<column>`` (one row per position, as the Arrow table writes the labels), so
  nothing per cell is stored twice (``__pdp_name_rows`` is the same view with ``cell``, which
  :func:`~polars_dp.releases.sql.to_arrow` orders by).  A DuckDB view is read-only:
  ``UPDATE name ...`` fails, so the table and the macros cannot come to disagree;
* ``name_meta(key, value)``: the release metadata (JSON text, as in the Arrow schema
  metadata; :func:`read_release` re-attaches it);
* ``name_labels_<column>(label, start, stop, factor)`` per nominal attribute: a view of the
  internal ``__pdp_name_labels_<column>``: every hierarchy label (as text; ``true``/``false``
  for booleans) with its leaf range and the per-axis variance factor of that range;
* ``name_range_count(<col>_lo := ..., <col>_hi := ..., <nominal col> := ..., align := ...)``:
  one row (``count``, ``std``), every predicate optional;
* ``name_range_counts(queries_table)``: one row per query (``id``, ``count``, ``std``) for a
  table with an ``id`` column and the predicate columns of the Python batch form; missing
  columns and NULLs mean the whole domain; any other column, a NULL id and a repeated id are
  refused (``sql/query_checks.sql``, the rule of Python's ``range_counts``).

Each query's box of cells, and every error text, comes from the functions the Python answers
run (:mod:`polars_dp.domains.ranges`), rendered as SQL (:mod:`polars_dp.domains.expressions`),
so SQL and Python answer alike; both macros then sum by inclusion-exclusion over the ``2^d``
corners of the box, joined on ``prefix``.  A bad predicate (unknown label, value outside the
domain, ``lo > hi``) raises a DuckDB error naming the column and value.

``std`` and ``lo`` / ``hi`` are the release's noise model rendered as SQL
(:meth:`~polars_dp.plans.noise_model.NoiseModel.variance` and ``half_width`` over the axes of
:class:`_Axis`, the SQL side of :class:`~polars_dp.kernels.wavelet_variance.AxisRanges`): for
Privelet ``sqrt(2 scale^2 prod_k f_k)`` (Theorem 3; Basic: ``f_k`` = cells in the range), a
transformed ordinal axis's ``f_k`` from the Haar tree's levels per query
(:func:`~polars_dp.kernels.wavelet_variance.haar_range_factor`, the function Python runs on
numpy), exact for every axis size.

Both macros take ``align := 'exact'`` (default; an ordinal bound inside a bin is an error
naming the nearest aligned bounds), ``'outer'`` or ``'inner'``, as the Python methods do
(:mod:`polars_dp.domains.queries`).  Batch answers come in ``id`` order.

In an in-memory connection the internal cell table lives in an attached compressed in-memory
database (``__pdp_name_store<k>``, built slab by slab; DuckDB keeps the tables of an in-memory
database uncompressed) and ``__pdp_name_cells`` is a view of it; a database file holds it itself.

Registration refuses to overwrite an existing table, view or macro (the error names them)
unless ``replace=True``.

Plain SQL works on the table too::

    SELECT sum(count) FROM name WHERE age BETWEEN 20 AND 30 AND occupation_group = 'Sales'
"""

from __future__ import annotations

import contextlib
import itertools
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol, cast

import numpy as np
import pyarrow as pa

from polars_dp.domains.attributes import Nominal, Ordinal
from polars_dp.domains.expressions import NUMPY, SQL, Sql, sql_text
from polars_dp.domains.queries import ALIGN, label_ranges
from polars_dp.domains.ranges import (
    BinPositions,
    bin_positions,
    cell_ranges,
    chosen,
    no_bin_text,
    not_a_label_text,
    outside_text,
    reversed_text,
    unaligned_text,
)
from polars_dp.errors import ParameterError
from polars_dp.kernels.prefix import prefix_row_blocks
from polars_dp.kernels.tail_bounds import AxisWeights
from polars_dp.kernels.wavelet_variance import (
    axis_width,
    haar_axis_weights,
    haar_range_factor,
    haar_weight_terms,
    range_weights,
)
from polars_dp.releases.sql import (
    BATCH_WHERE,
    Registered,
    Registration,
    check_connection,
    check_free,
    check_identifier,
    checked_alpha,
    comment,
    ident,
    internal,
    literal,
    metadata_table,
    number,
    query_checks,
    register,
    render,
    view,
)

if TYPE_CHECKING:
    class GridRelease(Registered, Protocol):
        """What the SQL of a grid release reads of it (the class, :class:`polars_dp.GridRelease`,
        sits above this module and hands itself to :func:`register_grid`)."""

        @property
        def attributes(self) -> tuple[Any, ...]: ...
        @property
        def counts(self) -> np.ndarray: ...
        @property
        def noise_scale(self) -> float: ...
        @property
        def noise_model(self) -> Any: ...
        @property
        def shape(self) -> tuple[int, ...]: ...
        @property
        def n_cells(self) -> int: ...
        @property
        def transformed(self) -> tuple[str, ...]: ...
        def axis_variance(self, axis: int, starts: np.ndarray, stops: np.ndarray) -> np.ndarray: ...
        def _table(self, start: int = 0, stop: int | None = None) -> pa.Table: ...
        def _axis_table(self, axis: int) -> pa.Table: ...

#: Cells per Arrow batch streamed into DuckDB at registration.
BATCH_CELLS = 1 << 21


class _Axis:
    """SQL of one axis: start/stop cells and variance factor of a predicate, per query.  The
    ordinal cells and error texts come from :mod:`polars_dp.domains.ranges`, the functions
    the Python answers run."""

    def __init__(self, release: GridRelease, name: str, axis: int):
        self.release = release
        self.axis = axis
        self.attribute = release.attributes[axis]
        self.name = name
        self.transformed = self.attribute.column in release.transformed

    @property
    def column(self) -> str:
        return self.attribute.column

    @property
    def columns(self) -> list[str]:
        a = self.attribute
        return [a.column] if isinstance(a, Nominal) else [f"{a.column}_lo", f"{a.column}_hi"]

    def typed_columns(self) -> list[str]:
        sql_type = "VARCHAR" if isinstance(self.attribute, Nominal) else "DOUBLE"
        return [f"NULL::{sql_type} AS {ident(c)}" for c in self.columns]

    def labels_table(self) -> str:
        """The user-facing view of this axis's labels (a view of :meth:`labels_source`)."""
        return f"{self.name}_labels_{self.attribute.column}"

    def labels_source(self) -> str:
        """The internal labels table the macros read."""
        return internal(self.name, f"labels_{self.attribute.column}")

    def tables(self) -> list[str]:
        """Tables and views this axis adds to a registration."""
        return [self.labels_table(), self.labels_source()] if isinstance(self.attribute, Nominal) else []

    # ---------------------------------------------------------------- ordinal values and bins
    def values(self, where: str) -> str:
        """Checked ``__lo<k>`` / ``__hi<k>`` (DOUBLE, NULL = open side) of the ``vals`` CTE."""
        a, k = self.attribute, self.axis
        if isinstance(a, Nominal):
            return ""
        out = []
        for column, side in zip(self.columns, ("lo", "hi"), strict=True):
            raw = f"q.{ident(column)}"
            ref = f"TRY_CAST({raw} AS DOUBLE)"
            outside = outside_text(SQL, column, Sql(ref), a.domain_text())
            out.append(
                f"CASE WHEN {raw} IS NULL THEN NULL "
                f"WHEN {ref} IS NULL THEN error({literal(column + ': ')} || CAST({raw} AS VARCHAR) || "
                f"{literal(' is not a number')} || {where}) "
                f"WHEN NOT ({ref} >= {number(a.lo)} AND {ref} <= {number(a.hi)}) THEN "
                f"error({outside} || {where}) "
                f"ELSE {ref} END AS __{side}{k}")
        return ", " + ", ".join(out)

    def _bounds(self, prefix: str) -> tuple[Sql, Sql]:
        """``(lo, hi)`` of the checked bounds, an open side (NULL) as the domain's end."""
        a, k = cast(Ordinal, self.attribute), self.axis
        return (Sql(f"coalesce({prefix}.__lo{k}, {sql_text(a.lo)})"),
                Sql(f"coalesce({prefix}.__hi{k}, {sql_text(a.hi)})"))

    def positions(self) -> str:
        """Per ordinal axis, the :class:`~polars_dp.domains.ranges.BinPositions` of the query as
        columns ``__p<field><k>`` of the ``pos`` CTE."""
        a, k = self.attribute, self.axis
        if isinstance(a, Nominal):
            return ""
        p = bin_positions(SQL, a, *self._bounds("v"))
        return "".join(f", {x} AS __p{f}{k}" for f, x in zip(BinPositions._fields, p, strict=True))

    def ranges(self, where: str) -> str:
        """``s<k>``, ``__e<k>`` (``e<k>``, ``f<k>`` for nominal) columns of the ``ranged`` CTE."""
        k, a = self.axis, self.attribute
        if isinstance(a, Nominal):
            ref, lab = f"q.{ident(a.column)}", f"l{k}"
            root = float(self.release.axis_variance(k, np.array([0]), np.array([a.n_cells]))[0])
            unknown = f"error({not_a_label_text(SQL, a.column, Sql(ref))} || {self.hint(ref)} || {where})"
            return (f"CASE WHEN {ref} IS NULL THEN 0 WHEN {lab}.start IS NULL THEN {unknown} "
                    f"ELSE {lab}.start END AS s{k}, "
                    f"CASE WHEN {ref} IS NULL THEN {a.n_cells} ELSE {lab}.stop END AS e{k}, "
                    f"CASE WHEN {ref} IS NULL THEN {root!r} ELSE {lab}.factor END AS f{k}"
                    + ("".join(f", CASE WHEN {ref} IS NULL THEN {root} ELSE {lab}.{c} END AS {short}{k}"
                               for (c, short), root in zip(_WEIGHT_COLUMNS.items(), self.root_weights(),
                                                           strict=True))
                       if self.transformed else ""))
        lo, hi = self._bounds("q")
        ranges = cell_ranges(SQL, BinPositions(*(Sql(f"q.__p{f}{k}") for f in BinPositions._fields)))
        start, stop = chosen(SQL, ranges, Sql("align"))
        raw_lo, raw_hi = (Sql(f"q.{ident(c)}") for c in self.columns)
        bad_align = (f"error({literal('align must be one of ' + ', '.join(ALIGN) + ', got ')} "
                     "|| coalesce(align, 'NULL'))")
        reverse = reversed_text(SQL, a.column, Sql(f"q.__lo{k}"), Sql(f"q.__hi{k}"))
        known = ", ".join(map(literal, ALIGN))
        return (f"CASE WHEN align IS NULL OR align NOT IN ({known}) THEN {bad_align} "
                f"WHEN {lo > hi} THEN error({reverse} || {where}) "
                f"WHEN align = 'exact' AND NOT {ranges.aligned} "
                f"THEN error({unaligned_text(SQL, a, raw_lo, raw_hi, ranges)} || {where}) "
                f"ELSE {start} END AS s{k}, {stop} AS __e{k}, "
                f"{raw_lo} AS __rl{k}, {raw_hi} AS __rh{k}")

    def hint(self, ref: str) -> str:
        """SQL text ``; did you mean 'X'?`` for a nominal predicate ``ref`` naming no label but one
        ignoring case (the first in hierarchy order, as the Python error), else ``''``."""
        return (f"coalesce('; did you mean ''' || (SELECT h.label FROM {ident(self.labels_source())} "
                f"AS h WHERE lower(h.label) = lower(CAST({ref} AS VARCHAR)) ORDER BY h.rowid LIMIT 1) "
                "|| '''?', '')")

    def checked(self, where: str) -> str:
        """``s<k>``, ``e<k>`` (``f<k>``) of the ``box`` CTE: an ordinal range that holds no
        whole bin is an error (DuckDB cannot raise it where ``s<k>`` is defined)."""
        k, a = self.axis, self.attribute
        if isinstance(a, Nominal):
            return f"q.s{k}, q.e{k}, q.f{k}" + (f", q.w{k}, q.t{k}, q.u{k}" if self.transformed else "")
        no_bin = no_bin_text(SQL, a, Sql(f"q.__rl{k}"), Sql(f"q.__rh{k}"), Sql("align"))
        return (f"q.s{k}, CASE WHEN q.__e{k} <= q.s{k} THEN error({no_bin} || {where}) "
                f"ELSE q.__e{k} END AS e{k}")

    def root_weights(self) -> tuple[str, str, str]:
        """SQL of the nominal weights of the whole domain (a predicate left NULL): their list,
        largest and second largest (the label table's ``weights``, ``top``, ``second``)."""
        w, _ = range_weights(self.attribute, np.array([0]), np.array([self.attribute.n_cells]), True)
        top, second = _top_second(w)
        return str(SQL.lst(*(float(x) for x in w[0]))), sql_text(float(top[0])), sql_text(float(second[0]))

    def width(self, transformed: bool) -> int:
        """Number of terms of this axis in :func:`~polars_dp.kernels.wavelet_variance.range_weights`."""
        return axis_width(self.attribute, transformed)

    def terms(self, transformed: bool) -> tuple[Sql, Sql]:
        """SQL lists ``(weights, multiplicities)`` of the query's range on this axis: the terms
        of :func:`~polars_dp.kernels.wavelet_variance.range_weights`, rendered from the same
        functions (the nominal ones from the labels table)."""
        k = self.axis
        s, e = Sql(f"box.s{k}"), Sql(f"box.e{k}")
        if not transformed:
            return SQL.lst(1.0), SQL.lst(e - s)
        if isinstance(self.attribute, Nominal):
            return Sql(f"box.w{k}"), Sql(f"list_transform(box.w{k}, lambda __w: 1.0::DOUBLE)")
        weights = haar_weight_terms(SQL, self.attribute.n_cells, s, e)
        return SQL.lst(*weights), SQL.lst(*(1.0 for _ in weights))

    def weights(self, ops: Any, factor: Any, listed: bool) -> AxisWeights:
        """:class:`~polars_dp.kernels.tail_bounds.AxisWeights` of the query's range on this
        (transformed) axis: a nominal one's largest and second largest weight from its label's
        row, a Haar one's from its scalar terms (:func:`~polars_dp.kernels.wavelet_variance.
        haar_axis_weights`, the function Python runs); ``factor`` the sum of squares; the list
        (:meth:`terms`) only where ``listed``."""
        k = self.axis
        if isinstance(self.attribute, Nominal):
            return AxisWeights(Sql(f"box.t{k}"), Sql(f"box.u{k}"), factor,
                               self.terms(True)[0] if listed else None)
        s, e = self.bounds()
        return haar_axis_weights(ops, self.attribute.n_cells, s, e, factor, listed)

    def label_join(self) -> str:
        if not isinstance(self.attribute, Nominal):
            return ""
        k = self.axis
        return (f"\n    LEFT JOIN {ident(self.labels_source())} AS l{k} "
                f"ON l{k}.label = CAST(q.{ident(self.attribute.column)} AS VARCHAR)")

    def bounds(self) -> tuple[Sql, Sql]:
        """The query's cell range ``[s_k, e_k)`` on this axis (SQL)."""
        return Sql(f"box.s{self.axis}"), Sql(f"box.e{self.axis}")

    def factor(self, transformed: bool) -> Sql:
        """Per-axis variance factor ``f_k`` of the query's range (SQL; a nominal axis's from the
        labels table, computed by :meth:`GridRelease.axis_variance`)."""
        k = self.axis
        if not transformed:
            return Sql(f"(box.e{k} - box.s{k})")
        if isinstance(self.attribute, Nominal):
            return Sql(f"box.f{k}")
        return haar_range_factor(SQL, self.attribute.n_cells, Sql(f"box.s{k}"), Sql(f"box.e{k}"))


def _answers(release: GridRelease, name: str, axes: list[_Axis], queries: str, where: str) -> str:
    d = len(axes)
    strides = np.asarray(release.counts.strides, dtype=np.int64) // release.counts.itemsize
    bit = "((c.corner >> {k}) & 1) = 1"
    corner_cell = " + ".join(
        f"(CASE WHEN {bit.format(k=k)} THEN box.e{k} - 1 ELSE box.s{k} - 1 END) * {int(strides[k])}"
        for k in range(d))
    corner_valid = " AND ".join(f"({bit.format(k=k)} OR box.s{k} > 0)" for k in range(d))
    relation, variance, accuracy = accuracy_sql(release, axes)
    return render(
        "grid_answers.sql",
        table=ident(internal(name)),
        queries=queries,
        typed_columns=", ".join(["NULL AS id", *(c for ax in axes for c in ax.typed_columns())]),
        checks=query_checks(queries, "q", [c for ax in axes for c in ax.columns], batch=where == BATCH_WHERE),
        values="".join(ax.values(where) for ax in axes),
        positions="".join(ax.positions() for ax in axes),
        ranges=",\n           ".join(ax.ranges(where) for ax in axes),
        checked=", ".join(ax.checked(where) for ax in axes),
        label_joins="".join(ax.label_join() for ax in axes),
        d=d,
        n_corners=1 << d,
        corner_cell=corner_cell,
        corner_valid=corner_valid,
        variance=variance,
        accuracy=accuracy,
        box_values=relation,
    )


def accuracy_sql(release: GridRelease, axes: list[_Axis]) -> tuple[str, str, str]:
    """``(relation, variance, expression)``: each answer's noise variance (the noise model's
    :meth:`~polars_dp.plans.noise_model.NoiseModel.variance`) and half-width at ``alpha`` (``lo`` /
    ``hi``, its :meth:`~polars_dp.plans.noise_model.NoiseModel.half_width`, the rule of
    :meth:`GridRelease.range_accuracy`) rendered as plain SQL over ``box`` (``relation``: ``box``
    plus the values computed once per query; a model with ``staged_variance`` computes its
    variance there too); NULL once post-processed or for a NULL ``alpha``."""
    model = release.noise_model
    held: list[str] = []

    def build() -> Any:
        if model.staged_variance:
            held.append(sql_text(SQL.let(model.variance(SQL, axes))))
        return model.half_width(SQL, axes, checked_alpha(), release.noise)

    relation, half = SQL.staged(build, "box")
    variance = held[0] if held else sql_text(model.variance(SQL, axes))
    return relation, variance, f"CASE WHEN alpha IS NULL THEN NULL ELSE {half} END"


def _cell_batches(release: GridRelease) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """The internal cell table's rows: ``cell``, ``count`` (a view of the counts) and ``prefix``,
    in slabs of the leading axis; the labels are not stored per cell (:func:`_label_columns`).
    The prefix sums are the release's cached summed-area array when it has one, else computed
    slab by slab (:func:`~polars_dp.kernels.prefix.prefix_row_blocks`, the same bits) without
    holding a second array the size of the counts."""
    shape = release.shape
    inner = release.n_cells // shape[0]
    flat = release.counts.reshape(-1)
    schema = pa.schema([("cell", pa.int64()), ("count", pa.from_numpy_dtype(flat.dtype)),
                        ("prefix", pa.float64())])
    cached = vars(release).get("_prefix_cache")
    if cached is not None:
        rows = max(1, BATCH_CELLS // max(inner, 1))
        blocks: Iterator[tuple[int, np.ndarray]] = (
            (r + 1, cached[r + 1:r + 1 + rows]) for r in range(0, shape[0], rows))
    else:
        blocks = prefix_row_blocks(release.counts, BATCH_CELLS)
    interior = (slice(None),) + (slice(1, None),) * (len(shape) - 1)

    def batches() -> Iterator[pa.RecordBatch]:
        for r, block in blocks:
            if r == 0:  # the zero border row
                continue
            start, stop = (r - 1) * inner, (r - 1 + block.shape[0]) * inner
            prefix = np.ascontiguousarray(block[interior]).reshape(-1)  # a copy: the block is reused
            cells = np.arange(start, stop, dtype=np.int64)
            columns = [pa.array(cells), pa.array(flat[start:stop]), pa.array(prefix)]
            yield pa.record_batch(columns, schema=schema)

    return schema, batches()


def _label_columns(release: GridRelease, name: str) -> str:
    """The user's label columns of a cell, derived from its ``cell`` number: per attribute its
    labels listed once (the internal ``__pdp_<name>_axis_<column>`` tables, one row per position
    along the axis, as the Arrow table writes them) and indexed by ``(cell // stride) % n``."""
    strides = np.asarray(release.counts.strides, dtype=np.int64) // release.counts.itemsize
    out = []
    for k, table in enumerate(release._axis_table(k) for k in range(len(release.attributes))):
        at = f"((cell // {int(strides[k])}) % {release.shape[k]}) + 1"
        out += [f"(SELECT list({ident(c)} ORDER BY __i) FROM {ident(_axis_source(release, name, k))})[{at}] "
                f"AS {ident(c)}" for c in table.column_names[1:]]
    return ", ".join(out)


def _axis_source(release: GridRelease, name: str, axis: int) -> str:
    return internal(name, f"axis_{release.attributes[axis].column}")


#: Columns of a transformed nominal axis's internal labels table (not in its view) and their
#: names in the ``ranged`` CTE (``<name><axis>``): the label's nominal weights, their largest and
#: their second largest (counting repeats; the interval half-width reads these two, not the list).
_WEIGHT_COLUMNS = {"weights": "w", "top": "t", "second": "u"}


def _top_second(weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Largest and second largest weight per row (the list functions Python's half-width runs;
    0 for a single weight, an axis the half-width reads as one term)."""
    top = NUMPY.lmax(weights)
    return top, NUMPY.lsecond(weights, top) if weights.shape[1] > 1 else 0.0 * top


def lookup_tables(release: GridRelease, axes: list[_Axis]) -> tuple[dict[str, pa.Table], list[str]]:
    """The ``name_labels_<column>`` table of each nominal axis: its transient source (label,
    leaf range, per-axis variance factor; a transformed axis's weights, their largest and second
    largest) and the statement creating it."""
    sources, statements = {}, []
    for ax in axes:
        a, k = ax.attribute, ax.axis
        if isinstance(a, Nominal):
            mapping = label_ranges(a)
            starts = np.array([r[0] for r in mapping.values()], dtype=np.int64)
            stops = np.array([r[1] for r in mapping.values()], dtype=np.int64)
            source = f"__pdp_labels_{k}"
            sources[source] = pa.table({"label": pa.array(list(mapping), pa.string()), "start": starts,
                                      "stop": stops, "factor": release.axis_variance(k, starts, stops)})
            if ax.transformed:
                weights, _ = range_weights(a, starts, stops, True)
                top, second = _top_second(weights)
                for column, values in zip(_WEIGHT_COLUMNS, (pa.array(list(weights), pa.list_(pa.float64())),
                                                            pa.array(top), pa.array(second)), strict=True):
                    sources[source] = sources[source].append_column(column, values)
            statements += [f"CREATE TABLE {ident(ax.labels_source())} AS SELECT * FROM {ident(source)}",
                           view(ax.labels_table(), ax.labels_source(),
                                literal(f"labels of {a.column} in release {ax.name}: leaf ranges"),
                                list(_WEIGHT_COLUMNS) if ax.transformed else [])]
    return sources, statements


def register_grid(con: Any, name: str, release: GridRelease, *, replace: bool = False) -> Any:
    """Create the table, metadata, lookup tables and macros of ``release`` in ``con`` (see the
    module doc); all in one transaction (:func:`~polars_dp.releases.sql.register`).  Returns
    the DuckDB relation of the table ``name``.

    Refuses (:class:`ParameterError` naming them) when a table, view or macro it would create
    exists already, unless ``replace=True``.
    """
    check_connection(con)
    preserve = con.execute("SELECT current_setting('preserve_insertion_order')").fetchall()[0][0]
    parts = grid_registration(name, release, preserve=preserve)
    if not _in_memory(con):
        return register(con, name, parts, replace=replace)
    if not replace:  # refuse before building the cell table
        check_free(con, parts.tables, parts.macros, replace=False)
    store = _compressed_store(con, name, release, preserve=preserve)
    if store is None:  # the connection cannot attach a database: cells in its own
        return register(con, name, parts, replace=replace)
    try:
        out = register(con, name, grid_registration(name, release, preserve=preserve, store=store),
                       replace=replace)
    except BaseException:
        with contextlib.suppress(Exception):
            con.execute(f"DETACH {ident(store)}")
        raise
    _detach_stale_stores(con, name, keep=store)
    return out


#: Name of the attached database holding the cell table of release ``name`` in an in-memory
#: connection (:func:`_compressed_store`): ``__pdp_<name>_store<k>``.
def _store_name(name: str, k: int) -> str:
    return f"__pdp_{name}_store{k}"


def _in_memory(con: Any) -> bool:
    """Whether the connection's current database lives in memory (no file)."""
    rows = con.execute("SELECT path FROM duckdb_databases() "
                       "WHERE database_name = current_database()").fetchall()
    return bool(rows) and rows[0][0] in (None, "", ":memory:")


def _compressed_store(con: Any, name: str, release: GridRelease, *, preserve: bool) -> str | None:
    """In an in-memory connection, the cell table in an attached compressed in-memory database
    (``ATTACH ':memory:' (COMPRESS)``): DuckDB keeps the tables of an in-memory database
    uncompressed (24 bytes per cell for ``cell``, ``count``, ``prefix``); there it compresses each
    slab of cells once appended (``CHECKPOINT``), so no uncompressed copy of the whole table is
    ever held.  Returns the name of that database (``None`` when the connection cannot attach
    one: its cells then go into its own database)."""
    taken = {row[0].lower() for row in con.execute("SELECT database_name FROM duckdb_databases()").fetchall()}
    store = next(_store_name(name, k) for k in itertools.count() if _store_name(name, k).lower() not in taken)
    try:
        con.execute(f"ATTACH ':memory:' AS {ident(store)} (COMPRESS)")
    except Exception:  # e.g. enable_external_access = false
        return None
    table, source = f"{ident(store)}.main.{ident(internal(name))}", f"__pdp_slab_{name}"
    try:
        _, batches = _cell_batches(release)
        for i, batch in enumerate(batches):
            con.register(source, batch)
            try:
                select = f"SELECT * FROM {ident(source)}" + ("" if preserve else " ORDER BY cell")
                con.execute(f"INSERT INTO {table} {select}" if i else f"CREATE TABLE {table} AS {select}")
            finally:
                con.unregister(source)
            con.execute(f"CHECKPOINT {ident(store)}")
    except BaseException:
        with contextlib.suppress(Exception):
            con.execute(f"DETACH {ident(store)}")
        raise
    return store


def _detach_stale_stores(con: Any, name: str, keep: str) -> None:
    """Detach the cell stores of earlier registrations of ``name`` (replaced or dropped)."""
    pattern = re.compile(re.escape(f"__pdp_{name}_store").lower() + r"\d+")
    for (db,) in con.execute("SELECT database_name FROM duckdb_databases()").fetchall():
        if db.lower() != keep.lower() and pattern.fullmatch(db.lower()):
            con.execute(f"DETACH {ident(db)}")


def grid_registration(name: str, release: GridRelease, *, preserve: bool = True,
                      store: str | None = None, build: str | None = None) -> Registration:
    """What :func:`register_grid` creates (:class:`~polars_dp.releases.sql.Registration`); the
    cell source is made only when registered.  ``preserve``: whether the connection keeps
    insertion order (otherwise the cell table is sorted by ``cell`` explicitly).  ``store``: the
    attached database already holding the cell table (:func:`_compressed_store`); the internal
    cell table is then a view of it.  ``build``: the statements creating and filling the cell
    table instead of reading a cell source (a SQL script builds it slab by slab); no cell source
    is then listed."""
    check_identifier(name)
    clash = {"cell", "prefix"} & {c.lower() for c in release._table(0, 1).schema.names}
    if clash:
        raise ParameterError(
            f"the release has a column named {sorted(clash)[0]!r}, which the DuckDB table uses for "
            "its cell index / prefix sum; rename the attribute"
        )
    axes = [_Axis(release, name, k) for k in range(len(release.attributes))]
    source, meta_source = f"__pdp_source_{name}", f"__pdp_meta_{name}"
    params = ", ".join([*(f"{ident(c)} := NULL" for ax in axes for c in ax.columns), "align := 'exact'",
                        "alpha := 0.05"])
    single_source = "(SELECT 0 AS id, " + ", ".join(
        f"{ident(c)} AS {ident(c)}" for ax in axes for c in ax.columns) + ")"
    labels, label_statements = lookup_tables(release, axes)
    axis_sources = {f"__pdp_axis_{k}": release._axis_table(k) for k in range(len(axes))}
    axis_statements = [f"CREATE TABLE {ident(_axis_source(release, name, k))} AS SELECT * FROM {ident(src)} "
                       "ORDER BY __i" for k, src in enumerate(axis_sources)]
    columns = _label_columns(release, name)
    rows = internal(name, "rows")
    meta = f"CREATE TABLE {ident(f'{name}_meta')} AS SELECT key, value FROM {ident(meta_source)}"
    if build is not None:
        cells = f"{build};\n\n{meta}"
    elif store is None:
        cells = render("grid_register.sql", cells=ident(internal(name)), view=ident(name),
                       source=ident(source), order_by="" if preserve else " ORDER BY cell",
                       meta_table=ident(f"{name}_meta"), meta_source=ident(meta_source))
    else:
        cells = (f"CREATE VIEW {ident(internal(name))} AS SELECT * FROM "
                 f"{ident(store)}.main.{ident(internal(name))}; {meta}")
    statements = [
        cells,
        *axis_statements,
        view(name, internal(name), comment(release, name, f", noise_scale={release.noise_scale}"),
             columns=f"{columns}, {ident('count')}"),
        f"CREATE VIEW {ident(rows)} AS SELECT {columns}, {ident('count')}, cell FROM {ident(internal(name))}",
        f"COMMENT ON VIEW {ident(rows)} IS {literal(f'internal rows of {name} with their cell number')}",
        *label_statements,
        render("grid_macros.sql", name=name,
               single_macro=ident(f"{name}_range_count"), batch_macro=ident(f"{name}_range_counts"),
               parameters=params,
               single_answers=_answers(release, name, axes, single_source, "''"),
               batch_answers=_answers(release, name, axes, "query_table(queries)", BATCH_WHERE)),
    ]
    return Registration(
        tables=[name, rows, internal(name), f"{name}_meta", *(t for ax in axes for t in ax.tables()),
                *(_axis_source(release, name, k) for k in range(len(axes)))],
        macros=[f"{name}_range_count", f"{name}_range_counts"],
        sources={**({} if store is not None or build is not None else
                    {source: lambda: pa.RecordBatchReader.from_batches(*_cell_batches(release))}),
                 meta_source: metadata_table(release), **labels, **axis_sources},
        statements=statements)


__all__ = ["BATCH_CELLS", "accuracy_sql", "grid_registration", "register_grid"]
