"""Mechanisms: the only code that adds noise.  Each takes private input and returns a release."""

from polars_dp.mechanisms.basic import basic
from polars_dp.mechanisms.privtree import privtree
from polars_dp.mechanisms.spatial_grids import adaptive_grid, uniform_grid

__all__ = ["adaptive_grid", "basic", "privtree", "uniform_grid"]
