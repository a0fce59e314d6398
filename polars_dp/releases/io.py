"""Release files: the atomic Parquet writer and the readers of Parquet files and tables
(which release a file holds is :mod:`polars_dp.releases.reading`'s business)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from polars_dp.errors import ParameterError, ReleaseFormatError, ReleaseWriteError
from polars_dp.params import check_option

#: Rows per Parquet row group of a release file: large enough for fast full reads, small
#: enough that a filter on a sorted label column skips most of a large file and that a
#: reader holds little more than one group's column chunk (2 MB of float64 counts).
ROW_GROUP_ROWS = 1 << 18


def write_atomic(path: str | os.PathLike, write: Callable[[Path], object], *, suffix: str = ".tmp") -> Path:
    """Call ``write(tmp)`` on a temporary file beside ``path``, then rename it into place.

    A failure leaves no partial file behind, and an existing file at ``path`` is only
    replaced by a complete one.  The file gets the usual permissions (``0666 & ~umask``).
    A path that cannot be written (a read-only directory or file system, a parent that is not
    a directory) is a :class:`ReleaseWriteError` naming ``path``, never the temporary file.
    """
    path = Path(path)
    tmp = _temporary_file(path, suffix)
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600
        write(tmp)
        os.replace(tmp, path)
    except BaseException as exc:
        if tmp.exists():
            tmp.unlink()
        if isinstance(exc, OSError) and not isinstance(exc, ReleaseWriteError):
            raise write_error(path, exc) from None  # e.g. no space left on the device
        raise
    return path


def check_writable(path: str | os.PathLike, *, suffix: str = ".tmp") -> Path:
    """Refuse a ``path`` that :func:`write_atomic` could not write, before any work is done
    (the same errors): a temporary file is created beside it and removed at once."""
    path = Path(path)
    _temporary_file(path, suffix).unlink()
    return path


def _temporary_file(path: Path, suffix: str) -> Path:
    """A new empty file beside ``path`` (hidden, named after it), or the error saying why
    ``path`` cannot be written."""
    if path.is_dir():
        raise ParameterError(f"{str(path)!r} is a directory; give a file path such as 'release.parquet'")
    if not path.parent.exists():
        raise ParameterError(f"directory {str(path.parent)!r} does not exist; create it first")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    except OSError as exc:
        raise write_error(path, exc, created=False) from None
    os.close(fd)
    return Path(tmp)


def write_error(path: Path, exc: OSError, *, created: bool = True) -> ReleaseWriteError:
    """The error of a write to ``path`` that failed with ``exc`` (whose message may name a
    temporary file), said of the path the caller gave; ``created=False``: no file could be
    created in its directory at all."""
    reason = exc.strerror.lower() if exc.strerror else (str(exc) or type(exc).__name__).rstrip(".")
    if not created:
        return ReleaseWriteError(f"cannot write {str(path)!r}: its directory {str(path.parent)!r} takes "
                                 f"no new file ({reason}); give a path in a writable directory",
                                 str(path))
    return ReleaseWriteError(f"cannot write {str(path)!r}: {reason}; nothing was written", str(path))


def write_table_atomic(table: pa.Table, path: str | os.PathLike, **kwargs: Any) -> Path:
    """Write ``table`` to Parquet at ``path`` atomically (:func:`write_atomic`)."""
    return write_atomic(path, lambda tmp: pq.write_table(table, tmp, **kwargs))


#: The Parquet codecs a release file may be written with (``compression=``; any case).
COMPRESSIONS = ("zstd", "snappy", "gzip", "brotli", "lz4", "lz4_raw", "none")


def check_compression(compression: object) -> str:
    """``compression`` in lower case if it is one of :data:`COMPRESSIONS` (and this pyarrow
    build has it; ``None`` is ``"none"``, as pyarrow reads it), else a ParameterError listing
    them, before anything is written."""
    if compression is None:
        return "none"
    accepted = tuple(c for c in COMPRESSIONS if c == "none" or pa.Codec.is_available(c))
    value = compression.lower() if isinstance(compression, str) else compression
    return check_option(value, "compression", accepted)


def column_options(names: Sequence[str], compression: str, plain: Sequence[str] = ()) -> dict[str, Any]:
    """``ParquetWriter`` options: ``compression`` (:func:`check_compression`) and dictionary
    encoding for every column but those in ``plain``, which are stored PLAIN and uncompressed
    (noisy counts: zstd saves about a third of their bytes but decodes several times slower
    than a copy)."""
    compression = check_compression(compression)
    if not plain:
        return {"compression": compression}
    return {"compression": {n: ("none" if n in plain else compression) for n in names},
            "use_dictionary": [n for n in names if n not in plain]}


def write_batches_atomic(reader: pa.RecordBatchReader, path: str | os.PathLike, *,
                         plain: Sequence[str] = (), compression: str = "zstd", **kwargs: Any) -> Path:
    """Write the batches of ``reader`` to Parquet at ``path`` atomically (:func:`write_atomic`),
    in row groups of at most :data:`ROW_GROUP_ROWS` rows with column statistics; the schema
    metadata of ``reader`` is kept.  Columns named in ``plain`` are stored PLAIN, uncompressed,
    without a dictionary (:func:`column_options`); the others with ``compression``
    (a ParameterError before anything is written unless :func:`check_compression` accepts it)."""
    options = {**column_options(reader.schema.names, compression, plain), **kwargs}

    def write(tmp: Path) -> None:
        with pq.ParquetWriter(tmp, reader.schema, write_statistics=True, **options) as writer:
            for batch in reader:
                writer.write_batch(batch, row_group_size=ROW_GROUP_ROWS)
    return write_atomic(path, write)


def release_path(source: object, *, tables: bool = False) -> Path:
    """``source`` as a Path; ParameterError for anything but a str or os.PathLike (``tables``:
    the caller also reads a pyarrow Table, which the message then offers)."""
    if not isinstance(source, (str, os.PathLike)):
        table = " or a pyarrow Table" if tables else ""
        raise ParameterError(f"a release is read from a path (a str or os.PathLike){table}, got "
                             f"{type(source).__name__}", parameter="source")
    return Path(source)


def _read(source: str | os.PathLike, read: Callable[[Path], Any]) -> Any:
    """``read(path)`` of the release file ``source``, with clear errors."""
    path = release_path(source, tables=True)
    if not path.exists():
        raise ReleaseFormatError(f"no release at {str(path)!r}: the file does not exist")
    if path.is_dir():
        raise ReleaseFormatError(
            f"{str(path)!r} is a directory; a release is one Parquet file (reading a folder "
            "would merge several releases into one)"
        )
    try:
        return read(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise ReleaseFormatError(f"{str(path)!r} is not a readable Parquet file: {exc}") from None


def read_table(source: str | os.PathLike | pa.Table) -> pa.Table:
    """The Arrow table of a release file (or the table itself), with clear errors."""
    return source if isinstance(source, pa.Table) else _read(source, pq.read_table)


def open_parquet(source: str | os.PathLike, **kwargs: Any) -> pq.ParquetFile:
    """A release file opened for reading in batches (its schema and metadata read), with the
    errors of :func:`read_table`; ``kwargs`` go to ``pyarrow.parquet.ParquetFile`` (e.g.
    ``buffer_size``)."""
    return _read(source, lambda path: pq.ParquetFile(path, **kwargs))


__all__ = ["ROW_GROUP_ROWS", "check_writable", "column_options", "open_parquet", "read_table", "release_path",
           "write_atomic", "write_batches_atomic", "write_error", "write_table_atomic"]
