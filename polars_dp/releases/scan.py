"""``scan_release(path)``: a release file as a lazy Polars scan, verified when it is created and
checked on every collect.

The file is read and verified in full by :func:`~polars_dp.releases.reading.read_release` (metadata,
recomputed noise parameters, every cell or leaf located by its labels, the checksum) when the
scan is created, so a file that is not a release fails there, with
:class:`~polars_dp.ReleaseFormatError`.  Right after, one pass over the file records a SHA-256
digest of its Parquet footer (row-group layout, column statistics, metadata) and of every
column chunk's bytes in every row group (:func:`chunk_digests`); the file's size, modification
time and inode must be the same before the verification and after that pass.

Collecting the scan then reads only what the query needs: Polars pushes the projection and the
predicate into the Parquet reader, which skips the row groups whose column statistics exclude
the predicate (release files are written in cell or leaf order, in row groups of
:data:`~polars_dp.releases.io.ROW_GROUP_ROWS` rows, so a filter on a leading label or box column
touches few of them).  A collect checks, against the digests: the footer first (so the
statistics that skip row groups are the verified file's) and the predicate's columns in every
row group (a row edited so that it no longer matches cannot drop out unseen); then, batch by
batch, every projected column of each row group a batch's rows come from, before the batch is
handed over.  A file edited after the scan was created, even in place with its size and
modification time restored, is refused rather than answered from.  The scan reads published
numbers only and never draws noise: collecting it twice gives the same rows.

What it does not check: an edit made and undone again between two reads of one call (while
the scan is created, or between the Parquet reader's read and a digest check of a collect);
and the statistics are taken as the verified file wrote them (they are compared byte for byte,
not recomputed).  The checksum is no signature either: whoever can write the file can write a
verified one (:mod:`polars_dp.releases.integrity`).
"""

from __future__ import annotations

import hashlib
import os
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from polars.io.plugins import register_io_source

from polars_dp.errors import ReleaseFormatError
from polars_dp.releases.grid import GridRelease
from polars_dp.releases.grid_format import label_columns
from polars_dp.releases.io import open_parquet, release_path
from polars_dp.releases.reading import read_release
from polars_dp.releases.signing import VerifyKey

#: The row-index column a collect adds to learn which row groups its rows come from.
_ROW = "__pdp_row_index"


def _stamp(path: Path) -> tuple[int, int, int]:
    try:
        st = path.stat()
    except OSError as exc:
        raise ReleaseFormatError(f"release file {str(path)!r} is gone since it was scanned: {exc}") from None
    return st.st_size, st.st_mtime_ns, st.st_ino


def _digest(fh: BinaryIO, ranges: Iterable[tuple[int, int]]) -> str:
    h = hashlib.sha256()
    for start, length in ranges:
        fh.seek(start)
        h.update(fh.read(length))
    return h.hexdigest()


def _footer_range(fh: BinaryIO) -> tuple[int, int]:
    """``(start, length)`` of the Parquet footer: its Thrift metadata, length and ``PAR1`` magic."""
    end = fh.seek(0, os.SEEK_END)
    fh.seek(end - 8)
    tail = fh.read(8)
    length = struct.unpack("<I", tail[:4])[0] + 8 if len(tail) == 8 else end
    return max(0, end - length), min(length, end)


def _leaves(t: pa.DataType) -> int:
    """Parquet leaf columns of an Arrow type (a struct or map has one per field, a list its item's)."""
    if isinstance(t, pa.DictionaryType):
        return _leaves(t.value_type)
    if t.num_fields == 0:
        return 1
    return sum(_leaves(t.field(i).type) for i in range(t.num_fields))


@dataclass(frozen=True)
class Layout:
    """Where each row group's column chunks lie in a Parquet file (from its footer): per row
    group, the byte ranges of every top-level column (a struct column has one chunk per field),
    and the first row of each row group."""

    ranges: list[dict[str, list[tuple[int, int]]]]
    first_rows: np.ndarray

    @classmethod
    def of(cls, file: pq.ParquetFile) -> Layout:
        meta = file.metadata
        owner = [f.name for f in file.schema_arrow for _ in range(_leaves(f.type))]  # leaf -> column
        ranges, rows = [], [0]
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            chunks: dict[str, list[tuple[int, int]]] = {}
            for j in range(group.num_columns):
                c = group.column(j)
                start = c.dictionary_page_offset if c.has_dictionary_page else c.data_page_offset
                chunks.setdefault(owner[j], []).append((start, c.total_compressed_size))
            ranges.append(chunks)
            rows.append(rows[-1] + group.num_rows)
        return cls(ranges, np.asarray(rows[:-1], dtype=np.int64))

    def groups_of(self, rows: np.ndarray) -> np.ndarray:
        """The row groups holding the (0-based) ``rows``."""
        return np.unique(np.searchsorted(self.first_rows, rows, side="right") - 1)


