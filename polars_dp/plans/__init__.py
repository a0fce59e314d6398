"""Plans: a release decided from public inputs before any data is read.

>>> import polars_dp as pdp
>>> plan = pdp.plan("privelet", [pdp.Ordinal("age", 0, 99)], epsilon=1.0)
>>> round(plan.range_std(age=(20, 29)), 3)
19.098
>>> plan.epsilon_effective <= 1.0
True

``plan.run(frame)`` then releases exactly what ``pdp.privelet(frame, ...)`` would.  See
:mod:`polars_dp.plans.base` (the registry), :mod:`polars_dp.plans.grid` (calibration and
error before data) and :mod:`polars_dp.plans.spatial`.  Importing this package imports every
module of it, so each plan class in it is registered.
"""

from __future__ import annotations

from typing import Any

from polars_dp.plans.auto import auto_plan, compare
from polars_dp.plans.base import REGISTRY, Entry, Plan, discover, from_record, known_mechanisms, plan_class
from polars_dp.plans.grid import BasicPlan, GridPlan, PriveletPlan
from polars_dp.plans.hierarchical import HierarchicalPlan
from polars_dp.plans.spatial import (
    AdaptiveGridPlan,
    NgramPlan,
    PriveletGridPlan,
    PrivTreePlan,
    PrivTreeSequencesPlan,
    UniformGridPlan,
)

discover(__name__, __path__)


def plan(mechanism: str, *args: Any, **options: Any) -> Plan:
    """The plan of ``mechanism`` (``"basic"``, ``"privelet"``, ``"privtree"``, ...) with the
    mechanism's arguments less the data, the seed and ``progress``; no data is read.
    ``"auto"`` with ``workload=W``: the grid plan (Basic, Privelet, Privelet+, hierarchical) of
    least exact expected error over ``W`` (:mod:`polars_dp.plans.auto`); so is a grid mechanism's
    plan with ``strategy="workload"``."""
    if mechanism == "auto":
        return auto_plan(*args, **options)
    return plan_class(mechanism).make(*args, **options)


__all__ = ["REGISTRY", "AdaptiveGridPlan", "BasicPlan", "Entry", "GridPlan", "HierarchicalPlan", "NgramPlan",
           "Plan",
           "PriveletGridPlan", "PriveletPlan", "PrivTreePlan", "PrivTreeSequencesPlan", "UniformGridPlan",
           "compare", "from_record", "known_mechanisms", "plan", "plan_class"]
