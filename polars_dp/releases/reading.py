"""Reading a release: the registry of release types and :func:`read_release`.

Each release class registers its ``release_type`` here (:func:`register_release_type`);
:func:`read_release` reads the ``polars_dp.release_type`` metadata entry and hands the table
to that class's ``from_arrow`` (or ``from_parquet``), which re-plans it
(:meth:`~polars_dp.releases.base.Release._replan`) and places its payload, verified before
anything is answered from it.
"""

from __future__ import annotations

import os

import pyarrow as pa

from polars_dp.errors import ReleaseFormatError
from polars_dp.releases.base import Release
from polars_dp.releases.io import open_parquet, read_table
from polars_dp.releases.metadata import format_of, read_metadata
from polars_dp.releases.signing import VerifyKey, check_signature

_RELEASE_TYPES: dict[str, type[Release]] = {}


def register_release_type(cls: type[Release]) -> type[Release]:
    """Class decorator: make ``cls.release_type`` readable by :func:`read_release`."""
    _RELEASE_TYPES[cls.release_type] = cls
    return cls


def release_class(meta: dict[str, str]) -> type[Release]:
    """The registered release type that ``meta`` (a table's ``polars_dp.*`` entries) names."""
    format_of(meta)  # a newer layout is refused as such, before its type is looked up
    kind = meta.get("release_type")
    if kind is None:
        raise ReleaseFormatError(
            "this table has no polars_dp.release_type metadata: it was not written by polars-dp "
            "(or its metadata was dropped, e.g. by a Polars or DuckDB round trip)"
        )
    if kind not in _RELEASE_TYPES:
        raise ReleaseFormatError(f"unknown release type {kind!r}; known: {sorted(_RELEASE_TYPES)}")
    return _RELEASE_TYPES[kind]


def read_release(source: str | os.PathLike | pa.Table, *, unverified: bool = False,
                 verify_key: VerifyKey | None = None) -> Release:
    """Read a release from a Parquet file (or an Arrow table) written by polars-dp.

    The release class verifies the table before anything is answered from it (metadata
    types, recomputed noise parameters, cells or leaves located by their label columns, the
    checksum; :mod:`polars_dp.releases.integrity`): an edited, reordered-and-damaged or
    truncated file raises :class:`ReleaseFormatError` naming what is wrong.  A class with a
    ``from_parquet`` reads a file itself (e.g. in batches).

    The checksum detects accidental corruption and truncation, not forgery (whoever edits a
    file can recompute it).  A table without one (written by 0.1.0, or with its checksum
    removed) is refused unless ``unverified=True``; the release then has ``verified`` False
    and says so in its ``repr`` and in anything written from it.  ``verify_key`` (an Ed25519
    public key, or the HMAC secret) also requires a signature made with
    ``write_parquet(signing_key=...)`` that this key verifies
    (:class:`~polars_dp.errors.ReleaseSignatureError` otherwise; :mod:`polars_dp.releases.signing`).

    >>> import os, tempfile, polars as pl, polars_dp as pdp
    >>> release = pdp.basic(pl.DataFrame({"age": [23, 35, 61]}), [pdp.Ordinal("age", 0, 99)], epsilon=1.0)
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = release.write_parquet(os.path.join(folder, "ages.parquet"))
    ...     back = pdp.read_release(path)
    ...     print(back == release, back.verified)
    True True
    """
    meta = read_metadata(source if isinstance(source, pa.Table) else open_parquet(source).schema_arrow)
    cls = release_class(meta)
    if verify_key is not None:
        check_signature(meta, verify_key)  # of the stored checksum; the class checks the content
    if not isinstance(source, pa.Table) and hasattr(cls, "from_parquet"):
        return cls.from_parquet(source, unverified=unverified)
    return cls.from_arrow(read_table(source), unverified=unverified)


__all__ = ["read_release", "register_release_type"]
