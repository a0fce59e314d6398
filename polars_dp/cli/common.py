"""Plumbing shared by the commands: bad-input errors, reading data, atomic output, messages.

Exit codes: 0 success, 2 bad input (:class:`BadInput`, any :class:`polars_dp.PolarsDPError`,
unreadable data or SQL), 1 anything else.  Every output file is written to a temporary file
beside its destination and renamed into place, so a failure never leaves a partial file; an
output that cannot be written is refused before any data is read (:func:`check_output`).
"""

from __future__ import annotations

import functools
import glob
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

import polars_dp as pdp
from polars_dp.releases import io
from polars_dp.releases.integrity import OPT_IN

#: Formats by file extension (input data, query files, answer files).
FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".tsv": "tsv", ".arrow": "ipc",
           ".ipc": "ipc", ".feather": "ipc", ".ndjson": "ndjson", ".jsonl": "ndjson"}


class BadInput(Exception):
    """Input the user must fix (exit code 2); the message is one line saying what to change."""


class Failure(Exception):
    """A failure that is not the input's fault (exit code 1), e.g. a missing optional dependency."""


def one_line(exc: BaseException) -> str:
    """The first non-empty line of an exception's message (Polars and DuckDB messages run long)."""
    return next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)


class Messages:
    """Stage messages and warnings on stderr; stage messages are silenced by ``--quiet``."""

    def __init__(self, quiet: bool):
        self.quiet = quiet

    def stage(self, text: str) -> None:
        if not self.quiet:
            print(f"polars-dp: {text}", file=sys.stderr, flush=True)

    @staticmethod
    def warn(text: str) -> None:
        print(f"polars-dp: warning: {text}", file=sys.stderr, flush=True)


def file_format(path: str | os.PathLike, given: str | None = None, *, what: str = "file") -> str:
    """Format of ``path`` from ``given`` (``--format``) or its extension."""
    if given:
        return given
    fmt = FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        hint = " (or --format)" if what == "DATA" else ""
        raise BadInput(f"cannot tell the format of {what} {str(path)!r} from its extension; use one of "
                       f"{', '.join(sorted(FORMATS))}{hint}")
    return fmt


def scan(source: str, fmt: str | None = None, *, what: str = "DATA") -> pl.LazyFrame:
    """A lazy scan of a Parquet / CSV / TSV / IPC / NDJSON file or glob (nothing is read yet)."""
    if glob.has_magic(source):
        matches = sorted(glob.glob(source))
        if not matches:
            raise BadInput(f"{what} {source!r} matches no file")
        suffixes = sorted({Path(m).suffix.lower() for m in matches})
        if fmt is None and len(suffixes) > 1:
            raise BadInput(f"{what} {source!r} matches files of several formats ({', '.join(suffixes)}); "
                           "narrow the glob")
        fmt = file_format(matches[0], fmt, what=what)
    else:
        path = Path(source)
        if path.is_dir():
            raise BadInput(f"{what} {source!r} is a directory; give a file or a glob such as "
                           f"'{source.rstrip('/')}/*.parquet'")
        if not path.exists():
            raise BadInput(f"{what} {source!r} does not exist")
        fmt = file_format(path, fmt, what=what)
    scanners: dict[str, Callable[[str], pl.LazyFrame]] = {
        "parquet": pl.scan_parquet, "ipc": pl.scan_ipc, "ndjson": pl.scan_ndjson,
        "csv": functools.partial(pl.scan_csv, infer_schema_length=10_000),
        "tsv": functools.partial(pl.scan_csv, separator="\t", infer_schema_length=10_000)}
    return scanners[fmt](source)


def check_output(path: str | os.PathLike, *, formats: tuple[str, ...] | None = None,
                 what: str = "output") -> Path:
    """Refuse an output path that cannot be written, before any work is done."""
    path = Path(path)
    if path.is_dir():
        raise BadInput(f"{what} {str(path)!r} is a directory; give a file path")
    if not path.parent.exists():
        raise BadInput(f"directory {str(path.parent)!r} of {what} {str(path)!r} does not exist; "
                       "create it first")
    if formats is not None:
        fmt = FORMATS.get(path.suffix.lower())
        if fmt not in formats:
            raise BadInput(f"{what} {str(path)!r}: use one of the extensions "
                           f"{', '.join(sorted(k for k, v in FORMATS.items() if v in formats))}")
    return io.check_writable(path, suffix=path.suffix)  # a read-only directory: ReleaseWriteError


def write_atomic(path: str | os.PathLike, write: Callable[[Path], object]) -> Path:
    """Call ``write(tmp)`` on a temporary file beside ``path``, then rename it to ``path``.

    A failure removes the temporary file and leaves any existing ``path`` untouched.
    """
    path = check_output(path)
    return io.write_atomic(path, write, suffix=path.suffix)


def write_frame(frame: pl.DataFrame, path: str | os.PathLike) -> Path:
    """Write ``frame`` atomically in the format of ``path``'s extension."""
    fmt = file_format(path, what="output")
    writers: dict[str, Callable[[Path], object]] = {
        "parquet": frame.write_parquet, "csv": frame.write_csv, "ipc": frame.write_ipc,
        "tsv": functools.partial(frame.write_csv, separator="\t"), "ndjson": frame.write_ndjson}
    return write_atomic(path, writers[fmt])


def open_release(path: str, unverified: bool = False) -> Any:
    """:func:`polars_dp.read_release`, with the file named in every error (which names the
    ``--unverified`` option where the library names ``unverified=True``); an unverified
    release is announced on stderr."""
    try:
        release = pdp.read_release(path, unverified=unverified)
    except pdp.ReleaseFormatError as exc:
        message = str(exc).replace(OPT_IN, "--unverified")
        if "--unverified" in message:  # a release, but nothing vouches for it
            raise BadInput(f"{str(path)!r}: {message}") from None
        if repr(str(path)) not in message:
            raise BadInput(f"{str(path)!r} is not a polars-dp release: {message}") from None
        raise
    if not release.verified:
        Messages.warn(f"{str(path)!r} is unverified: no checksum vouches for its values (--unverified)")
    return release


def human_size(n_bytes: int) -> str:
    size = float(n_bytes)
    for unit in ("B", "kB", "MB"):
        if size < 1000:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} GB"
