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
* ``name_range_count(<col>_lo := ..., <col>_hi := ..., <nominal col> := ..., align := ...)``:
  one row (``count``, ``std``), every predicate optional;
* ``name_range_counts(queries_table)``: one row per query (``id``, ``count``, ``std``) for a
  table with an ``id`` column and the predicate columns of the Python batch form; missing
  columns and NULLs mean the whole domain; any other column, a NULL id and a repeated id are
  refused (``sql/query_checks.sql``, the rule of Python's ``range_counts``).

Both macros answer by inclusion-exclusion over the ``2^d`` corners of each query's box,
joined on ``prefix`` (the same arithmetic as :mod:`polars_dp.releases.grid_queries`).  A bad predicate
(unknown label, value outside the domain, ``lo > hi``) raises a DuckDB error naming the
column and value.

``std`` is the exact noise standard deviation ``sqrt(2 scale^2 prod_k f_k)`` (Privelet
paper, Theorem 3; Basic: ``f_k`` = cells in the range).  For an ordinal axis the mechanism
transformed, ``f_k`` is computed in SQL per query from the Haar tree's levels
(:func:`haar_factor_sql`, the arithmetic of
:func:`polars_dp.kernels.wavelet_variance.haar_range_variance_factor`): exact for every axis size.

Both macros take ``align := 'exact'`` (default; an ordinal bound inside a bin is an error
naming the nearest aligned bounds), ``'outer'`` or ``'inner'``, as the Python methods do
(:mod:`polars_dp.releases.grid_queries`).  Batch answers come in ``id`` order.

Registration refuses to overwrite an existing table, view or macro (the error names them)
unless ``replace=True``.

Plain SQL works on the table too::

    SELECT sum(count) FROM name WHERE age BETWEEN 20 AND 30 AND occupation_group = 'Sales'
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pyarrow as pa

from polars_dp.domains.attributes import FLOAT_TOLERANCE, Nominal, Ordinal
from polars_dp.errors import ParameterError
from polars_dp.kernels.wavelets import haar_levels, haar_padded_length
from polars_dp.plans.noise_model import Correlated
from polars_dp.releases.grid_queries import label_ranges
from polars_dp.releases.sql import (
    BATCH_WHERE,
    PythonFunction,
    Registration,
    check_identifier,
    comment,
    ident,
    literal,
    metadata_table,
    number,
    query_checks,
    register,
    register_function,
    render,
)

if TYPE_CHECKING:
    from polars_dp.releases.grid import GridRelease

#: Cells per Arrow batch streamed into DuckDB at registration.
BATCH_CELLS = 1 << 21


def haar_factor_sql(start: str, stop: str, m: int) -> str:
    """SQL of :func:`polars_dp.kernels.wavelet_variance.haar_range_variance_factor` for one range
    ``[start, stop)`` of ``m`` cells: exact for every ``m`` (no stored table).

    The base term is ``((stop - start) / P)^2``; each level of node width ``w`` (``P, ..., 2``,
    half ``h``) adds ``(diff / w)^2`` for the (at most two) nodes holding a range end, ``diff`` =
    cells of the range in the node's left half minus its right half.  When the ends fall in
    different nodes the range covers the start node from ``r = start mod w`` to its end and the
    stop node from its beginning for ``t = (stop - 1) mod w + 1`` cells, so ``|diff|`` is
    ``min(r, w - r)`` and ``min(t, w - t)``; within one node it is the overlap difference.
    Integer arithmetic up to the final division; one unrolled term per level."""
    p = haar_padded_length(m)
    terms = [f"power(({stop} - {start})::DOUBLE / {p}, 2)"]
    for w in (p >> j for j in range(haar_levels(m))):
        r, t = f"({start} % {w})", f"(({stop} - 1) % {w} + 1)"
        mid = f"({start} - {r} + {w // 2})"
        same = f"({start} // {w} = ({stop} - 1) // {w})"
        diff = (f"(greatest(least({stop}, {mid}) - {start}, 0) "
                f"- greatest({stop} - greatest({start}, {mid}), 0))")
        near_r, near_t = f"least({r}, {w} - {r})", f"least({t}, {w} - {t})"
        ends = f"{near_r} * {near_r} + {near_t} * {near_t}"
        terms.append(f"(CASE WHEN {same} THEN {diff} * {diff} ELSE {ends} END)::DOUBLE / {w * w}")
    return "(" + " + ".join(terms) + ")"


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

    def tables(self) -> list[str]:
        """Tables this axis adds to a registration."""
        return [self.labels_table()] if isinstance(self.attribute, Nominal) else []

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
            out.append(
                f"CASE WHEN {raw} IS NULL THEN NULL "
                f"WHEN {ref} IS NULL THEN error({literal(column + ': ')} || CAST({raw} AS VARCHAR) || "
                f"{literal(' is not a number')} || {where}) "
                f"WHEN NOT ({ref} >= {number(a.lo)} AND {ref} <= {number(a.hi)}) THEN "
                f"error({literal(column + ': ')} || {ref} || "
                f"{literal(' is outside the declared domain ' + a.domain_text())} || {where}) "
                f"ELSE {ref} END AS __{side}{k}")
        return ", " + ", ".join(out)

    def positions(self) -> str:
        """Per ordinal axis, columns of the ``pos`` CTE (same arithmetic as
        :func:`polars_dp.releases.grid_queries.ordinal_ranges`): ``__cl<k>``/``__ch<k>`` the
        bins holding lo/hi, ``__el<k>`` lo is a bin edge, ``__eh<k>`` hi ends a bin, ``__sh<k>``
        the stop cell of an aligned hi."""
        a, k = self.attribute, self.axis
        if isinstance(a, Nominal):
            return ""
        lo, w, tol = number(a.lo), number(a.width), repr(FLOAT_TOLERANCE)

        def t(ref: str) -> str:
            return f"(({ref} - {lo}) / {w})"

        def cell(ref: str) -> str:
            # greatest/least skip NULLs: an open side must stay NULL
            return (f"CASE WHEN {ref} IS NOT NULL THEN "
                    f"CAST(least(greatest(floor({t(ref)} + {tol}), 0), {a.n_cells - 1}) AS BIGINT) END")

        def on_edge(ref: str) -> str:
            return f"({t(ref)} - {cell(ref)} <= {tol})"

        h = f"v.__hi{k}"
        if a.integer:
            ends = f"({h} = least({lo} + ({cell(h)} + 1) * {w} - 1, {number(a.hi)}))"
            stop = f"{cell(h)} + 1"
        else:
            ends = f"({h} >= {number(a.hi)} OR {on_edge(h)})"
            stop = f"CASE WHEN {h} >= {number(a.hi)} THEN {a.n_cells} ELSE {cell(h)} END"
        return (f", {cell(f'v.__lo{k}')} AS __cl{k}, {on_edge(f'v.__lo{k}')} AS __el{k}, "
                f"{cell(h)} AS __ch{k}, {ends} AS __eh{k}, {stop} AS __sh{k}")

    def _bound_text(self, stop_cells: str, start_cells: str) -> str:
        """SQL text ``column=(lo, hi)`` of the aligned bounds of cells ``[start, stop)``."""
        a = cast(Ordinal, self.attribute)  # called for ordinal axes only
        lo, w = number(a.lo), number(a.width)
        if a.integer:
            first = f"CAST({lo} + ({start_cells}) * {w} AS BIGINT)"
            last = f"CAST(least({lo} + ({stop_cells}) * {w} - 1, {number(a.hi)}) AS BIGINT)"
        else:
            magnitude = max(abs(a.lo), abs(a.hi), abs(a.width))
            digits = 12 - math.floor(math.log10(magnitude))
            first = f"round({lo} + ({start_cells}) * {w}, {digits})"
            last = (f"CASE WHEN ({stop_cells}) >= {a.n_cells} THEN {number(a.hi)} "
                    f"ELSE round({lo} + ({stop_cells}) * {w}, {digits}) END")
        return (f"{literal(a.column + '=(')} || CAST({first} AS VARCHAR) || ', ' || "
                f"CAST({last} AS VARCHAR) || ')'")

    def ranges(self, where: str) -> str:
        """``s<k>``, ``e<k>`` (and ``f<k>`` for nominal) columns of the ``box`` CTE."""
        k, a = self.axis, self.attribute
        if isinstance(a, Nominal):
            ref, lab = f"q.{ident(a.column)}", f"l{k}"
            root = float(self.release.axis_variance(k, np.array([0]), np.array([a.n_cells]))[0])
            unknown = (f"error({literal(a.column + ': ')} || CAST({ref} AS VARCHAR) || "
                       f"{literal(' is not a label of this hierarchy')} || {where})")
            return (f"CASE WHEN {ref} IS NULL THEN 0 WHEN {lab}.start IS NULL THEN {unknown} "
                    f"ELSE {lab}.start END AS s{k}, "
                    f"CASE WHEN {ref} IS NULL THEN {a.n_cells} ELSE {lab}.stop END AS e{k}, "
                    f"CASE WHEN {ref} IS NULL THEN {root!r} ELSE {lab}.factor END AS f{k}")
        lo, hi = f"q.__lo{k}", f"q.__hi{k}"
        cl, el, ch, eh, sh = (f"q.__{x}{k}" for x in ("cl", "el", "ch", "eh", "sh"))
        n = a.n_cells
        outer_start = f"coalesce({cl}, 0)"
        inner_start = f"coalesce({cl} + CASE WHEN {el} THEN 0 ELSE 1 END, 0)"
        outer_stop = (f"greatest(CASE WHEN {hi} IS NULL THEN {n} WHEN {eh} THEN {sh} ELSE {ch} + 1 END, "
                      f"coalesce({cl}, 0) + 1)")
        inner_stop = f"CASE WHEN {hi} IS NULL THEN {n} WHEN {eh} THEN {sh} ELSE {ch} END"
        raw_lo, raw_hi = (f"coalesce(CAST(q.{ident(c)} AS VARCHAR), 'None')" for c in self.columns)
        asked = f"{literal(a.column + '=(')} || {raw_lo} || ', ' || {raw_hi} || ')'"
        nearest = (f"{self._bound_text(outer_stop, outer_start)} || {literal(' (align=outer)')} || "
                   f"CASE WHEN ({inner_start}) < ({inner_stop}) THEN ' or ' || "
                   f"{self._bound_text(inner_stop, inner_start)} || {literal(' (align=inner)')} "
                   f"ELSE {literal('; no whole bin lies inside it')} END")
        unaligned = (f"error({asked} || {literal(' does not fall on bin edges of ' + a.domain_text())} || "
                     f"{literal(' (a release only knows whole bins); nearest aligned: ')} || {nearest} "
                     f"|| {where})")
        empty = (f"error({literal(a.column + ': lo=')} || {lo} || ' > hi=' || {hi} || "
                 f"{literal('; the range is empty')} || {where})")
        bad_align = "error('align must be one of exact, outer, inner, got ' || coalesce(align, 'NULL'))"
        start = (f"CASE WHEN align IS NULL OR align NOT IN ('exact', 'outer', 'inner') THEN {bad_align} "
                 f"WHEN {lo} IS NOT NULL AND {hi} IS NOT NULL AND {lo} > {hi} THEN {empty} "
                 f"WHEN align = 'exact' AND NOT (coalesce({el}, true) AND coalesce({eh}, true)) "
                 f"THEN {unaligned} "
                 f"WHEN align = 'inner' THEN {inner_start} ELSE {outer_start} END")
        stop = f"CASE WHEN align = 'inner' THEN {inner_stop} ELSE {outer_stop} END"
        hint = literal("; use align := outer for the bins it touches")
        no_bin = (f"{asked} || {literal(' contains no whole bin of ' + a.domain_text())} || "
                  f"CASE WHEN align = 'outer' THEN '' ELSE {hint} END || {where}")
        return f"{start} AS s{k}, {stop} AS __e{k}, {no_bin} AS __nobin{k}"

    def checked(self) -> str:
        """``s<k>``, ``e<k>`` (``f<k>``) of the ``box`` CTE: an ordinal range that holds no
        whole bin is an error (DuckDB cannot raise it where ``s<k>`` is defined)."""
        k = self.axis
        if isinstance(self.attribute, Nominal):
            return f"b.s{k}, b.e{k}, b.f{k}"
        return f"b.s{k}, CASE WHEN b.__e{k} <= b.s{k} THEN error(b.__nobin{k}) ELSE b.__e{k} END AS e{k}"

    def label_join(self) -> str:
        if not isinstance(self.attribute, Nominal):
            return ""
        k = self.axis
        return (f"\n    LEFT JOIN {ident(self.labels_table())} AS l{k} "
                f"ON l{k}.label = CAST(q.{ident(self.attribute.column)} AS VARCHAR)")

    def factor(self) -> str:
        """Per-axis variance factor ``f_k`` of the query's range (SQL)."""
        k = self.axis
        if isinstance(self.attribute, Nominal):
            return f"box.f{k}"
        if not self.transformed:
            return f"(box.e{k} - box.s{k})"
        return haar_factor_sql(f"box.s{k}", f"box.e{k}", self.attribute.n_cells)


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
    if isinstance(release.noise_model, Correlated):
        accuracy = "NULL::DOUBLE"
    else:
        bounds = ", ".join(f"box.s{k}::BIGINT, box.e{k}::BIGINT" for k in range(d))
        accuracy = f"{ident(accuracy_function(name))}(alpha::DOUBLE, {bounds})"
    return render(
        "grid_answers.sql",
        table=ident(name),
        queries=queries,
        typed_columns=", ".join(["NULL AS id", *(c for ax in axes for c in ax.typed_columns())]),
        checks=query_checks(queries, "q", [c for ax in axes for c in ax.columns], batch=where == BATCH_WHERE),
        values="".join(ax.values(where) for ax in axes),
        positions="".join(ax.positions() for ax in axes),
        ranges=",\n           ".join(ax.ranges(where) for ax in axes),
        checked=", ".join(ax.checked() for ax in axes),
        label_joins="".join(ax.label_join() for ax in axes),
        d=d,
        n_corners=1 << d,
        corner_cell=corner_cell,
        corner_valid=corner_valid,
        variance=variance,
        accuracy=accuracy,
    )


def accuracy_function(name: str) -> str:
    """Name of the DuckDB function behind the ``lo`` / ``hi`` columns of release ``name``."""
    return f"__pdp_accuracy_{name}"


def accuracy_udf(name: str, release: GridRelease) -> PythonFunction:
    """A vectorised DuckDB function ``accuracy_function(name)(alpha, s0, e0, ...)`` answering
    :meth:`GridRelease.range_accuracy` for the cell ranges of a batch (the same code as the
    Python answers, so SQL and Python agree exactly).  It lives in the connection: a database
    file reopened without registering the release again answers counts and ``std`` but not
    ``lo`` / ``hi``."""
    d = len(release.attributes)

    def accuracy(alpha: pa.Array, *bounds: pa.Array) -> pa.Array:
        a = np.asarray(alpha.to_numpy(zero_copy_only=False), dtype=np.float64)
        cols = [np.asarray(b.to_numpy(zero_copy_only=False), dtype=np.int64) for b in bounds]
        starts, stops = np.stack(cols[0::2], axis=1), np.stack(cols[1::2], axis=1)
        out = np.empty(a.size)
        for value in np.unique(a):
            rows = a == value
            out[rows] = release.range_accuracy(starts[rows], stops[rows], float(value))
        return pa.array(out, from_pandas=True)  # NaN (post-processed) -> NULL

    positional = inspect.Parameter.POSITIONAL_ONLY
    accuracy.__signature__ = inspect.Signature(  # type: ignore[attr-defined]  # DuckDB counts these
        [inspect.Parameter(f"p{i}", positional) for i in range(2 * d + 1)])
    return PythonFunction(accuracy_function(name), accuracy, ["DOUBLE"] + ["BIGINT"] * (2 * d), "DOUBLE",
                          {"side_effects": False})


def register_accuracy(con: Any, name: str, release: GridRelease, *, replace: bool = False) -> None:
    """Add the function of :func:`accuracy_udf` to ``con``
    (:func:`~polars_dp.releases.sql.register_function`)."""
    register_function(con, accuracy_udf(name, release), replace=replace)


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


def lookup_tables(release: GridRelease, axes: list[_Axis]) -> tuple[dict[str, pa.Table], list[str]]:
    """The ``name_labels_<column>`` table of each nominal axis: its transient source (label,
    leaf range, per-axis variance factor) and the statement creating it."""
    sources, statements = {}, []
    for ax in axes:
        a, k = ax.attribute, ax.axis
        if isinstance(a, Nominal):
            mapping = label_ranges(a)
            starts = np.array([r[0] for r in mapping.values()], dtype=np.int64)
            stops = np.array([r[1] for r in mapping.values()], dtype=np.int64)
            view = f"__pdp_labels_{k}"
            sources[view] = pa.table({"label": pa.array(list(mapping), pa.string()), "start": starts,
                                      "stop": stops, "factor": release.axis_variance(k, starts, stops)})
            statements.append(f"CREATE TABLE {ident(ax.labels_table())} AS SELECT * FROM {ident(view)}")
    return sources, statements


def register_grid(con: Any, name: str, release: GridRelease, *, replace: bool = False) -> Any:
    """Create the table, metadata, lookup tables and macros of ``release`` in ``con`` (see the
    module doc); all in one transaction (:func:`~polars_dp.releases.sql.register`).  Returns
    the DuckDB relation of the table ``name``.

    Refuses (:class:`ParameterError` naming them) when a table, view or macro it would create
    exists already, unless ``replace=True``.
    """
    _check_name(name, release)
    axes = [_Axis(release, name, k) for k in range(len(release.attributes))]
    schema, batches = _cell_batches(release)
    source, meta_source = f"__pdp_source_{name}", f"__pdp_meta_{name}"
    preserve = con.execute("SELECT current_setting('preserve_insertion_order')").fetchall()[0][0]
    params = ", ".join([*(f"{ident(c)} := NULL" for ax in axes for c in ax.columns), "align := 'exact'",
                        "alpha := 0.05"])
    single_source = "(SELECT 0 AS id, " + ", ".join(
        f"{ident(c)} AS {ident(c)}" for ax in axes for c in ax.columns) + ")"
    labels, label_statements = lookup_tables(release, axes)
    statements = [
        render("grid_register.sql", table=ident(name), source=ident(source),
               order_by="" if preserve else " ORDER BY cell",
               meta_table=ident(f"{name}_meta"), meta_source=ident(meta_source),
               comment=comment(release, name, f", noise_scale={release.noise_scale}")),
        *label_statements,
        render("grid_macros.sql", name=name,
               single_macro=ident(f"{name}_range_count"), batch_macro=ident(f"{name}_range_counts"),
               parameters=params,
               single_answers=_answers(release, name, axes, single_source, "''"),
               batch_answers=_answers(release, name, axes, "query_table(queries)", BATCH_WHERE)),
    ]
    parts = Registration(
        tables=[name, f"{name}_meta", *(t for ax in axes for t in ax.tables())],
        macros=[f"{name}_range_count", f"{name}_range_counts"],
        sources={source: pa.RecordBatchReader.from_batches(schema, batches),
                 meta_source: metadata_table(release), **labels},
        statements=statements, functions=[accuracy_udf(name, release)])
    return register(con, name, parts, replace=replace)


__all__ = ["BATCH_CELLS", "accuracy_function", "accuracy_udf", "haar_factor_sql", "register_accuracy",
           "register_grid"]
