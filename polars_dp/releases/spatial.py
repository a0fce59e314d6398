"""SpatialRelease: a partition of a public box into leaf boxes with noisy counts.

The output of PrivTree and of the grid baselines (UG, AG).  One row per leaf: ``<col>_lo``,
``<col>_hi`` for each column, ``depth`` and the noisy ``count`` (plus, for a PrivTree, the
leaf's first Morton code ``morton``, which encodes the tree).  Range counts use the
uniformity assumption (:mod:`polars_dp.kernels.spatial_sums`) or, with ``density="linear"``, a
piecewise-linear density inside the leaves crossing a query's boundary
(:mod:`polars_dp.kernels.linear_density`).  Everything here is
post-processing of the mechanism's output; the release holds no reference to the input.
"""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Iterable, Mapping
from typing import Any, cast

import numpy as np
import polars as pl
import pyarrow as pa

from polars_dp.domains.box import Box, as_box
from polars_dp.domains.expressions import NUMPY
from polars_dp.domains.queries import as_query_frame, passthrough_columns, row_text
from polars_dp.domains.ranges import outside_box, outside_box_text, reversed_text
from polars_dp.errors import ParameterError, PolarsDPError, QueryError, ReleaseFormatError
from polars_dp.kernels.linear_density import (
    grid_face_neighbours,
    linear_morton_sums,
    linear_slopes,
    morton_face_neighbours,
    two_level_face_neighbours,
)
from polars_dp.kernels.linear_grid import linear_grid_correction
from polars_dp.kernels.morton import MortonLayout
from polars_dp.kernels.prefix import prefix_sums
from polars_dp.kernels.spatial_sums import (
    grid_sums,
    grid_weight_squares,
    morton_tree_sums,
    two_level_grid_sums,
)
from polars_dp.kernels.tail_bounds import chernoff_accuracy
from polars_dp.noise import SeedLike
from polars_dp.plans.base import Plan
from polars_dp.plans.grid import check_alpha
from polars_dp.plans.noise_model import (
    Correlated,
    IndependentLaplace,
    NoiseModel,
    noise_model_from_json,
    noise_model_to_json,
)
from polars_dp.plans.spatial import PointsPlan, PrivTreePlan, PrivTreeSubgridPlan
from polars_dp.progress import Progress
from polars_dp.releases import geoparquet, sql_tree
from polars_dp.releases.base import Release, Sealed, fmt_number, read_only
from polars_dp.releases.card import spatial_accuracy
from polars_dp.releases.integrity import check_equal
from polars_dp.releases.postprocess import (
    TREE_POSTPROCESSING,
    postprocess_counts,
    postprocessed_noise_model,
    postprocessing_steps,
)
from polars_dp.releases.reading import register_release_type
from polars_dp.releases.report import leaf_map
from polars_dp.releases.sampling import sample_boxes
from polars_dp.releases.spatial_format import (
    LAYOUTS,
    check_layout,
    float_column,
    leaf_order,
)
from polars_dp.releases.subgrid import SUBGRID_COLUMNS, Subgrid
from polars_dp.releases.tree_levels import TopLevels, check_same, parse_levels

#: the densities inside a leaf that range counts accept (``density=``)
DENSITIES = ("uniform", "linear")


