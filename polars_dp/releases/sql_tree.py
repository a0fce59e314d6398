"""A spatial tree release (PrivTree, UG, AG) in DuckDB: a leaf table plus box range-count macros."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from polars_dp.domains.expressions import SQL, Sql, sql_text
from polars_dp.domains.ranges import reversed_text
from polars_dp.kernels.tail_bounds import chernoff_half_width
from polars_dp.releases.noise_model import IndependentLaplace
from polars_dp.releases.postprocess import postprocessed_noise_model
from polars_dp.releases.sql import (
    BATCH_WHERE,
    INTERNAL_COLUMNS,
    PythonFunction,
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
    from polars_dp.releases.spatial import SpatialRelease


def std_function(name: str) -> str:
    """Name of the scalar function giving the ``noise_std`` of a release with counted levels."""
    return f"__pdp_noise_std_{name}"


def _noise_std(release: SpatialRelease, name: str) -> str:
    """SQL of each answer's ``noise_std`` (the rule of ``release.range_counts(std=True)``):
    i.i.d. leaf noise: ``sqrt(var * sum w^2)``; counted levels: the exact variance from the
    inference weights, by a scalar function over the box; otherwise (AG, Privelet*,
    post-processed) NULL."""
    if postprocessed_noise_model(release.params) is not None:
        return "NULL::DOUBLE"
    if release.levels is not None:
        args = ", ".join(f"box.lo{k}::DOUBLE, box.hi{k}::DOUBLE" for k in range(release.box.d))
        return f"{ident(std_function(name))}([{args}])"
    if isinstance(release.noise_model, IndependentLaplace):
        return f"sqrt({release.noise_model.unit_variance()!r} * coalesce(total.weight_squares, 0.0))"
    return "NULL::DOUBLE"


def _noise_half_width(release: SpatialRelease) -> str:
    """SQL of each answer's leaf-noise half-width at ``alpha``: the rule of
    :meth:`SpatialRelease.leaf_noise_accuracy` (:func:`~polars_dp.kernels.tail_bounds.
    chernoff_half_width`, rendered as SQL: no Python function); NULL where the release states
    no error bar (counted levels, AG, Privelet*, post-processed) or ``alpha`` is NULL."""
    if (postprocessed_noise_model(release.params) is not None or release.levels is not None
            or not isinstance(release.noise_model, IndependentLaplace)):
        return "NULL::DOUBLE"
    scale = release.noise_model.scale
    squares = Sql(f"({sql_text(scale**2)} * coalesce(total.weight_squares, 0.0))")
    half = chernoff_half_width(SQL, squares, scale, SQL.ln(2.0 / checked_alpha()))
    return f"CASE WHEN alpha IS NULL THEN NULL ELSE {half} END"


def _std_function(name: str, release: SpatialRelease) -> PythonFunction:
    """The vectorised scalar function behind ``noise_std`` of a release with counted levels."""
    d, box, levels = release.box.d, release.box, release.levels
    assert levels is not None  # called for releases with counted levels only

    def noise_std(bounds: pa.Array) -> pa.Array:  # one [lo0, hi0, lo1, hi1, ...] list per box
        flat = np.asarray(pa.array(bounds).flatten().to_numpy(zero_copy_only=False), dtype=np.float64)
        pairs = flat.reshape(-1, d, 2)
        _, var = levels.range_counts(box, pairs[:, :, 0], pairs[:, :, 1], variance=True)
        return pa.array(np.sqrt(np.asarray(var, dtype=np.float64)))

    return PythonFunction(std_function(name), noise_std, ["DOUBLE[]"], "DOUBLE")


def _tree_answers(release: SpatialRelease, name: str, queries: str, where: str) -> str:
    cols, box = release.columns, release.box
    bounds, fractions, overlap, typed = [], [], [], []
    for k, c in enumerate(cols):
        lo, hi = ident(f"{c}_lo"), ident(f"{c}_hi")
        typed += [f"NULL::DOUBLE AS {lo}", f"NULL::DOUBLE AS {hi}"]
        qlo, qhi = f"coalesce(q.{lo}, {float(box.lo[k])!r})", f"coalesce(q.{hi}, {float(box.hi[k])!r})"
        reverse = reversed_text(SQL, c, Sql(qlo), Sql(qhi))
        bounds.append(f"CASE WHEN {qlo} > {qhi} THEN error({reverse} || {where}) ELSE {qlo} END AS lo{k}, "
                      f"{qhi} AS hi{k}")
        fractions.append(f"(least(t.{hi}, box.hi{k}) - greatest(t.{lo}, box.lo{k})) / (t.{hi} - t.{lo})")
        overlap.append(f"t.{hi} > box.lo{k} AND t.{lo} < box.hi{k}")
    checks = query_checks(queries, "q", [f"{c}_{side}" for c in cols for side in ("lo", "hi")],
                          batch=where == BATCH_WHERE)
    return render("tree_answers.sql", table=ident(internal(name)), queries=queries, checks=checks,
                  typed_columns=", ".join(["NULL AS id", *typed]),
                  bounds=",\n           ".join(bounds), fractions=" * ".join(fractions),
                  overlap=" AND ".join(overlap), noise_std=_noise_std(release, name),
                  noise_half=_noise_half_width(release))


def python_functions(name: str, release: SpatialRelease) -> list[PythonFunction]:
    """The connection-local Python functions the macros of release ``name`` call: the
    ``noise_std`` of counted top levels (everything else is plain SQL)."""
    return [] if release.levels is None else [_std_function(name, release)]


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
    counted top levels answers from its inferred counts and gets its ``noise_std`` from a
    scalar function ``__pdp_noise_std_<name>`` registered on the connection (the inference
    weights live in Python).

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
    ranges = [f"{ident(f'{c}_{side}')} := NULL" for c in release.columns for side in ("lo", "hi")]
    params = ", ".join([*ranges, "alpha := 0.05"])
    single_source = "(SELECT 0 AS id, " + ", ".join(
        f"{ident(f'{c}_{side}')} AS {ident(f'{c}_{side}')}" for c in release.columns
        for side in ("lo", "hi")) + ")"
    functions = python_functions(name, release)
    leaves = release._table()
    leaves = leaves.append_column("leaf", pa.array(np.arange(leaves.num_rows, dtype=np.int64)))
    statements = [
        render("tree_register.sql", cells=ident(internal(name)), view=ident(name), source=ident(source),
               meta_table=ident(f"{name}_meta"), meta_source=ident(meta_source)),
        view(name, internal(name), comment(release, name), INTERNAL_COLUMNS["tree"]),
        render("tree_macros.sql", name=name, single_macro=ident(f"{name}_range_count"),
               batch_macro=ident(f"{name}_range_counts"), parameters=params,
               single_answers=_tree_answers(release, name, single_source, "''"),
               batch_answers=_tree_answers(release, name, "query_table(queries)", BATCH_WHERE)),
    ]
    parts = Registration(tables=[name, internal(name), f"{name}_meta"],
                         macros=[f"{name}_range_count", f"{name}_range_counts"],
                         sources={source: leaves, meta_source: metadata_table(release)},
                         statements=statements, functions=functions)
    return parts


__all__ = ["python_functions", "register_tree", "tree_registration"]
