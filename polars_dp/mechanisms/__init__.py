"""Mechanisms: the only code that adds noise.  Each takes private input and returns a release.

Every mechanism is registered with its plan (:mod:`polars_dp.plans`): ``pdp.plan(name, ...)
.run(frame)`` runs it.  Basic and Privelet are their plans' runners; the data-dependent
mechanisms are run with the plan's validated options.
"""

from typing import TYPE_CHECKING, Any

from polars_dp.mechanisms.laplace_histogram import basic
from polars_dp.mechanisms.ngram import ngram_sequences, run_ngram
from polars_dp.mechanisms.options import checked_options
from polars_dp.mechanisms.sequences import privtree_sequences, run_privtree_sequences
from polars_dp.mechanisms.spatial_grids import adaptive_grid, privelet_grid, uniform_grid
from polars_dp.mechanisms.spatial_tree import privtree
from polars_dp.mechanisms.wavelet import privelet
from polars_dp.plans.base import Plan, register_runner

privtree = checked_options("privtree")(privtree)
uniform_grid = checked_options("uniform_grid")(uniform_grid)
adaptive_grid = checked_options("adaptive_grid")(adaptive_grid)
privelet_grid = checked_options("privelet_grid")(privelet_grid)
privtree_sequences = checked_options("privtree_sequences")(privtree_sequences)
ngram_sequences = checked_options("ngram_sequences")(ngram_sequences)
register_runner("ngram_sequences", run_ngram, ngram_sequences)
register_runner("privtree_sequences", run_privtree_sequences, privtree_sequences)


def _function_runner(function: Any) -> Any:
    def run(plan: Plan, frame: Any, *, seed: Any = None, progress: bool | None = None) -> Any:
        args, kwargs = plan.arguments()
        return function(frame, *args, **kwargs, seed=seed, progress=progress)
    return run


for _f in (privtree, uniform_grid, adaptive_grid, privelet_grid):
    register_runner(_f.__name__, _function_runner(_f), _f)


class BoundMechanisms:  # not in __all__: __all__ lists the mechanisms
    """The static view of the mechanism methods that ``df.dp`` and :class:`~polars_dp.Session`
    generate from the registry at import time: each is the mechanism with its data argument
    bound (type checkers bind the first parameter as ``self``)."""

    if TYPE_CHECKING:
        basic = basic
        privelet = privelet
        privtree = privtree
        uniform_grid = uniform_grid
        adaptive_grid = adaptive_grid
        privelet_grid = privelet_grid
        privtree_sequences = privtree_sequences
        ngram_sequences = ngram_sequences


__all__ = ["adaptive_grid", "basic", "ngram_sequences", "privelet", "privelet_grid", "privtree",
           "privtree_sequences", "uniform_grid"]
