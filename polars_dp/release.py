"""Release objects: the public output of a mechanism, as Arrow tables with metadata.

Everything here is post-processing of a differentially private output: a release holds
no reference to the input data.  Each release type converts to a pyarrow Table whose
schema metadata (bytes keys under ``polars_dp.``) records the mechanism, epsilon, the
neighbour relation, the public domain and the library version, and is restored by
:func:`read_release`.  Polars and DuckDB conversions drop schema metadata, so every export
path re-attaches it (:func:`attach_metadata`).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from polars_dp.domain import Attribute, Nominal, attribute_from_json
from polars_dp.errors import ParameterError, QueryError, ReleaseFormatError
from polars_dp.queries import (
    as_query_frame,
    predicate_ranges,
    prefix_sums,
    query_ranges,
    range_sums,
)

META_PREFIX = "polars_dp."
_RELEASE_TYPES: dict[str, type[Release]] = {}


def register_release_type(cls: type[Release]) -> type[Release]:
    """Class decorator: make ``cls.release_type`` readable by :func:`read_release`."""
    _RELEASE_TYPES[cls.release_type] = cls
    return cls


def _version() -> str:
    from polars_dp import __version__
    return __version__


def attach_metadata(table: pa.Table, metadata: Mapping[str, Any]) -> pa.Table:
    """Return ``table`` with ``polars_dp.*`` schema metadata (values JSON-encoded unless str)."""
    meta = dict(table.schema.metadata or {})
    for key, value in metadata.items():
        text = value if isinstance(value, str) else json.dumps(value)
        meta[(META_PREFIX + key).encode()] = text.encode()
    return table.replace_schema_metadata(meta)


def read_metadata(table_or_schema: pa.Table | pa.Schema) -> dict[str, str]:
    """The ``polars_dp.*`` metadata of a table, prefix stripped, values as text."""
    schema = table_or_schema.schema if isinstance(table_or_schema, pa.Table) else table_or_schema
    out = {}
    for k, v in (schema.metadata or {}).items():
        key = k.decode()
        if key.startswith(META_PREFIX):
            out[key[len(META_PREFIX):]] = v.decode()
    return out


def write_table_atomic(table: pa.Table, path: str | os.PathLike, **kwargs: Any) -> Path:
    """Write Parquet to a temporary file beside ``path``, then rename it into place.

    A failure leaves no partial file behind, and an existing file at ``path`` is only
    replaced by a complete one.
    """
    path = Path(path)
    if path.is_dir():
        raise ParameterError(f"{str(path)!r} is a directory; give a file path such as 'release.parquet'")
    if not path.parent.exists():
        raise ParameterError(f"directory {str(path.parent)!r} does not exist; create it first")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the file the usual permissions
    try:
        pq.write_table(table, tmp, **kwargs)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


class Release:
    """Common behaviour of every release: metadata, Arrow/Polars/Parquet export."""

    release_type: ClassVar[str] = ""

    mechanism: str
    epsilon: float
    neighbours: str
    params: dict[str, Any]
    created: str
    library_version: str
    noise: str
    seeded: bool

    def _init_common(self, *, mechanism: str, epsilon: float, neighbours: str,
                     params: Mapping[str, Any] | None, created: str | None,
                     library_version: str | None, noise: str = "float", seeded: bool = False) -> None:
        self.noise = noise
        self.seeded = bool(seeded)
        self.mechanism = mechanism
        self.epsilon = float(epsilon)
        self.neighbours = neighbours
        self.params = dict(params or {})
        self.created = created or datetime.now(UTC).isoformat(timespec="seconds")
        self.library_version = library_version or _version()

    def metadata(self) -> dict[str, Any]:
        """What the Arrow schema metadata records (keys without the ``polars_dp.`` prefix)."""
        return {
            "release_type": self.release_type,
            "mechanism": self.mechanism,
            "epsilon": self.epsilon,
            "neighbours": self.neighbours,
            "noise": self.noise,
            "seeded": self.seeded,
            "params": self.params,
            "version": self.library_version,
            "created": self.created,
        }

    @staticmethod
    def _common_from_metadata(meta: Mapping[str, str]) -> dict[str, Any]:
        return {
            "mechanism": meta["mechanism"],
            "epsilon": json.loads(meta["epsilon"]),
            "neighbours": meta["neighbours"],
            "noise": meta.get("noise", "float"),  # files written before exact noise
            "seeded": bool(json.loads(meta.get("seeded", "false"))),
            "params": json.loads(meta.get("params", "{}")),
            "created": meta.get("created"),
            "library_version": meta.get("version"),
        }

    def _seeded_repr(self) -> str:
        return ", seeded=True (not for production)" if self.seeded else ""

    def _table(self) -> pa.Table:
        raise NotImplementedError

    def to_arrow(self) -> pa.Table:
        """The release as a pyarrow Table with ``polars_dp.*`` schema metadata."""
        return attach_metadata(self._table(), self.metadata())

    def to_polars(self) -> pl.DataFrame:
        """The release as a Polars DataFrame (Polars keeps no schema metadata)."""
        return pl.from_arrow(self._table())

    def write_parquet(self, path: str | os.PathLike, *, compression: str = "zstd") -> Path:
        """Write the release (with metadata) to Parquet atomically; returns the path."""
        return write_table_atomic(self.to_arrow(), path, compression=compression)

    def to_duckdb(self, con: Any, name: str) -> Any:
        """Register this release in a DuckDB connection: a native table ``name``, its metadata
        and range-count table macros; see :func:`polars_dp.duckdb.register`."""
        from polars_dp.duckdb import register
        return register(con, name, self)

    @classmethod
    def from_arrow(cls, table: pa.Table) -> Release:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        if type(self) is not type(other):
            return NotImplemented
        mine = {k: v for k, v in self.metadata().items()}
        theirs = {k: v for k, v in other.metadata().items()}
        return mine == theirs and self._payload_equal(other)

    def _payload_equal(self, other: Release) -> bool:
        return self._table().equals(other._table())

    __hash__ = None  # mutable numpy payload


def read_release(source: str | os.PathLike | pa.Table) -> Release:
    """Read a release from a Parquet file (or an Arrow table) written by polars-dp."""
    if isinstance(source, pa.Table):
        table = source
    else:
        path = Path(source)
        if not path.exists():
            raise ReleaseFormatError(f"no release at {str(path)!r}: the file does not exist")
        if path.is_dir():
            raise ReleaseFormatError(
                f"{str(path)!r} is a directory; a release is one Parquet file (reading a folder "
                "would merge several releases into one)"
            )
        try:
            table = pq.read_table(path)
        except (pa.ArrowInvalid, OSError) as exc:
            raise ReleaseFormatError(f"{str(path)!r} is not a readable Parquet file: {exc}") from None
    meta = read_metadata(table)
    kind = meta.get("release_type")
    if kind is None:
        raise ReleaseFormatError(
            "this table has no polars_dp.release_type metadata: it was not written by polars-dp "
            "(or its metadata was dropped, e.g. by a Polars or DuckDB round trip)"
        )
    if kind not in _RELEASE_TYPES:
        raise ReleaseFormatError(f"unknown release type {kind!r}; known: {sorted(_RELEASE_TYPES)}")
    return _RELEASE_TYPES[kind].from_arrow(table)


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
    """

    release_type = "grid"

    def __init__(self, counts: np.ndarray, attributes: tuple[Attribute, ...], *, mechanism: str,
                 epsilon: float, neighbours: str, noise_scale: float,
                 params: Mapping[str, Any] | None = None, created: str | None = None,
                 library_version: str | None = None, noise: str = "float", seeded: bool = False):
        counts = np.asarray(counts, dtype=np.float64)
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
                          noise=noise, seeded=seeded)
        self._check_column_names()

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

    def _check_column_names(self) -> None:
        names = ["count"]
        for a in self.attributes:
            names.append(a.column)
            if isinstance(a, Nominal):
                names.extend(self.level_columns(a).values())
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ParameterError(f"release column name(s) {sorted(dup)} would collide; rename the column")

    def metadata(self) -> dict[str, Any]:
        meta = super().metadata()
        meta.update({
            "attributes": [a.to_json() for a in self.attributes],
            "shape": list(self.shape),
            "noise_scale": self.noise_scale,
        })
        return meta

    # ------------------------------------------------------------------ Arrow
    def _table(self, start: int = 0, stop: int | None = None) -> pa.Table:
        """The release table (no metadata); ``start``/``stop`` select the rows of the flat
        cells ``[start, stop)`` (to stream a large release in batches)."""
        shape = self.shape
        cols: dict[str, pa.Array] = {}
        for axis, a in enumerate(self.attributes):
            idx = _axis_index(shape, axis, start, stop)
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
                cols[a.column] = pa.array(a.cell_labels()[idx])
        cols["count"] = pa.array(self.counts.reshape(-1)[start:stop])
        return pa.table(cols)

    @classmethod
    def from_arrow(cls, table: pa.Table) -> GridRelease:
        meta = read_metadata(table)
        try:
            attrs = tuple(attribute_from_json(x) for x in json.loads(meta["attributes"]))
            shape = tuple(json.loads(meta["shape"]))
            common = cls._common_from_metadata(meta)
            scale = json.loads(meta["noise_scale"])
        except (KeyError, ValueError, TypeError) as exc:
            raise ReleaseFormatError(f"grid release metadata is incomplete or corrupt: {exc}") from None
        if "count" not in table.column_names:
            raise ReleaseFormatError("grid release has no 'count' column")
        counts = table.column("count").to_numpy()
        if counts.size != int(np.prod(shape, dtype=np.int64)):
            raise ReleaseFormatError(
                f"grid release has {counts.size} rows but its metadata declares shape {shape}"
            )
        return cls(counts.reshape(shape), attrs, noise_scale=scale, **common)

    def _payload_equal(self, other: Release) -> bool:
        return (isinstance(other, GridRelease) and self.attributes == other.attributes
                and np.array_equal(self.counts, other.counts))

    # ------------------------------------------------------------------ noise model
    @property
    def transformed(self) -> tuple[str, ...]:
        """Columns along which the mechanism applied a wavelet transform (none for Basic)."""
        return tuple(self.params.get("transformed", ()))

    def axis_variance(self, axis: int, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
        """Per-axis variance factor ``f_axis`` of the cell ranges ``[starts, stops)``.

        Every grid mechanism here adds independent Laplace noise of magnitude
        ``noise_scale / W(c)`` to coefficients of a Kronecker-product transform with
        product-form weights, so the noise variance of a range count factorises:
        ``Var = 2 * noise_scale**2 * prod_axis f_axis`` (Privelet paper, Theorem 3).  An
        untransformed axis (Basic; Privelet+'s S_A) has ``f = stop - start`` (one unit-weight
        coefficient per cell); a transformed axis gets its factor from
        :func:`polars_dp.transforms.range_variance_factor`.
        """
        starts = np.asarray(starts, dtype=np.int64)
        stops = np.asarray(stops, dtype=np.int64)
        attribute = self.attributes[axis]
        if attribute.column in self.transformed:
            from polars_dp.transforms import range_variance_factor
            return range_variance_factor(attribute, starts, stops)
        return (stops - starts).astype(np.float64)

    def range_variance(self, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
        """Exact noise variance of range counts; ``starts``/``stops`` have shape (queries, d)."""
        starts = np.atleast_2d(np.asarray(starts, dtype=np.int64))
        stops = np.atleast_2d(np.asarray(stops, dtype=np.int64))
        var = np.full(starts.shape[0], 2.0 * self.noise_scale**2)
        for axis in range(len(self.attributes)):
            var *= self.axis_variance(axis, starts[:, axis], stops[:, axis])
        return var

    # ------------------------------------------------------------------ queries
    @property
    def prefix(self) -> np.ndarray:
        """Summed-area array of ``counts`` with a zero border (computed once, then cached;
        recomputed if ``counts`` is replaced).  See :func:`polars_dp.queries.prefix_sums`."""
        cached = self.__dict__.get("_prefix_cache")
        if cached is None or cached[0] is not self.counts:
            cached = (self.counts, prefix_sums(self.counts))
            self.__dict__["_prefix_cache"] = cached
        return cached[1]

    def range_count(self, **predicates: Any) -> float:
        """Noisy count of rows matching every predicate.

        ``column=(lo, hi)`` (inclusive, in value space; ``None`` for an open side) for an
        ordinal attribute, and ``column=label`` (a leaf or any group of the hierarchy) for a
        nominal one; an absent column means its whole domain.  ``2^d`` look-ups in
        :attr:`prefix` (:mod:`polars_dp.queries`).
        """
        starts, stops = predicate_ranges(self.attributes, predicates)
        return float(range_sums(self.prefix, starts[None], stops[None])[0])

    def range_std(self, **predicates: Any) -> float:
        """Standard deviation of :meth:`range_count`'s noise: ``sqrt(range_variance)``."""
        starts, stops = predicate_ranges(self.attributes, predicates)
        return float(np.sqrt(self.range_variance(starts[None], stops[None])[0]))

    def range_counts(self, queries: Any, std: bool = False, *,
                     passthrough: Iterable[str] = ("id",)) -> pl.DataFrame:
        """Answer a batch of range-count queries; returns ``queries`` with ``count`` (and
        ``std``, the noise standard deviation of each answer) added.

        ``queries``: a Polars frame with ``<col>_lo`` / ``<col>_hi`` columns for ordinal
        attributes and ``<col>`` (a hierarchy label) for nominal ones; null = unrestricted.
        Other columns raise :class:`QueryError` unless listed in ``passthrough``.
        """
        frame = as_query_frame(queries)
        starts, stops = query_ranges(self.attributes, frame, passthrough=passthrough)
        out = {"count": range_sums(self.prefix, starts, stops)}
        if std:
            out["std"] = np.sqrt(self.range_variance(starts, stops))
        return frame.with_columns(pl.Series(name, values) for name, values in out.items())

    def __repr__(self) -> str:
        dims = " x ".join(f"{a.column}:{a.n_cells}" for a in self.attributes)
        return (f"GridRelease(mechanism={self.mechanism!r}, epsilon={self.epsilon}, "
                f"neighbours={self.neighbours!r}, noise={self.noise!r}{self._seeded_repr()}, "
                f"cells={self.n_cells:,} [{dims}])")


__all__ = ["GridRelease", "Release", "attach_metadata", "read_metadata", "read_release",
           "register_release_type", "write_table_atomic"]
