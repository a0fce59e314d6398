"""A spatial box's declaration (:func:`polars_dp.domains.box.as_box`): public bounds refused,
before any data, where the float64 cell arithmetic cannot hold them."""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl
import pytest

import polars_dp as pdp
from polars_dp.domains.box import MIN_EXTENT, as_box

POINTS = pl.DataFrame({"x": [1e-272, 2e-272, 7e-272], "y": [1.0, 2.0, 7.0]})


@pytest.mark.parametrize("pair", [("0", "10"), (True, 5), (0, np.bool_(True)), (b"0", 1)])
def test_bounds_are_numbers_not_text_or_truth_values(pair):
    with pytest.raises(pdp.ParameterError, match=r"bounds of 'x' need a \(lo, hi\) pair of numbers"):
        as_box(["x", "y"], [pair, (0, 10)])


def test_an_extent_too_small_for_the_cell_arithmetic_is_refused():
    """Below MIN_EXTENT the cells per unit ``m / (hi - lo)`` overflowed and every point fell in
    the last cell (a silent wrong count); from it on, the counts are right."""
    for name in ("privtree", "privtree_subgrid", "uniform_grid"):
        with pytest.raises(pdp.ParameterError, match="too small for the float64 cell arithmetic"):
            getattr(pdp, name)(POINTS, ["x", "y"], bounds=[(0, 1e-304), (0, 10)], epsilon=1.0)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no overflow on the way
            release = getattr(pdp, name)(POINTS, ["x", "y"], bounds=[(0, MIN_EXTENT), (0, 10)], epsilon=1e4,
                                         seed=1)
            assert release.range_count(x=(0, MIN_EXTENT / 2)) == pytest.approx(2, abs=0.01)  # 1e-272, 2e-272
            assert release.range_count(x=(0, MIN_EXTENT)) == pytest.approx(3, abs=0.01)
