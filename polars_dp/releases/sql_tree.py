"""A spatial tree release (PrivTree, UG, AG) in DuckDB: a leaf table plus box range-count macros."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from polars_dp.releases.sql import (
    BATCH_WHERE,
    check_free,
    check_identifier,
    comment,
    create_mode,
    ident,
    in_transaction,
    literal,
    metadata_table,
    query_checks,
    render,
)

if TYPE_CHECKING:
    from polars_dp.releases.tree import SpatialRelease


def _tree_answers(release: SpatialRelease, name: str, queries: str, where: str) -> str:
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
    checks = query_checks(queries, "q", [f"{c}_{side}" for c in cols for side in ("lo", "hi")],
                          batch=where == BATCH_WHERE)
    return render("tree_answers.sql", table=ident(name), queries=queries, checks=checks,
                  typed_columns=", ".join(["NULL AS id", *typed]),
                  bounds=",\n           ".join(bounds), fractions=" * ".join(fractions),
                  overlap=" AND ".join(overlap))


def register_tree(con: Any, name: str, release: SpatialRelease, *, replace: bool = False) -> Any:
    """Register a spatial :class:`~polars_dp.SpatialRelease` in ``con``, in one transaction:

    * ``name``: one row per leaf (``<col>_lo``, ``<col>_hi``, ``depth``, ``count``, and the
      leaf's position ``leaf`` in the release);
    * ``name_meta(key, value)`` and a table comment, as for grid releases;
    * ``name_range_count(<col>_lo := ..., <col>_hi := ...)``: one row (``count``);
    * ``name_range_counts(boxes_table)``: ``id``, ``count`` per box of a table with an ``id``
      column and ``<col>_lo`` / ``<col>_hi`` columns (missing or NULL = the whole range; any
      other column, a NULL id and a repeated id are refused, as in Python).

    Answers use the same uniformity assumption as ``release.range_counts``: a leaf adds
    ``count * vol(leaf ∩ box) / vol(leaf)``; rows come in ``id`` order.  Refuses
    (:class:`ParameterError` naming them) when a table, view or macro it would create exists,
    unless ``replace=True``.
    """
    check_identifier(name)
    source, meta_source = f"__pdp_source_{name}", f"__pdp_meta_{name}"
    params = ", ".join(f"{ident(f'{c}_{side}')} := NULL" for c in release.columns for side in ("lo", "hi"))
    single_source = "(SELECT 0 AS id, " + ", ".join(
        f"{ident(f'{c}_{side}')} AS {ident(f'{c}_{side}')}" for c in release.columns
        for side in ("lo", "hi")) + ")"

    def build() -> None:
        check_free(con, [name, f"{name}_meta"], [f"{name}_range_count", f"{name}_range_counts"],
                   replace=replace)
        create = create_mode(replace)
        con.execute(render("tree_register.sql", table=ident(name), source=ident(source), create=create,
                           meta_table=ident(f"{name}_meta"), meta_source=ident(meta_source),
                           comment=comment(release, name)))
        con.execute(render(
            "tree_macros.sql", name=name, create=create,
            single_macro=ident(f"{name}_range_count"), batch_macro=ident(f"{name}_range_counts"),
            parameters=params,
            single_answers=_tree_answers(release, name, single_source, "''"),
            batch_answers=_tree_answers(release, name, "query_table(queries)", BATCH_WHERE),
        ))

    leaves = release._table()
    leaves = leaves.append_column("leaf", pa.array(np.arange(leaves.num_rows, dtype=np.int64)))
    in_transaction(con, {source: leaves, meta_source: metadata_table(release)}, build)
    return con.table(name)


__all__ = ["register_tree"]
