"""``plan("auto", ..., workload=W)`` and ``compare`` over declared workloads: every candidate's
error is its own error bars averaged over the workload, and the choice is the least."""

from __future__ import annotations

import itertools

import numpy as np
import polars as pl
import pytest

import polars_dp as pdp
from polars_dp.errors import ParameterError
from polars_dp.plans.auto import candidate_plans

ATTRS = [pdp.Ordinal("a", 0, 11),
         pdp.Nominal("b", pdp.Hierarchy.from_dict({"g": ["x", "y"], "h": ["z", "w"]}))]


def _all_ranges() -> pl.DataFrame:
    """Every query of ``workload.ranges(ATTRS)`` listed: each interval of ``a`` times each node of ``b``."""
    intervals = [(lo, hi) for lo in range(12) for hi in range(lo, 12)]
    nodes = [None, "g", "h", "x", "y", "z", "w"]
    rows = [{"a_lo": lo, "a_hi": hi, "b": node} for (lo, hi), node in itertools.product(intervals, nodes)]
    return pl.DataFrame(rows)


@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
def test_workload_error_is_the_mean_of_the_error_bars(neighbours):
    workload = pdp.workload.ranges(ATTRS)
    frame = _all_ranges()
    assert workload.queries == frame.height
    for plan in candidate_plans(ATTRS, epsilon=0.8, workload=workload, neighbours=neighbours):
        listed = float((plan.accuracy(frame)["std"].to_numpy() ** 2).mean())
        assert plan.workload_error(workload) == pytest.approx(listed, rel=1e-9), plan.strategy_name
        assert plan.workload_error(frame) == pytest.approx(listed, rel=1e-9), plan.strategy_name


def test_auto_is_the_least_of_the_candidates_and_compare_shows_them():
    workload = pdp.workload.ranges(ATTRS)
    chosen = pdp.plan("auto", ATTRS, epsilon=1.0, workload=workload, neighbours="add_remove")
    table = pdp.compare(ATTRS, workload, epsilon=1.0, neighbours="add_remove")
    names = {p.strategy_name for p in candidate_plans(ATTRS, epsilon=1.0, workload=workload,
                                                      neighbours="add_remove")}
    assert set(table["plan"]) == names == {"Basic", "Privelet", "Privelet+ Tu", "Privelet+ uT",
                                           next(n for n in names if n.startswith("Hierarchical"))}
    assert table["rmse"].is_sorted()
    assert table["plan"][0] == chosen.strategy_name
    assert np.sqrt(chosen.workload_error(workload)) == pytest.approx(table["rmse"][0], rel=1e-12)
    plans = [pdp.plan("basic", ATTRS, epsilon=1.0, neighbours="add_remove"), chosen]
    assert pdp.compare(plans, workload)["plan"].to_list()[0] == chosen.strategy_name


def test_marginals_choose_the_hierarchy():
    attrs = [pdp.Ordinal("x", 0, 63), pdp.Ordinal("y", 0, 63)]
    chosen = pdp.plan("auto", attrs, epsilon=1.0, workload=pdp.workload.marginals(attrs, 1))
    assert chosen.release_mechanism == "hierarchical" and chosen.budget_choice == "workload"


@pytest.mark.parametrize(("options", "match"), [
    ({}, "needs workload="),
    ({"workload": pdp.workload.ranges(ATTRS), "untransformed": ["a"]}, "no option 'untransformed'"),
    ({"workload": pdp.workload.ranges([pdp.Ordinal("z", 0, 3)])}, "'z', which is not a declared attribute"),
])
def test_auto_refusals(options, match):
    with pytest.raises(ParameterError, match=match):
        pdp.plan("auto", ATTRS, epsilon=1.0, **options)
