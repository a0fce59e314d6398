"""Reading a grid file in write order: batches placed by position only after every label is
checked against its row's cell; any other file goes through label placement (and its errors)."""

from __future__ import annotations

import importlib

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import polars_dp as pdp
import polars_dp.releases.grid_format as grid_format
from polars_dp.errors import ReleaseFormatError


def _attributes() -> list:
    jobs = pdp.Hierarchy.from_dict({"office": ["clerk", "manager"], "field": ["driver", "farmer", "cook"]},
                                   level_names=["group"])
    occ = pdp.Hierarchy.from_dict({f"g{g}": list(range(g * 4, g * 4 + 4)) for g in range(3)})
    return [pdp.Ordinal("age", 0, 39, width=4), pdp.Nominal("sex", categories=["female", "male"]),
            pdp.Nominal("job", jobs), pdp.Nominal("occ", occ)]


@pytest.fixture(scope="module")
def release() -> pdp.GridRelease:
    rng = np.random.default_rng(4)
    n = 2000
    frame = pl.DataFrame({"age": rng.integers(0, 40, n), "sex": rng.choice(["female", "male"], n),
                          "job": rng.choice(["clerk", "manager", "driver", "farmer", "cook"], n),
                          "occ": rng.integers(0, 12, n)})
    return pdp.privelet(frame, _attributes(), epsilon=1.0, untransformed=["sex"], seed=2)


@pytest.fixture
def spy(monkeypatch):
    results = []
    real = grid_format.counts_in_write_order

    def wrapped(*a, **kw):
        out = real(*a, **kw)
        results.append(out is not None)
        return out

    monkeypatch.setattr(importlib.import_module("polars_dp.releases.grid"), "counts_in_write_order", wrapped)
    return results


@pytest.mark.parametrize("row_group", [7, None])
def test_file_in_write_order_is_read_by_position(tmp_path, release, spy, row_group):
    path = tmp_path / "r.parquet"
    release.write_parquet(path)
    if row_group:  # many row groups, each read column by column
        pq.write_table(pq.read_table(path), path, row_group_size=row_group)
        assert pq.ParquetFile(path).metadata.num_row_groups > 1
    back = pdp.read_release(path)
    assert spy == [True]
    np.testing.assert_array_equal(back.counts, release.counts)
    assert back.attributes == release.attributes


def _rewrite(path, table: pa.Table, **columns) -> None:
    for name, values in columns.items():
        i = table.column_names.index(name)
        table = table.set_column(i, name, values)
    pq.write_table(table, path)


def _swap(column: pa.ChunkedArray, i: int, j: int) -> pa.Array:
    arr = column.combine_chunks()
    if pa.types.is_dictionary(arr.type):
        idx = arr.indices.to_numpy().copy()
        idx[[i, j]] = idx[[j, i]]
        return pa.DictionaryArray.from_arrays(pa.array(idx, arr.indices.type), arr.dictionary)
    v = arr.to_numpy().copy()
    v[[i, j]] = v[[j, i]]
    return pa.array(v)


@pytest.mark.parametrize("column", ["age_lo", "age_hi", "job", "occ", "job_group"])
def test_swapped_labels_are_not_placed_by_position(tmp_path, release, spy, column):
    """Two rows' labels swapped (counts left in place): the position check refuses, and label
    placement then puts the counts at the other cells, which the checksum (or the level
    check) refuses."""
    path = tmp_path / "r.parquet"
    release.write_parquet(path)
    table = pq.read_table(path)
    n = table.num_rows
    i, j = 3, n - 5
    if column == "job_group":  # swap the leaf with its level, so only the pair disagrees
        _rewrite(path, table, job_group=_swap(table.column("job_group"), 0, n - 1))
    else:
        cols = {column: _swap(table.column(column), i, j)}
        _rewrite(path, table, **cols)
    with pytest.raises(ReleaseFormatError):
        pdp.read_release(path)
    assert spy == [False]


def test_shuffled_file_is_restored_by_label(tmp_path, release, spy):
    path = tmp_path / "r.parquet"
    release.write_parquet(path)
    table = pq.read_table(path)
    pq.write_table(table.take(np.random.default_rng(0).permutation(table.num_rows)), path)
    back = pdp.read_release(path)
    assert spy == [False]
    np.testing.assert_array_equal(back.counts, release.counts)


def test_edited_count_in_write_order_fails_the_checksum(tmp_path, release, spy):
    path = tmp_path / "r.parquet"
    release.write_parquet(path)
    table = pq.read_table(path)
    count = table.column("count").to_numpy().copy()
    count[10] += 1.0
    _rewrite(path, table, count=pa.array(count))
    with pytest.raises(ReleaseFormatError, match="checksum"):
        pdp.read_release(path)
    assert spy == [True]


def test_out_of_domain_label_is_refused(tmp_path, release, spy):
    path = tmp_path / "r.parquet"
    release.write_parquet(path)
    table = pq.read_table(path)
    age = table.column("age_lo").to_numpy().copy()
    age[-1] = 41  # not lo + k width
    _rewrite(path, table, age_lo=pa.array(age))
    with pytest.raises(ReleaseFormatError, match="age_lo"):
        pdp.read_release(path)
    assert spy == [False]


def test_relabelled_dictionary_is_not_read_by_position(tmp_path, release, spy):
    """The dictionary of ``sex`` reversed, its indices kept: every index still matches its row,
    but the labels now name the other cell, so the position path must refuse the dictionary and
    label placement moves the counts, which the checksum refuses."""
    path = tmp_path / "r.parquet"
    release.write_parquet(path)
    table = pq.read_table(path)
    sex = table.column("sex").combine_chunks()
    flipped = pa.DictionaryArray.from_arrays(sex.indices, pa.array(["male", "female"]))
    _rewrite(path, table, sex=flipped)
    with pytest.raises(ReleaseFormatError, match="checksum"):
        pdp.read_release(path)
    assert spy == [False]


def test_reading_in_write_order_does_not_import_pandas(tmp_path, release):
    """``pyarrow`` imports pandas on ``Array.to_numpy`` or ``pa.array``: about 0.8 s and 40 MB in a
    fresh process, for nothing (the read views Arrow buffers directly)."""
    import subprocess
    import sys
    path = tmp_path / "r.parquet"
    release.write_parquet(path)
    code = ("import sys, polars_dp as pdp; r = pdp.read_release(sys.argv[1]); "
            "print(r.n_cells, 'pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [str(release.n_cells), "False"]
