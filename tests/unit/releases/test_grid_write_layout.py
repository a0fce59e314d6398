"""Grid files: the noisy count column stored PLAIN and uncompressed, labels dictionary-encoded
and compressed; the write-order check of a label column against every start, stride and length."""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest

import polars_dp as pdp
import polars_dp.releases.grid_format as grid_format


def test_count_column_plain_labels_compressed(tmp_path):
    attrs = [pdp.Ordinal("age", 0, 99), pdp.Nominal("sex", categories=["f", "m"])]
    frame = pl.DataFrame({"age": [3, 50, 50], "sex": ["f", "m", "m"]})
    release = pdp.privelet(frame, attrs, epsilon=1.0, seed=3)
    path = release.write_parquet(tmp_path / "r.parquet")
    group = pq.ParquetFile(path).metadata.row_group(0)
    by_name = {group.column(i).path_in_schema: group.column(i) for i in range(group.num_columns)}
    assert by_name["count"].compression == "UNCOMPRESSED"
    assert not by_name["count"].has_dictionary_page
    for name in ("age", "sex"):
        assert by_name[name].compression == "ZSTD"
        assert by_name[name].has_dictionary_page
    np.testing.assert_array_equal(pdp.read_release(path).counts, release.counts)


def test_an_unknown_compression_is_refused_before_anything_is_written(tmp_path):
    attrs = [pdp.Ordinal("age", 0, 99), pdp.Nominal("sex", categories=["f", "m"])]
    release = pdp.basic(pl.DataFrame({"age": [3, 50], "sex": ["f", "m"]}), attrs, epsilon=1.0, seed=3)
    for bad in ("nope", "uncompressed", 3):
        with pytest.raises(pdp.ParameterError, match=r"compression must be one of \('zstd', 'snappy'"):
            release.write_parquet(tmp_path / "r.parquet", compression=bad)
    assert list(tmp_path.iterdir()) == []
    path = release.write_parquet(tmp_path / "r.parquet", compression="GZIP")
    group = pq.ParquetFile(path).metadata.row_group(0)
    assert group.column([group.column(i).path_in_schema for i in range(2)].index("sex")).compression == "GZIP"
    path = release.write_parquet(tmp_path / "n.parquet", compression=None)  # pyarrow's "none"
    group = pq.ParquetFile(path).metadata.row_group(0)
    assert {group.column(i).compression for i in range(group.num_columns)} == {"UNCOMPRESSED"}


@pytest.mark.parametrize("n, step", [(1, 1), (3, 1), (4, 2), (5, 3), (2, 7)])
def test_pattern_check_matches_the_cell_of_each_row(n, step):
    rng = np.random.default_rng(n * 10 + step)
    expected = rng.permutation(np.arange(n) * 3 + 1)
    total = 3 * n * step + 5
    truth = expected[(np.arange(total) // step) % n]
    for start in range(0, total):
        for stop in sorted({start, start + 1, start + step, min(total, start + n * step + 2), total}):
            stop = min(stop, total)
            values = truth[start:stop].copy()
            assert grid_format._pattern_matches(values, start, step, expected)
            for j in range(values.size):  # any single wrong row is found
                bad = values.copy()
                bad[j] += 1 if bad[j] != expected.max() + 1 else 2
                assert not grid_format._pattern_matches(bad, start, step, expected)
