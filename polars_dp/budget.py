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
one relation and refuses the other.  A charge is never refunded: a mechanism that fails
after reading the data (say, on an out-of-domain value) has already let something out.

Composition is exact: charges are exact rationals (:class:`fractions.Fraction`), summed and
compared with the exact value of ``total``; anything above is refused, with no slack.

* A plan (``run(plan, frame)``, :meth:`polars_dp.Session.run` and every ``Session`` method)
  is charged its ``plan.epsilon_spent``: ``sum_i Delta_i / b_i`` over the parts of the
  release.  *Why that is what the release spends*: each part is a discrete Laplace mechanism
  on integer values of L1 sensitivity ``Delta_i`` with scale ``b_i`` (an exact rational of the
  ``2^-20`` grid), whose pmf ratio on neighbouring inputs is at most ``exp(Delta_i / b_i)``,
  so the part is ``Delta_i / b_i``-DP; PrivTree's exact split decisions with scale ``lambda``
  and ``delta >= lambda ln(beta)`` are ``(2 beta - 1) g / ((beta - 1) lambda)``-DP (PrivTree
  paper Sec. 3, ``g`` the group factor); what follows is post-processing, and sequential
  composition (Dwork & Roth 2014, Thm. 3.16) adds the parts.  *Why it is at most
  ``epsilon``*: the plan splits ``epsilon`` into exact rationals ``epsilon_i`` that add up to
  it and rounds each scale *up* from ``Delta_i / epsilon_i``, so ``Delta_i / b_i <=
  epsilon_i``.  With ``noise="float"`` nothing is exact (see below) and the charge is the
  exact value of the float ``epsilon``.
* ``run(mechanism, ..., epsilon=...)`` (a function) is charged the exact value of the float
  ``epsilon`` (a bound on what the mechanism spends).

Decimal floats are binary fractions: ``0.1 + 0.2`` exceeds ``0.3`` (``0.1`` is
``0.1000000000000000055...``, ``0.3`` is ``0.2999999999999999888...``), so ten function charges
of ``0.1`` do not fit in a total of ``1.0``.  Ten *plans* at ``epsilon=0.1`` often do: a
Basic plan under ``replace`` neighbours has scale ``2 / 0.1`` rounded up to the grid, exactly
``20``, and spends exactly ``1/10``.  Otherwise choose a total a little larger, or epsilons that
are exact binary fractions (``0.125``, ``0.25``).

Float noise (``noise="float"``) is refused unless the accountant was made with
``allow_float=True``: numpy's floating-point Laplace is not exactly ``epsilon``-DP (Mironov,
CCS 2012), so its charges bound nothing.  When allowed, the ledger marks the entry
``"<mechanism> (noise='float')"``.

Seeded releases do not compose: the noise of a seeded release is a known function of the
seed, so two seeded releases of neighbouring tables can cancel it exactly.  ``run`` refuses a
``seed``.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from polars_dp.errors import BudgetExceededError, ParameterError
from polars_dp.noise import check_epsilon, check_neighbours


