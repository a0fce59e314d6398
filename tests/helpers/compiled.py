"""Skip marker for the tests that compare the compiled twins with the numpy kernels."""

from __future__ import annotations

import pytest

from polars_dp.compiled import enabled

needs_compiled = pytest.mark.skipif(
    not enabled(), reason="compiled kernels off: no numba (the fast extra), or POLARS_DP_COMPILED=0")
