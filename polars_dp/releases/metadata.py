"""The ``polars_dp.*`` schema-metadata codec of release tables: one layout for every release type.

Keys are bytes under the ``polars_dp.`` prefix; values are JSON text (strings stored as is).
Arrow IPC and pyarrow Parquet keep schema metadata; Polars and DuckDB conversions drop it, so
every export path re-attaches it with :func:`attach_metadata`.

The layout (format :data:`FORMAT_VERSION`; ``docs/release-format.md``), the same for every type:

* the header (:data:`HEADER_KEYS`): ``format``, ``release_type``, ``mechanism``, ``epsilon``,
  ``neighbours``, ``noise``, ``seeded``, ``version`` (of the library) and ``created``;
* ``params``: one JSON object, the only place of the mechanism's parameters, budget split and
  noise scales (and of the post-processing applied);
* the release type's own entries (``Release.metadata_entries``): its public domain, the size of
  its payload and how its noise is described (a grid: ``attributes``, ``shape``,
  ``noise_scale``);
* ``unverified`` (``true``), only in what is written from a release read with
  ``unverified=True`` (:data:`~polars_dp.releases.integrity.UNVERIFIED_KEY`);
* ``checksum`` over all of the above and the payload
  (:func:`~polars_dp.releases.integrity.payload_checksum`);
* ``signature``, optional: a keyed signature over the checksum
  (:mod:`polars_dp.releases.signing`).

:func:`release_metadata` writes it; :func:`decode_metadata` reads it back, every header field
checked.  Files without a ``format`` entry are format 1 (0.1.0 and the writers before the
format was numbered), whose spatial and sequence files also copied parameters beside
``params``: :func:`from_format_1` is the one adapter that reads them (each copy must equal its
``params`` entry, then it is dropped); with it, :data:`FORMER_PARAMS` reads the entries that files
before 0.5 spelled differently under their current names.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from polars_dp.errors import ReleaseFormatError
from polars_dp.releases.integrity import (
    CHECKSUM_KEY,
    SIGNATURE_KEY,
    UNVERIFIED_KEY,
    check_epsilon,
    check_equal,
    check_mechanism,
    check_neighbours,
    field,
)

META_PREFIX = "polars_dp."
#: The metadata layout this version writes; :data:`READABLE_FORMATS` are those it reads.
FORMAT_VERSION = 2
READABLE_FORMATS = (1, 2)
FORMAT_KEY = "format"
PARAMS_KEY = "params"
#: The entries every release writes first, whatever its type.
HEADER_KEYS = (FORMAT_KEY, "release_type", "mechanism", "epsilon", "neighbours", "noise", "seeded",
               "version", "created")
#: Entries outside the header and ``params`` that no release type may declare as its own.
RESERVED_KEYS = (PARAMS_KEY, UNVERIFIED_KEY, CHECKSUM_KEY, SIGNATURE_KEY)
#: How noise was drawn: exact integer/lattice samplers, or numpy's floating-point Laplace.
NOISE_KINDS = ("exact", "float")


def encode_metadata(metadata: Mapping[str, Any]) -> dict[str, str]:
    """The text of every entry as stored: JSON unless the value is a str."""
    return {key: value if isinstance(value, str) else json.dumps(value) for key, value in metadata.items()}


def attach_metadata(table: pa.Table, metadata: Mapping[str, Any]) -> pa.Table:
    """Return ``table`` with ``polars_dp.*`` schema metadata (values JSON-encoded unless str)."""
    meta = dict(table.schema.metadata or {})
    for key, text in encode_metadata(metadata).items():
        meta[(META_PREFIX + key).encode()] = text.encode()
    return table.replace_schema_metadata(meta)


def read_metadata(table_or_schema: pa.Table | pa.Schema) -> dict[str, str]:
    """The ``polars_dp.*`` metadata of a table, prefix stripped, values as text."""
    schema = table_or_schema.schema if isinstance(table_or_schema, pa.Table) else table_or_schema
    entries = ((k.decode(), v) for k, v in (schema.metadata or {}).items())
    return {k[len(META_PREFIX):]: v.decode() for k, v in entries if k.startswith(META_PREFIX)}


def release_metadata(header: Mapping[str, Any], params: Mapping[str, Any],
                     entries: Mapping[str, Any], declared: Sequence[str], *,
                     unverified: bool = False) -> dict[str, Any]:
    """The metadata of a release in the layout (module docstring): ``header`` (every key of
    :data:`HEADER_KEYS` but ``format``), ``params``, then the type's ``entries`` (only keys it
    ``declared``, in that order; absent ones are not written) and, for a release that was read
    unverified, ``unverified: true``.

    >>> meta = release_metadata({"release_type": "grid", "mechanism": "basic", "epsilon": 1.0,
    ...     "neighbours": "replace", "noise": "exact", "seeded": True, "version": "0.4.0",
    ...     "created": "2026-01-01T00:00:00+00:00"}, {"sensitivity": 2}, {"shape": [4]},
    ...     ("attributes", "shape"))
    >>> list(meta)[:2], meta["format"], list(meta)[-2:]
    (['format', 'release_type'], 2, ['params', 'shape'])
    """
    unknown = set(entries) - set(declared)
    missing = set(HEADER_KEYS[1:]) ^ set(header)
    if unknown or missing or set(declared) & {*HEADER_KEYS, *RESERVED_KEYS}:
        raise ValueError(f"metadata layout: header keys {sorted(missing)} or entries {sorted(unknown)} "
                         f"out of place (declared {list(declared)})")
    out: dict[str, Any] = {FORMAT_KEY: FORMAT_VERSION, **{k: header[k] for k in HEADER_KEYS[1:]},
                           PARAMS_KEY: dict(params)}
    out.update((k, entries[k]) for k in declared if k in entries)
    if unverified:
        out[UNVERIFIED_KEY] = True
    return out


@dataclass(frozen=True)
class DecodedMetadata:
    """A release table's metadata, read: the stored text (what the checksum covers), its format,
    the constructor arguments every release shares (``common``, each field checked) and the
    type's own entries (text; :meth:`entry` parses one)."""

    text: Mapping[str, str]
    format: int
    common: dict[str, Any]
    entries: Mapping[str, str]

    def entry(self, key: str, parse: Any = lambda x: x, *, json_value: bool = True,
              default: Any = ...) -> Any:
        """``parse`` of the type's entry ``key`` (:func:`~polars_dp.releases.integrity.field`)."""
        return field(self.entries, key, parse, json_value=json_value, default=default)

    def __contains__(self, key: object) -> bool:
        return key in self.entries


