"""A budgeted session: one private dataset, one total epsilon, the mechanisms as methods.

>>> import polars as pl, polars_dp as pdp
>>> df = pl.DataFrame({"age": [23, 35, 61]})
>>> attrs = [pdp.Ordinal("age", 0, 99, width=10)]
>>> session = pdp.Session(df, epsilon=1.0, neighbours="replace")
>>> cube = session.privelet(attrs, epsilon=0.6, label="ages cube")
>>> session.basic(attrs, epsilon=0.6)
Traceback (most recent call last):
    ...
polars_dp.errors.BudgetExceededError: ...

Every method is the functional mechanism (:func:`polars_dp.privelet`, ...) with the session's
data bound as its first argument and its neighbour relation fixed, generated from the
function as ``df.dp.*`` is (:mod:`polars_dp.namespace`), so a new mechanism keyword appears
here too.  Each call is charged to the session's :class:`~polars_dp.Accountant` *before*
the data is read (basic sequential composition: the releases together are
``sum epsilon_i <= epsilon``-DP under ``neighbours``; Dwork & Roth 2014, Thm. 3.16).  A
refused call reads nothing; a charged call stays charged even if the mechanism then fails
(the failure may depend on the data).  The sequence mechanisms are add/remove-one only and
run only in an ``add_remove`` session (the accountant's rule).

Seeds are refused: a seeded release is reproducible by anyone who knows the seed, so it
protects nothing and composes with nothing.

Each release records the session's ledger up to and including itself in
``release.params["ledger"]`` (written to the ``polars_dp.params`` metadata, and kept by
Parquet round trips): ``{"total_epsilon", "neighbours", "entries": [{"label", "epsilon",
"mechanism", "time"}, ...]}``.

The data is passed to the mechanisms as given (a Polars DataFrame or LazyFrame, or any input
the mechanism functions accept); the session never reads it itself.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

from polars_dp import mechanisms
from polars_dp.budget import Accountant
from polars_dp.errors import ParameterError
from polars_dp.noise import check_epsilon

F = TypeVar("F", bound=Callable[..., Any])

#: Keywords a session method does not offer: the data, the seed and the neighbour relation.
_HIDDEN = ("seed", "neighbours")


def _charged(mechanism: F) -> F:
    """A method that charges the session, then calls ``mechanism(session data, ...)``; its
    signature is the mechanism's less the data, ``seed`` and ``neighbours``, plus ``label``."""
    name = mechanism.__name__

    @functools.wraps(mechanism)
    def method(self: Session, *args: Any, epsilon: float, label: str | None = None, **kwargs: Any) -> Any:
        return self._run(mechanism, args, kwargs, epsilon=epsilon, label=label)

    signature = inspect.signature(mechanism)
    params = [p for p in list(signature.parameters.values())[1:] if p.name not in _HIDDEN]
    label = inspect.Parameter("label", inspect.Parameter.KEYWORD_ONLY, default=None, annotation="str | None")
    self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    method.__signature__ = signature.replace(parameters=[self_param, *params, label])  # type: ignore[attr-defined]  # inspect reads a function's __signature__
    method.__doc__ = (f"``{name}`` on the session's data, charged to its budget before the data is "
                      f"read; ``label`` names the release in the ledger (default {name!r}).\n\n"
                      + inspect.cleandoc(mechanism.__doc__ or ""))
    del method.__wrapped__  # help() and inspect use __signature__
    return method  # type: ignore[return-value]


class Session:
    """A private dataset with a total budget ``epsilon`` under one neighbour relation.

    ``Session(data, epsilon=1.0, neighbours="replace")``; ``df.dp.session(...)`` builds one.
    Methods: the mechanisms (``session.privelet(attributes, epsilon=0.3, label=...)``).
    ``spent``, ``remaining`` and ``ledger`` report the budget.
    """

    def __init__(self, data: Any, *, epsilon: float, neighbours: str):
        self._accountant = Accountant(total=check_epsilon(epsilon), neighbours=neighbours)
        self._data = data
        self._entries: list[dict[str, Any]] = []

    # ------------------------------------------------------------------ budget
    @property
    def total(self) -> float:
        return self._accountant.total

    @property
    def neighbours(self) -> str:
        return self._accountant.neighbours

    @property
    def spent(self) -> float:
        return self._accountant.spent

    @property
    def remaining(self) -> float:
        return self._accountant.remaining

    @property
    def ledger(self) -> list[dict[str, Any]]:
        """One entry per charged release: ``label``, ``epsilon``, ``mechanism``, ``time`` (UTC)."""
        return [dict(e) for e in self._entries]

    def _ledger_record(self) -> dict[str, Any]:
        return {"total_epsilon": self.total, "neighbours": self.neighbours, "entries": self.ledger}

    def _run(self, mechanism: Callable[..., Any], args: tuple, kwargs: dict[str, Any], *, epsilon: float,
             label: str | None) -> Any:
        name = mechanism.__name__
        if "seed" in kwargs:
            raise ParameterError(
                f"a session release cannot be seeded (got seed={kwargs['seed']!r}): a seeded release "
                "is reproducible by anyone who knows the seed and composes with nothing; call "
                f"pdp.{name}(...) directly for tests and experiments"
            )
        if label is None:
            label = name
        if not isinstance(label, str) or not label:
            raise ParameterError(f"label must be a non-empty string, got {label!r}")

        def charged(*a: Any, **kw: Any) -> Any:  # runs only once the accountant has charged
            self._entries.append({"label": label, "epsilon": float(kw["epsilon"]), "mechanism": name,
                                  "time": datetime.now(UTC).isoformat(timespec="seconds")})
            return mechanism(*a, **kw)

        charged.__name__ = label
        charged.__signature__ = inspect.signature(mechanism)  # type: ignore[attr-defined]  # the accountant reads `neighbours` from it
        release = self._accountant.run(charged, self._data, *args, epsilon=epsilon, **kwargs)
        release.params["ledger"] = self._ledger_record()
        return release

    basic = _charged(mechanisms.basic)
    privelet = _charged(mechanisms.privelet)
    privtree = _charged(mechanisms.privtree)
    uniform_grid = _charged(mechanisms.uniform_grid)
    adaptive_grid = _charged(mechanisms.adaptive_grid)
    privelet_grid = _charged(mechanisms.privelet_grid)
    privtree_sequences = _charged(mechanisms.privtree_sequences)
    ngram_sequences = _charged(mechanisms.ngram_sequences)

    def __repr__(self) -> str:
        return (f"Session(epsilon={self.total:g}, neighbours={self.neighbours!r}, spent={self.spent:g}, "
                f"releases={len(self._entries)})")


__all__ = ["Session"]
