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

Seeded releases do not compose: the noise of a seeded release is a known function of the
seed, so two seeded releases of neighbouring tables can cancel it exactly.  ``run`` refuses a
``seed``.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from polars_dp.errors import BudgetExceededError, ParameterError
from polars_dp.noise import check_epsilon, check_neighbours

#: Spending within this relative slack of the total is allowed (float sums of e.g. 0.1 + 0.2).
_SLACK = 1e-9


@dataclass
class Accountant:
    """Tracks the epsilon spent on one dataset under one neighbour relation.

    ``run(mechanism, *args, epsilon=..., **kwargs)`` checks that ``epsilon`` fits in what is
    left, runs the mechanism with ``neighbours`` set to the accountant's relation, and
    records the release.  ``ledger`` lists ``(mechanism, epsilon)`` of every release.
    """

    total: float
    neighbours: str = "replace"
    ledger: list[tuple[str, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.total = check_epsilon(self.total, "total")
        check_neighbours(self.neighbours)

    @property
    def spent(self) -> float:
        return math.fsum(eps for _, eps in self.ledger)

    @property
    def remaining(self) -> float:
        return max(0.0, self.total - self.spent)

    def charge(self, epsilon: float, label: str) -> None:
        """Record ``epsilon`` for ``label``; raise BudgetExceededError (recording nothing) if it
        does not fit."""
        epsilon = check_epsilon(epsilon)
        if self.spent + epsilon > self.total * (1 + _SLACK):
            raise BudgetExceededError(
                f"{label} asks for epsilon={epsilon:g} but only {self.remaining:g} of the total "
                f"{self.total:g} is left (spent {self.spent:g} on {len(self.ledger)} release(s)); "
                "lower epsilon or stop releasing from this data"
            )
        self.ledger.append((label, epsilon))

    def run(self, mechanism: Callable[..., Any], *args: Any, epsilon: float, **kwargs: Any) -> Any:
        """Charge ``epsilon``, then call ``mechanism(*args, epsilon=epsilon, **kwargs)`` under the
        accountant's neighbour relation.

        The charge stays even if the mechanism raises: an error raised after the data was read
        (e.g. a DomainError that names an offending value) depends on the data too.
        Mechanisms without a ``neighbours`` parameter (the sequence models) are add/remove-one
        only, so they run only under an ``add_remove`` accountant.
        """
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


__all__ = ["Accountant"]