def chunk_digests(path: Path, layout: Layout) -> tuple[str, list[dict[str, str]]]:
    """SHA-256 of the footer and, per row group, of each top-level column's chunk bytes."""
    with open(path, "rb", buffering=0) as fh:
        footer = _digest(fh, [_footer_range(fh)])
        return footer, [{name: _digest(fh, r) for name, r in group.items()} for group in layout.ranges]


class _Verifier:
    """Compares what a collect read with the digests recorded when the scan was created."""

    def __init__(self, path: Path, layout: Layout, footer: str, digests: list[dict[str, str]]):
        self.path, self.layout, self.footer, self.digests = path, layout, footer, digests

    def changed(self) -> ReleaseFormatError:
        return ReleaseFormatError(f"release file {str(self.path)!r} changed after scan_release verified it; "
                                  "scan it again")

    def check_footer(self) -> None:
        try:
            with open(self.path, "rb", buffering=0) as fh:
                same = _digest(fh, [_footer_range(fh)]) == self.footer
        except OSError:
            same = False
        if not same:
            raise self.changed()

    def check(self, groups: Iterable[int], columns: Iterable[str]) -> None:
        """The chunks of ``columns`` in row groups ``groups`` are those of the verified file."""
        names = list(dict.fromkeys(columns))
        with open(self.path, "rb", buffering=0) as fh:
            for g in groups:
                for name in names:
                    if _digest(fh, self.layout.ranges[g][name]) != self.digests[g][name]:
                        raise self.changed()


def scan_release(path: str | os.PathLike, *, unverified: bool = False,
                 verify_key: VerifyKey | None = None) -> pl.LazyFrame:
    """A lazy, verified scan of the release file at ``path`` (projection and predicate pushdown,
    streaming-engine compatible).

    Rows and dtypes are those of ``read_release(path).to_polars()`` (label columns
    ``Categorical``), plus any derived columns the file holds (GeoParquet ``geometry`` and
    ``bbox``); Polars keeps no schema metadata: read it with :func:`polars_dp.read_release`.
    A file that labels a binned axis by one column (written before ``<col>_lo`` / ``<col>_hi``)
    is read whole and verified, and its frame is scanned from memory in today's columns.
    Raises :class:`~polars_dp.ReleaseFormatError` now when ``path`` is not a valid release,
    and at collect time when what the collect read differs from the verified file (module doc).
    A file without a checksum is refused unless ``unverified=True`` (:func:`polars_dp.read_release`).
    ``verify_key`` (an Ed25519 public key, or the HMAC secret) also requires a signature this key
    verifies, checked before the scan is returned, as :func:`polars_dp.read_release` does
    (:class:`~polars_dp.errors.ReleaseSignatureError` otherwise).
    """
    path = release_path(path)
    stamp = _stamp(path) if path.is_file() else None  # read_release says what is wrong otherwise
    release = read_release(path, unverified=unverified, verify_key=verify_key)  # verifies everything once
    layout = Layout.of(open_parquet(path))
    verifier = _Verifier(path, layout, *chunk_digests(path, layout))
    if stamp is None or _stamp(path) != stamp:
        raise ReleaseFormatError(f"release file {str(path)!r} changed while scan_release verified it; "
                                 "scan it again")
    schema = pl.scan_parquet(path).collect_schema()
    if isinstance(release, GridRelease) and any(name not in schema for a in release.attributes
                                                for name in label_columns(a)):
        # a binned grid axis labelled by one column (written before <col>_lo / <col>_hi): the
        # release read whole by read_release's legacy adapter, in memory, in today's columns
        return release.to_polars().lazy()

    def source(with_columns: list[str] | None, predicate: pl.Expr | None, n_rows: int | None,
               batch_size: int | None) -> Iterator[pl.DataFrame]:
        if _stamp(path) != stamp:
            raise verifier.changed()
        verifier.check_footer()
        columns = list(schema) if with_columns is None else list(with_columns)
        lf = pl.scan_parquet(path, row_index_name=_ROW)
        if predicate is not None:
            lf = lf.filter(predicate)
        lf = lf.select(*columns, _ROW)
        if n_rows is not None:
            lf = lf.head(n_rows)
        if predicate is not None:  # in every row group: the rows that do not match, too
            verifier.check(range(len(layout.ranges)), predicate.meta.root_names())
        checked: set[int] = set()
        for batch in lf.collect_batches(chunk_size=batch_size):
            groups = [int(g) for g in layout.groups_of(batch[_ROW].to_numpy()) if int(g) not in checked]
            verifier.check(groups, columns)  # before any row of these row groups is handed over
            checked.update(groups)
            yield batch.drop(_ROW)

    return register_io_source(source, schema=schema, is_pure=True, explain_name="polars_dp release",
                              explain_detail=str(path))


__all__ = ["Layout", "chunk_digests", "scan_release"]
