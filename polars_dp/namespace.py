"""``df.dp`` / ``lf.dp``: the mechanisms as methods of Polars DataFrames and LazyFrames.

Registered on ``import polars_dp``.  Each method *is* the functional mechanism with the frame
bound as its first argument: its signature, defaults and docstring come from the function
(:func:`polars_dp.basic`, :func:`polars_dp.privelet`, ...), so they cannot drift, and
``help(df.dp.privelet)`` / IDEs show the real parameters.  The namespace keeps no state
(Polars caches the namespace object on the frame).  On a LazyFrame only the aggregate the
mechanism needs is collected, with the streaming engine.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

import polars as pl

from polars_dp import mechanisms
from polars_dp.session import Session

F = TypeVar("F", bound=Callable[..., Any])


def _bound_to_frame(mechanism: F) -> F:
    """A method that calls ``mechanism(self._frame, ...)``, with the mechanism's signature less
    its data argument."""

    @functools.wraps(mechanism)
    def method(self: DPNamespace, *args: Any, **kwargs: Any) -> Any:
        return mechanism(self._frame, *args, **kwargs)

    signature = inspect.signature(mechanism)
    params = list(signature.parameters.values())
    self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    method.__signature__ = signature.replace(parameters=[self_param, *params[1:]])  # type: ignore[attr-defined]  # inspect reads a function's __signature__
    del method.__wrapped__  # help() and inspect use __signature__, not the function's
    return method  # type: ignore[return-value]


class DPNamespace:
    """Differentially private releases of this frame (``frame.dp.<mechanism>(...)``)."""

    def __init__(self, frame: pl.DataFrame | pl.LazyFrame):
        self._frame = frame

    basic = _bound_to_frame(mechanisms.basic)
    privelet = _bound_to_frame(mechanisms.privelet)
    privtree = _bound_to_frame(mechanisms.privtree)
    uniform_grid = _bound_to_frame(mechanisms.uniform_grid)
    adaptive_grid = _bound_to_frame(mechanisms.adaptive_grid)
    privelet_grid = _bound_to_frame(mechanisms.privelet_grid)
    privtree_sequences = _bound_to_frame(mechanisms.privtree_sequences)
    ngram_sequences = _bound_to_frame(mechanisms.ngram_sequences)

    def session(self, *, epsilon: float, neighbours: str) -> Session:
        """A :class:`~polars_dp.Session` on this frame: a total budget ``epsilon`` under
        ``neighbours``, with the mechanisms as methods, each charged before the frame is read."""
        return Session(self._frame, epsilon=epsilon, neighbours=neighbours)


pl.api.register_dataframe_namespace("dp")(DPNamespace)
pl.api.register_lazyframe_namespace("dp")(DPNamespace)

__all__ = ["DPNamespace"]