@register_release_type
class SpatialRelease(Release):
    """Leaves of a spatial decomposition with noisy counts.

    ``layout`` says how the leaves tile the box: ``{"kind": "morton", "bits": k,
    "split_bits": s}`` (a PrivTree; ``codes`` holds each leaf's first Morton code),
    ``{"kind": "grid", "m": m}`` (``m^d`` cells in C order) or ``{"kind": "two_level_grid",
    "m1": m1, "m2": [...]}`` (first-level cells in C order, each cut into its own ``m2^d``
    cells, leaves grouped by first-level cell).

    The leaf arrays (``lo``, ``hi``, ``depth``, ``count``, ``codes``), the ``box`` and the
    counted ``levels`` are read-only: the numbers change only through :meth:`postprocess`,
    which records what was done.
    """

    box: Sealed[Box] = Sealed()
    lo: Sealed[np.ndarray] = Sealed()
    hi: Sealed[np.ndarray] = Sealed()
    depth: Sealed[np.ndarray] = Sealed()
    count: Sealed[np.ndarray] = Sealed()
    codes: Sealed[np.ndarray | None] = Sealed()
    #: counted top levels and the inference answering queries (``None``: leaves only)
    levels: Sealed[TopLevels | None] = Sealed()
    #: the PrivTree leaves and both measurement sets of a ``privtree_subgrid`` release, whose rows
    #: are the sub-cells (:mod:`polars_dp.releases.subgrid`; ``None`` otherwise)
    subgrid: Sealed[Subgrid | None] = Sealed()

    release_type = "tree"  # the identifier stored in files (docs/release-format.md)
    internal_columns = ("leaf",)  # the leaf's position
    metadata_entries = ("columns", "bounds", "layout", "n_leaves", "noise_model", "levels")

    def __init__(self, box: Box, lo: np.ndarray, hi: np.ndarray, depth: np.ndarray, count: np.ndarray,
                 *, layout: Mapping[str, Any], mechanism: str | None = None, epsilon: float | None = None,
                 neighbours: str | None = None,
                 params: Mapping[str, Any] | None = None, codes: np.ndarray | None = None,
                 noise_model: NoiseModel | None = None, created: str | None = None,
                 library_version: str | None = None, noise: str | None = None, seeded: bool = False,
                 levels: TopLevels | None = None, plan: Plan | None = None, subgrid: Subgrid | None = None):
        if layout.get("kind") not in LAYOUTS:
            raise ReleaseFormatError(f"unknown tree layout {layout.get('kind')!r}; known: {LAYOUTS}")
        if layout["kind"] == "morton" and codes is None:
            raise ReleaseFormatError("a Morton-layout tree release needs the leaves' Morton codes")
        self.box = box
        self.lo = np.asarray(lo, dtype=np.float64).reshape(-1, box.d)
        self.hi = np.asarray(hi, dtype=np.float64).reshape(-1, box.d)
        self.depth = np.asarray(depth, dtype=np.int32)
        self.count = np.asarray(count, dtype=np.float64)
        self.codes = None if codes is None else np.asarray(codes, dtype=np.int64)
        self.layout = dict(layout)
        self._init_common(mechanism=mechanism, epsilon=epsilon, neighbours=neighbours, params=params,
                          created=created, library_version=library_version, noise=noise, seeded=seeded,
                          plan=plan)
        self._noise_model = None if self._stated is None else noise_model
        self._grid_cache: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._slopes_cache: np.ndarray | None = None
        self._subgrid_cache: dict[bool, Any] = {}
        self.levels = levels
        self.subgrid = subgrid

    @property
    def noise_model(self) -> NoiseModel:
        """The noise of the leaf counts: its plan's (``release_noise_model``), or after
        post-processing the one that says so; a release built by hand without a plan states
        its own (or, when it states none, the plan rebuilt from its record gives it)."""
        if self._noise_model is not None:
            return self._noise_model
        try:
            return postprocessed_noise_model(self.params) or cast(PointsPlan, self.plan).release_noise_model
        except PolarsDPError:
            return Correlated("its noise model was not recorded and its plan cannot be rebuilt")

    def _domain(self) -> dict[str, Any]:
        return {"columns": list(self.box.columns), "bounds": self.box.to_json()}

    # ------------------------------------------------------------------ basics
    @property
    def columns(self) -> list[str]:
        return list(self.box.columns)

    @property
    def n_leaves(self) -> int:
        return int(self.count.size)

    @property
    def leaves(self) -> pl.DataFrame:
        """One row per leaf: ``<col>_lo``, ``<col>_hi`` per column, ``depth``, ``count``."""
        table = self._table()
        hidden = [c for c in ("morton", *SUBGRID_COLUMNS) if c in table.column_names]
        return cast(pl.DataFrame, pl.from_arrow(table.drop_columns(hidden)))

    def _metadata_entries(self) -> dict[str, Any]:
        entries = {"columns": list(self.box.columns), "bounds": self.box.to_json(), "layout": self.layout,
                   "n_leaves": self.n_leaves, "noise_model": noise_model_to_json(self.noise_model)}
        if self.levels is not None:
            entries["levels"] = self.levels.to_json()
        return entries

    # ------------------------------------------------------------------ Arrow
    def _table(self) -> pa.Table:
        cols: dict[str, Any] = {}
        for j, c in enumerate(self.box.columns):
            cols[f"{c}_lo"] = pa.array(self.lo[:, j])
            cols[f"{c}_hi"] = pa.array(self.hi[:, j])
        cols["depth"] = pa.array(self.depth)
        cols["count"] = pa.array(self.count)
        if self.codes is not None:
            cols["morton"] = pa.array(self.codes)
        if self.levels is not None:
            cols["noisy_count"] = pa.array(self.levels.noisy_leaves)
        if self.subgrid is not None:
            cols.update((k, pa.array(v)) for k, v in self.subgrid.columns().items())
        return pa.table(cols)

    @classmethod
    def from_arrow(cls, table: pa.Table, *, unverified: bool = False) -> SpatialRelease:
        """The release of a table written by :meth:`to_arrow`, verified before it answers
        (:mod:`polars_dp.releases.integrity`): metadata types, the noise parameters recomputed
        from epsilon and the neighbour relation, every leaf put in its place by its geometry
        (any row order; the leaves must tile the box as the layout says), and the checksum
        (required unless ``unverified=True``)."""
        meta = cls._read_metadata(table)
        common = meta.common
        box = meta.entry("bounds", lambda b: as_box(meta.entry("columns"), b))
        layout = meta.entry("layout", check_layout)
        model = meta.entry("noise_model", noise_model_from_json, default=None)
        try:
            lo = np.column_stack([float_column(table, f"{c}_lo") for c in box.columns])
            hi = np.column_stack([float_column(table, f"{c}_hi") for c in box.columns])
            depth = table.column("depth").to_numpy()
            count = table.column("count").to_numpy()  # the stored type (the constructor decides)
            if not np.issubdtype(count.dtype, np.number):
                raise ReleaseFormatError(f"tree release column 'count' has type {count.dtype}, not numbers")
            codes = table.column("morton").to_numpy() if "morton" in table.column_names else None
            noisy_leaves = float_column(table, "noisy_count") if "levels" in meta else None
        except KeyError as exc:
            raise ReleaseFormatError(f"tree release table has no {exc.args[0]!r} column") from None
        def own(plan: Plan) -> None:
            _check_layout_and_model(cast(PointsPlan, plan), common["params"], layout, model)
        plan = cls._replan(meta, {"columns": list(box.columns), "bounds": box.to_json()}, own)
        n_leaves = meta.entry("n_leaves", int, default=table.num_rows)
        if n_leaves != table.num_rows:
            raise ReleaseFormatError(f"tree release has {table.num_rows} rows but its metadata declares "
                                     f"{n_leaves} leaves: rows were removed or added")
        try:
            order = leaf_order(box, layout, lo, hi, depth, codes)
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            if isinstance(exc, ReleaseFormatError):
                raise
            raise ReleaseFormatError(
                f"release metadata field 'layout' is malformed ({layout!r}): {exc!r}") from None
        codes = None if codes is None else codes[order]
        subgrid = None
        if isinstance(plan, PrivTreeSubgridPlan):
            subgrid = _read_subgrid(table, plan, cast(np.ndarray, codes), depth[order], count[order], order,
                                    common["params"], common["noise"])
        release = cls(box, lo[order], hi[order], depth[order], count[order], layout=layout, codes=codes,
                      noise_model=model, plan=plan, subgrid=subgrid, **common)
        if noisy_leaves is None:
            return release._checked(meta, unverified)
        if layout["kind"] != "morton" or codes is None:
            raise ReleaseFormatError("counted top levels need a Morton-layout tree release")
        lay = MortonLayout(box.d, int(layout["bits"]), int(layout["split_bits"]))
        parsed = parse_levels(meta.entry("levels"), lay)
        release._checked(meta, unverified, noisy_leaves[order], parsed[2])
        levels = _read_levels(release, lay, parsed, noisy_leaves[order])
        return SpatialRelease(box, release.lo, release.hi, release.depth, release.count, layout=layout,
                              codes=release.codes, noise_model=release.noise_model, levels=levels,
                              library_version=release.library_version, subgrid=release.subgrid,
                              **release._shared()).derived_from(release)

    def _payload_arrays(self) -> list[np.ndarray]:
        arrays: list[np.ndarray] = [self.lo, self.hi, self.depth, self.count]
        arrays = arrays if self.codes is None else [*arrays, self.codes]
        if self.levels is not None:
            arrays += [self.levels.noisy_leaves, self.levels.noisy]
        if self.subgrid is not None:
            arrays += list(self.subgrid.columns().values())
        return arrays

    def _geometry_batches(self, crs: object | None, rows: int) -> pa.RecordBatchReader:
        """The leaf batches with GeoParquet polygons (``write_parquet(geometry=True)``; 2-D only):
        see :mod:`polars_dp.releases.geoparquet`."""
        return geoparquet.with_geometry(self.to_batches(rows), self.box, crs)

    # ------------------------------------------------------------------ queries
    def _query_arrays(self, boxes: Any, passthrough: str | Iterable[str] = ()
                      ) -> tuple[np.ndarray, np.ndarray]:
        frame = as_query_frame(boxes)
        known = {f"{c}_{s}" for c in self.box.columns for s in ("lo", "hi")}
        known |= passthrough_columns(passthrough)
        unknown = [c for c in frame.columns if c not in known]
        if unknown:
            raise QueryError(f"query column {unknown[0]!r} is not one of {sorted(known)}")
        n = frame.height
        q_lo = np.empty((n, self.box.d))
        q_hi = np.empty_like(q_lo)
        for j, c in enumerate(self.box.columns):
            for arr, side, default in ((q_lo, "lo", self.box.lo[j]), (q_hi, "hi", self.box.hi[j])):
                name = f"{c}_{side}"
                if name in frame.columns:
                    s = frame[name]
                    if not (s.dtype.is_numeric() or s.dtype == pl.Null):
                        raise QueryError(f"query column {name!r} must hold numbers, got {s.dtype}")
                    arr[:, j] = s.cast(pl.Float64).fill_null(default).to_numpy()  # null: whole range
                else:
                    arr[:, j] = default
        if np.isnan(q_lo).any() or np.isnan(q_hi).any():
            raise QueryError("query bounds contain NaN")

        def where(row: int) -> str:
            """How an error names the query (nothing for a single query without an id)."""
            return f" ({row_text(frame, row)})" if "id" in frame.columns or n > 1 else ""
        for j in range(self.box.d):
            for arr, side in ((q_lo, "lo"), (q_hi, "hi")):
                bad = np.flatnonzero(outside_box(NUMPY, self.box, j, arr[:, j]))
                if bad.size:
                    row = int(bad[0])
                    raise QueryError(outside_box_text(NUMPY, self.box, j, side, arr[row, j]) + where(row))
        bad = np.nonzero(np.any(q_lo > q_hi, axis=1))[0]
        if bad.size:  # the sentence of the SQL macros and of grid releases
            row = int(bad[0])
            j = int(np.flatnonzero(q_lo[row] > q_hi[row])[0])
            reverse = reversed_text(NUMPY, self.box.columns[j], q_lo[row, j], q_hi[row, j])
            raise QueryError(reverse + where(row))
        return q_lo, q_hi

    def range_counts(self, boxes: Any, std: bool = False, *,
                     passthrough: str | Iterable[str] = ("id",), progress: bool | None = None,
                     alpha: float | None = None, density: str = "uniform") -> pl.DataFrame:
        """Noisy counts of many boxes at once: ``boxes`` with a ``count`` column added.

        ``boxes``: a Polars frame (or anything ``pl.DataFrame`` accepts) with ``<col>_lo`` /
        ``<col>_hi`` columns (closed ranges inside the release's bounds: a bound outside them
        is a :class:`QueryError` naming the column and the bounds, as a grid query outside its
        domain, never clipped; a missing column or a null means the whole declared range, as in
        SQL) and optionally an ``id`` and the ``passthrough`` columns (one name or several; ``id``
        is always allowed), kept as they are.  Each leaf contributes its count times the fraction of
        its volume inside the box (the same shape of answer as
        :meth:`GridRelease.range_counts`).

        ``std=True`` adds a ``noise_std`` column: each answer's noise standard deviation
        ``sqrt(2 b^2 sum_leaves w^2)`` (``b`` the leaves' Laplace scale, ``w`` each leaf's
        weight in the answer), exact, for releases whose leaf counts carry independent noise
        (PrivTree, UG).  It is the noise of the leaf counts only: the **uniformity error**
        inside partially covered leaves (points are not spread evenly in a leaf) is **not
        included**, and on real data it can dominate (the column is named ``noise_std``, not
        ``std``, to say so; grid releases' ``std`` is the whole error of an unbiased answer).

        ``alpha`` adds ``noise_lo`` / ``noise_hi``: ``count`` -/+ a half-width the *leaf noise*
        exceeds with probability at most ``alpha`` (:func:`polars_dp.kernels.tail_bounds.chernoff_accuracy`
        with every leaf weight <= 1); like ``noise_std`` it leaves out the uniformity error.

        One rule where the release states no error bar (AG and Privelet*, whose leaf counts are
        not independent, and post-processed releases): ``noise_std``, ``noise_lo`` and
        ``noise_hi`` are null, as in the SQL macros; :meth:`range_std` and
        :meth:`range_noise_interval` give ``None`` and the command line prints no error bar.
        Counted top levels state a ``noise_std`` but no interval (null ``noise_lo`` / ``noise_hi``).
        A ``privtree_subgrid`` release (consistent leaf and sub-cell counts) states both: the exact
        variance of its answer, a linear map of the two sets of noisy counts, and the Chernoff
        bound of that map (:mod:`polars_dp.releases.subgrid`).

        ``density``: ``"uniform"`` (the default, as above) or ``"linear"``: each leaf crossing a
        box's boundary contributes under a piecewise-linear density fitted to its neighbours'
        counts (:meth:`linear_slopes`, :mod:`polars_dp.kernels.linear_density`); whole leaves
        contribute their counts as before, so the whole box, or any union of whole leaves, gets
        the same answer.  Post-processing of the released counts: no budget.  For PrivTree
        (Morton), UG and AG releases (and any grid layout) without counted top levels.  The
        answer is still a linear map of the noisy counts, but its ``noise_std`` is not stated:
        with ``density="linear"`` the ``noise_std``, ``noise_lo`` and ``noise_hi`` columns are
        null.  The SQL macros (:meth:`to_duckdb`) always use the uniform density.

        ``progress``: a stage bar on stderr; ``None``: on a terminal for large work.
        """
        if alpha is not None:
            alpha = check_alpha(alpha)
            std = True
        linear = self._check_density(density) == "linear"
        frame = as_query_frame(boxes)
        if linear:
            counts = self.range_count_array(frame, passthrough=passthrough, density="linear")
            return frame.with_columns(pl.Series("count", counts), *_null_columns(std, alpha))
        bar = Progress("range_counts", progress, frame.height * max(self.n_leaves, 1))
        bar.step("queries")
        if self.subgrid is not None:
            return self._subgrid_range_counts(frame, passthrough, std, alpha, bar)
        if self.levels is not None:
            exact_std = std and postprocessed_noise_model(self.params) is None
            counts, var = self.levels.range_counts(self.box, *self._query_arrays(frame, passthrough),
                                                   variance=exact_std)
            bar.close()  # inferred counts mix the noise: no tail bound is stated (null noise_lo / noise_hi)
            extra = (_null_columns(std, alpha) if var is None
                     else [pl.Series("noise_std", np.sqrt(var)), *_null_columns(False, alpha)])
            return frame.with_columns(pl.Series("count", counts), *extra)
        model = self.error_model
        if not std or model.leaf_scale is None:  # no error bar stated (AG, Privelet*, post-processed): NULL
            counts = self.range_count_array(frame, passthrough=passthrough)
            bar.close()
            return frame.with_columns(pl.Series("count", counts), *_null_columns(std, alpha))
        q_lo, q_hi = self._query_arrays(frame, passthrough)
        if self.layout["kind"] == "morton":
            codes = cast(np.ndarray, self.codes)  # a Morton layout always has codes
            counts, squares = morton_tree_sums(codes, self.count, self._morton_layout(), self.box, q_lo, q_hi,
                                               weight_squares=True)
        else:
            counts = self.range_count_array(frame, passthrough=passthrough)
            squares = grid_weight_squares(int(self.layout["m"]), self.box, q_lo, q_hi)
        bar.close()
        std_ = np.sqrt(model.leaf_variance(NUMPY, squares))
        out = [pl.Series("count", counts), pl.Series("noise_std", std_)]
        if alpha is not None:
            half = self.leaf_noise_accuracy(squares, alpha)
            out += [pl.Series("noise_lo", counts - half), pl.Series("noise_hi", counts + half)]
        return frame.with_columns(out)

    def _subgrid_range_counts(self, frame: pl.DataFrame, passthrough: str | Iterable[str], std: bool,
                              alpha: float | None, bar: Progress) -> pl.DataFrame:
        """Uniform answers of a sub-grid release, with the exact ``noise_std`` of the consistent
        counts and the Chernoff ``noise_lo`` / ``noise_hi`` (:mod:`polars_dp.releases.subgrid`;
        null once post-processed)."""
        q_lo, q_hi = self._query_arrays(frame, passthrough)
        counts = self._uniform_answers(q_lo, q_hi)
        extra = _null_columns(std, alpha)
        if std and postprocessed_noise_model(self.params) is None:
            sub = cast(Subgrid, self.subgrid)
            var, units = sub.variance(self.box, q_lo, q_hi)
            extra = [pl.Series("noise_std", np.sqrt(var))]
            if alpha is not None:
                half = np.asarray(chernoff_accuracy(units, sub.bound, alpha), dtype=np.float64)
                extra += [pl.Series("noise_lo", counts - half), pl.Series("noise_hi", counts + half)]
        bar.close()
        return frame.with_columns(pl.Series("count", counts), *extra)

    def _subgrid_prefix(self, linear: bool) -> Any:
        """The sub-grids' summed-area arrays of the counts (and of ``count * beta``), built once."""
        if linear not in self._subgrid_cache:
            slopes = self.linear_slopes() if linear else None
            self._subgrid_cache[linear] = cast(Subgrid, self.subgrid).prefix(self.count, slopes)
        return self._subgrid_cache[linear]

    def leaf_noise_accuracy(self, weight_squares: np.ndarray, alpha: float) -> np.ndarray:
        """Half-width ``a`` with ``P(|leaf noise of the answer| > a) <= alpha`` for answers whose
        leaf weights ``w <= 1`` have ``sum w^2 = weight_squares``: the noise model's
        :meth:`~polars_dp.plans.noise_model.NoiseModel.leaf_half_width` (i.i.d. leaf noise: the
        Chernoff bound with every term's scale at most the leaves' ``b``, or Chebyshev's
        ``sqrt(Var / alpha)`` where smaller; the uniformity error is not included).  The one rule
        behind ``noise_lo`` / ``noise_hi`` in Python and in DuckDB; NaN where the release states
        no error bar (:meth:`range_counts`)."""
        squares = np.asarray(weight_squares, dtype=np.float64)
        alpha = check_alpha(alpha)
        half = self.error_model.leaf_half_width(NUMPY, squares, np.float64(alpha))
        return np.broadcast_to(np.asarray(half, dtype=np.float64), squares.shape).copy()

    def noise_variance_array(self, boxes: Any, *, passthrough: str | Iterable[str] = ("id",)) -> np.ndarray:
        """The noise variance of each answer of :meth:`range_counts` (``noise_std ** 2``; NaN where
        the release states no error bar).  Exact for i.i.d. leaf noise and for counted top levels
        (from the inference weights); the hook a tail bound such as ``accuracy(alpha)`` reads."""
        std = self.range_counts(boxes, std=True, passthrough=passthrough)["noise_std"]
        return std.fill_null(float("nan")).to_numpy() ** 2

    @property
    def error_model(self) -> NoiseModel:
        """The noise model the error bars come from: :attr:`noise_model` as drawn, or
        :class:`~polars_dp.plans.noise_model.Correlated` once post-processed.  Only i.i.d. leaf
        noise (PrivTree, UG) states one: AG and Privelet* mix their leaf counts (the model's
        ``reason`` says how)."""
        return postprocessed_noise_model(self.params) or self.noise_model

    def range_std(self, density: Any = "uniform", **ranges: tuple[float, float]) -> float | None:
        """Noise standard deviation of :meth:`range_count` (the ``noise_std`` of
        :meth:`range_counts`: leaf noise only, the uniformity error inside leaves is not included;
        ``None`` with ``density="linear"``, which states no error bar)."""
        density, ranges = _density_or_column(density, ranges)
        if self._check_density(density) == "linear":
            self._single_query(ranges)
            return None
        query = self._single_query(ranges)
        if not query:
            query = {f"{self.box.columns[0]}_lo": [float(self.box.lo[0])]}
        std = self.range_counts(query, std=True)["noise_std"][0]
        return None if std is None else float(std)  # None: post-processed, no error bar (as range_counts)

    def range_noise_interval(self, alpha: float = 0.05, density: Any = "uniform",
                             **ranges: tuple[float, float]) -> tuple[float | None, float | None]:
        """``(noise_lo, noise_hi)`` of :meth:`range_count` at ``alpha`` (the columns of
        :meth:`range_counts` with ``alpha=``: leaf noise only); ``(None, None)`` where the
        release states no error bar, as with ``density="linear"``."""
        density, ranges = _density_or_column(density, ranges)
        if self._check_density(density) == "linear":
            check_alpha(alpha)
            self._single_query(ranges)
            return None, None
        query = self._single_query(ranges)
        if not query:
            query = {f"{self.box.columns[0]}_lo": [float(self.box.lo[0])]}
        row = self.range_counts(query, alpha=alpha).row(0, named=True)
        lo, hi = row["noise_lo"], row["noise_hi"]
        return (None, None) if lo is None else (float(lo), float(hi))

    def range_sums(self, boxes: Any, *, passthrough: str | Iterable[str] = ("id",)) -> np.ndarray:
        """Deprecated name of :meth:`range_count_array`."""
        warnings.warn("SpatialRelease.range_sums is deprecated; use range_count_array", DeprecationWarning,
                      stacklevel=2)
        return self.range_count_array(boxes, passthrough=passthrough)

    def range_count_array(self, boxes: Any, *, passthrough: str | Iterable[str] = ("id",),
                          density: str = "uniform") -> np.ndarray:
        """The answers of :meth:`range_counts` as a float64 numpy array (one per box); ``density``
        as there."""
        linear = self._check_density(density) == "linear"
        q_lo, q_hi = self._query_arrays(boxes, passthrough)
        return self._linear_answers(q_lo, q_hi) if linear else self._uniform_answers(q_lo, q_hi)

    def _uniform_answers(self, q_lo: np.ndarray, q_hi: np.ndarray) -> np.ndarray:
        kind = self.layout["kind"]
        if self.subgrid is not None:
            return self.subgrid.answers(self.box, self.count, self._subgrid_prefix(False), q_lo, q_hi)
        if self.levels is not None:
            return self.levels.range_counts(self.box, q_lo, q_hi, variance=False)[0]
        if kind == "morton":
            return morton_tree_sums(cast(np.ndarray, self.codes), self.count, self._morton_layout(), self.box,
                                    q_lo, q_hi)
        prefix, offsets, m2 = self._grid_structure()
        if kind == "grid":
            zeros = np.zeros(q_lo.shape[0], dtype=np.int64)
            return grid_sums(prefix, zeros, m2[zeros], np.broadcast_to(self.box.lo, q_lo.shape),
                             np.broadcast_to(self.box.hi, q_lo.shape), q_lo, q_hi)
        return two_level_grid_sums(prefix, offsets, m2, int(self.layout["m1"]), self.box, q_lo, q_hi)

    def _check_density(self, density: object) -> str:
        """``density`` if it is one this release answers with, else a :class:`ParameterError`."""
        if density not in DENSITIES:
            raise ParameterError(f"density must be one of {list(DENSITIES)}, got {density!r}",
                                 parameter="density")
        if density == "linear" and self.levels is not None:
            raise ParameterError("density='linear' needs a release without counted top levels; use "
                                 "density='uniform' (one of ['uniform', 'linear'])", parameter="density")
        return str(density)

    def linear_slopes(self) -> np.ndarray:
        """The relative slopes ``beta`` (shape ``(n_leaves, d)``) of the piecewise-linear density
        of ``density="linear"``: :func:`polars_dp.kernels.linear_density.linear_slopes` of the
        leaves' noisy counts and face neighbours (post-processing; computed once per release)."""
        self._check_density("linear")
        if self._slopes_cache is None:
            kind, d = self.layout["kind"], self.box.d
            if kind == "morton":
                lower, upper = morton_face_neighbours(cast(np.ndarray, self.codes), self.depth,
                                                      self._morton_layout())
            elif kind == "grid":
                lower, upper = grid_face_neighbours((int(self.layout["m"]),) * d)
            else:
                lower, upper = two_level_face_neighbours(int(self.layout["m1"]),
                                                         np.asarray(self.layout["m2"], dtype=np.int64), d)
            self._slopes_cache = read_only(linear_slopes(self.lo, self.hi, self.count, lower, upper))
        return self._slopes_cache

    def _morton_layout(self) -> MortonLayout:
        return MortonLayout(self.box.d, int(self.layout["bits"]), int(self.layout["split_bits"]))

    def _linear_answers(self, q_lo: np.ndarray, q_hi: np.ndarray) -> np.ndarray:
        """Range counts under the linear density.  Morton leaves: the tree traversal of
        :func:`linear_morton_sums`.  Grids: the uniform answer plus, per leaf crossing the box,
        ``count * prod_j (e_j - s_j) * sum_j beta_j (s_j + e_j) / 2`` (zero for whole leaves),
        from per-slab prefix sums of ``count * beta`` (:func:`linear_grid_correction`)."""
        beta = self.linear_slopes()
        if self.subgrid is not None:
            return self.subgrid.answers(self.box, self.count, self._subgrid_prefix(True), q_lo, q_hi,
                                        linear=True)
        if self.layout["kind"] == "morton":
            return linear_morton_sums(cast(np.ndarray, self.codes), self.count, self.lo, self.hi, beta,
                                      self._morton_layout(), self.box, q_lo, q_hi)
        if self.layout["kind"] == "grid":
            m1, m2 = 1, np.array([int(self.layout["m"])])
        else:
            m1, m2 = int(self.layout["m1"]), np.asarray(self.layout["m2"], dtype=np.int64)
        return self._uniform_answers(q_lo, q_hi) + linear_grid_correction(self.count, beta, m1, m2, self.box,
                                                                          q_lo, q_hi)

    def _grid_structure(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Flattened prefix sums of every (sub-)grid, their offsets, and their sides."""
        if self._grid_cache is None:
            d = self.box.d
            if self.layout["kind"] == "grid":
                m = int(self.layout["m"])
                prefix = read_only(prefix_sums(self.count.reshape((1,) + (m,) * d), batch_axes=1).ravel())
                self._grid_cache = (prefix, np.zeros(1, dtype=np.int64), np.array([m]))
            else:
                m2 = np.asarray(self.layout["m2"], dtype=np.int64)
                leaf_start = np.concatenate([[0], np.cumsum(m2**d)])[:-1]
                sizes = (m2 + 1) ** d
                offsets = np.concatenate([[0], np.cumsum(sizes)])[:-1]
                prefix = np.empty(int(sizes.sum()))
                for side in np.unique(m2):  # one pass per distinct sub-grid side
                    cells = np.nonzero(m2 == side)[0]
                    idx = leaf_start[cells][:, None] + np.arange(side**d)
                    p = prefix_sums(self.count[idx].reshape((cells.size,) + (int(side),) * d), batch_axes=1)
                    prefix[(offsets[cells][:, None] + np.arange((side + 1) ** d)).ravel()] = p.ravel()
                self._grid_cache = (read_only(prefix), offsets, m2)
        return self._grid_cache

    def range_count(self, density: Any = "uniform", **ranges: tuple[float, float]) -> float:
        """Noisy count of points with ``lo <= col <= hi`` for each ``col=(lo, hi)`` given
        (an absent column means its whole declared range); ``density`` as in :meth:`range_counts`."""
        density, ranges = _density_or_column(density, ranges)
        density = self._check_density(density)
        query = self._single_query(ranges)
        if not query:
            return float(self.count.sum())
        return float(self.range_count_array(query, density=density)[0])

    def _single_query(self, ranges: Mapping[str, Any]) -> dict[str, list[float | None]]:
        query: dict[str, list[float | None]] = {}
        for col, pred in ranges.items():
            if col not in self.box.columns:
                raise QueryError(f"{col!r} is not a column of this release; columns: {self.columns}")
            if not (isinstance(pred, (tuple, list)) and len(pred) == 2):
                raise QueryError(f"{col}: give a (lo, hi) pair, got {pred!r}")
            for side, value in zip(("lo", "hi"), pred, strict=True):
                if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Real)):
                    raise QueryError(f"{col}: {side}={value!r} is not a number")
                # None: an open end, a null bound (the whole range) as in a table of boxes
                query[f"{col}_{side}"] = [None if value is None else float(value)]
        return query

    # ------------------------------------------------------------------ outputs
    def sample(self, n: int, *, seed: SeedLike = None) -> pl.DataFrame:
        """``n`` synthetic points: a leaf drawn by its count (negatives read as 0), then a point
        uniform in its box; see :mod:`polars_dp.releases.sampling`.  No data, no budget."""
        return sample_boxes(self.lo, self.hi, self.count, self.columns, n, seed)

    def postprocess(self, *methods: str) -> SpatialRelease:
        """A new release with the leaf counts post-processed: ``"nonnegative"`` (least-squares
        projection onto non-negative counts with the same total), recorded in
        ``params["postprocessed"]``.  Its noise model becomes :class:`Correlated` and
        ``range_counts(std=True)`` gives a NULL ``std``: see :mod:`polars_dp.releases.postprocess`."""
        levels = self.levels
        if levels is None:
            count, params = postprocess_counts(self.count, self.params, methods, TREE_POSTPROCESSING)
        else:  # after inference, on the finest nodes (the leaves keep the sums of theirs)
            finest, params = postprocess_counts(levels.finest_counts, self.params, methods,
                                                TREE_POSTPROCESSING)
            levels = levels.with_finest_counts(finest)
            count = levels.leaf_counts()
        return SpatialRelease(self.box, self.lo, self.hi, self.depth, count, layout=self.layout,
                              codes=self.codes, noise_model=postprocessed_noise_model(params), levels=levels,
                              subgrid=self.subgrid, **self._shared(params)).derived_from(self)

    def _payload_equal(self, other: Release) -> bool:
        return isinstance(other, SpatialRelease) and self._table().equals(other._table())

    def to_duckdb(self, con: Any, name: str, *, replace: bool = False) -> Any:
        """Register this release in a DuckDB connection: a leaf table ``name``, its metadata and
        box range-count macros; see :func:`polars_dp.releases.sql_tree.register_tree`.  The macros
        answer with the uniform density inside a leaf (``density="uniform"`` of
        :meth:`range_counts`); ``density="linear"`` is answered in Python only.

        Refuses (:class:`ParameterError` naming them) when a table, view or macro it would
        create exists; ``replace=True`` overwrites them."""
        return sql_tree.register_tree(con, name, self, replace=replace)

    def __repr__(self) -> str:
        return (f"SpatialRelease(mechanism={self.mechanism!r}, epsilon={self.epsilon}, "
                f"neighbours={self.neighbours!r}, columns={self.columns}, {self._size_words()}"
                f"{self._repr_flags()})")

    # ------------------------------------------------------------------ self-description
    query_kinds = ("range",)
    plot_kind = "leaves"
    interval_columns = ("noise_lo", "noise_hi")

    def domain_summary(self) -> dict[str, Any]:
        return {"columns": self.columns, "bounds": self.metadata()["bounds"]}

    def domain_lines(self) -> list[str]:
        return [f"{c}: [{fmt_number(a)}, {fmt_number(b)}]" for c, (a, b) in self.range_domain().items()]

    def size_summary(self) -> dict[str, Any]:
        return {"leaves": self.n_leaves, "layout": self.metadata()["layout"]["kind"]}

    def size_text(self) -> str:
        if self.subgrid is not None:
            return f"{self.n_leaves:,} sub-cells in {self.subgrid.starts.size:,} PrivTree leaves"
        return f"{self.n_leaves:,} leaves"

    def _size_words(self) -> str:
        """``leaves=N`` (``sub_cells=N, leaves=M`` for a sub-grid release), for the repr."""
        if self.subgrid is not None:
            return f"sub_cells={self.n_leaves:,}, leaves={self.subgrid.starts.size:,}"
        return f"leaves={self.n_leaves:,}"

    def range_domain(self) -> dict[str, Any]:
        """Each column's ``(lo, hi)`` bounds (what an open side of a range query stands for)."""
        return dict(zip(self.columns, self.metadata()["bounds"], strict=True))

    range_interval = range_noise_interval

    def card_accuracy(self, alpha: float) -> dict[str, Any]:
        return spatial_accuracy(self, alpha)

    def report_figures(self, alpha: float) -> list[str]:
        return leaf_map(self)

    def sql_names(self, name: str) -> list[str]:
        return [name, f"{name}_meta", f"{name}_range_count(...)", f"{name}_range_counts('queries')"]


def _null_columns(std: bool, alpha: float | None) -> list[pl.Series | pl.Expr]:
    """The null ``noise_std`` (with ``std``) and ``noise_lo`` / ``noise_hi`` (with ``alpha``)
    columns of answers that state no error bar."""
    names = (["noise_std"] if std else []) + (["noise_lo", "noise_hi"] if alpha is not None else [])
    return [pl.lit(None, pl.Float64).alias(c) for c in names]


def _density_or_column(density: Any, ranges: dict[str, tuple[float, float]]
                       ) -> tuple[Any, dict[str, tuple[float, float]]]:
    """``density=`` of a single query, or the range of a column named ``density``."""
    if isinstance(density, (tuple, list)):
        return "uniform", {"density": cast(tuple[float, float], density), **ranges}
    return density, ranges


def _check_layout_and_model(plan: PointsPlan, params: Mapping[str, Any], layout: Mapping[str, Any],
                            model: NoiseModel | None) -> None:
    """A spatial file's own entries against its plan: the ``layout`` the plan gives (kind, and the
    sides or bits it decides) and the ``noise_model`` (the plan's, or after post-processing the one
    that says so; files of 0.1.0 record none)."""
    for key, want in plan.layout_entries(params).items():
        check_equal(f"layout.{key}", layout.get(key), want)
    if model is None:
        return
    want_model = postprocessed_noise_model(params) or plan.release_noise_model
    if isinstance(model, IndependentLaplace) and isinstance(want_model, IndependentLaplace):
        check_equal("noise_model.scale", model.scale, want_model.scale)
    if model != want_model:
        raise ReleaseFormatError(f"release metadata field 'noise_model' is {noise_model_to_json(model)} but "
                                 f"the declared parameters give {noise_model_to_json(want_model)}; the file "
                                 "was edited or is corrupt")


def _read_subgrid(table: pa.Table, plan: PrivTreeSubgridPlan, codes: np.ndarray, depth: np.ndarray,
                  count: np.ndarray, order: np.ndarray, params: Mapping[str, Any], noise: str) -> Subgrid:
    """The sub-grids of a ``privtree_subgrid`` table (rows in code order), verified
    (:meth:`Subgrid.from_columns`): the consistent counts recomputed from the two measurement
    sets, the recorded post-processing reapplied, must be the stored counts."""
    try:
        bits = table.column("subgrid_bits").to_numpy()[order]
        leaf_noisy = float_column(table, "leaf_noisy_count")[order]
        noisy = float_column(table, "noisy_count")[order]
    except KeyError as exc:
        raise ReleaseFormatError(f"tree release table has no {exc.args[0]!r} column") from None
    if not np.issubdtype(bits.dtype, np.integer):
        raise ReleaseFormatError(f"tree release column 'subgrid_bits' has type {bits.dtype}, not integers")
    sub = Subgrid.from_columns(codes, depth, bits, leaf_noisy, noisy, plan.tree_layout, plan=plan,
                               noise=noise)
    check_same("consistent sub-cell counts", np.asarray(count, dtype=np.float64),
               _reapplied(sub.consistent(), params))
    return sub


def _reapplied(counts: np.ndarray, params: Mapping[str, Any]) -> np.ndarray:
    """``counts`` with the post-processing steps ``params`` records applied again (a reader
    recomputing the stored counts)."""
    steps = [s["method"] for s in postprocessing_steps(params)]
    return postprocess_counts(counts, {}, steps, TREE_POSTPROCESSING)[0] if steps else counts


def _read_levels(release: SpatialRelease, layout: MortonLayout,
                 parsed: tuple[int, list[float], np.ndarray, np.ndarray],
                 noisy_leaves: np.ndarray) -> TopLevels:
    """The counted top levels of a table, verified: the inference is recomputed from the noisy
    counts (and the recorded post-processing reapplied) and must give the stored counts; the
    levels and their scales are the plan's."""
    plan = cast(PrivTreePlan, release.plan)
    k, scales, noisy, stored_top = parsed
    if plan.levels != k or [float(b) for b in plan.level_scales] != scales:
        raise ReleaseFormatError("params.levels / params.level_noise_scales disagree with the counted levels")
    assert release.codes is not None  # checked by the caller: a Morton-layout release
    levels = TopLevels.infer(release.codes, release.depth, layout, k, noisy, scales, noisy_leaves,
                             float(plan.leaf_scale), release.noise)
    check_same("top-level counts", stored_top, levels.top_counts())
    if postprocessing_steps(release.params):
        levels = levels.with_finest_counts(_reapplied(levels.finest_counts, release.params))
    check_same("leaf counts", release.count, levels.leaf_counts())
    return levels


__all__ = ["SpatialRelease"]
