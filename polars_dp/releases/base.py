"""The release base class: what every published output shares.

A release is the public output of a mechanism: everything computed from it is
post-processing of a differentially private output, and it holds no reference to the input
data.  Every release converts to a pyarrow Table whose ``polars_dp.*`` schema metadata
(:mod:`polars_dp.releases.metadata`) records the mechanism, epsilon, the neighbour relation,
how the noise was drawn (``noise``: ``"exact"`` or ``"float"``), whether a seed made it
reproducible (``seeded``), the public domain and the library version.

``verified`` says whether the values were checked against a checksum: ``True`` for a release
made here or read from a file whose checksum matches, ``False`` for one read with
``read_release(path, unverified=True)`` from a file without a checksum.  An unverified release
says so in its ``repr`` and in everything written from it (the metadata entry ``unverified``,
:mod:`polars_dp.releases.integrity`), so a re-written copy never passes for a verified one.

A release is also an Arrow stream (the Arrow PyCapsule interface, ``__arrow_c_stream__`` /
``__arrow_c_schema__``): ``pa.table(release)``, ``pl.DataFrame(release)``, DuckDB's
replacement scan and ``con.register`` take the object itself and get the table of
:meth:`Release.to_arrow` with its metadata, built batch by batch from the release arrays.
"""

from __future__ import annotations

import copy
import functools
import itertools
import os
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any, ClassVar, Generic, Self, TypeVar, cast, overload

import numpy as np
import polars as pl
import pyarrow as pa

from polars_dp._version import __version__
from polars_dp.errors import ParameterError, PolarsDPError, ReleaseFormatError
from polars_dp.plans.base import ANNOTATIONS, Plan, from_record, record_class
from polars_dp.progress import Progress
from polars_dp.releases import io
from polars_dp.releases.card import ALPHA, release_card
from polars_dp.releases.integrity import CHECKSUM_KEY, check_record, payload_checksum, verify_checksum
from polars_dp.releases.io import write_batches_atomic
from polars_dp.releases.metadata import (
    DecodedMetadata,
    attach_metadata,
    encode_metadata,
    read_release_metadata,
    release_metadata,
)
from polars_dp.releases.postprocess import PARAM
from polars_dp.releases.report import write_report
from polars_dp.releases.signing import SigningKey, with_signature

#: Rows per record batch of the Arrow stream (a consumer may hold a few batches at once; Parquet
#: files are written in larger row groups, :data:`~polars_dp.releases.io.ROW_GROUP_ROWS`).
STREAM_BATCH_ROWS = 1 << 19

T = TypeVar("T")


def read_only(values: np.ndarray) -> np.ndarray:
    """``values`` as an array no one can write through, not copied: it and every numpy array
    whose memory it views are made read-only in place (a release takes over the arrays it is
    built from), and an array owning its memory is handed out as a read-only view of it (numpy
    lets an owner be made writeable again, not a view over a read-only base)."""
    out = np.asarray(values)
    array: object = out
    while isinstance(array, np.ndarray):
        array.flags.writeable = False
        array = array.base
    if out.flags.owndata:
        out = out.view()
        out.flags.writeable = False
    return out


class Sealed(Generic[T]):
    """A release attribute set once, by the constructor: an ndarray is stored read-only
    (:func:`read_only`), so ``release.counts[release.counts < 0] = 0`` raises numpy's
    ``ValueError``, and binding the attribute again raises :class:`AttributeError`.  The
    published numbers change only through ``release.postprocess(...)``, a new release that
    records what was done (the arrays its Arrow table views, its cached prefix sums and its
    file stay the same numbers)."""

    name: str

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type) -> Sealed[T]: ...

    @overload
    def __get__(self, obj: object, owner: type | None = None) -> T: ...

    def __get__(self, obj: object | None, owner: type | None = None) -> Sealed[T] | T:
        if obj is None:
            return self
        try:
            return cast(T, obj.__dict__[self.name])
        except KeyError:
            raise AttributeError(f"{type(obj).__name__!r} object has no attribute {self.name!r}") from None

    def __set__(self, obj: object, value: T) -> None:
        if self.name in obj.__dict__:
            raise AttributeError(
                f"{type(obj).__name__}.{self.name} is read-only: a release changes only through "
                "release.postprocess(...), which returns a new release recording what was done")
        obj.__dict__[self.name] = read_only(value) if isinstance(value, np.ndarray) else value


