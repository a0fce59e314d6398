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
mechanism registry as ``df.dp.*`` is (:mod:`polars_dp.namespace`), so a new mechanism keyword
appears here too.  A method builds the mechanism's plan (options checked, no data read) and
passes it to :meth:`Session.run`, which also takes a plan built by hand
(``session.run(pdp.plan("privelet", attrs, epsilon=0.3, neighbours="replace"), label=...)``).
Each call is charged to the session's :class:`~polars_dp.Accountant` (the plan's exact
``epsilon_spent``) *before* the data is read (basic sequential composition: the releases together are
``sum epsilon_i <= epsilon``-DP under ``neighbours``; Dwork & Roth 2014, Thm. 3.16).  A
refused call reads nothing; a charged call stays charged even if the mechanism then fails
(the failure may depend on the data).  The sequence mechanisms are add/remove-one only and
run only in an ``add_remove`` session (the accountant's rule).

Seeds are refused: a seeded release is reproducible by anyone who knows the seed, so it
protects nothing and composes with nothing.  The total ``epsilon`` may be exact (a
:class:`fractions.Fraction` or a decimal string such as ``"0.3"``; a float is its binary value).

Each release records the session's ledger up to and including itself in
``release.params["ledger"]`` (written to the ``polars_dp.params`` metadata, and kept by
Parquet round trips): ``{"total_epsilon", "neighbours", "entries": [{"label", "epsilon",
"epsilon_spent", "mechanism", "noise", "time"}, ...]}``.

The data is passed to the mechanisms as given (a Polars DataFrame or LazyFrame, or any input
the mechanism functions accept); the session never reads it itself.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

from polars_dp import mechanisms
from polars_dp.budget import Accountant, ExactEpsilon, exact_epsilon, planned_call
from polars_dp.domains.privacy_unit import Rows
from polars_dp.errors import ParameterError
from polars_dp.ledger import Ledger
from polars_dp.mechanisms.options import as_method
from polars_dp.plans import REGISTRY, Plan
from polars_dp.plans.options import PRIVACY_UNIT, PROGRESS

F = TypeVar("F", bound=Callable[..., Any])


def _charged(name: str, mechanism: F) -> F:
    """A method that builds the plan of ``name`` under the session's neighbour relation, charges
    it, then runs it on the session's data; its signature is the mechanism's less the data,
    ``seed`` and ``neighbours``, plus ``label``."""

    def method(self: Session, *args: Any, label: str | None = None, **kwargs: Any) -> Any:
        planned, progress = planned_call(name, args, kwargs, self.neighbours, self.privacy_unit)
        return self.run(planned, label=label, progress=progress)

    label = inspect.Parameter("label", inspect.Parameter.KEYWORD_ONLY, default=None, annotation="str | None")
    as_method(mechanism, method, hidden=("seed", "neighbours"), extra=(label,))
    method.__doc__ = (f"``{name}`` on the session's data, charged to its budget before the data is "
                      f"read; ``label`` names the release in the ledger (default {name!r}).\n\n"
                      + inspect.cleandoc(method.__doc__ or ""))  # as_method's: no data, seed, neighbours
    return method  # type: ignore[return-value]


class Session(mechanisms.BoundMechanisms):
    """A private dataset with a total budget ``epsilon`` under one neighbour relation, protecting
    one individual (``privacy_unit``).

    ``Session(data, epsilon=1.0, neighbours="replace")``; ``df.dp.session(...)`` builds one.
    Methods: the mechanisms (``session.privelet(attributes, epsilon=0.3, label=...)``).
    ``spent``, ``remaining`` and ``ledger`` report the budget (composed exactly, see
    :class:`~polars_dp.Accountant`).  ``noise="float"`` releases are refused unless
    ``allow_float=True``; the ledger records each release's ``noise``.

    ``privacy_unit=pdp.Rows(max_per=k, id_column="person")``: every release protects one person
    (their rows, at most ``k`` kept); a method given no ``privacy_unit`` takes this one, and one
    naming another individual is refused (releases protecting different individuals do not
    compose, :mod:`polars_dp.budget`).  The default, ``pdp.Rows()``: one row is one individual.

    ``ledger=pdp.Ledger(path), dataset="people"``: ``epsilon`` is the dataset's total, fixed in
    the file by its first charge, and every release is refused that would take the charges of
    every process to the dataset past it (:mod:`polars_dp.ledger`); ``spent`` and
    ``remaining`` are then the dataset's, ``ledger`` lists this session's releases.
    """

    def __init__(self, data: Any, *, epsilon: ExactEpsilon, neighbours: str, allow_float: bool = False,
                 ledger: Ledger | None = None, dataset: str | None = None,
                 privacy_unit: Rows | None = PRIVACY_UNIT.default):
        exact_epsilon(epsilon)  # named as the session's argument
        self._accountant = Accountant(total=epsilon, neighbours=neighbours, ledger=ledger,
                                      allow_float=bool(allow_float), dataset=dataset,
                                      privacy_unit=privacy_unit)
        self._data = data
        self._entries: list[dict[str, Any]] = []

    # ------------------------------------------------------------------ budget
    @property
    def total(self) -> float:
        return float(self._accountant.total_exact)

    @property
    def neighbours(self) -> str:
        return self._accountant.neighbours

    @property
    def privacy_unit(self) -> Rows:
        """The individual every release of the session protects."""
        return self._accountant.privacy_unit

    @property
    def spent(self) -> float:
        return self._accountant.spent

    @property
    def remaining(self) -> float:
        return self._accountant.remaining

    @property
    def ledger(self) -> list[dict[str, Any]]:
        """One entry per charged release: ``label``, ``epsilon`` (the plan's), ``epsilon_spent``
        (what was charged), ``mechanism``, ``noise``, ``time`` (UTC)."""
        return [dict(e) for e in self._entries]

    def _ledger_record(self) -> dict[str, Any]:
        record = {"total_epsilon": self.total, "neighbours": self.neighbours, "entries": self.ledger}
        if self._accountant.dataset is not None:
            record["dataset"] = self._accountant.dataset
        if self.privacy_unit.truncates:
            record["privacy_unit"] = self.privacy_unit.record()
        return record

    def run(self, plan: Plan, *, label: str | None = None, progress: bool | None = PROGRESS.default) -> Any:
        """Charge ``plan`` (its exact ``epsilon_spent``, at most its ``epsilon``: see
        :mod:`polars_dp.budget`) to the session, then run it on the session's data.

        The plan's neighbour relation and individual must be the session's; a refused plan
        reads nothing.
        A charged plan stays charged even if running it fails (the failure may depend on the
        data)."""
        if not isinstance(plan, Plan):
            raise ParameterError(f"Session.run takes a plan (pdp.plan(...)), got {type(plan).__name__}",
                                 parameter="plan")
        label = plan.name if label is None else label
        if not isinstance(label, str) or not label:
            raise ParameterError(f"label must be a non-empty string, got {label!r}", parameter="label")
        spent = self._accountant.charge_plan(plan, label)
        self._entries.append({"label": label, "epsilon": float(plan.epsilon), "epsilon_spent": float(spent),
                              "mechanism": plan.name, "noise": plan.noise,
                              "time": datetime.now(UTC).isoformat(timespec="seconds")})
        release = plan.run(self._data, progress=progress)
        release.annotate("ledger", self._ledger_record())
        return release

    def __repr__(self) -> str:
        unit = f", privacy_unit={self.privacy_unit!r}" if self.privacy_unit.truncates else ""
        return (f"Session(epsilon={self.total:g}, neighbours={self.neighbours!r}{unit}, "
                f"spent={self.spent:g}, releases={len(self._entries)})")


for _name, _entry in REGISTRY.items():
    if _entry.function is not None:
        setattr(Session, _name, _charged(_name, _entry.function))

__all__ = ["Session"]
