"""numpy views of Arrow arrays (``polars_dp.arrow_arrays``): the same values as
``Array.to_numpy``, without importing pandas."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

from polars_dp.arrow_arrays import array_values, buffer_values


@pytest.mark.parametrize("dtype", [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint16(),
                                   pa.float32(), pa.float64()])
def test_buffer_values_view_sliced_arrays(dtype):
    full = pa.array(np.arange(50) * 2, dtype)
    part = full.slice(7, 20)  # an offset into the data buffer
    got = buffer_values(part)
    np.testing.assert_array_equal(got, np.arange(7, 27) * 2)
    assert got.dtype == np.dtype(dtype.to_pandas_dtype())
    assert not got.flags.writeable  # a view of Arrow's buffer


@pytest.mark.parametrize("array", [pa.array([1, None, 3]), pa.array([True, False]), pa.array(["a", "b"]),
                                   pa.array(np.array([1.0, 2.0], np.float16))])
def test_buffer_values_refuse_nulls_and_other_types(array):
    assert buffer_values(array) is None


@pytest.mark.parametrize("array", [pa.array(np.arange(30), pa.int32()).slice(3, 9), pa.array([1, None, 3]),
                                   pa.array([True, False, True]), pa.array(["a", "b"]),
                                   pa.array([1.5, 2.5], pa.float16()), pa.array([], pa.int64())])
def test_array_values_equal_to_numpy(array):
    got, want = array_values(array), array.to_numpy(zero_copy_only=False)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_duckdb_count_does_not_import_pandas(tmp_path):
    """A DuckDB relation's counts are fetched as Arrow batches and viewed in place: importing
    pandas on the first fetch cost 0.2-0.3 s of a fresh process's first release."""
    code = (
        "import sys, duckdb, polars_dp as pdp\n"
        "rel = duckdb.connect().sql('SELECT range % 7 AS a, range % 3 AS b FROM range(1000)')\n"
        "r = pdp.privelet(rel, [pdp.Ordinal('a', 0, 6), pdp.Ordinal('b', 0, 2)], epsilon=1.0,\n"
        "                 untransformed=['b'], seed=1)\n"
        "print(r.n_cells, 'pandas' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PATH": "", "PYTHONPATH": ":".join(sys.path)})
    assert out.stdout.split() == ["21", "False"]