#: Types whose values :class:`ReleaseParams` keeps as they are (immutable: a deep copy would be
#: the same object); any other value is deep-copied.
_ATOMIC = frozenset({str, int, float, bool, type(None)})


class ReleaseParams(Mapping[str, Any]):
    """A release's ``params``, read-only: ``release.params["leaf_noise_scale"] = 0`` raises
    :class:`TypeError`, and a list or dict entry is handed out as a copy, so editing it changes
    nothing the release answers or writes.  The entries the library adds after the mechanism
    (the command line's ``seeded``, a session's ``ledger``) go through :meth:`Release.annotate`."""

    __slots__ = ("_entries",)

    def __init__(self, entries: Mapping[str, Any] | None = None):
        memo: dict[int, Any] = {}  # one memo: entries sharing an object share its copy
        self._entries = {k: v if type(v) in _ATOMIC else copy.deepcopy(v, memo)
                         for k, v in (entries or {}).items()}

    def __getitem__(self, key: str) -> Any:
        value = self._entries[key]
        return copy.deepcopy(value) if isinstance(value, (list, dict)) else value

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __setitem__(self, key: str, value: Any) -> None:
        raise TypeError(f"release params are read-only (params[{key!r}]): a release changes only "
                        "through release.postprocess(...), which returns a new release recording "
                        "what was done")

    def __delitem__(self, key: str) -> None:
        self[key] = None

    def __eq__(self, other: object) -> bool:
        return dict(self._entries) == (dict(other) if isinstance(other, Mapping) else other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._entries)


#: The ``params`` entries :meth:`Release.annotate` may add: the integrity rule's annotations but
#: the post-processing steps, which only ``postprocess`` records.
ANNOTATION_KEYS = tuple(key for key in ANNOTATIONS if key != PARAM)