def format_of(meta: Mapping[str, str]) -> int:
    """The layout number of a table's metadata text: its ``format`` entry, 1 without one; a
    format this version does not read is a :class:`ReleaseFormatError` saying so."""
    def check(value: Any) -> int:
        if isinstance(value, bool) or value not in READABLE_FORMATS:
            raise ReleaseFormatError(
                f"release metadata field 'format' is {value!r}: this version of polars-dp reads the "
                f"formats {list(READABLE_FORMATS)} (a newer format needs a newer polars-dp)")
        return int(value)
    return field(meta, FORMAT_KEY, check, default=1)


def from_format_1(meta: Mapping[str, str], declared: Sequence[str]) -> dict[str, str]:
    """The one legacy adapter: a format-1 table's entries in the current layout.  Format 1 wrote
    no ``format`` entry and copied parameters beside ``params`` (spatial files every one of
    them, sequence files ``lambda``, ``delta``, ``tree_share``, ...): each such copy must equal
    its ``params`` entry (else the file was edited) and is dropped; nothing else changed."""
    params = field(meta, PARAMS_KEY, default={})
    layout = {*HEADER_KEYS, *RESERVED_KEYS, *declared}
    out = {}
    for key, text in meta.items():
        if key in layout:
            out[key] = text
        elif isinstance(params, dict) and key in params:
            copy = text if isinstance(params[key], str) else field(meta, key)
            check_equal(key, copy, params[key])
    return out


#: ``params`` entries that files written before 0.5 spell differently (sequence models wrote
#: ``eps_*`` where every other release writes ``epsilon_*``): the legacy adapter's one table of
#: former names, read as the current ones.
FORMER_PARAMS = {"eps_tree": "epsilon_tree", "eps_leaf": "epsilon_leaf", "eps_length": "epsilon_length"}


def _params(value: Any) -> dict[str, Any]:
    """The ``params`` object, former entry names (:data:`FORMER_PARAMS`) read as the current ones."""
    if not isinstance(value, dict):
        raise ReleaseFormatError(f"release metadata field 'params' must be an object, got {value!r}")
    current = {str(k): FORMER_PARAMS.get(str(k), str(k)) for k in value}
    return {k if current[k] in value else current[k]: v for k, v in value.items()}


def _noise(value: Any) -> str:
    if value not in NOISE_KINDS:
        raise ReleaseFormatError(f"release metadata field 'noise' must be one of {NOISE_KINDS}, "
                                 f"got {value!r}")
    return value


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ReleaseFormatError(f"release metadata field 'seeded' must be true or false, got {value!r}")
    return value


def _text(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ReleaseFormatError(f"release metadata text field is not text: {value!r}")
    return value


def decode_metadata(meta: Mapping[str, str], declared: Sequence[str]) -> DecodedMetadata:
    """Read the metadata text of a table whose type ``declared`` its entries: the format, the
    legacy adapter for format 1 (:func:`from_format_1`), and every header field checked (a
    malformed one is a :class:`ReleaseFormatError` naming it).  Files without ``noise`` /
    ``seeded`` (0.1.0) used the float sampler; whether a seed was used is unknown there and
    read as ``False``.  Entries outside the layout are not read (the checksum covers them)."""
    version = format_of(meta)
    layout = from_format_1(meta, declared) if version == 1 else meta
    common = {
        "mechanism": field(layout, "mechanism", check_mechanism, json_value=False),
        "epsilon": field(layout, "epsilon", check_epsilon),
        "neighbours": field(layout, "neighbours", check_neighbours, json_value=False),
        "params": field(layout, PARAMS_KEY, _params, default={}),
        "created": field(layout, "created", _text, json_value=False, default=None),
        "library_version": field(layout, "version", _text, json_value=False, default=None),
        "noise": field(layout, "noise", _noise, json_value=False, default="float"),
        "seeded": field(layout, "seeded", _flag, default=False),
    }
    entries = {k: layout[k] for k in declared if k in layout}
    return DecodedMetadata(dict(meta), version, common, entries)


def read_release_metadata(table_or_schema: pa.Table | pa.Schema, declared: Sequence[str]) -> DecodedMetadata:
    """:func:`decode_metadata` of a table's (or schema's) ``polars_dp.*`` metadata."""
    return decode_metadata(read_metadata(table_or_schema), declared)


__all__ = ["FORMAT_KEY", "FORMAT_VERSION", "HEADER_KEYS", "META_PREFIX", "NOISE_KINDS", "PARAMS_KEY",
           "READABLE_FORMATS", "RESERVED_KEYS", "DecodedMetadata", "attach_metadata", "decode_metadata",
           "encode_metadata", "format_of", "from_format_1", "read_metadata", "read_release_metadata",
           "release_metadata"]
