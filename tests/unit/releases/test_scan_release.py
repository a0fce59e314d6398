"""pdp.scan_release: verified once at creation, then a lazy scan with projection and predicate pushdown."""

from __future__ import annotations

import os

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import polars_dp as pdp
from polars_dp.releases import io as release_io
from tests.helpers import V0_1_0_FILES

ROWS_PER_GROUP = 1_000


@pytest.fixture
def small_row_groups(monkeypatch):
    monkeypatch.setattr(release_io, "ROW_GROUP_ROWS", ROWS_PER_GROUP)
    return ROWS_PER_GROUP


def grid(n_age=100, n_inner=1_000):
    rng = np.random.default_rng(0)
    n = 5_000
    df = pl.DataFrame({"age": rng.integers(0, n_age, n), "income": rng.integers(0, n_inner, n),
                       "city": rng.choice(["a", "b"], n)})
    attrs = [pdp.Ordinal("age", 0, n_age - 1), pdp.Ordinal("income", 0, n_inner - 1),
             pdp.Nominal("city", ["a", "b"])]
    return df.dp.basic(attrs, epsilon=1.0, seed=4)


@pytest.fixture(scope="module")
def grid_release():
    return grid()


def rchar() -> int:
    with open("/proc/self/io") as fh:
        for line in fh:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    raise OSError("no rchar")


def test_scan_equals_the_verified_release(tmp_path, grid_release, small_row_groups):
    path = grid_release.write_parquet(tmp_path / "r.parquet")
    lf = pdp.scan_release(path)
    assert isinstance(lf, pl.LazyFrame)
    expected = pdp.read_release(path).to_polars()
    assert lf.collect().equals(expected)
    assert lf.collect().equals(lf.collect())  # the same rows every time (no noise drawn)
    assert lf.collect(engine="streaming").equals(expected)
    assert lf.collect_schema() == expected.schema


def test_projection_and_predicate(tmp_path, grid_release, small_row_groups):
    path = grid_release.write_parquet(tmp_path / "r.parquet")
    lf = pdp.scan_release(path)
    got = lf.filter(pl.col("age").is_between(10, 12), pl.col("city") == "b").select("income", "count")
    want = (grid_release.to_polars().filter(pl.col("age").is_between(10, 12), pl.col("city") == "b")
            .select("income", "count"))
    assert got.collect().equals(want)
    assert got.collect(engine="streaming").equals(want)
    assert lf.head(7).collect().equals(grid_release.to_polars().head(7))
    total = lf.filter(pl.col("age") == 3).select(pl.col("count").sum()).collect().item()
    assert total == pytest.approx(grid_release.range_count(age=(3, 3)), rel=1e-9, abs=1e-6)


def test_row_groups_are_sorted_by_cell_with_statistics(tmp_path, grid_release, small_row_groups):
    path = grid_release.write_parquet(tmp_path / "r.parquet")
    meta = pq.ParquetFile(path).metadata
    assert meta.num_row_groups == -(-grid_release.n_cells // ROWS_PER_GROUP)
    age = meta.schema.to_arrow_schema().get_field_index("age")
    stats = [meta.row_group(i).column(age).statistics for i in range(meta.num_row_groups)]
    assert all(s is not None and s.has_min_max for s in stats)
    mins, maxs = [s.min for s in stats], [s.max for s in stats]
    assert mins == sorted(mins) and all(lo <= hi for lo, hi in zip(mins, maxs, strict=True))
    assert pdp.read_release(path) == grid_release  # checksum semantics unchanged


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="needs Linux /proc/self/io")
def test_a_narrow_filter_reads_a_small_part_of_the_file(tmp_path, grid_release, small_row_groups):
    path = grid_release.write_parquet(tmp_path / "r.parquet")
    lf = pdp.scan_release(path)
    before = rchar()
    lf.collect()
    full = rchar() - before
    before = rchar()
    narrow = lf.filter(pl.col("age") == 42).collect()  # 1 % of the cells, 2 of 200 row groups
    part = rchar() - before
    assert narrow.height == grid_release.n_cells // 100
    assert part < 0.1 * full, (part, full)
    before = rchar()
    ages = lf.select("age").collect()  # projection: the noisy counts (most of the bytes) are not read
    projected = rchar() - before
    assert ages.width == 1 and ages.height == grid_release.n_cells
    assert projected < 0.5 * full, (projected, full)


