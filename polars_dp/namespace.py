"""``df.dp`` / ``lf.dp``: the mechanisms as methods of Polars DataFrames and LazyFrames.

Registered on ``import polars_dp``.  One method per entry of the mechanism registry
(:data:`polars_dp.plans.REGISTRY`): each *is* the functional mechanism with the frame bound
as its first argument, so its signature, defaults and docstring come from the function
(:func:`polars_dp.basic`, :func:`polars_dp.privelet`, ...) and cannot drift, and
``help(df.dp.privelet)`` / IDEs show the real parameters.  The namespace keeps no state
(Polars caches the namespace object on the frame).  On a LazyFrame only the aggregate the
mechanism needs is collected, with the streaming engine.

Type checkers do not see attributes that Polars registers at run time, so ``df.dp`` is
untyped for them; :func:`dp` is the typed spelling of the same namespace:

>>> import polars as pl, polars_dp as pdp
>>> release = pdp.dp(pl.DataFrame({"age": [30, 41]})).basic([pdp.Ordinal("age", 0, 99)],
...                                                        epsilon=1.0, seed=1)
>>> release.mechanism
'basic'
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import polars as pl

from polars_dp import mechanisms
from polars_dp.budget import ExactEpsilon
from polars_dp.domains.privacy_unit import Rows
from polars_dp.errors import ParameterError
from polars_dp.ledger import Ledger
from polars_dp.mechanisms.options import as_method
from polars_dp.plans import REGISTRY
from polars_dp.plans.options import PRIVACY_UNIT
from polars_dp.session import Session

F = TypeVar("F", bound=Callable[..., Any])


def _bound_to_frame(mechanism: F) -> F:
    """A method that calls ``mechanism(self._frame, ...)``, with the mechanism's signature less
    its data argument."""

    def method(self: DPNamespace, *args: Any, **kwargs: Any) -> Any:
        return mechanism(self._frame, *args, **kwargs)

    return as_method(mechanism, method)  # type: ignore[return-value]


class DPNamespace(mechanisms.BoundMechanisms):
    """Differentially private releases of this frame (``frame.dp.<mechanism>(...)``)."""

    def __init__(self, frame: pl.DataFrame | pl.LazyFrame):
        self._frame = frame

    @property
    def frame(self) -> pl.DataFrame | pl.LazyFrame:
        """The frame these methods release from (:meth:`polars_dp.Accountant.run` reads the
        data of ``df.dp.<mechanism>`` here)."""
        return self._frame

    def session(self, *, epsilon: ExactEpsilon, neighbours: str, allow_float: bool = False,
                ledger: Ledger | None = None, dataset: str | None = None,
                privacy_unit: Rows | None = PRIVACY_UNIT.default) -> Session:
        """A :class:`~polars_dp.Session` on this frame: a total budget ``epsilon`` under
        ``neighbours`` protecting ``privacy_unit``'s individual (one row by default), with the
        mechanisms as methods, each charged before the frame is read; ``ledger=`` and ``dataset=``
        as for :class:`~polars_dp.Session`."""
        return Session(self._frame, epsilon=epsilon, neighbours=neighbours, allow_float=allow_float,
                       ledger=ledger, dataset=dataset, privacy_unit=privacy_unit)


for _name, _entry in REGISTRY.items():
    if _entry.function is not None:
        setattr(DPNamespace, _name, _bound_to_frame(_entry.function))


def dp(frame: pl.DataFrame | pl.LazyFrame) -> DPNamespace:
    """``frame.dp``, typed: the same namespace for code checked by mypy or pyright."""
    if not isinstance(frame, (pl.DataFrame, pl.LazyFrame)):
        raise ParameterError(f"dp() takes a Polars DataFrame or LazyFrame, got {type(frame).__name__}",
                             parameter="frame")
    return DPNamespace(frame)


pl.api.register_dataframe_namespace("dp")(DPNamespace)
pl.api.register_lazyframe_namespace("dp")(DPNamespace)

__all__ = ["DPNamespace", "dp"]
