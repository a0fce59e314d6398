"""``epsilon_for`` on hierarchical plans: the plan's strategy (levels and budget shares) kept, the
accuracy of float noise is exactly ``c / epsilon``; exact noise is bisected to the float."""

from __future__ import annotations

import math

import polars as pl
import pytest

import polars_dp as pdp
from polars_dp.errors import ParameterError

ATTRS = [pdp.Ordinal("a", 0, 63), pdp.Ordinal("b", 0, 31)]
QUERIES = pl.DataFrame({"a_lo": [0, 10, 5], "a_hi": [40, 20, 5], "b_lo": [0, 3, 0], "b_hi": [31, 9, 31]})


def _accuracy(plan, epsilon, over="max"):
    values = plan.at_epsilon(epsilon).accuracy(QUERIES)["accuracy"]
    return values.max() if over == "max" else values.mean()


@pytest.mark.parametrize("workload", [None, pdp.workload.ranges(ATTRS)])
def test_float_accuracy_scales_as_one_over_epsilon(workload):
    plan = pdp.plan("hierarchical", ATTRS, epsilon=1.0, noise="float", workload=workload)
    found = [plan.epsilon_for(QUERIES, accuracy=target) for target in (10.0, 40.0, 160.0)]
    assert found[0] * 10.0 == pytest.approx(found[1] * 40.0, rel=1e-9)
    assert found[1] * 40.0 == pytest.approx(found[2] * 160.0, rel=1e-9)
    assert _accuracy(plan, found[1]) <= 40.0 < _accuracy(plan, found[1] * (1 - 1e-9))


@pytest.mark.parametrize("over", ["max", "mean"])
def test_exact_noise_is_the_smallest_float_epsilon(over):
    plan = pdp.plan("hierarchical", ATTRS, epsilon=0.5, workload=pdp.workload.prefixes(ATTRS))
    eps = plan.epsilon_for(QUERIES, accuracy=30.0, over=over)
    assert _accuracy(plan, eps, over) <= 30.0 < _accuracy(plan, math.nextafter(eps, 0.0), over)
    kept = plan.at_epsilon(eps)  # the strategy is kept: the same shares, and levels
    assert (kept.budget_units == plan.budget_units).all() and kept.axes == plan.axes
    assert kept.epsilon_spent <= eps


def test_an_unreachable_target_is_refused():
    plan = pdp.plan("hierarchical", ATTRS, epsilon=1.0)
    with pytest.raises(ParameterError, match="no epsilon up to") as info:
        plan.epsilon_for(QUERIES, accuracy=1e-6)
    assert info.value.parameter == "accuracy"
    with pytest.raises(ParameterError, match="over must be"):
        plan.epsilon_for(QUERIES, accuracy=1.0, over="median")
