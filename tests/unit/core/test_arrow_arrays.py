"""numpy views of Arrow arrays (``polars_dp.arrow_arrays``): the same values as
``Array.to_numpy``, without importing pandas."""

from __future__ import annotations

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

