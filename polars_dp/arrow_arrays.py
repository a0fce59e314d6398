"""numpy views of Arrow arrays that do not import pandas.

``pyarrow.Array.to_numpy`` imports pandas the first time it runs (0.2–0.8 s and about 40 MB in a
fresh process), even for a zero-copy conversion.  :func:`buffer_values` views a fixed-width
numeric array's data buffer instead; :func:`array_values` falls back to ``to_numpy`` only for
arrays it cannot view (nulls, booleans, other types).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

#: numpy dtype of each Arrow type whose values :func:`buffer_values` views in place.
NUMPY_TYPES = {pa.int8(): np.int8, pa.int16(): np.int16, pa.int32(): np.int32, pa.int64(): np.int64,
               pa.uint8(): np.uint8, pa.uint16(): np.uint16, pa.uint32(): np.uint32, pa.uint64(): np.uint64,
               pa.float32(): np.float32, pa.float64(): np.float64}


def buffer_values(array: pa.Array) -> np.ndarray | None:
    """The values of a fixed-width numeric array without nulls as a read-only numpy view of its
    data buffer (no copy, no pandas), or None for any other array."""
    dtype = NUMPY_TYPES.get(array.type)
    if dtype is None or array.null_count:
        return None
    itemsize = np.dtype(dtype).itemsize
    view = np.frombuffer(array.buffers()[1], dtype=dtype, count=len(array), offset=array.offset * itemsize)
    view.flags.writeable = False  # Arrow data is immutable; a write would change the array itself
    return view


def array_values(array: pa.Array) -> np.ndarray:
    """``array.to_numpy(zero_copy_only=False)``, as a view of the data buffer where
    :func:`buffer_values` can take one (read-only then)."""
    view = buffer_values(array)
    return view if view is not None else array.to_numpy(zero_copy_only=False)


__all__ = ["NUMPY_TYPES", "array_values", "buffer_values"]
