"""Mechanisms: the only code that adds noise.  Each takes private input and returns a release.

Every mechanism is wired one way (:mod:`polars_dp.mechanisms.options`): a runner
``run_<name>(plan, frame, *, seed, progress)`` and the public function generated from its plan's
option table, ``name(frame, ...) = pdp.plan(name, ...).run(frame, seed=..., progress=...)``.
Importing this package imports every module of it, so each runner registers; ``__all__`` is every
registered mechanism function (those imported below by name are there for type checkers).
"""

from typing import TYPE_CHECKING

from polars_dp.mechanisms.hierarchical import hierarchical
from polars_dp.mechanisms.laplace_histogram import basic
from polars_dp.mechanisms.ngram import ngram_sequences
from polars_dp.mechanisms.sequences import privtree_sequences
from polars_dp.mechanisms.spatial_grids import adaptive_grid, privelet_grid, uniform_grid
from polars_dp.mechanisms.spatial_subgrid import privtree_subgrid
from polars_dp.mechanisms.spatial_tree import privtree
from polars_dp.mechanisms.wavelet import privelet
from polars_dp.plans.base import REGISTRY, discover

discover(__name__, __path__)


class BoundMechanisms:  # not in __all__: __all__ lists the mechanisms
    """The static view of the mechanism methods that ``df.dp`` and :class:`~polars_dp.Session`
    generate from the registry at import time: each is the mechanism with its data argument
    bound (type checkers bind the first parameter as ``self``)."""

    if TYPE_CHECKING:
        basic = basic
        privelet = privelet
        privtree = privtree
        privtree_subgrid = privtree_subgrid
        uniform_grid = uniform_grid
        adaptive_grid = adaptive_grid
        privelet_grid = privelet_grid
        privtree_sequences = privtree_sequences
        ngram_sequences = ngram_sequences
        hierarchical = hierarchical


globals().update({name: e.function for name, e in REGISTRY.items() if e.function is not None})
__all__ = sorted(name for name, e in REGISTRY.items() if e.function is not None)
