"""Mechanisms: the only code that adds noise.  Each takes private input and returns a release."""

from polars_dp.mechanisms.basic import basic
from polars_dp.mechanisms.ngram import ngram_sequences
from polars_dp.mechanisms.privelet import privelet
from polars_dp.mechanisms.privtree import privtree
from polars_dp.mechanisms.sequences import privtree_sequences
from polars_dp.mechanisms.spatial_grids import adaptive_grid, privelet_grid, uniform_grid

__all__ = ["adaptive_grid", "basic", "ngram_sequences", "privelet", "privelet_grid", "privtree",
           "privtree_sequences", "uniform_grid"]
