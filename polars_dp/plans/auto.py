"""One chooser across the grid strategies: the plan of least exact expected error for a workload.

``pdp.plan("auto", attributes, epsilon=..., workload=W)`` scores, before any data and from
public inputs only, Basic, Privelet, every Privelet+ subset (up to
:data:`~polars_dp.plans.grid.EXHAUSTIVE_MAX` attributes; above it Basic, Privelet and the
paper's rule) and the hierarchical plan with budgets optimised for ``W`` (Qardaji, Yang, Li,
VLDB 2013; McKenna et al., VLDB 2018), each by its exact expected mean squared error over ``W``
(:meth:`~polars_dp.plans.grid.GridPlan.workload_error`), and returns the least.
``pdp.compare(attributes, W, epsilon=...)`` shows the same candidates side by side.
``strategy="workload"`` on a grid mechanism (``pdp.privelet(df, attributes, epsilon=...,
workload=W, strategy="workload")``, ``pdp.basic``) releases under this choice
(:meth:`~polars_dp.plans.grid.GridPlan.make`); the release records the chosen plan's own
mechanism and parameters.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

import numpy as np
import polars as pl

from polars_dp.domains.attributes import Attribute, as_attributes
from polars_dp.errors import ParameterError
from polars_dp.plans import grid
from polars_dp.plans.grid import (
    EXHAUSTIVE_MAX,
    BasicPlan,
    GridPlan,
    PriveletPlan,
    declared_workload,
    register_chooser,
    transformable,
)
from polars_dp.plans.hierarchical import HierarchicalPlan


def _own(cls: type[GridPlan], options: dict[str, Any]) -> dict[str, Any]:
    names = {o.name for o in cls.options_table}
    return {k: v for k, v in options.items() if k in names}


def candidate_plans(attributes: Attribute | Iterable[Attribute], *, epsilon: float, workload: Any,
                    **options: Any) -> list[GridPlan]:
    """The plans ``"auto"`` chooses among (module docstring); ``options`` go to the plans whose
    tables hold them (``levels`` to the hierarchical one only)."""
    if workload is None:
        raise ParameterError("plan('auto', ...) needs workload= (a pdp.workload object or a query frame): "
                             "the choice minimises its expected error", parameter="workload")
    attrs = as_attributes(attributes)
    tables = {o.name for cls in (BasicPlan, PriveletPlan, HierarchicalPlan) for o in cls.options_table}
    for key in options:
        if key not in tables or key in ("untransformed", "workload", "strategy"):
            raise ParameterError(f"plan('auto', ...) has no option {key!r}; it takes the options of the grid "
                                 "mechanisms (neighbours, noise, levels, ...)", parameter=key)
    declared = declared_workload(attrs, workload)
    out: list[GridPlan] = [BasicPlan(attrs, epsilon=epsilon, **_own(BasicPlan, options))]
    if len(attrs) <= EXHAUSTIVE_MAX:
        masks = [m for m in itertools.product([False, True], repeat=len(attrs)) if any(m)]
    else:
        masks = [tuple(True for _ in attrs)]
    sets = [[a.column for a, t in zip(attrs, m, strict=True) if not t] for m in masks
            if all(transformable(a) or not t for a, t in zip(attrs, m, strict=True))]
    if len(attrs) > EXHAUSTIVE_MAX:
        sets.append("auto")  # type: ignore[arg-type]
    privelet = _own(PriveletPlan, options)
    out += [PriveletPlan(attrs, epsilon=epsilon, untransformed=s, **privelet) for s in sets]
    out.append(HierarchicalPlan(attrs, epsilon=epsilon, workload=declared, **_own(HierarchicalPlan, options)))
    return out


def auto_plan(attributes: Attribute | Iterable[Attribute], *, epsilon: float, workload: Any = None,
              **options: Any) -> GridPlan:
    """The candidate of least exact expected mean squared error over ``workload`` (the first on ties)."""
    plans = candidate_plans(attributes, epsilon=epsilon, workload=workload, **options)
    declared = declared_workload(plans[0].attributes, workload)
    errors = [p.workload_error(declared) for p in plans]
    return plans[int(np.argmin(errors))]


register_chooser("workload", auto_plan)


def compare(plans: Any, queries: Any, *, align: str = "exact", epsilon: float | None = None,
            **options: Any) -> pl.DataFrame:
    """:func:`polars_dp.plans.grid.compare` of ``plans`` over ``queries``; when ``plans`` are the
    attributes (declarations) instead, the candidates of ``plan("auto", attributes,
    epsilon=epsilon, workload=queries, **options)`` side by side (``plan``, ``mechanism``,
    ``epsilon``, ``rmse``, ``mean``; best first)."""
    if isinstance(plans, Attribute) or (isinstance(plans, (list, tuple)) and plans
                                        and all(isinstance(a, Attribute) for a in plans)):
        if epsilon is None:
            raise ParameterError("compare(attributes, workload, epsilon=...) needs epsilon",
                                 parameter="epsilon")
        candidates = candidate_plans(plans, epsilon=epsilon, workload=queries, **options)
        return grid.compare(candidates, declared_workload(candidates[0].attributes, queries))
    if epsilon is not None or options:
        raise ParameterError("compare(plans, queries) takes no plan options; give them to the plans",
                             parameter="epsilon")
    return grid.compare(plans, queries, align=align)


__all__ = ["auto_plan", "candidate_plans", "compare"]