@dataclass
class Accountant:
    """Tracks the epsilon spent on one dataset under one neighbour relation.

    ``run(mechanism, *args, epsilon=..., **kwargs)`` checks that ``epsilon`` fits in what is
    left, runs the mechanism with ``neighbours`` set to the accountant's relation, and
    records the release.  ``ledger`` lists ``(mechanism, epsilon)`` of every release.
    ``allow_float=True`` admits ``noise="float"`` releases (refused otherwise, see above).
    """

    total: float
    neighbours: str = "replace"
    ledger: list[tuple[str, float]] = field(default_factory=list)
    allow_float: bool = False
    _exact: list[Fraction] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        self.total = check_epsilon(self.total, "total")
        check_neighbours(self.neighbours)

    @property
    def spent_exact(self) -> Fraction:
        """The exact sum of the charges (a plan's ``epsilon_spent``, else the exact value of the
        float epsilon; ledger entries added by hand count as their floats)."""
        exact = [*self._exact, *(Fraction(eps) for _, eps in self.ledger[len(self._exact):])]
        return sum(exact, Fraction(0))

    @property
    def spent(self) -> float:
        return float(self.spent_exact)

    @property
    def remaining(self) -> float:
        return float(max(Fraction(0), Fraction(self.total) - self.spent_exact))

    def charge(self, epsilon: float, label: str, *, exact: Fraction | None = None) -> None:
        """Record ``epsilon`` for ``label``; raise BudgetExceededError (recording nothing) if the
        exact sum would exceed the exact total.  ``exact``: the exact value charged instead of
        the float's (a plan's ``epsilon_spent``; in ``(0, epsilon]``)."""
        epsilon = check_epsilon(epsilon)
        amount = Fraction(epsilon) if exact is None else Fraction(exact)
        if not 0 < amount <= Fraction(epsilon):
            raise ParameterError(f"{label}: the exact charge {amount} must lie in (0, epsilon={epsilon!r}]",
                                 parameter="epsilon")
        if self.spent_exact + amount > Fraction(self.total):
            raise BudgetExceededError(
                f"{label} asks for epsilon={epsilon:g} (exactly {float(amount):.17g}) but only "
                f"{self.remaining:.17g} of the total {self.total:g} is left (spent {self.spent:.17g} on "
                f"{len(self.ledger)} release(s); epsilons add exactly, as exact rationals); lower "
                "epsilon or stop releasing from this data"
            )
        self._exact.append(amount)
        self.ledger.append((label, epsilon if exact is None else float(amount)))

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

    def run(self, mechanism: Any, *args: Any, epsilon: float | None = None, **kwargs: Any) -> Any:
        """Charge ``epsilon``, then call ``mechanism(*args, epsilon=epsilon, **kwargs)`` under the
        accountant's neighbour relation.

        ``run(plan, frame, progress=None)`` takes a plan (:func:`polars_dp.plan`) instead: its
        exact ``epsilon_spent`` is charged (module docstring; its neighbour relation must be
        the accountant's) before ``plan.run(frame)`` reads the data.

        The charge stays even if the mechanism raises: an error raised after the data was read
        (e.g. a DomainError that names an offending value) depends on the data too.
        Mechanisms without a ``neighbours`` parameter (the sequence models) are add/remove-one
        only, so they run only under an ``add_remove`` accountant.
        """
        if getattr(mechanism, "is_plan", False):
            return self._run_plan(mechanism, *args, epsilon=epsilon, **kwargs)
        if epsilon is None:
            raise ParameterError("Accountant.run(mechanism, ...) needs epsilon=", parameter="epsilon")
        if kwargs.get("seed") is not None:
            raise ParameterError(
                "the Accountant does not run seeded releases: a seed fixes the noise, so seeded "
                "releases of neighbouring data cancel it and compose with nothing; drop seed= "
                "(releases then draw cryptographic randomness)"
            )
        given = kwargs.pop("neighbours", self.neighbours)
        if given != self.neighbours:
            raise ParameterError(
                f"this accountant composes releases under neighbours={self.neighbours!r}; "
                f"got neighbours={given!r}"
            )
        label = getattr(mechanism, "__name__", repr(mechanism))
        label = self.ledger_label(label, kwargs.get("noise", "exact"))
        try:
            takes_neighbours = "neighbours" in inspect.signature(mechanism).parameters
        except (TypeError, ValueError):  # builtins without a signature
            takes_neighbours = True
        if not takes_neighbours and self.neighbours != "add_remove":
            raise ParameterError(
                f"{label} is differentially private under add/remove-one neighbours only; "
                "run it with an Accountant(neighbours='add_remove')"
            )
        self.charge(epsilon, label)
        if takes_neighbours:
            kwargs["neighbours"] = self.neighbours
        return mechanism(*args, epsilon=epsilon, **kwargs)

    def _run_plan(self, plan: Any, frame: Any, *, epsilon: float | None = None, **kwargs: Any) -> Any:
        if kwargs.get("seed") is not None:
            raise ParameterError("the Accountant does not run seeded releases: drop seed=", parameter="seed")
        if epsilon is not None and epsilon != plan.epsilon:
            raise ParameterError(f"the plan spends epsilon={plan.epsilon:g}; do not pass epsilon= "
                                 f"({epsilon!r}) with a plan", parameter="epsilon")
        if plan.neighbours != self.neighbours:
            raise ParameterError(f"this accountant composes releases under neighbours={self.neighbours!r}; "
                                 f"the plan is under neighbours={plan.neighbours!r}", parameter="neighbours")
        self.charge(plan.epsilon, self.ledger_label(plan.name, plan.noise), exact=plan.epsilon_spent)
        return plan.run(frame, **kwargs)


__all__ = ["Accountant"]
