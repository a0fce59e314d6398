"""``scan_release(path)``: a release file as a lazy Polars scan, verified once when it is created.

The file is read and verified in full by :func:`~polars_dp.releases.io.read_release` (metadata,
recomputed noise parameters, every cell or leaf located by its labels, the checksum) when the
scan is created, so a file that is not a release fails there, with
:class:`~polars_dp.ReleaseFormatError`.  Collecting the scan then reads only what the query
needs: Polars pushes the projection and the predicate into the Parquet reader, which skips the
row groups whose column statistics exclude the predicate (release files are written in cell or
leaf order, in row groups of :data:`~polars_dp.releases.io.ROW_GROUP_ROWS` rows, so a filter on
a leading label or box column touches few of them).  The scan reads published numbers only and
never draws noise: collecting it twice gives the same rows.  The file must not change after it
was verified: its size, modification time and inode are checked on every collect.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import polars as pl
from polars.io.plugins import register_io_source

from polars_dp.errors import ReleaseFormatError
from polars_dp.releases.io import read_release


def _stamp(path: Path) -> tuple[int, int, int]:
    try:
        st = path.stat()
    except OSError as exc:
        raise ReleaseFormatError(f"release file {str(path)!r} is gone since it was scanned: {exc}") from None
    return st.st_size, st.st_mtime_ns, st.st_ino


def scan_release(path: str | os.PathLike, *, unverified: bool = False) -> pl.LazyFrame:
    """A lazy, verified scan of the release file at ``path`` (projection and predicate pushdown,
    streaming-engine compatible).

    Rows and dtypes are those of ``read_release(path).to_polars()`` (label columns
    ``Categorical``), plus any derived columns the file holds (GeoParquet ``geometry`` and
    ``bbox``); Polars keeps no schema metadata: read it with :func:`polars_dp.read_release`.
    Raises :class:`~polars_dp.ReleaseFormatError` now when
    ``path`` is not a valid release, and at collect time when the file changed since.
    A file without a checksum is refused unless ``unverified=True`` (:func:`polars_dp.read_release`).
    """
    path = Path(path)
    read_release(path, unverified=unverified)  # verifies everything once; the release is not kept
    stamp = _stamp(path)
    schema = pl.scan_parquet(path).collect_schema()

    def source(with_columns: list[str] | None, predicate: pl.Expr | None, n_rows: int | None,
               batch_size: int | None) -> Iterator[pl.DataFrame]:
        if _stamp(path) != stamp:
            raise ReleaseFormatError(
                f"release file {str(path)!r} changed after scan_release verified it; scan it again")
        lf = pl.scan_parquet(path)
        if with_columns is not None:
            lf = lf.select(with_columns)
        if predicate is not None:
            lf = lf.filter(predicate)
        if n_rows is not None:
            lf = lf.head(n_rows)
        yield from lf.collect_batches(chunk_size=batch_size)

    return register_io_source(source, schema=schema, is_pure=True, explain_name="polars_dp release",
                              explain_detail=str(path))


__all__ = ["scan_release"]
