"""``df.dp`` / ``lf.dp``: the mechanisms as methods of Polars DataFrames and LazyFrames.

Registered on ``import polars_dp``.  The namespace is thin: it passes the frame to the
functional API (:mod:`polars_dp.mechanisms`) and keeps no state (Polars caches the
namespace object on the frame).  On a LazyFrame only the aggregate the mechanism needs is
collected, with the streaming engine.
"""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl

from polars_dp import mechanisms
from polars_dp.domain import Attribute
from polars_dp.noise import SeedLike
from polars_dp.release import GridRelease


class DPNamespace:
    """Differentially private releases of this frame (``frame.dp.<mechanism>(...)``)."""

    def __init__(self, frame: pl.DataFrame | pl.LazyFrame):
        self._frame = frame

    def basic(self, attributes: Attribute | Iterable[Attribute], *, epsilon: float,
              neighbours: str = "replace", seed: SeedLike = None, on_out_of_domain: str = "raise",
              nulls: str = "raise") -> GridRelease:
        """Laplace histogram over ``attributes``; see :func:`polars_dp.basic`."""
        return mechanisms.basic(self._frame, attributes, epsilon=epsilon, neighbours=neighbours,
                                seed=seed, on_out_of_domain=on_out_of_domain, nulls=nulls)

    def privelet(self, attributes: Attribute | Iterable[Attribute], *, epsilon: float,
                 untransformed: str | Iterable[str] = (), neighbours: str = "replace",
                 seed: SeedLike = None, on_out_of_domain: str = "raise",
                 nulls: str = "raise") -> GridRelease:
        """Privelet / Privelet+ wavelet release over ``attributes``; see :func:`polars_dp.privelet`."""
        return mechanisms.privelet(self._frame, attributes, epsilon=epsilon, untransformed=untransformed,
                                   neighbours=neighbours, seed=seed, on_out_of_domain=on_out_of_domain,
                                   nulls=nulls)


pl.api.register_dataframe_namespace("dp")(DPNamespace)
pl.api.register_lazyframe_namespace("dp")(DPNamespace)

__all__ = ["DPNamespace"]
