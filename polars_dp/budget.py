"""A privacy accountant: refuses to spend past a total epsilon (sequential composition).

Releasing ``k`` mechanisms that are ``epsilon_i``-DP on the same data is
``sum(epsilon_i)``-DP (basic sequential composition; Dwork & Roth 2014, Thm. 3.16), for one
neighbour relation.  The accountant checks the budget *before* a mechanism touches the
data, so a refused release reads nothing.

>>> import polars as pl, polars_dp as pdp
>>> df = pl.DataFrame({"age": [23, 35, 61]})
>>> attrs = [pdp.Ordinal("age", 0, 99, width=10)]
>>> acct = pdp.Accountant(total=1.0, neighbours="replace")
>>> cube = acct.run(df.dp.privelet, attrs, epsilon=0.6)
>>> acct.run(df.dp.basic, attrs, epsilon=0.6)
Traceback (most recent call last):
    ...
polars_dp.errors.BudgetExceededError: ...

Releases under different neighbour relations do not compose directly (an ``epsilon``-DP
release under ``add_remove`` is ``2 epsilon``-DP under ``replace``); the accountant keeps to
one relation and refuses the other.  Likewise for the privacy unit
(:mod:`polars_dp.domains.privacy_unit`): the relations are on *individuals*, one row under
``pdp.Rows()`` or the rows of one identifier under ``pdp.Rows(max_per=k, id_column="person")``.
A row-level ``epsilon``-DP release is only ``m epsilon``-DP for a person with ``m`` rows, so
releases protecting different individuals do not compose: the accountant protects one
(``privacy_unit=``, one row by default), gives it to a call that names none, and refuses a
plan whose ``id_column`` differs.  Releases that truncate the same identifier to different
``max_per`` compose (each is ``epsilon_i``-DP for that identifier).  A charge is never
refunded: a mechanism that fails after reading the data (say, on an out-of-domain value) has
already let something out.

Every release is judged on its plan
-----------------------------------
``run`` charges and runs a *plan* (:func:`polars_dp.plan`): given one, that plan; given a
mechanism (``pdp.basic``, ``df.dp.basic``, a :func:`functools.partial` of either, with any
mix of positional and keyword arguments) the plan it would run, built from the call's
arguments exactly as a :class:`~polars_dp.Session` method builds it (:func:`planned_call`).
The seed, the noise kind and the neighbour relation are read from the whole call, partials
included, so a seed or ``noise="float"`` bound into a wrapper is refused like a direct one.
A callable whose plan cannot be seen (a lambda, a function of one's own) is refused before
it runs: call :meth:`Accountant.charge` yourself for a mechanism of your own.

Composition is exact
--------------------
Charges are exact rationals (:class:`fractions.Fraction`), summed and compared with the exact
value of ``total``; anything above is refused, with no slack.  One rule for every release:
it is charged its plan's ``plan.epsilon_spent``, ``sum_i Delta_i / b_i`` over the parts of
the release.  *Why that is what the release spends*: each part is a discrete Laplace
mechanism on integer values of L1 sensitivity ``Delta_i`` with scale ``b_i`` (an exact
rational of the ``2^-20`` grid), whose pmf ratio on neighbouring inputs is at most
``exp(Delta_i / b_i)``, so the part is ``Delta_i / b_i``-DP; PrivTree's exact split
decisions with scale ``lambda`` and ``delta >= lambda ln(beta)`` are ``(2 beta - 1) g /
((beta - 1) lambda)``-DP (PrivTree paper Sec. 3, ``g`` the group factor); what follows is
post-processing, and sequential composition (Dwork & Roth 2014, Thm. 3.16) adds the parts.
*Why it is at most ``epsilon``*: the plan splits ``epsilon`` into exact rationals
``epsilon_i`` that add up to it and rounds each scale *up* from ``Delta_i / epsilon_i``, so
``Delta_i / b_i <= epsilon_i``.  With ``noise="float"`` nothing is exact (see below) and the
charge is the exact value of the float ``epsilon``.

A float is its binary value: ``total=0.3`` is ``0.2999999999999999888...``, below the exact
``3/10`` that a Basic plan at ``0.1`` (scale ``2 / 0.1`` rounded up to the grid, exactly
``20``, spending exactly ``1/10``) and one at ``0.2`` (exactly ``1/5``) add up to.  ``total``
and the ``epsilon`` of :meth:`Accountant.charge` also take exact values: a
:class:`fractions.Fraction`, a :class:`decimal.Decimal` or a decimal string (``"0.3"``,
``"3/10"``), so ``Accountant(total="0.3")`` fits both.

Float noise (``noise="float"``) is refused unless the accountant was made with
``allow_float=True``: numpy's floating-point Laplace is not exactly ``epsilon``-DP (Mironov,
CCS 2012), so its charges bound nothing.  When allowed, the ledger marks the entry
``"<mechanism> (noise='float')"``.

Seeded releases do not compose: the noise of a seeded release is a known function of the
seed, so two seeded releases of neighbouring tables can cancel it exactly.  ``run`` refuses a
``seed``.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
import os
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Any

from polars_dp import mechanisms
from polars_dp.domains.privacy_unit import Rows, as_privacy_unit
from polars_dp.errors import BudgetExceededError, ParameterError
from polars_dp.ledger import UNITS_DO_NOT_COMPOSE, Ledger, check_dataset_name, domain_fingerprint, exact_text
from polars_dp.noise import check_neighbours
from polars_dp.plans import REGISTRY, Plan, plan, plan_class
from polars_dp.plans.spatial import SEQUENCE_NEIGHBOURS

#: What ``total`` and a charged ``epsilon`` may be: a float is its exact binary value.
ExactEpsilon = float | int | Fraction | Decimal | str

#: How to say exactly what one means (appended to the refusals).
EXACT_HINT = ("a float total or epsilon is its binary value (0.1 + 0.2 > 0.3): give an exact total "
              "as a fractions.Fraction or a decimal string (total='0.3'), a mechanism's exact epsilon "
              "as a fractions.Fraction (epsilon=Fraction(3, 10))")


#: The plan options that are part of the public domain (beside its positional declaration),
#: fingerprinted in a ledger file.
DOMAIN_OPTIONS = ("bounds", "alphabet", "max_length")


def exact_epsilon(value: ExactEpsilon, name: str = "epsilon") -> Fraction:
    """``value`` as an exact rational > 0: a float (or int) its exact binary value; a
    ``Fraction``, a ``Decimal`` or a string (``"0.1"``, ``"1/10"``, ``"1e-3"``) the exact
    number it spells.  A bool, a non-finite or non-positive value is a ParameterError."""
    exact: Fraction | None = None
    if isinstance(value, str):
        try:
            exact = Fraction(value.strip())
        except (ValueError, ZeroDivisionError):
            exact = None
    elif isinstance(value, Decimal):
        exact = Fraction(value) if value.is_finite() else None
    elif isinstance(value, numbers.Real) and not isinstance(value, bool):
        if isinstance(value, numbers.Rational):
            exact = Fraction(int(value.numerator), int(value.denominator))
        elif math.isfinite(float(value)):
            exact = Fraction(float(value))
    if exact is None or exact <= 0:
        raise ParameterError(f"{name} must be a finite number > 0 (a float, a Fraction or a decimal string "
                             f"such as '0.3'), got {value!r}", parameter=name)
    return exact


def planned_call(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], neighbours: str,
                 privacy_unit: Rows | None = None) -> tuple[Plan, bool | None]:
    """``(plan, progress)`` of the mechanism call ``name(data, *args, **kwargs)`` charged under
    ``neighbours``: a seed is refused, a different relation is refused, an unset one is the
    accountant's (for mechanisms with a ``neighbours`` option), as is an unset (or ``None``)
    ``privacy_unit`` (:meth:`Accountant.charge_plan` refuses another individual); the plan
    checks the rest."""
    kwargs = dict(kwargs)
    if kwargs.get("seed") is not None:
        raise ParameterError(
            f"a budgeted release cannot be seeded (got seed={kwargs['seed']!r}): a seed fixes the noise, so "
            "seeded releases of neighbouring data cancel it and compose with nothing; drop seed= (releases "
            f"then draw cryptographic randomness), or call pdp.{name}(...) directly for tests",
            parameter="seed")
    kwargs.pop("seed", None)
    progress = kwargs.pop("progress", None)
    if "neighbours" in kwargs:
        if kwargs["neighbours"] != neighbours:
            raise ParameterError(f"this budget composes releases under neighbours={neighbours!r}; got "
                                 f"neighbours={kwargs['neighbours']!r}", parameter="neighbours")
    elif "neighbours" in {o.name for o in plan_class(name).options_table}:
        kwargs["neighbours"] = neighbours
    if (privacy_unit is not None and kwargs.get("privacy_unit") is None
            and "privacy_unit" in {o.name for o in plan_class(name).options_table}):
        kwargs["privacy_unit"] = privacy_unit
    return plan(name, *args, **kwargs), progress


def resolve_call(mechanism: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
                 ) -> tuple[str, Any, tuple[Any, ...], dict[str, Any]]:
    """``(name, data, args, kwargs)``: the registered mechanism that ``mechanism(*args,
    **kwargs)`` calls, with its data and its other arguments, seen through
    :func:`functools.partial` (any depth: its arguments come first, the call's keywords win)
    and ``df.dp`` methods (their frame is the data).  Anything else is a ParameterError: its
    plan cannot be seen."""
    while isinstance(mechanism, functools.partial):
        args, kwargs = (*mechanism.args, *args), {**mechanism.keywords, **kwargs}
        mechanism = mechanism.func
    name = next((n for n, e in REGISTRY.items() if e.function is not None and e.function is mechanism), None)
    owner = getattr(mechanism, "__self__", None)
    if name is None and inspect.ismethod(mechanism) and isinstance(owner, mechanisms.BoundMechanisms):
        data = getattr(owner, "frame", None)  # df.dp: a frame; a Session's methods have their own budget
        if data is not None and mechanism.__name__ in REGISTRY:
            return mechanism.__name__, data, args, kwargs
    if name is None:
        raise ParameterError(
            f"Accountant.run cannot see the plan of {getattr(mechanism, '__qualname__', repr(mechanism))}: "
            "pass a plan (pdp.plan(...)), a mechanism (pdp.basic, df.dp.basic) or a functools.partial "
            "of one; for a mechanism of your own, call charge(epsilon, label) before running it",
            parameter="mechanism")
    first = next(iter(inspect.signature(mechanism).parameters))
    if args:
        return name, args[0], args[1:], kwargs
    if first in kwargs:
        kwargs = dict(kwargs)
        return name, kwargs.pop(first), args, kwargs
    raise ParameterError(f"{name} needs the data as its first argument", parameter=first)


@dataclass
class Accountant:
    """Tracks the epsilon spent on one dataset under one neighbour relation.

    ``run(mechanism, *args, epsilon=..., **kwargs)`` builds the mechanism's plan under the
    accountant's neighbour relation, charges its exact ``epsilon_spent`` if it fits in what is
    left, runs it and records the release.  ``ledger`` lists ``(label, epsilon charged)`` of
    every release.  ``total`` (also an exact ``Fraction`` or decimal string, see above) is
    kept as a float; ``total_exact`` is what charges are compared with.  ``allow_float=True``
    admits ``noise="float"`` releases (refused otherwise, see above).

    ``privacy_unit``: the individual every release protects (``pdp.Rows()``, one row, by
    default; module docstring): a plan that names none gets it, one protecting another
    individual (another ``id_column``) is refused.

    ``ledger=pdp.Ledger(path), dataset="people"``: the budget outlives the process
    (:mod:`polars_dp.ledger`).  ``total`` is then the dataset's total, fixed in the file by its
    first charge with its relation and individual (others later are a LedgerError); every charge is checked,
    under the file's lock, against the charges of every process, then appended before the
    data is read.  ``spent`` and ``remaining`` are the dataset's; ``ledger`` still lists this
    accountant's own charges, and ``book`` is the file.
    """

    total: ExactEpsilon
    neighbours: str = "replace"
    ledger: list[tuple[str, float]] = field(default_factory=list)
    allow_float: bool = False
    dataset: str | None = None
    book: Ledger | None = field(default=None, repr=False)
    privacy_unit: Rows = field(default_factory=Rows)
    _exact: list[Fraction] = field(default_factory=list, init=False, repr=False)
    _total: Fraction = field(default=Fraction(0), init=False, repr=False)

    def __init__(self, total: ExactEpsilon, neighbours: str = "replace",
                 ledger: list[tuple[str, float]] | Ledger | None = None, allow_float: bool = False, *,
                 dataset: str | None = None, privacy_unit: Rows | None = None):
        self.total, self.neighbours, self.allow_float = total, neighbours, allow_float
        self.privacy_unit = as_privacy_unit(privacy_unit)
        if isinstance(ledger, (str, os.PathLike)):
            raise ParameterError(f"ledger= takes a ledger file opened as pdp.Ledger(path), got the path "
                                 f"{str(ledger)!r}: pass ledger=pdp.Ledger({str(ledger)!r})",
                                 parameter="ledger")
        self.book = ledger if isinstance(ledger, Ledger) else None
        self.ledger = [] if ledger is None or isinstance(ledger, Ledger) else ledger
        self.dataset = dataset
        self._exact = []
        self._total = exact_epsilon(self.total, "total")
        self.total = float(self._total)
        check_neighbours(self.neighbours)
        if (self.book is None) != (dataset is None):
            raise ParameterError("a persistent budget needs both ledger=pdp.Ledger(path) and dataset='name' "
                                 f"(got ledger={ledger!r}, dataset={dataset!r})", parameter="dataset")
        if self.book is not None:
            self.book.check(check_dataset_name(dataset), self._total, self.neighbours,
                            self.privacy_unit.id_column)

    @property
    def total_exact(self) -> Fraction:
        """The total as the exact rational charges are compared with."""
        return self._total

    @property
    def spent_exact(self) -> Fraction:
        """The exact sum of the charges (ledger entries added by hand count as their floats); with
        a ledger file, of every charge to the dataset in the file."""
        if self.book is not None and self.dataset is not None:
            return self.book.spent(self.dataset)
        exact = [*self._exact, *(Fraction(eps) for _, eps in self.ledger[len(self._exact):])]
        return sum(exact, Fraction(0))

    @property
    def spent(self) -> float:
        return float(self.spent_exact)

    @property
    def remaining_exact(self) -> Fraction:
        """What is left of the total, exactly (never below 0)."""
        return max(Fraction(0), self._total - self.spent_exact)

    @property
    def remaining(self) -> float:
        return float(self.remaining_exact)

    def charge(self, epsilon: ExactEpsilon, label: str, *, exact: Fraction | None = None,
               mechanism: str | None = None, noise: str | None = None, domain: str | None = None) -> None:
        """Record ``epsilon`` (a float's exact binary value, or an exact ``Fraction`` / decimal
        string) for ``label``; raise BudgetExceededError (recording nothing) if the exact sum
        would exceed the exact total.  ``exact``: the exact value charged instead (a plan's
        ``epsilon_spent``; in ``(0, epsilon]``).  ``mechanism``, ``noise``, ``domain`` (a
        fingerprint): what a ledger file records beside the charge."""
        bound = exact_epsilon(epsilon)
        amount = bound if exact is None else Fraction(exact)
        if not 0 < amount <= bound:
            raise ParameterError(f"{label}: the exact charge {amount} must lie in (0, epsilon={epsilon!r}]",
                                 parameter="epsilon")
        if self.book is not None and self.dataset is not None:  # checked and appended under the file's lock
            self.book.charge(self.dataset, amount, total=self._total, neighbours=self.neighbours, label=label,
                             mechanism=mechanism, noise=noise, domain=domain,
                             id_column=self.privacy_unit.id_column)
        elif self.spent_exact + amount > self._total:
            raise BudgetExceededError(
                f"{label} asks for epsilon {exact_text(amount)} but only "
                f"{exact_text(self.remaining_exact)} of the total "
                f"{exact_text(self._total)} is left (spent {exact_text(self.spent_exact)} on "
                f"{len(self.ledger)} release(s); epsilons add exactly, as exact rationals, and "
                f"{EXACT_HINT}); lower epsilon or stop releasing from this data"
            )
        self._exact.append(amount)
        self.ledger.append((label, float(amount)))

    def ledger_label(self, label: str, noise: str) -> str:
        """``label`` as the ledger records it: float noise is refused unless ``allow_float``, and
        marked ``"<label> (noise='float')"`` when allowed (module docstring)."""
        if noise != "float":
            return label
        if not self.allow_float:
            raise ParameterError(
                f"{label} with noise='float' draws floating-point Laplace noise, which is not exactly "
                "epsilon-DP, so the budget cannot vouch for it; use noise='exact' (the default), "
                "or allow it with allow_float=True to record it anyway", parameter="noise")
        return f"{label} (noise='float')"

    def charge_plan(self, plan: Plan, label: str | None = None) -> Fraction:
        """Charge ``plan`` its exact ``epsilon_spent`` (the one rule, module docstring) and return
        it; refused, recording nothing, if the plan's neighbour relation or individual (its
        privacy unit's ``id_column``) is not the accountant's, if it draws float noise without
        ``allow_float``, if its declared domain is too large for this machine
        (:meth:`Plan.check_size`) or if it does not fit."""
        if not isinstance(plan, Plan):
            raise ParameterError(f"charge_plan takes a plan (pdp.plan(...)), got {type(plan).__name__}",
                                 parameter="plan")
        label = plan.name if label is None else label
        if plan.neighbours != self.neighbours:
            raise ParameterError(
                f"{label} is planned under neighbours={plan.neighbours!r} but this budget composes "
                f"releases under neighbours={self.neighbours!r}"
                + (f"; {SEQUENCE_NEIGHBOURS}" if plan.shape == "sequences" else ""),
                parameter="neighbours")
        unit = plan.privacy_unit
        if unit.id_column != self.privacy_unit.id_column:
            raise ParameterError(
                f"{label} protects {unit.individual} as one individual ({unit!r}) but this budget composes "
                f"releases protecting {self.privacy_unit.individual} ({self.privacy_unit!r}); "
                f"{UNITS_DO_NOT_COMPOSE}: declare the budget's unit "
                "(privacy_unit= on the Session or Accountant) and give every release that id_column",
                parameter="privacy_unit")
        plan.check_size()  # a domain too large for this machine is refused before it is charged
        spent = plan.epsilon_spent
        args, kwargs = plan.arguments()
        domain = domain_fingerprint([args, {k: kwargs[k] for k in DOMAIN_OPTIONS if k in kwargs}])
        self.charge(plan.epsilon, self.ledger_label(label, plan.noise), exact=spent, mechanism=plan.name,
                    noise=plan.noise, domain=domain)
        return spent

    def run(self, mechanism: Any, *args: Any, epsilon: float | None = None, **kwargs: Any) -> Any:
        """Charge, then run, the plan of ``mechanism(*args, epsilon=epsilon, **kwargs)`` under
        the accountant's neighbour relation (:func:`resolve_call`, :func:`planned_call`): its
        exact ``epsilon_spent`` is charged before the data is read.

        ``run(plan, frame, progress=None)`` takes a plan (:func:`polars_dp.plan`) instead.

        The charge stays even if the mechanism raises: an error raised after the data was read
        (e.g. a DomainError that names an offending value) depends on the data too.  Every
        refusal that depends on public inputs only (a seed, float noise, the relation, the
        individual, a bad option, a noise scale past its limit, a declared domain too large for
        this machine, the budget) comes first and charges nothing.
        The sequence models are add/remove-one only, so they run only under an
        ``add_remove`` accountant.
        """
        if isinstance(mechanism, Plan):
            return self._run_plan(mechanism, *args, epsilon=epsilon, **kwargs)
        if epsilon is not None:
            kwargs["epsilon"] = epsilon
        name, data, args, kwargs = resolve_call(mechanism, args, kwargs)
        planned, progress = planned_call(name, args, kwargs, self.neighbours, self.privacy_unit)
        self.charge_plan(planned)
        return planned.run(data, progress=progress)

    def _run_plan(self, plan: Plan, *frame: Any, epsilon: float | None = None, **kwargs: Any) -> Any:
        if "frame" in kwargs:
            frame = (*frame, kwargs.pop("frame"))
        if len(frame) != 1:
            raise ParameterError(f"run(plan, frame) runs the plan on one frame, the data; got {len(frame)} "
                                 "frames", parameter="frame")
        if kwargs.get("seed") is not None:
            raise ParameterError("the Accountant does not run seeded releases: drop seed=", parameter="seed")
        kwargs.pop("seed", None)
        if epsilon is not None and epsilon != plan.epsilon:
            raise ParameterError(f"the plan spends epsilon={plan.epsilon:g}; do not pass epsilon= "
                                 f"({epsilon!r}) with a plan", parameter="epsilon")
        self.charge_plan(plan)
        return plan.run(frame[0], **kwargs)


__all__ = ["EXACT_HINT", "Accountant", "ExactEpsilon", "exact_epsilon", "planned_call", "resolve_call"]
