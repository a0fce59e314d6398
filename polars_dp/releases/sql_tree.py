"""A spatial tree release (PrivTree, UG, AG) in DuckDB: a leaf table plus box range-count macros."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pyarrow as pa

from polars_dp.domains.expressions import SQL, Sql
from polars_dp.domains.ranges import outside_box, outside_box_text, reversed_text
from polars_dp.kernels.tail_bounds import chernoff_half_width
from polars_dp.releases.postprocess import postprocessed_noise_model
from polars_dp.releases.sql import (
    BATCH_WHERE,
    Registered,
    Registration,
    check_identifier,
    checked_alpha,
    comment,
    ident,
    internal,
    metadata_table,
    query_checks,
    register,
    render,
    view,
)

if TYPE_CHECKING:
    class SpatialRelease(Registered, Protocol):
        """What the SQL of a spatial release reads of it (the class, :class:`polars_dp.SpatialRelease`,
        sits above this module and hands itself to :func:`register_tree`)."""

        @property
        def box(self) -> Any: ...
        @property
        def columns(self) -> list[str]: ...
        @property
        def levels(self) -> Any: ...
        @property
        def subgrid(self) -> Any: ...
        @property
        def layout(self) -> Any: ...
        @property
        def error_model(self) -> Any: ...
        @property
        def params(self) -> Any: ...
        def _table(self) -> pa.Table: ...


def _noise_std(release: SpatialRelease, name: str) -> str:
    """SQL of each answer's ``noise_std`` (the rule of ``release.range_counts(std=True)``):
    counted levels: the exact variance from the inference weights
    (:meth:`~polars_dp.releases.tree_levels.TopLevels.variance_sql`, plain SQL over the node
    tables); otherwise the noise model's :meth:`~polars_dp.plans.noise_model.NoiseModel.
    leaf_variance` of the answer's leaf weights (NULL where it states none: AG, Privelet*,
    post-processed)."""
    if release.levels is None and release.subgrid is None:
        return f"sqrt({release.error_model.leaf_variance(SQL, _SQUARES)})"
    if postprocessed_noise_model(release.params) is not None:
        return "NULL::DOUBLE"
    if release.levels is not None:
        nodes, up = ident(internal(name, "nodes")), ident(internal(name, "up"))
        return f"sqrt({release.levels.variance_sql(release.box.d, nodes, up)})"
    return f"sqrt({_subgrid_sum(release, name, release.subgrid.var_leaf, release.subgrid.var_sub)})"


def _subgrid_sum(release: SpatialRelease, name: str, var_leaf: float, var_sub: float) -> str:
    """SQL of ``sum over the PrivTree leaves L the box meets of var_sub (Q - 2 c F + M c^2) + var_leaf
    c^2`` (:mod:`polars_dp.releases.subgrid`): a scalar subquery correlated with the box, over its
    sub-cells grouped by leaf (a leaf is the node of bit depth ``depth - subgrid_bits``: its first
    code ``morton >> shift``), ``F`` / ``Q`` the sums of the sub-cells' overlapped fractions and
    their squares, ``M = 2^subgrid_bits``, ``c = F w / M``, ``w`` the weight of the leaf's own
    count in the consistent counts.  With the variances of the noise it is the answer's variance;
    with the squared scales the Chernoff bound's ``V``."""
    fraction = " * ".join(_fractions(release))
    total_bits = release.box.d * int(release.layout["bits"])
    vl, vs = float(var_leaf), float(var_sub)
    true_leaf, true_sub = float(release.subgrid.var_leaf), float(release.subgrid.var_sub)
    weight = f"(m * {true_sub!r}) / (m * {true_sub!r} + {true_leaf!r})"
    per_leaf = (f"SELECT sum({fraction}) AS f, sum(({fraction}) ** 2) AS q, "
                f"any_value(pow(2.0, t.subgrid_bits)) AS m "
                f"FROM {ident(internal(name))} AS t WHERE {' AND '.join(_overlap(release))} "
                f"GROUP BY t.depth - t.subgrid_bits, "
                f"t.morton >> ({total_bits} - (t.depth - t.subgrid_bits))")
    with_c = f"SELECT f, q, m, f * {weight} / m AS c FROM ({per_leaf})"
    return (f"coalesce((SELECT sum({vs!r} * (q - 2.0 * c * f + m * c * c) + {vl!r} * c * c) "
            f"FROM ({with_c})), 0.0)")


def _fractions(release: SpatialRelease) -> list[str]:
    """Per dimension, the SQL of a leaf's overlapped fraction of the query ``box``."""
    return [f"(least(t.{ident(f'{c}_hi')}, box.hi{k}) - greatest(t.{ident(f'{c}_lo')}, box.lo{k})) / "
            f"(t.{ident(f'{c}_hi')} - t.{ident(f'{c}_lo')})" for k, c in enumerate(release.columns)]


def _overlap(release: SpatialRelease) -> list[str]:
    """Per dimension, the SQL of "the leaf meets the query ``box``" (open overlap)."""
    return [f"t.{ident(f'{c}_hi')} > box.lo{k} AND t.{ident(f'{c}_lo')} < box.hi{k}"
            for k, c in enumerate(release.columns)]


#: The sum of the squared leaf weights of an answer, in ``tree_answers.sql``.
_SQUARES = Sql("coalesce(total.weight_squares, 0.0)")


def _noise_half_width(release: SpatialRelease, name: str) -> str:
    """SQL of each answer's leaf-noise half-width at ``alpha``: the noise model's
    :meth:`~polars_dp.plans.noise_model.NoiseModel.leaf_half_width` rendered as SQL (the rule of
    :meth:`SpatialRelease.leaf_noise_accuracy`; no Python function); NULL where the release
    states no error bar (counted levels, AG, Privelet*, post-processed) or ``alpha`` is NULL."""
    if release.levels is not None:
        return "NULL::DOUBLE"
    if release.subgrid is not None:
        if postprocessed_noise_model(release.params) is not None:
            return "NULL::DOUBLE"
        sub = release.subgrid
        units = _subgrid_sum(release, name, sub.leaf_scale**2, sub.sub_scale**2)
        half = chernoff_half_width(SQL, Sql("units"), sub.bound, SQL.ln(2.0 / checked_alpha()))
        # the bound reads V many times: the correlated sum is computed once per box, then named
        return f"CASE WHEN alpha IS NULL THEN NULL ELSE (SELECT {half} FROM (SELECT {units} AS units)) END"
    half = release.error_model.leaf_half_width(SQL, _SQUARES, checked_alpha())
    return f"CASE WHEN alpha IS NULL THEN NULL ELSE {half} END"


def _tree_answers(release: SpatialRelease, name: str, queries: str, where: str) -> str:
    cols, box = release.columns, release.box
    bounds, typed = [], []
    fractions, overlap = _fractions(release), _overlap(release)
    for k, c in enumerate(cols):
        lo, hi = ident(f"{c}_lo"), ident(f"{c}_hi")
        typed += [f"NULL::DOUBLE AS {lo}", f"NULL::DOUBLE AS {hi}"]
        qlo, qhi = f"coalesce(q.{lo}, {float(box.lo[k])!r})", f"coalesce(q.{hi}, {float(box.hi[k])!r})"
        reverse = reversed_text(SQL, c, Sql(qlo), Sql(qhi))
        # the rule of Python's answers: a bound outside the box is an error, never clipped
        outside = " ".join(f"WHEN {outside_box(SQL, box, k, Sql(q))} THEN "
                           f"error({outside_box_text(SQL, box, k, side, Sql(q))} || {where})"
                           for q, side in ((qlo, "lo"), (qhi, "hi")))
        bounds.append(f"CASE {outside} WHEN {qlo} > {qhi} THEN error({reverse} || {where}) ELSE {qlo} END "
                      f"AS lo{k}, {qhi} AS hi{k}")
    checks = query_checks(queries, "q", [f"{c}_{side}" for c in cols for side in ("lo", "hi")],
                          batch=where == BATCH_WHERE)
    return render("tree_answers.sql", table=ident(internal(name)), queries=queries, checks=checks,
                  typed_columns=", ".join(["NULL AS id", *typed]),
                  bounds=",\n           ".join(bounds), fractions=" * ".join(fractions),
                  overlap=" AND ".join(overlap), noise_std=_noise_std(release, name),
                  noise_half=_noise_half_width(release, name))


def level_tables(name: str, release: SpatialRelease) -> dict[str, pa.Table]:
    """The internal node tables the ``noise_std`` of counted top levels reads (none otherwise)."""
    if release.levels is None:
        return {}
    nodes, up = release.levels.node_tables(release.box)
    return {internal(name, "nodes"): nodes, internal(name, "up"): up}


def register_tree(con: Any, name: str, release: SpatialRelease, *, replace: bool = False) -> Any:
    """Register a spatial :class:`~polars_dp.SpatialRelease` in ``con``, in one transaction:

    * ``name``: a view with one row per leaf (``<col>_lo``, ``<col>_hi``, ``depth``, ``count``)
      and a comment, over the internal table ``__pdp_name_cells`` that the macros read (which
      adds the leaf's position ``leaf`` in the release); read-only, as for grid releases;
    * ``name_meta(key, value)``, as for grid releases;
    * ``name_range_count(<col>_lo := ..., <col>_hi := ..., alpha := 0.05)``: one row (``count``,
      ``noise_std``, ``noise_lo``, ``noise_hi``);
    * ``name_range_counts(boxes_table, alpha := 0.05)``: ``id``, ``count``, ``noise_std``,
      ``noise_lo``, ``noise_hi`` per box of a table with an ``id`` column and ``<col>_lo`` /
      ``<col>_hi`` columns (missing or NULL = the whole range; any other column, a NULL id and a
      repeated id are refused, as in Python).

    ``noise_std`` is what ``release.range_counts(std=True)`` gives and ``noise_lo`` /
    ``noise_hi`` what ``release.range_counts(alpha=...)`` gives (``count`` -/+ the half-width
    the leaf noise exceeds with probability at most ``alpha``, the tail bound rendered as plain
    SQL): the noise of the counts only
    (not the uniformity error, hence the ``noise_`` names), NULL where the release states no
    error bar or with ``alpha := NULL``.  A release with
    counted top levels answers from its inferred counts and gets its exact ``noise_std`` from
    the internal tables ``__pdp_name_nodes`` and ``__pdp_name_up`` (the public tree and the
    inference's variances, :meth:`~polars_dp.releases.tree_levels.TopLevels.node_tables`), in
    plain SQL.

    Answers use the same uniformity assumption as ``release.range_counts``: a leaf adds
    ``count * vol(leaf ∩ box) / vol(leaf)``; rows come in ``id`` order.  Refuses
    (:class:`ParameterError` naming them) when a table, view or macro it would create exists,
    unless ``replace=True``.
    """
    return register(con, name, tree_registration(name, release), replace=replace)


def tree_registration(name: str, release: SpatialRelease) -> Registration:
    """What :func:`register_tree` creates (:class:`~polars_dp.releases.sql.Registration`)."""
    check_identifier(name)
    source, meta_source = f"__pdp_source_{name}", f"__pdp_meta_{name}"
    bounds = [ident(f"{c}_{side}") for c in release.columns for side in ("lo", "hi")]
    params = ", ".join([*(f"{b} := NULL" for b in bounds), "alpha := 0.05"])
    single_source = "(SELECT 0 AS id, " + ", ".join(f"{b} AS {b}" for b in bounds) + ")"
    levels = level_tables(name, release)
    sources = {f"__pdp_source_{table}": data for table, data in levels.items()}
    leaves = release._table()
    leaves = leaves.append_column("leaf", pa.array(np.arange(leaves.num_rows, dtype=np.int64)))
    statements = [
        render("tree_register.sql", cells=ident(internal(name)), view=ident(name), source=ident(source),
               meta_table=ident(f"{name}_meta"), meta_source=ident(meta_source)),
        view(name, internal(name), comment(release, name), release.internal_columns),
        *(f"CREATE TABLE {ident(table)} AS SELECT * FROM {ident(source)}" for table, source in
          zip(levels, sources, strict=True)),
        render("tree_macros.sql", name=name, single_macro=ident(f"{name}_range_count"),
               batch_macro=ident(f"{name}_range_counts"), parameters=params,
               single_answers=_tree_answers(release, name, single_source, "''"),
               batch_answers=_tree_answers(release, name, "query_table(queries)", BATCH_WHERE)),
    ]
    return Registration(tables=[name, internal(name), f"{name}_meta", *levels],
                        macros=[f"{name}_range_count", f"{name}_range_counts"],
                        sources={source: leaves, meta_source: metadata_table(release), **sources},
                        statements=statements)


__all__ = ["level_tables", "register_tree", "tree_registration"]
