"""``df.dp`` / ``lf.dp``: the mechanisms as methods of Polars DataFrames and LazyFrames.

Registered on ``import polars_dp``.  The namespace is thin: it passes the frame to the
functional API (:mod:`polars_dp.mechanisms`) and keeps no state (Polars caches the
namespace object on the frame).  On a LazyFrame only the aggregate the mechanism needs is
collected, with the streaming engine.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import polars as pl

from polars_dp import mechanisms
from polars_dp.domain import Attribute
from polars_dp.noise import SeedLike
from polars_dp.release import GridRelease
from polars_dp.sequence_model import SequenceModel
from polars_dp.tree_release import TreeRelease


class DPNamespace:
    """Differentially private releases of this frame (``frame.dp.<mechanism>(...)``)."""

    def __init__(self, frame: pl.DataFrame | pl.LazyFrame):
        self._frame = frame

    def basic(self, attributes: Attribute | Iterable[Attribute], *, epsilon: float,
              neighbours: str = "replace", seed: SeedLike = None, on_out_of_domain: str = "raise",
              nulls: str = "raise", noise: str = "exact") -> GridRelease:
        """Laplace histogram over ``attributes``; see :func:`polars_dp.basic`."""
        return mechanisms.basic(self._frame, attributes, epsilon=epsilon, neighbours=neighbours,
                                seed=seed, on_out_of_domain=on_out_of_domain, nulls=nulls, noise=noise)

    def privtree(self, columns: str | Sequence[str], *, bounds: Any, epsilon: float,
                 fanout: int | None = None, theta: float = 0.0, tree_share: float = 0.5,
                 neighbours: str = "add_remove", seed: SeedLike = None, on_out_of_domain: str = "raise",
                 nulls: str = "raise", noise: str = "exact") -> TreeRelease:
        """PrivTree decomposition of the points ``columns`` in ``bounds``; see :func:`polars_dp.privtree`."""
        return mechanisms.privtree(self._frame, columns, bounds=bounds, epsilon=epsilon, fanout=fanout,
                                   theta=theta, tree_share=tree_share, neighbours=neighbours, seed=seed,
                                   on_out_of_domain=on_out_of_domain, nulls=nulls, noise=noise)

    def uniform_grid(self, columns: str | Sequence[str], *, bounds: Any, epsilon: float,
                     n: int | None = None, n_share: float = 0.05, c: float = 10.0,
                     neighbours: str = "add_remove", seed: SeedLike = None, on_out_of_domain: str = "raise",
                     nulls: str = "raise", noise: str = "exact") -> TreeRelease:
        """UG baseline (uniform noisy grid); see :func:`polars_dp.uniform_grid`."""
        return mechanisms.uniform_grid(self._frame, columns, bounds=bounds, epsilon=epsilon, n=n,
                                       n_share=n_share, c=c, neighbours=neighbours, seed=seed,
                                       on_out_of_domain=on_out_of_domain, nulls=nulls, noise=noise)

    def privelet_grid(self, columns: str | Sequence[str], *, bounds: Any, epsilon: float,
                      bits: int | None = None, neighbours: str = "add_remove", seed: SeedLike = None,
                      on_out_of_domain: str = "raise", nulls: str = "raise",
                      noise: str = "exact") -> TreeRelease:
        """Privelet* baseline (Privelet on a fixed 2^bits grid); see :func:`polars_dp.privelet_grid`."""
        return mechanisms.privelet_grid(self._frame, columns, bounds=bounds, epsilon=epsilon, bits=bits,
                                        neighbours=neighbours, seed=seed, on_out_of_domain=on_out_of_domain,
                                        nulls=nulls, noise=noise)

    def adaptive_grid(self, columns: str | Sequence[str], *, bounds: Any, epsilon: float,
                      n: int | None = None, n_share: float = 0.05, alpha: float = 0.5, c: float = 10.0,
                      c2: float = 5.0, neighbours: str = "add_remove", seed: SeedLike = None,
                      on_out_of_domain: str = "raise", nulls: str = "raise",
                      noise: str = "exact") -> TreeRelease:
        """AG baseline (two-level adaptive grid); see :func:`polars_dp.adaptive_grid`."""
        return mechanisms.adaptive_grid(self._frame, columns, bounds=bounds, epsilon=epsilon, n=n,
                                        n_share=n_share, alpha=alpha, c=c, c2=c2, neighbours=neighbours,
                                        seed=seed, on_out_of_domain=on_out_of_domain, nulls=nulls,
                                        noise=noise)

    def privelet(self, attributes: Attribute | Iterable[Attribute], *, epsilon: float,
                 untransformed: str | Iterable[str] = (), neighbours: str = "replace",
                 seed: SeedLike = None, on_out_of_domain: str = "raise",
                 nulls: str = "raise", noise: str = "exact") -> GridRelease:
        """Privelet / Privelet+ wavelet release over ``attributes``; see :func:`polars_dp.privelet`."""
        return mechanisms.privelet(self._frame, attributes, epsilon=epsilon, untransformed=untransformed,
                                   neighbours=neighbours, seed=seed, on_out_of_domain=on_out_of_domain,
                                   nulls=nulls, noise=noise)

    def privtree_sequences(self, column: str, *, alphabet: Sequence[Any], max_length: int, epsilon: float,
                           tree_share: float = 0.5, theta: float = 0.0, postprocess: str = "sum_then_clip",
                           seed: SeedLike = None, noise: str = "exact") -> SequenceModel:
        """Private prediction suffix tree of a sequence column; see :func:`polars_dp.privtree_sequences`."""
        return mechanisms.privtree_sequences(self._frame, column, alphabet=alphabet, max_length=max_length,
                                             epsilon=epsilon, tree_share=tree_share, theta=theta,
                                             postprocess=postprocess, seed=seed, noise=noise)

    def ngram_sequences(self, column: str, *, alphabet: Sequence[Any], max_length: int, epsilon: float,
                        height: int = 5, seed: SeedLike = None, noise: str = "exact") -> SequenceModel:
        """Fixed-height noisy n-gram baseline; see :func:`polars_dp.ngram_sequences`."""
        return mechanisms.ngram_sequences(self._frame, column, alphabet=alphabet, max_length=max_length,
                                          epsilon=epsilon, height=height, seed=seed, noise=noise)


pl.api.register_dataframe_namespace("dp")(DPNamespace)
pl.api.register_lazyframe_namespace("dp")(DPNamespace)

__all__ = ["DPNamespace"]
