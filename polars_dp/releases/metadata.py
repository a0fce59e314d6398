"""The ``polars_dp.*`` schema-metadata codec of release tables.

Keys are bytes under the ``polars_dp.`` prefix; values are JSON text (strings stored as is).
Arrow IPC and pyarrow Parquet keep schema metadata; Polars and DuckDB conversions drop it, so
every export path re-attaches it with :func:`attach_metadata`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

META_PREFIX = "polars_dp."


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
    out = {}
    for k, v in (schema.metadata or {}).items():
        key = k.decode()
        if key.startswith(META_PREFIX):
            out[key[len(META_PREFIX):]] = v.decode()
    return out


__all__ = ["META_PREFIX", "attach_metadata", "encode_metadata", "read_metadata"]