class Release:
    """Common behaviour of every release: metadata, Arrow/Polars/Parquet export."""

    release_type: ClassVar[str] = ""
    #: The type's own top-level metadata entries beside the header and ``params`` (its public
    #: domain, payload size and noise description; :mod:`polars_dp.releases.metadata`).
    metadata_entries: ClassVar[tuple[str, ...]] = ()
    #: The columns of its internal DuckDB table that the user's view does not show, the first
    #: one the release order (:mod:`polars_dp.releases.sql`).
    internal_columns: ClassVar[tuple[str, ...]] = ()
    #: Columns written PLAIN and uncompressed (:func:`~polars_dp.releases.io.column_options`).
    _plain_columns: ClassVar[tuple[str, ...]] = ()
    #: What :meth:`sql_script` runs: :func:`polars_dp.releases.sql_script.sql_script`, set by
    #: that module (it sits on the DuckDB glue, which imports this one).
    script_writer: ClassVar[Callable[[Release, str | os.PathLike, str], str] | None] = None

    library_version: str
    seeded: bool
    _created: str | None
    _made_at: float
    #: Whether the values were checked against a checksum (module docstring); set by the readers.
    verified: bool = True
    _plan: Plan | None = None
    #: The header of a release built by hand without a plan (``None`` when it has one).
    _stated: dict[str, Any] | None = None
    _params: ReleaseParams

    def _init_common(self, *, mechanism: str | None, epsilon: float | None, neighbours: str | None,
                     params: Mapping[str, Any] | None, created: str | None,
                     library_version: str | None, noise: str | None = None, seeded: bool = False,
                     plan: Plan | None = None) -> None:
        """The header and ``params``.  With a ``plan`` (a release made or read under it) they are
        views of the plan (:attr:`mechanism`, :attr:`epsilon`, :attr:`neighbours`, :attr:`noise`,
        :attr:`params`): of ``params`` only the entries the data decides and the library's
        annotations are taken, and a header field given must be the plan's.  Without one (a
        release built by hand) they are stored as given (``noise`` ``"float"`` unless given)."""
        self._plan = plan
        stated = {"mechanism": mechanism, "epsilon": epsilon, "neighbours": neighbours, "noise": noise}
        given = dict(params or {})
        if plan is not None:
            ours = self._from_plan(plan)
            wrong = [k for k, v in stated.items() if v is not None and v != ours[k]]
            if wrong:
                raise ParameterError(f"a release's {wrong[0]} is its plan's ({ours[wrong[0]]!r}), "
                                     f"not {stated[wrong[0]]!r}")
            data = {k: given[k] for k in plan.data_keys() if k in given}
            given = {**plan.record(**data), **{k: v for k, v in given.items() if k in ANNOTATIONS}}
        elif mechanism is None or epsilon is None or neighbours is None:
            raise ParameterError("a release needs its plan, or its mechanism, epsilon and neighbours")
        else:
            self._stated = {**stated, "epsilon": float(epsilon), "noise": noise or "float"}
        self._params = ReleaseParams(given)
        # the clock read now, formatted when first asked for (most releases never print it)
        self._created, self._made_at = created or None, time.time()
        self.library_version = library_version or __version__
        self.seeded = bool(seeded)

    @property
    def created(self) -> str:
        """When the release was made: UTC, ISO 8601 to the second (``2026-12-03T13:05:12+00:00``)."""
        if self._created is None:
            self._created = datetime.fromtimestamp(self._made_at, UTC).isoformat(timespec="seconds")
        return self._created

    def _shared(self, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The constructor arguments a release derived from this one keeps: its plan, or the header
        it states (a plan rebuilt for it stays its own), its record (or ``params``), when it was
        made and whether a seed made it."""
        return {**(self._stated or {"plan": self._plan}), "params": self.params if params is None else params,
                "created": self.created, "seeded": self.seeded}

    @staticmethod
    def _from_plan(plan: Plan) -> dict[str, Any]:
        return {"mechanism": plan.release_mechanism, "epsilon": float(plan.epsilon),
                "neighbours": plan.neighbours, "noise": plan.noise}

    def _stated_field(self, key: str) -> Any:
        """A header field: the plan's when the release has one, else as stated."""
        return self._from_plan(cast(Plan, self._plan))[key] if self._stated is None else self._stated[key]

    @property
    def mechanism(self) -> str:
        """The mechanism the release records (its plan's ``release_mechanism``)."""
        return cast(str, self._stated_field("mechanism"))

    @property
    def epsilon(self) -> float:
        """The stated privacy budget (its plan's ``epsilon``)."""
        return cast(float, self._stated_field("epsilon"))

    @property
    def neighbours(self) -> str:
        """The neighbour relation (its plan's)."""
        return cast(str, self._stated_field("neighbours"))

    @property
    def noise(self) -> str:
        """``"exact"`` or ``"float"`` (its plan's)."""
        return cast(str, self._stated_field("noise"))

    @property
    def params(self) -> ReleaseParams:
        """The record: its plan's (:meth:`Plan.record`, with what the data decided), then the
        library's annotations (post-processing steps, ``seeded``, ``ledger``)."""
        return self._params

    # ------------------------------------------------------------------ plan
    @property
    def plan(self) -> Plan:
        """The plan this release was made under: the one it was made or read with, else rebuilt
        once from its header and record (:func:`polars_dp.plans.from_record`)."""
        if self._plan is None:
            self._plan = from_record(cast(dict, self._stated), self.params, self._domain())
        return self._plan

    @functools.cached_property
    def _record_class(self) -> type[Plan]:
        """The plan class that declares this release's record, which answers what the release
        reads of it: its plan's, else the registered class of its mechanism and entries
        (:class:`Plan` itself for a release built by hand under no registered mechanism).  Once:
        a record changes only by a new release (``annotate`` adds no entry of the plan's)."""
        if self._plan is not None:
            return type(self._plan)
        try:
            return record_class(self.mechanism, self.params)
        except ReleaseFormatError:
            return Plan

    def _domain(self) -> dict[str, Any]:
        """The plan options this release stores as its public domain (subclasses)."""
        raise NotImplementedError

    @classmethod
    def _replan(cls, meta: DecodedMetadata, domain: Mapping[str, Any],
                own: Any = None) -> Plan:
        """Reading is re-planning, once: the plan rebuilt from the file's header and record on the
        public ``domain`` the type decoded, checked against the file by the one comparator
        (:func:`~polars_dp.releases.integrity.check_record`; ``own(plan)`` checks the type's own
        entries against it).  The type then only places its payload."""
        plan = from_record(meta.common, meta.common["params"], domain)
        check_record(plan, meta.common, own)
        return plan

    def _checked(self, meta: DecodedMetadata, unverified: bool, *extra: np.ndarray) -> Self:
        """This release, read from the table of ``meta``, ``verified`` by the stored checksum of its
        payload and ``extra`` arrays (:func:`~polars_dp.releases.integrity.verify_checksum`)."""
        self.verified = verify_checksum(meta.text, [*self._payload_arrays(), *extra], required=True,
                                        unverified=unverified)
        return self

    def metadata(self) -> dict[str, Any]:
        """What the Arrow schema metadata records (keys without the ``polars_dp.`` prefix), in
        the one layout of :mod:`polars_dp.releases.metadata`: the header, ``params`` and the
        type's :attr:`metadata_entries`."""
        header = {"release_type": self.release_type, "mechanism": self.mechanism, "epsilon": self.epsilon,
                  "neighbours": self.neighbours, "noise": self.noise, "seeded": self.seeded,
                  "version": self.library_version, "created": self.created}
        return release_metadata(header, self.params, self._metadata_entries(), self.metadata_entries,
                                unverified=not self.verified)

    def annotate(self, key: str, value: Any) -> None:
        """Record a note of the library's in ``params`` after the mechanism ran: ``"seeded"`` (the
        command line's copy of the header's flag) or ``"ledger"`` (a session's ledger); both are
        checked against the header when the release is read back.  Nothing else is editable."""
        if key not in ANNOTATION_KEYS:
            raise ParameterError(f"annotate takes one of {list(ANNOTATION_KEYS)}, got {key!r}: the "
                                 "other params are the mechanism's and read-only")
        self._params = ReleaseParams({**self.params, key: value})

    def sql_script(self, parquet_path: str | os.PathLike, name: str) -> str:
        """A self-contained DuckDB SQL script creating what ``to_duckdb(con, name)`` creates,
        read from this release's Parquet file ``parquet_path`` by any DuckDB client (``duckdb
        my.duckdb -c ".read release.sql"``), after checking the file's ``polars_dp`` metadata and a
        fingerprint of its values; see :mod:`polars_dp.releases.sql_script` for what is and is
        not checked."""
        writer = Release.script_writer
        assert writer is not None  # set when polars_dp.releases is imported
        return writer(self, parquet_path, name)

    def card(self, alpha: float = ALPHA) -> dict[str, Any]:
        """The release card: mechanism and paper, privacy unit, epsilon, noise, domain, accuracy at
        ``alpha`` for a default workload, version, seeding, verification, checksum, and the same
        facts under the OpenDP registry's field names (:mod:`polars_dp.releases.card`)."""
        return release_card(self, alpha)

    def report(self, path: str | os.PathLike[str], alpha: float = ALPHA) -> Path:
        """Write a self-contained HTML page (no script, no network): the card and figures with
        error bars (:mod:`polars_dp.releases.report`); returns the path.  ``path`` must end in
        ``.html`` or ``.htm`` (anything else is refused and nothing is written)."""
        return write_report(self, path, alpha)

    def derived_from(self, source: Release) -> Self:
        """This release, computed from ``source`` by post-processing, with its ``verified``
        state: what is derived from an unverified release is unverified too."""
        self.verified = source.verified
        return self

    def _metadata_entries(self) -> dict[str, Any]:
        """The values of this type's :attr:`metadata_entries` (those it has)."""
        return {}

    @classmethod
    def _read_metadata(cls, source: pa.Table | pa.Schema) -> DecodedMetadata:
        """The metadata of a table of this type, decoded and its header checked
        (:func:`~polars_dp.releases.metadata.read_release_metadata`)."""
        return read_release_metadata(source, cls.metadata_entries)

    def export_metadata(self) -> dict[str, str]:
        """The metadata entries as stored (text), with the ``checksum`` of the content
        (:func:`polars_dp.releases.integrity.payload_checksum`)."""
        text = encode_metadata(self.metadata())
        text[CHECKSUM_KEY] = payload_checksum(text, self._payload_arrays())
        return text

    def _payload_arrays(self) -> list[np.ndarray]:
        """The published values in canonical order (what the checksum covers); by default the
        Arrow IPC bytes of the release table."""
        sink = pa.BufferOutputStream()
        table = self._table()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        return [np.frombuffer(sink.getvalue(), dtype=np.uint8)]

    def _repr_flags(self) -> str:
        """``, seeded`` / ``, noise='float'`` for the repr of releases that are not production-grade."""
        flags = ""
        if self.noise != "exact":
            flags += f", noise={self.noise!r}"
        if self.seeded:
            flags += ", seeded=True (not for publication)"
        if not self.verified:
            flags += ", verified=False (read with unverified=True: no checksum vouches for its values)"
        return flags

    def _table(self) -> pa.Table:
        raise NotImplementedError

    def to_arrow(self) -> pa.Table:
        """The release as a pyarrow Table with ``polars_dp.*`` schema metadata (and a checksum)."""
        return attach_metadata(self._table(), self.export_metadata())

    def _table_batches(self, rows: int) -> Iterator[pa.RecordBatch]:
        """The rows of :meth:`_table` as record batches of at most ``rows`` rows, in order.

        By default the table is built whole and sliced (small releases); a release whose
        table is large builds each batch from its arrays instead (:class:`GridRelease`)."""
        yield from self._table().to_batches(max_chunksize=rows)

    def to_batches(self, rows: int = STREAM_BATCH_ROWS) -> pa.RecordBatchReader:
        """The release as a stream of record batches (schema with the ``polars_dp.*``
        metadata of :meth:`to_arrow`), built lazily: a batch exists only while it is read."""
        if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
            raise ParameterError(f"rows must be a positive integer, got {rows!r}")
        batches = self._table_batches(rows)
        first = next(batches, None)
        head = [] if first is None else [first]
        fields = list(self._table().schema if first is None else first.schema)
        meta = attach_metadata(pa.table({}), self.export_metadata()).schema.metadata
        schema = pa.schema(fields, metadata=meta)
        return pa.RecordBatchReader.from_batches(schema, itertools.chain(head, batches))

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """Arrow PyCapsule stream of :meth:`to_batches` (a fresh stream on every call)."""
        return self.to_batches().__arrow_c_stream__(requested_schema)

    def __arrow_c_schema__(self) -> object:
        """Arrow PyCapsule of the release schema, with its ``polars_dp.*`` metadata."""
        return self.to_batches().schema.__arrow_c_schema__()

    def to_polars(self) -> pl.DataFrame:
        """The release as a Polars DataFrame (Polars keeps no schema metadata).

        Its dtypes are those of ``pl.read_parquet`` on the release's Parquet file: string
        labels are dictionary-encoded in Arrow (one small code per cell, whatever the size
        of the grid), so both give ``Categorical`` label columns."""
        return cast(pl.DataFrame, pl.from_arrow(self._table()))

    def write_parquet(self, path: str | os.PathLike, *, compression: str = "zstd",
                      progress: bool | None = None, geometry: bool = False,
                      crs: object | None = None, signing_key: SigningKey | None = None) -> Path:
        """Write the release (with metadata) to Parquet atomically; returns the path.

        Rows are written in the release's canonical order (grid cells in C order, leaves in
        tree order) as row groups of ``ROW_GROUP_ROWS`` (2^18) rows with column statistics,
        so a filtered scan (:func:`polars_dp.scan_release`) skips the row groups it does not
        need; the table is streamed batch by batch, never built whole.  ``compression`` (a codec of
        :data:`polars_dp.releases.io.COMPRESSIONS`, any case; another is a :class:`ParameterError`
        before anything is written) applies to the label columns; a grid's noisy ``count`` column
        is stored uncompressed (it would shrink by only about a third and decodes several times
        faster as it is).

        ``geometry=True`` (2-D spatial releases only) adds GeoParquet leaf polygons in the
        coordinate reference system ``crs`` (:mod:`polars_dp.releases.geoparquet`); any
        other release refuses it with :class:`ParameterError`.
        ``signing_key``: an Ed25519 private key (or an HMAC secret) signing the checksum, for
        ``read_release(path, verify_key=...)`` (:mod:`polars_dp.releases.signing`).
        A path that cannot be written is a :class:`~polars_dp.errors.ReleaseWriteError` naming
        it; nothing is left behind.
        ``progress``: stage bars on stderr (building the table, writing); ``None``: on a
        terminal for large releases.
        """
        if not isinstance(geometry, (bool, np.bool_)):
            raise ParameterError(f"geometry must be True or False, got {geometry!r}", parameter="geometry")
        if crs is not None and not geometry:
            raise ParameterError("crs= describes the geometry column: give it with geometry=True")
        compression = io.check_compression(compression)  # before the table is built
        bar = Progress("write_parquet", progress, self._size())
        bar.step("building the table")
        rows = io.ROW_GROUP_ROWS
        reader = self._geometry_batches(crs, rows) if geometry else self.to_batches(rows)
        if signing_key is not None:
            reader = with_signature(reader, signing_key)
        bar.step("writing")
        written = write_batches_atomic(reader, path, compression=compression, plain=self._plain_columns)
        bar.close()
        return written

    def _geometry_batches(self, crs: object | None, rows: int) -> pa.RecordBatchReader:
        """:meth:`to_batches` of ``rows`` rows with GeoParquet geometry columns (spatial only)."""
        raise ParameterError(
            f"geometry=True needs a 2-D spatial release (SpatialRelease); a {type(self).__name__} has no "
            "geometry: write it without geometry=")

    def _size(self) -> int:
        """Rows of the release table, for progress decisions (0 when not cheap to know)."""
        return int(getattr(self, "n_cells", 0) or getattr(self, "n_leaves", 0) or 0)

    @classmethod
    def from_arrow(cls, table: pa.Table, *, unverified: bool = False) -> Release:
        """The release of ``table``, verified (``unverified=True`` accepts a table without a
        checksum, :func:`~polars_dp.releases.integrity.verify_checksum`)."""
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        if type(self) is not type(other):
            return NotImplemented
        return self.metadata() == other.metadata() and self._payload_equal(other)

    def _payload_equal(self, other: Release) -> bool:
        return self._table().equals(other._table())

    __hash__ = None  # type: ignore[assignment]  # unhashable: numpy payload (compared by value)

    # ------------------------------------------------------------------ self-description
    # What the command line and polars_dp.duckdb ask a release, so that none of them branches on
    # its type; a type that does not answer is refused with NotImplementedError naming what.

    #: ``"range"`` (``range_count / range_std / range_counts / range_interval`` over boxes of
    #: ``range_domain()``) and / or ``"frequency"`` (``frequency_table``, ``top_k``, ``alphabet``).
    query_kinds: ClassVar[tuple[str, ...]] = ()
    plot_kind: ClassVar[str] = ""  #: what ``polars-dp plot`` draws: marginals, leaves or top_strings
    column_word: ClassVar[str] = "column"  #: what a queried column is called in messages
    binned: ClassVar[bool] = False  #: range bounds fall on bins (the ``align=`` option of queries)
    #: The interval columns of ``range_counts(alpha=...)`` (``noise_*``: the counts' noise only).
    interval_columns: ClassVar[tuple[str, str]] = ("lo", "hi")

    def _undescribed(self, what: str) -> NotImplementedError:
        return NotImplementedError(f"{type(self).__name__} does not describe itself: implement {what} "
                                   "(see Release, self-description)")

    def domain_summary(self) -> dict[str, Any]:
        """The public domain as JSON-ready data."""
        raise self._undescribed("domain_summary()")

    def domain_lines(self) -> list[str]:
        """The public domain for people, one line per item."""
        raise self._undescribed("domain_lines()")

    def size_summary(self) -> dict[str, Any]:
        """The size of the payload as JSON-ready data."""
        raise self._undescribed("size_summary()")

    def size_text(self) -> str:
        """The size of the payload for people, e.g. ``"1,200 cells"``."""
        raise self._undescribed("size_text()")

    def stated_noise_scale(self) -> float | None:
        """The Laplace scale of the released values (per coefficient for wavelets) if a single one
        is stated: by default the one its plan's record states (:meth:`Plan.stated_scale`)."""
        return self._record_class.stated_scale(self.params)

    def noise_text(self) -> str | None:
        """:meth:`stated_noise_scale` for people (``None``: no single scale)."""
        scale = self.stated_noise_scale()
        if scale is None:
            return None
        per = ", per wavelet coefficient" if self._record_class.transformed_axes(self.params) else ""
        return f"{fmt_number(scale)} (Laplace{per})"

    def card_domain(self) -> dict[str, Any]:
        """The public domain as the release card states it (:meth:`domain_summary` by default)."""
        return self.domain_summary()

    def card_accuracy(self, alpha: float) -> dict[str, Any]:
        """The card's accuracy at ``alpha`` over the type's default workload
        (:mod:`polars_dp.releases.card`)."""
        raise self._undescribed("card_accuracy(alpha)")

    def exact_spend(self) -> Fraction | None:
        """The exact epsilon the card states as effective: the plan's (:attr:`Plan.epsilon_spent`),
        ``None`` when no plan is rebuilt (the card then states the recorded one)."""
        try:
            return self.plan.epsilon_spent
        except PolarsDPError:
            return None

    def report_figures(self, alpha: float) -> list[str]:
        """The report's inline SVG figures, error bars at ``alpha`` (:mod:`polars_dp.releases.report`)."""
        raise self._undescribed("report_figures(alpha)")

    def sql_names(self, name: str) -> list[str]:
        """What :meth:`to_duckdb` creates under ``name``, as a user calls it."""
        raise self._undescribed("sql_names(name)")

    def to_duckdb(self, con: Any, name: str, *, replace: bool = False) -> Any:
        """Register this release in a DuckDB connection as ``name``, through the one registration
        flow :func:`polars_dp.releases.sql.register`; returns the relation of table ``name``."""
        raise self._undescribed("to_duckdb(con, name, replace=...)")


def fmt_number(x: float) -> str:
    """A count or scale for people: thousands separators, at most 3 decimals."""
    if x == int(x) and abs(x) < 1e15:
        return f"{int(x):,}"
    return f"{x:,.3f}".rstrip("0").rstrip(".") if abs(x) >= 0.001 else f"{x:.3g}"


__all__ = ["STREAM_BATCH_ROWS", "Release", "Sealed", "fmt_number", "read_only"]
