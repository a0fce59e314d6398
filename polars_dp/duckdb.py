"""Query a release with SQL in DuckDB: a native table plus range-count table macros.

Spatial tree releases (PrivTree, UG, AG): see :func:`register_tree`.  Grid releases:

``register(con, name, release)`` (or ``release.to_duckdb(con, name)``) creates

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
joined on ``prefix`` (the same arithmetic as :mod:`polars_dp.queries`).  A bad predicate
(unknown label, value outside the domain, ``lo > hi``) raises a DuckDB error naming the
column and value.

``std`` is the exact noise standard deviation ``sqrt(2 scale^2 prod_k f_k)`` (Privelet
paper, Theorem 3; Basic: ``f_k`` = cells in the range).  For an ordinal axis the mechanism
transformed, the factors of all ``n (n + 1) / 2`` ranges are stored in a table
``name_factors_<column>`` when that is at most :data:`MAX_FACTOR_ROWS` rows; beyond that the
SQL ``std`` is NULL (use ``release.range_counts(..., std=True)`` in Python).

The SQL lives in ``sql/*.sql`` templates (shipped in the wheel as ``polars_dp/sql``),
rendered per release here.  Plain SQL works on the table too::

    SELECT sum(count) FROM name WHERE age BETWEEN 20 AND 30 AND occupation_group = 'Sales'
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from polars_dp.domain import FLOAT_TOLERANCE, Nominal, Ordinal
from polars_dp.errors import ParameterError, ReleaseFormatError
from polars_dp.queries import label_ranges
from polars_dp.release import GridRelease, Release, attach_metadata, read_metadata
from polars_dp.release import read_release as _read_arrow_release

#: Largest per-axis table of variance factors stored for a transformed ordinal axis.
MAX_FACTOR_ROWS = 1 << 21
#: Cells per Arrow batch streamed into DuckDB at registration.
BATCH_CELLS = 1 << 21

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")


# ---------------------------------------------------------------------- templates
def sql_dir() -> Path:
    """Folder of the SQL templates: ``polars_dp/sql`` when installed, the repo's ``sql/`` in a
    source checkout."""
    installed = files("polars_dp") / "sql"
    if installed.is_dir():
        return Path(str(installed))
    return Path(__file__).resolve().parent.parent / "sql"


def render(template: str, **values: Any) -> str:
    """The text of ``sql/<template>`` with every ``{{key}}`` replaced by ``values[key]``."""
    text = (sql_dir() / template).read_text()

    def substitute(match: re.Match) -> str:
        key = match.group(1)
        if key not in values:
            raise KeyError(f"template {template} needs a value for {{{{{key}}}}}")
        return str(values[key])

    return _PLACEHOLDER.sub(substitute, text)


def ident(name: str) -> str:
    """A quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def literal(text: str) -> str:
    """A quoted SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def _number(x: float | int) -> str:
    return repr(float(x)) if isinstance(x, float) else str(int(x))


# ---------------------------------------------------------------------- SQL fragments
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
                    f"WHEN NOT ({ref} >= {_number(a.lo)} AND {ref} <= {_number(a.hi)}) THEN "
                    f"error({literal(column + ': ')} || {ref} || "
                    f"{literal(' is outside the declared domain ' + a.domain_text())} || {where}) ")

        def cell(ref: str) -> str:
            return (f"CAST(least(greatest(floor(({ref} - {_number(a.lo)}) / {_number(a.width)} "
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


def _answers(release: GridRelease, name: str, axes: list[_Axis], queries: str, where: str) -> str:
    d = len(axes)
    strides = np.asarray(release.counts.strides, dtype=np.int64) // release.counts.itemsize
    bit = "((c.corner >> {k}) & 1) = 1"
    corner_cell = " + ".join(
        f"(CASE WHEN {bit.format(k=k)} THEN box.e{k} - 1 ELSE box.s{k} - 1 END) * {int(strides[k])}"
        for k in range(d))
    corner_valid = " AND ".join(f"({bit.format(k=k)} OR box.s{k} > 0)" for k in range(d))
    variance = " * ".join([f"{2.0 * release.noise_scale ** 2!r}", *(ax.factor() for ax in axes)])
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


# ---------------------------------------------------------------------- registration
def _check_identifier(name: str) -> None:
    if not isinstance(name, str) or not _IDENTIFIER.match(name):
        raise ParameterError(
            f"name must be a plain SQL identifier (letters, digits, underscore), got {name!r}"
        )


def _check_name(name: str, release: GridRelease) -> None:
    _check_identifier(name)
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


def _small_table(con: Any, view: str, table: str, data: pa.Table) -> None:
    con.register(view, data)
    try:
        con.execute(f"CREATE OR REPLACE TABLE {ident(table)} AS SELECT * FROM {ident(view)}")
    finally:
        con.unregister(view)


def _lookup_tables(con: Any, release: GridRelease, axes: list[_Axis]) -> None:
    for ax in axes:
        a, k = ax.attribute, ax.axis
        if isinstance(a, Nominal):
            mapping = label_ranges(a)
            starts = np.array([r[0] for r in mapping.values()], dtype=np.int64)
            stops = np.array([r[1] for r in mapping.values()], dtype=np.int64)
            data = pa.table({"label": pa.array(list(mapping), pa.string()), "start": starts, "stop": stops,
                             "factor": release.axis_variance(k, starts, stops)})
            _small_table(con, f"__pdp_labels_{k}", ax.labels_table(), data)
        elif ax.stores_factors():
            starts, stops = np.triu_indices(a.n_cells + 1, k=1)
            data = pa.table({"start": starts.astype(np.int64), "stop": stops.astype(np.int64),
                             "factor": release.axis_variance(k, starts, stops)})
            _small_table(con, f"__pdp_factors_{k}", ax.factors_table(), data)


def _metadata_table(release: Release) -> pa.Table:
    meta = read_metadata(attach_metadata(pa.table({}), release.metadata()))
    return pa.table({"key": list(meta), "value": list(meta.values())})


def _comment(release: Release, name: str) -> str:
    extra = f", noise_scale={release.noise_scale}" if isinstance(release, GridRelease) else ""
    return literal(f"polars-dp {release.release_type} release: mechanism={release.mechanism}, "
                   f"epsilon={release.epsilon}, neighbours={release.neighbours}{extra}; "
                   f"metadata in {name}_meta")


def _in_transaction(con: Any, views: dict[str, Any], build: Any) -> None:
    """Register ``views``, run ``build()`` and commit; on any error roll back and drop the views,
    so a failed registration leaves nothing half-made in the connection."""
    con.execute("BEGIN TRANSACTION")
    try:
        for view, data in views.items():
            con.register(view, data)
        build()
        for view in views:
            con.unregister(view)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        for view in views:
            with contextlib.suppress(Exception):  # the view may be gone already
                con.unregister(view)
        raise


def register(con: Any, name: str, release: Release) -> Any:
    """Create the table, metadata, lookup tables and macros of ``release`` in ``con`` (see the
    module doc); all in one transaction.  Returns the DuckDB relation of the table ``name``.

    A :class:`~polars_dp.TreeRelease` (PrivTree, UG, AG) gets a leaf table and box macros
    instead (see :func:`register_tree`).
    """
    from polars_dp.tree_release import TreeRelease

    if isinstance(release, TreeRelease):
        return register_tree(con, name, release)
    if getattr(release, "release_type", None) == "sequence_model":
        from polars_dp.sequence_duckdb import register_sequences
        return register_sequences(con, name, release)
    if not isinstance(release, GridRelease):
        raise ParameterError(f"register expects a GridRelease or TreeRelease, got {type(release).__name__}")
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
                           comment=_comment(release, name)))
        _lookup_tables(con, release, axes)
        con.execute(render(
            "grid_macros.sql", name=name,
            single_macro=ident(f"{name}_range_count"), batch_macro=ident(f"{name}_range_counts"),
            parameters=params,
            single_answers=_answers(release, name, axes, single_source, "''"),
            batch_answers=_answers(release, name, axes, "query_table(queries)", _BATCH_WHERE),
        ))

    _in_transaction(con, {source: pa.RecordBatchReader.from_batches(schema, batches),
                          meta_source: _metadata_table(release)}, build)
    return con.table(name)


_BATCH_WHERE = "' (query id=' || coalesce(CAST(q.id AS VARCHAR), 'NULL') || ')'"


def _tree_answers(release: Any, name: str, queries: str, where: str) -> str:
    cols, box = release.columns, release.box
    bounds, fractions, overlap, typed = [], [], [], []
    for k, c in enumerate(cols):
        lo, hi = ident(f"{c}_lo"), ident(f"{c}_hi")
        typed += [f"NULL::DOUBLE AS {lo}", f"NULL::DOUBLE AS {hi}"]
        qlo, qhi = f"coalesce(q.{lo}, {float(box.lo[k])!r})", f"coalesce(q.{hi}, {float(box.hi[k])!r})"
        bounds.append(
            f"CASE WHEN {qlo} > {qhi} THEN error({literal(c + ': lo=')} || {qlo} || ' > hi=' || {qhi} "
            f"|| {literal('; the range is empty')} || {where}) ELSE {qlo} END AS lo{k}, {qhi} AS hi{k}")
        fractions.append(f"(least(t.{hi}, box.hi{k}) - greatest(t.{lo}, box.lo{k})) / (t.{hi} - t.{lo})")
        overlap.append(f"t.{hi} > box.lo{k} AND t.{lo} < box.hi{k}")
    return render("tree_answers.sql", table=ident(name), queries=queries, typed_columns=", ".join(typed),
                  bounds=",\n           ".join(bounds), fractions=" * ".join(fractions),
                  overlap=" AND ".join(overlap))


def register_tree(con: Any, name: str, release: Any) -> Any:
    """Register a spatial :class:`~polars_dp.TreeRelease` in ``con``, in one transaction:

    * ``name``: one row per leaf (``<col>_lo``, ``<col>_hi``, ``depth``, ``count``, and the
      leaf's position ``leaf`` in the release);
    * ``name_meta(key, value)`` and a table comment, as for grid releases;
    * ``name_range_count(<col>_lo := ..., <col>_hi := ...)``: one row (``count``);
    * ``name_range_counts(boxes_table)``: ``id``, ``count`` per box of a table with an ``id``
      column and ``<col>_lo`` / ``<col>_hi`` columns (missing or NULL = the whole range).

    Answers use the same uniformity assumption as ``release.range_counts``: a leaf adds
    ``count * vol(leaf ∩ box) / vol(leaf)``.
    """
    _check_identifier(name)
    source, meta_source = f"__pdp_source_{name}", f"__pdp_meta_{name}"
    params = ", ".join(f"{ident(f'{c}_{side}')} := NULL" for c in release.columns for side in ("lo", "hi"))
    single_source = "(SELECT 0 AS id, " + ", ".join(
        f"{ident(f'{c}_{side}')} AS {ident(f'{c}_{side}')}" for c in release.columns
        for side in ("lo", "hi")) + ")"

    def build() -> None:
        con.execute(render("tree_register.sql", table=ident(name), source=ident(source),
                           meta_table=ident(f"{name}_meta"), meta_source=ident(meta_source),
                           comment=_comment(release, name)))
        con.execute(render(
            "tree_macros.sql", name=name,
            single_macro=ident(f"{name}_range_count"), batch_macro=ident(f"{name}_range_counts"),
            parameters=params,
            single_answers=_tree_answers(release, name, single_source, "''"),
            batch_answers=_tree_answers(release, name, "query_table(queries)", _BATCH_WHERE),
        ))

    leaves = release._table()
    leaves = leaves.append_column("leaf", pa.array(np.arange(leaves.num_rows, dtype=np.int64)))
    _in_transaction(con, {source: leaves, meta_source: _metadata_table(release)}, build)
    return con.table(name)


# ---------------------------------------------------------------------- reading back
def to_arrow(con: Any, name: str) -> pa.Table:
    """The release table ``name`` as Arrow (in release order, without ``cell``/``prefix``/``leaf``),
    with its ``polars_dp.*`` schema metadata re-attached from ``name_meta``."""
    _check_identifier(name)
    try:
        rows = con.execute(f"SELECT key, value FROM {ident(name + '_meta')}").fetchall()
        kind = dict(rows).get("release_type")
        order, hidden = {"tree": ("leaf", "leaf"), "sequence_model": ("cell", "cell")}.get(
            kind, ("cell", "cell, prefix"))
        table = con.sql(
            f"SELECT * EXCLUDE ({hidden}) FROM {ident(name)} ORDER BY {order}").to_arrow_table()
    except Exception as exc:  # duckdb.CatalogException and friends
        raise ReleaseFormatError(
            f"{name!r} is not a polars-dp release registered in this connection: {exc}"
        ) from None
    return attach_metadata(table, dict(rows))


def read_release(con: Any, name: str) -> Release:
    """The release registered as ``name`` (inverse of :func:`register`)."""
    return _read_arrow_release(to_arrow(con, name))


__all__ = ["BATCH_CELLS", "MAX_FACTOR_ROWS", "ident", "literal", "read_release", "register",
           "register_tree", "render", "sql_dir", "to_arrow"]