def test_spatial_scan_filters_on_box_columns(tmp_path, small_row_groups):
    rng = np.random.default_rng(1)
    df = pl.DataFrame({"x": rng.uniform(0, 1, 20_000), "y": rng.uniform(0, 1, 20_000)})
    release = df.dp.uniform_grid(["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=1.0, seed=2, n=20_000)
    path = release.write_parquet(tmp_path / "t.parquet")
    got = pdp.scan_release(path).filter(pl.col("x_lo") >= 0.5).collect()
    assert got.equals(release.to_polars().filter(pl.col("x_lo") >= 0.5))


def test_not_a_release_fails_at_scan_time(tmp_path):
    with pytest.raises(pdp.ReleaseFormatError, match="does not exist"):
        pdp.scan_release(tmp_path / "missing.parquet")
    plain = tmp_path / "plain.parquet"
    pl.DataFrame({"a": [1, 2]}).write_parquet(plain)
    with pytest.raises(pdp.ReleaseFormatError, match="release_type"):
        pdp.scan_release(plain)
    junk = tmp_path / "junk.parquet"
    junk.write_bytes(b"not parquet")
    with pytest.raises(pdp.ReleaseFormatError, match="not a readable Parquet"):
        pdp.scan_release(junk)
    with pytest.raises(pdp.ReleaseFormatError, match="directory"):
        pdp.scan_release(tmp_path)


def test_an_edited_release_fails_at_scan_time(tmp_path, grid_release):
    path = grid_release.write_parquet(tmp_path / "r.parquet")
    table = pq.read_table(path)
    counts = table.column("count").to_numpy().copy()
    counts[5] += 1.0
    edited = table.set_column(table.schema.get_field_index("count"), "count", pa.array(counts))
    pq.write_table(edited, path)
    with pytest.raises(pdp.ReleaseFormatError, match="checksum"):
        pdp.scan_release(path)


def test_a_file_changed_after_the_scan_is_refused_at_collect(tmp_path, grid_release):
    path = grid_release.write_parquet(tmp_path / "r.parquet")
    lf = pdp.scan_release(path)
    other = grid(n_age=10, n_inner=10)
    other.write_parquet(path)  # a valid release, but not the one that was verified
    with pytest.raises((pdp.ReleaseFormatError, pl.exceptions.PolarsError), match="changed after"):
        lf.collect()


# ---------------------------------------------------------------------- every collect verifies what it reads
def edit_count_in_place(path, release, cell: int, delta: float) -> None:
    """Overwrite the stored ``count`` of ``cell`` (a PLAIN float64) with ``count + delta``, in place:
    same size, same inode, the modification time restored."""
    meta = pq.ParquetFile(path).metadata
    index = meta.schema.to_arrow_schema().get_field_index("count")
    rows = 0
    for group in range(meta.num_row_groups):
        if rows + meta.row_group(group).num_rows > cell:
            break
        rows += meta.row_group(group).num_rows
    chunk = meta.row_group(group).column(index)
    start = chunk.dictionary_page_offset or chunk.data_page_offset
    value = float(release.counts.reshape(-1)[cell])
    data = bytearray(path.read_bytes())
    region = data[start:start + chunk.total_compressed_size]
    old, new = np.float64(value).tobytes(), np.float64(value + delta).tobytes()
    at = start + bytes(region).index(old, 8 * (cell - rows))  # the cell's own value
    stat = os.stat(path)
    with open(path, "r+b") as fh:
        fh.seek(at)
        fh.write(new)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (stat.st_size, stat.st_mtime_ns, stat.st_ino)
    data[at:at + 8] = new
    assert path.read_bytes() == bytes(data)


def test_an_in_place_edit_after_the_scan_is_refused_at_collect(tmp_path, grid_release, small_row_groups):
    """The issue's case: a same-size edit with the modification time restored turned a sum of 477
    into 1,000,477; read_release refuses the file, so must every collect that reads the edit."""
    path = grid_release.write_parquet(tmp_path / "r.parquet")
    lf = pdp.scan_release(path)
    cell = 3 * ROWS_PER_GROUP + 17  # in the fourth row group: age 1 (2,000 cells per age)
    edit_count_in_place(path, grid_release, cell, 1_000_000.0)
    with pytest.raises(pdp.ReleaseFormatError, match="checksum"):
        pdp.read_release(path)
    for query in (lf, lf.select(pl.col("count").sum()), lf.filter(pl.col("age") == 1),
                  lf.filter(pl.col("age") == 1).select("count")):
        with pytest.raises((pdp.ReleaseFormatError, pl.exceptions.PolarsError), match="changed after"):
            query.collect()
        with pytest.raises((pdp.ReleaseFormatError, pl.exceptions.PolarsError), match="changed after"):
            query.collect(engine="streaming")
    # a query whose rows all lie in row groups that were not edited reads only verified values
    other = lf.filter(pl.col("age") == 7).select(pl.col("count").sum()).collect().item()
    assert other == pytest.approx(grid_release.range_count(age=(7, 7)), rel=1e-9, abs=1e-6)


def test_a_predicate_column_is_verified_in_every_row_group(tmp_path, grid_release, small_row_groups):
    """A filter on count reads the count column of every row group: an edit anywhere is refused
    (a row changed so that it no longer matches would otherwise drop out unseen)."""
    path = grid_release.write_parquet(tmp_path / "r.parquet")
    lf = pdp.scan_release(path)
    big = float(np.abs(grid_release.counts).max()) + 10.0
    assert lf.filter(pl.col("count") > big).collect().height == 0
    edit_count_in_place(path, grid_release, 150 * ROWS_PER_GROUP + 5, 2 * big)
    with pytest.raises((pdp.ReleaseFormatError, pl.exceptions.PolarsError), match="changed after"):
        lf.filter(pl.col("count") > big).select("age").collect()


def test_every_old_release_file_scans_as_it_reads():
    for path in V0_1_0_FILES:
        expected = pdp.read_release(path, unverified=True).to_polars()
        assert pdp.scan_release(path, unverified=True).collect().equals(expected, null_equal=True), path


def test_an_edited_footer_is_refused_at_collect(tmp_path, grid_release, small_row_groups):
    """The footer holds the row-group layout and the statistics that decide which row groups a
    filter skips: a same-size edit of it after the scan is refused too."""
    path = grid_release.write_parquet(tmp_path / "r.parquet")
    lf = pdp.scan_release(path)
    created = pdp.read_release(path).metadata()["created"].encode()
    data = path.read_bytes()
    at = data.rindex(created)
    stat = os.stat(path)
    with open(path, "r+b") as fh:
        fh.seek(at)
        fh.write(created.replace(b"20", b"19", 1))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    with pytest.raises((pdp.ReleaseFormatError, pl.exceptions.PolarsError), match="changed after"):
        lf.filter(pl.col("age") == 42).collect()


def test_a_column_name_with_a_dot_is_checked_as_one_column(tmp_path, small_row_groups):
    df = pl.DataFrame({"age.years": np.arange(3_000) % 50})
    release = pdp.basic(df, [pdp.Ordinal("age.years", 0, 49)], epsilon=1.0, seed=1)
    path = release.write_parquet(tmp_path / "dots.parquet")
    got = pdp.scan_release(path).filter(pl.col("age.years") < 10).collect()
    assert got.equals(release.to_polars().filter(pl.col("age.years") < 10))
