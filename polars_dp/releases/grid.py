"""GridRelease: a noisy frequency matrix over declared attributes (Basic, Privelet, Privelet+).

One row per cell in the Arrow form: the label columns of each attribute (nominal: the leaf
label ``<column>``, plus one ``<column>_<level>`` column per hierarchy level; ordinal: the value
``<column>`` when each cell is one value, else the bin's range ``<column>_lo`` / ``<column>_hi``,
both inclusive in an integer domain, half-open ``[lo, hi)`` in a float domain:
:mod:`polars_dp.releases.grid_format`) and the noisy ``count``.  A bin's range is the query that
counts exactly that bin: ``WHERE age_lo >= 20 AND age_hi <= 29`` sums the cells
``range_count(age=(20, 29))`` sums.  Range counts come from prefix sums
(:mod:`polars_dp.domains.queries`); their exact noise variance from the release's
:class:`~polars_dp.plans.noise_model.WaveletLaplace` noise model.  Everything here is
post-processing of the mechanism's output.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from fractions import Fraction
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from polars_dp.domains.attributes import Attribute, Nominal, attribute_from_json
from polars_dp.domains.queries import as_query_frame, predicate_ranges, query_ranges
from polars_dp.errors import ParameterError, QueryError, ReleaseFormatError
from polars_dp.kernels.prefix import box_sums, prefix_sums, streamed_box_sums
from polars_dp.kernels.wavelet_variance import AxisRanges, axis_ranges
from polars_dp.memory import available_memory
from polars_dp.noise import SeedLike
from polars_dp.plans.base import Plan
from polars_dp.plans.grid import check_alpha
from polars_dp.plans.noise_model import LevelLaplace, NoiseModel, WaveletLaplace
from polars_dp.progress import Progress
from polars_dp.releases import sql_grid
from polars_dp.releases.base import Release, Sealed, read_only
from polars_dp.releases.card import grid_accuracy
from polars_dp.releases.grid_format import (
    READ_BUFFER,
    cell_label_values,
    counts_by_label,
    counts_in_write_order,
    label_columns,
    write_order_batches,
    write_order_columns,
)
from polars_dp.releases.integrity import check_noise_scale, positive_number
from polars_dp.releases.io import open_parquet, read_table
from polars_dp.releases.metadata import DecodedMetadata
from polars_dp.releases.postprocess import GRID_POSTPROCESSING, postprocess_counts, postprocessed_noise_model
from polars_dp.releases.reading import register_release_type
from polars_dp.releases.report import grid_figures
from polars_dp.releases.sampling import sample_grid


def _axis_index(shape: tuple[int, ...], axis: int, start: int = 0, stop: int | None = None
                ) -> np.ndarray:
    """Index along ``axis`` of the cells ``[start, stop)`` (flat, C order) of an array of
    ``shape`` (no full grid)."""
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    if start or stop is not None:
        cells = np.arange(start, stop, dtype=np.int64)
        return ((cells // inner) % shape[axis]).astype(np.int32)
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    base = np.arange(shape[axis], dtype=np.int32)
    return np.tile(np.repeat(base, inner), outer)


def _label_array(labels: list | np.ndarray, codes: np.ndarray) -> pa.Array:
    """Strings as a dictionary array (codes into labels); other labels as plain values."""
    if len(labels) and isinstance(labels[0], str):
        return pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()), pa.array(labels, pa.string()))
    return pa.array(np.asarray(labels)[codes])


@register_release_type
class GridRelease(Release):
    """A noisy frequency matrix over declared attributes (Basic, Privelet, Privelet+).

    ``counts[i1, ..., id]`` is the noisy number of rows whose cells along the attributes are
    ``i1, ..., id``; ``noise_scale`` is the Laplace magnitude lambda of the mechanism (per
    coefficient for wavelet mechanisms); ``params`` holds mechanism-specific facts such as
    Privelet's ``rho`` and untransformed attributes.

    ``counts`` is read-only (so are the cached prefix sums and every array read back from a
    file): the numbers change only through :meth:`postprocess`, which records what was done.
    """

    #: the noisy frequency matrix (read-only; the constructor takes over the array it is given,
    #: which becomes read-only too: :func:`~polars_dp.releases.base.read_only`)
    counts: Sealed[np.ndarray] = Sealed()

    release_type = "grid"
    internal_columns = ("cell", "prefix")  # linear cell index, inclusive prefix sum
    metadata_entries = ("attributes", "shape", "noise_scale")
    _plain_columns = ("count",)  # noisy values: stored as they are, read at copy speed

    #: Largest summed-area array (bytes) kept for later queries; ``None``: half of the memory
    #: available when it is first needed.  Beyond it, queries stream the prefix sums instead
    #: (same answers, bit for bit; one pass over the counts per batch of queries).
    prefix_cache_bytes: int | None = None

    def __init__(self, counts: np.ndarray, attributes: tuple[Attribute, ...], *,
                 mechanism: str | None = None, epsilon: float | None = None, neighbours: str | None = None,
                 noise_scale: float, params: Mapping[str, Any] | None = None, created: str | None = None,
                 library_version: str | None = None, noise: str | None = None, seeded: bool = False,
                 plan: Plan | None = None):
        counts = np.asarray(counts, dtype=np.float64, order="C")  # cells are numbered in C order
        attributes = tuple(attributes)
        if counts.shape != tuple(a.n_cells for a in attributes):
            raise ParameterError(
                f"counts has shape {counts.shape} but the attributes declare "
                f"{tuple(a.n_cells for a in attributes)}"
            )
        self.counts = counts
        self.attributes = attributes
        self.noise_scale = float(noise_scale)
        self._init_common(mechanism=mechanism, epsilon=epsilon, neighbours=neighbours,
                          params=params, created=created, library_version=library_version,
                          noise=noise, seeded=seeded, plan=plan)
        names = ["count"]
        for a in attributes:
            names.extend(label_columns(a))
            if isinstance(a, Nominal):
                names.extend(self.level_columns(a).values())
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ParameterError(f"release column name(s) {sorted(dup)} would collide; rename the column")

    # ------------------------------------------------------------------ basics
    @property
    def shape(self) -> tuple[int, ...]:
        return self.counts.shape

    @property
    def n_cells(self) -> int:
        return int(self.counts.size)

    @property
    def columns(self) -> list[str]:
        return [a.column for a in self.attributes]

    def attribute(self, column: str) -> Attribute:
        for a in self.attributes:
            if a.column == column:
                return a
        raise QueryError(f"{column!r} is not an attribute of this release; attributes: {self.columns}")

    def level_columns(self, attribute: Nominal) -> dict[str, str]:
        """Release column name of each hierarchy level of ``attribute``: ``<column>_<level>``."""
        return {lvl: f"{attribute.column}_{lvl}" for lvl in attribute.hierarchy.level_names}

    def _domain(self) -> dict[str, Any]:
        return {"attributes": self.attributes}

    def _metadata_entries(self) -> dict[str, Any]:
        return {"attributes": [a.to_json() for a in self.attributes], "shape": list(self.shape),
                "noise_scale": self.noise_scale}

    # ------------------------------------------------------------------ Arrow
    def _table(self, start: int = 0, stop: int | None = None) -> pa.Table:
        """The release table (no metadata); ``start``/``stop`` select the rows of the flat
        cells ``[start, stop)`` (to stream a large release in batches)."""
        shape = self.shape
        cols: dict[str, pa.Array] = {}
        for axis in range(len(self.attributes)):
            cols.update(self._axis_columns(axis, _axis_index(shape, axis, start, stop)))
        cols["count"] = pa.array(self.counts.reshape(-1)[start:stop])
        return pa.table(cols)

    def _axis_columns(self, axis: int, idx: np.ndarray) -> dict[str, pa.Array]:
        """The label columns of attribute ``axis`` for the cells at positions ``idx`` along it."""
        a = self.attributes[axis]
        cols: dict[str, pa.Array] = {}
        if isinstance(a, Nominal):
            cols[a.column] = _label_array(a.cell_labels(), idx)
            for lvl, labels in a.hierarchy.level_labels().items():
                uniq = list(dict.fromkeys(labels))
                pos = {label: i for i, label in enumerate(uniq)}
                leaf_code = np.array([pos[x] for x in labels], dtype=np.int32)
                if not all(isinstance(x, str) for x in uniq):  # leaves shallower than a level
                    uniq = [str(x) for x in uniq]
                cols[self.level_columns(a)[lvl]] = _label_array(uniq, leaf_code[idx])
        else:
            for column, values in zip(label_columns(a), cell_label_values(a), strict=True):
                cols[column] = pa.array(np.asarray(values)[idx])
        return cols

    def _axis_table(self, axis: int) -> pa.Table:
        """One row per cell position along ``axis`` (``__i``) with that attribute's label
        columns, as :meth:`_table` writes them (the DuckDB view derives a cell's labels from it)."""
        n = self.shape[axis]
        return pa.table({"__i": np.arange(n, dtype=np.int64),
                         **self._axis_columns(axis, np.arange(n, dtype=np.int32))})

    def _table_batches(self, rows: int) -> Iterator[pa.RecordBatch]:
        """Record batches of ``rows`` cells each, built from :attr:`counts` one at a time (the
        count column is a view of the counts; a 1e8-cell grid is never copied whole)."""
        for start in range(0, self.n_cells, rows):
            yield from self._table(start, min(start + rows, self.n_cells)).to_batches()

    @classmethod
    def _read_header(cls, meta: DecodedMetadata) -> tuple[dict[str, Any], tuple[Attribute, ...],
                                                          tuple[int, ...], float]:
        """The verified metadata of a grid table: (constructor arguments with the plan, attributes,
        shape, noise scale); the ``noise_scale`` entry is the plan's ``Delta rho / epsilon``
        (:func:`~polars_dp.releases.integrity.check_noise_scale`)."""
        common = meta.common
        attrs = meta.entry("attributes", lambda x: tuple(attribute_from_json(a) for a in x))
        shape = meta.entry("shape", lambda x: tuple(int(n) for n in x))
        scale = meta.entry("noise_scale", lambda x: positive_number(x, "noise_scale"))
        if shape != tuple(a.n_cells for a in attrs):
            raise ReleaseFormatError(f"release metadata field 'shape' is {list(shape)} but the attributes "
                                     f"declare {[a.n_cells for a in attrs]}")
        plan = cls._replan(meta, {"attributes": attrs},
                           lambda plan: check_noise_scale("noise_scale", scale, plan.nominal_scale))
        return {**common, "plan": plan}, attrs, shape, scale

    @classmethod
    def from_arrow(cls, table: pa.Table, *, unverified: bool = False) -> GridRelease:
        """The release of a table written by :meth:`to_arrow`, verified before it answers
        (:mod:`polars_dp.releases.integrity`): metadata types, the noise scale recomputed from
        epsilon, the neighbour relation and ``rho``, every cell located by its label columns
        (any row order; a missing or repeated cell is refused), the level columns, and the
        checksum (required unless ``unverified=True``)."""
        meta = cls._read_metadata(table)
        common, attrs, shape, scale = cls._read_header(meta)
        return cls(counts_by_label(table, attrs, shape), attrs, noise_scale=scale, **common)._checked(
            meta, unverified)

    @classmethod
    def from_parquet(cls, path: str | os.PathLike, *, unverified: bool = False) -> GridRelease:
        """:meth:`from_arrow` of a Parquet file, streamed in batches when its rows are still in
        write order (every label checked against its row's cell, vectorised:
        :func:`~polars_dp.releases.grid_format.counts_in_write_order`); any other file is read
        whole and placed by label."""
        file = open_parquet(path, buffer_size=READ_BUFFER, pre_buffer=False)
        meta = cls._read_metadata(file.schema_arrow)
        common, attrs, shape, scale = cls._read_header(meta)
        names = file.schema_arrow.names
        columns = write_order_columns(attrs, names)
        if file.metadata.num_rows == int(np.prod(shape, dtype=np.int64)) and all(c in names for c in columns):
            counts = counts_in_write_order(write_order_batches(file, columns), attrs, shape, names)
            if counts is not None:
                return cls(counts, attrs, noise_scale=scale, **common)._checked(meta, unverified)
        return cls.from_arrow(read_table(path), unverified=unverified)

    def _payload_arrays(self) -> list[np.ndarray]:
        return [self.counts]

    def _payload_equal(self, other: Release) -> bool:
        return (isinstance(other, GridRelease) and self.attributes == other.attributes
                and np.array_equal(self.counts, other.counts))

    # ------------------------------------------------------------------ noise model
    @property
    def noise_model(self) -> NoiseModel:
        """Laplace ``noise_scale / W(c)`` per wavelet coefficient along :attr:`transformed`
        (no transformed axis: i.i.d. Laplace ``noise_scale`` per cell); :class:`Correlated`
        once post-processed (:meth:`postprocess`).  It gives every error bar of the release."""
        return postprocessed_noise_model(self.params) or self._drawn_noise

    @property
    def _drawn_noise(self) -> NoiseModel:
        """The noise as drawn, before any post-processing: the plan's when it states one of its
        own (least squares over block levels, :class:`~polars_dp.plans.noise_model.LevelLaplace`),
        else Laplace ``noise_scale`` per coefficient along :attr:`transformed`."""
        model = self._plan.noise_model if self._plan is not None else None
        if isinstance(model, LevelLaplace):
            return model
        return WaveletLaplace(self.noise_scale, self.transformed)

    @property
    def transformed(self) -> tuple[str, ...]:
        """Columns along which the mechanism applied a wavelet transform (none for Basic)."""
        return self._record_class.transformed_axes(self.params)

    def axis_variance(self, axis: int, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
        """Per-axis variance factor ``f_axis`` of the cell ranges ``[starts, stops)`` under the
        noise as drawn (:class:`~polars_dp.kernels.wavelet_variance.AxisRanges`): the noise
        variance of a range count is ``2 * noise_scale**2 * prod_axis f_axis`` (Privelet paper,
        Theorem 3); an untransformed axis (Basic; Privelet+'s S_A) has ``f = stop - start``."""
        ax = AxisRanges(self.attributes[axis], np.asarray(starts, dtype=np.int64),
                        np.asarray(stops, dtype=np.int64))
        return ax.factor(self._drawn_noise.transforms(ax.column))

    def range_variance(self, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
        """Exact noise variance of range counts given as **cell-index** boxes: ``starts`` /
        ``stops`` of shape (queries, d) hold, per axis, the half-open range ``[start, stop)`` of
        cell indices (not attribute values; NaN for a post-processed release).  For predicates in
        value space use :meth:`range_std` or ``range_counts(..., std=True)``; the cell ranges of
        predicates come from :func:`polars_dp.domains.queries.predicate_ranges`.  The
        noise model's :meth:`~polars_dp.plans.noise_model.NoiseModel.variance`."""
        return self.noise_model.range_variance(axis_ranges(self.attributes, starts, stops))

    def range_accuracy(self, starts: np.ndarray, stops: np.ndarray, alpha: float = 0.05) -> np.ndarray:
        """Half-width ``a`` per cell range ``[starts, stops)`` with ``P(|noise| > a) <= alpha``
        (the noise model's :meth:`~polars_dp.plans.noise_model.NoiseModel.half_width`: the tail
        bound of :mod:`polars_dp.kernels.tail_bounds`, exact law for one noise term); NaN once
        post-processed."""
        alpha = check_alpha(alpha)
        return self.noise_model.range_accuracy(axis_ranges(self.attributes, starts, stops), alpha, self.noise)

    def accuracy(self, queries: Any, alpha: float = 0.05, *, align: str = "exact") -> pl.DataFrame:
        """``id``, ``count``, ``std`` and ``accuracy`` per query (the columns of
        :meth:`polars_dp.plans.GridPlan.accuracy` plus the noisy ``count``): the noise of each
        ``count`` exceeds ``accuracy`` with probability at most ``alpha``.  ``std`` and
        ``accuracy`` are null once post-processed."""
        alpha = check_alpha(alpha)
        frame = as_query_frame(queries)
        if "id" not in frame.columns:
            frame = frame.with_row_index("id")
        starts, stops = query_ranges(self.attributes, frame, passthrough=("id",), align=align)
        std = np.sqrt(self.range_variance(starts, stops))
        acc = self.range_accuracy(starts, stops, alpha)
        return pl.DataFrame({"id": frame["id"], "count": self._box_sums(starts, stops),
                             "std": pl.Series(std, nan_to_null=True),
                             "accuracy": pl.Series(acc, nan_to_null=True)})

    # ------------------------------------------------------------------ queries
    @property
    def prefix(self) -> np.ndarray:
        """Summed-area array of ``counts`` with a zero border (computed once, then cached;
        read-only, as ``counts``).  See :func:`polars_dp.kernels.prefix.prefix_sums`."""
        cached = self.__dict__.get("_prefix_cache")
        if cached is None:
            cached = self.__dict__["_prefix_cache"] = read_only(prefix_sums(self.counts))
        return cached

    def _prefix_fits(self) -> bool:
        """Whether the summed-area array may be built and cached (see :attr:`prefix_cache_bytes`)."""
        if self.__dict__.get("_prefix_cache") is not None:
            return True
        size = 8 * int(np.prod([n + 1 for n in self.shape], dtype=np.float64))
        limit = self.prefix_cache_bytes
        if limit is None:
            available = available_memory()
            return available is None or size <= available // 2
        return size <= limit

    def _box_sums(self, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
        """Range sums over cell boxes: from the cached summed-area array when it fits in
        memory, else streamed (:func:`polars_dp.kernels.prefix.streamed_box_sums`)."""
        if self._prefix_fits():
            return box_sums(self.prefix, starts, stops)
        return streamed_box_sums(self.counts, starts, stops)

    def range_count(self, *, align: str = "exact", **predicates: Any) -> float:
        """Noisy count of rows matching every predicate.

        ``column=(lo, hi)`` (inclusive, in value space; ``None`` for an open side) for an
        ordinal attribute, and ``column=label`` (a leaf or any group of the hierarchy) for a
        nominal one; an absent column means its whole domain.  ``2^d`` look-ups in
        :attr:`prefix` (:mod:`polars_dp.domains.queries`).

        ``align``: an ordinal bound inside a bin raises :class:`QueryError` naming the nearest
        aligned ranges (``"exact"``, the default), or widens the range to the bins it touches
        (``"outer"``) or narrows it to the bins inside it (``"inner"``); the answer is then the
        count of those whole bins.

        >>> import polars as pl, polars_dp as pdp
        >>> df = pl.DataFrame({"age": [23, 35, 35, 61]})
        >>> release = pdp.basic(df, [pdp.Ordinal("age", 0, 99, width=10)], epsilon=1.0)
        >>> both = release.range_count(age=(30, 49))   # bins 30..39 and 40..49
        >>> both == release.range_count(age=(30, 39)) + release.range_count(age=(40, 49))
        True
        >>> release.range_count(age=(30, 45))
        Traceback (most recent call last):
            ...
        polars_dp.errors.QueryError: ...
        >>> release.range_count(age=(30, 45), align="outer") == both
        True
        """
        starts, stops = predicate_ranges(self.attributes, predicates, align)
        return float(self._box_sums(starts[None], stops[None])[0])

    def range_std(self, *, align: str = "exact", **predicates: Any) -> float | None:
        """Standard deviation of :meth:`range_count`'s noise: ``sqrt(range_variance)``; None
        when the release has no exact error bar (post-processed), as ``range_counts`` gives null."""
        starts, stops = predicate_ranges(self.attributes, predicates, align)
        std = float(np.sqrt(self.range_variance(starts[None], stops[None])[0]))
        return None if np.isnan(std) else std

    def range_counts(self, queries: Any, std: bool = False, *,
                     passthrough: str | Iterable[str] = ("id",), align: str = "exact",
                     progress: bool | None = None, alpha: float | None = None) -> pl.DataFrame:
        """Answer a batch of range-count queries; returns ``queries`` with ``count`` (and
        ``std``, the noise standard deviation of each answer) added; with ``alpha`` also
        ``lo`` / ``hi`` = ``count`` -/+ the accuracy at ``alpha`` (:meth:`accuracy`; null once
        post-processed).

        ``queries``: a Polars frame with ``<col>_lo`` / ``<col>_hi`` columns for ordinal
        attributes and ``<col>`` (a hierarchy label) for nominal ones; null = unrestricted.
        Other columns raise :class:`QueryError` unless listed in ``passthrough`` (one name or
        several; ``id`` is always allowed).  ``align``
        as in :meth:`range_count`.  ``progress``: stage bars on stderr (prefix sums,
        variance); ``None``: on a terminal for large releases.
        """
        frame = as_query_frame(queries)
        starts, stops = query_ranges(self.attributes, frame, passthrough=passthrough, align=align)
        bar = Progress("range_counts", progress, self.n_cells)
        bar.step("prefix sums and corners")
        out = {"count": self._box_sums(starts, stops)}
        if std:
            bar.step("variance")
            out["std"] = np.sqrt(self.range_variance(starts, stops))
        if alpha is not None:
            bar.step("accuracy")
            acc = self.range_accuracy(starts, stops, alpha)
            out["lo"], out["hi"] = out["count"] - acc, out["count"] + acc
        bar.close()
        return frame.with_columns(pl.Series(name, values, nan_to_null=True) for name, values in out.items())

    # ------------------------------------------------------------------ outputs
    def sample(self, n: int, *, seed: SeedLike = None) -> pl.DataFrame:
        """``n`` synthetic rows drawn from the counts (negatives read as 0), one column per
        attribute; see :mod:`polars_dp.releases.sampling`.  Post-processing: no data, no budget."""
        return sample_grid(self.counts, self.attributes, n, seed)

    def postprocess(self, *methods: str) -> GridRelease:
        """A new release with the counts post-processed by ``methods`` in order: ``"nonnegative"``
        (least-squares projection onto non-negative counts with the same total) and/or
        ``"integer"`` (integers keeping the rounded total); recorded in
        ``params["postprocessed"]``.  Its ``std`` is NULL: see :mod:`polars_dp.releases.postprocess`."""
        counts, params = postprocess_counts(self.counts, self.params, methods, GRID_POSTPROCESSING)
        return GridRelease(counts, self.attributes, noise_scale=self.noise_scale,
                           **self._shared(params)).derived_from(self)

    def to_duckdb(self, con: Any, name: str, *, replace: bool = False) -> Any:
        """Register this release in a DuckDB connection: a native table ``name``, its metadata
        and range-count table macros; see :func:`polars_dp.releases.sql_grid.register_grid`.

        Refuses (:class:`ParameterError` naming them) when a table, view or macro it would
        create exists; ``replace=True`` overwrites them."""
        return sql_grid.register_grid(con, name, self, replace=replace)

    def __repr__(self) -> str:
        dims = " x ".join(f"{a.column}:{a.n_cells}" for a in self.attributes)
        note = self._record_class.note(self.params)
        return (f"GridRelease(mechanism={self.mechanism!r}, epsilon={self.epsilon}, "
                f"neighbours={self.neighbours!r}, cells={self.n_cells:,} [{dims}]{self._repr_flags()})"
                + (f"  # {note}" if note is not None else ""))

    # ------------------------------------------------------------------ self-description
    query_kinds = ("range",)
    plot_kind = "marginals"
    column_word = "attribute"
    binned = True

    def domain_summary(self) -> dict[str, Any]:
        return {"attributes": [a.to_json() for a in self.attributes]}

    def domain_lines(self) -> list[str]:
        out = []
        for a in self.attributes:
            if isinstance(a, Nominal):
                levels = f", hierarchy of height {a.hierarchy.height}" if a.hierarchy.height > 2 else ""
                out.append(f"{a.column}: nominal {a.domain_text()}{levels}")
            else:
                out.append(f"{a.column}: ordinal {a.domain_text()} ({a.n_cells:,} cells)")
        return out

    def size_summary(self) -> dict[str, Any]:
        return {"cells": self.n_cells, "shape": list(self.shape)}

    def size_text(self) -> str:
        return f"{self.n_cells:,} cells"

    def stated_noise_scale(self) -> float | None:
        """``noise_scale``; None for block levels (one scale per level tuple, in ``params``)."""
        return None if isinstance(self._drawn_noise, LevelLaplace) else self.noise_scale

    def range_domain(self) -> dict[str, Any]:
        """What a range query may ask of each attribute: a nominal attribute (one of its labels)
        or an ordinal one's ``(lo, hi)`` (the bounds an open side of a range stands for)."""
        return {a.column: a if isinstance(a, Nominal) else (a.lo, a.hi) for a in self.attributes}

    def range_interval(self, alpha: float = 0.05, *, align: str = "exact", **predicates: Any
                       ) -> tuple[float | None, float | None]:
        """:meth:`range_count` -/+ its :meth:`range_accuracy` at ``alpha`` (the ``lo`` / ``hi``
        of ``range_counts(alpha=...)``); ``(None, None)`` when the release states no error bar."""
        starts, stops = predicate_ranges(self.attributes, predicates, align)
        acc = float(self.range_accuracy(starts[None], stops[None], alpha)[0])
        count = float(self._box_sums(starts[None], stops[None])[0])
        return (None, None) if acc != acc else (count - acc, count + acc)

    def card_domain(self) -> dict[str, Any]:
        return {**self.domain_summary(), "shape": list(self.shape)}

    def card_accuracy(self, alpha: float) -> dict[str, Any]:
        return grid_accuracy(self, alpha)

    def exact_spend(self) -> Fraction | None:
        """None: a grid's card states the ``epsilon_effective`` its record holds."""
        return None

    def report_figures(self, alpha: float) -> list[str]:
        return grid_figures(self, alpha)

    def sql_names(self, name: str) -> list[str]:
        return [name, f"{name}_meta", f"{name}_range_count(...)", f"{name}_range_counts('queries')"]


__all__ = ["GridRelease"]
