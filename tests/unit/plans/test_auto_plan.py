"""``plan("auto", ..., workload=W)`` and ``compare`` over declared workloads: every candidate's
error is its own error bars averaged over the workload, and the choice is the least."""

from __future__ import annotations

import itertools
import math
import time
import warnings

import numpy as np
import polars as pl
import pytest

import polars_dp as pdp
from polars_dp.errors import ParameterError
from polars_dp.kernels.wavelet_variance import axis_workload_factor, range_variance_factor
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


def _listed_factor(attribute, axis, transformed):
    starts, stops, weights = axis.intervals()
    f = range_variance_factor(attribute, starts, stops) if transformed else (stops - starts).astype(float)
    return float(f @ weights)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 64, 100])
def test_axis_workload_factor_equals_the_listed_sum(n):
    """The per-axis sum of variance factors from the Gram statistics equals the sum over the
    listed intervals, for every interval family, transformed or not, padded or not."""
    a = pdp.Ordinal("x", 0, n - 1)
    for make in (pdp.workload.ranges, pdp.workload.prefixes, pdp.workload.random_ranges,
                 pdp.workload.identity, pdp.workload.total):
        (_, [axis]), = make(a).axis_terms([a])
        for transformed in (True, False):
            listed = _listed_factor(a, axis, transformed)
            assert axis_workload_factor(a, axis, transformed) == pytest.approx(listed, rel=1e-9, abs=0)


def test_product_and_union_workload_error_equals_the_listed_queries():
    """A product workload's mean error is the product of per-axis means: equal to the error bars
    of every listed query (3-D with a nominal axis, and a weighted union)."""
    attrs = [pdp.Ordinal("a", 0, 9), pdp.Ordinal("c", 0, 4), ATTRS[1]]
    ranges = pdp.workload.ranges(attrs)
    rows = [{"a_lo": lo, "a_hi": hi, "c_lo": cl, "c_hi": ch, "b": node}
            for lo in range(10) for hi in range(lo, 10) for cl in range(5) for ch in range(cl, 5)
            for node in [None, "g", "h", "x", "y", "z", "w"]]
    frame = pl.DataFrame(rows)
    prefixes = pdp.workload.prefixes(attrs[:2])
    prefix_rows = pl.DataFrame([{"a_lo": 0, "a_hi": hi, "c_lo": 0, "c_hi": ch} for hi in range(10)
                                for ch in range(5)])
    union = pdp.workload.union(ranges, prefixes, weights=[1.0, 3.0])
    plans = [pdp.plan("basic", attrs, epsilon=0.7)] + [
        pdp.plan("privelet", attrs, epsilon=0.7, untransformed=u) for u in ([], ["c"], ["a", "b"])]
    for plan in plans:  # the explicit queries: each one's own error bar (range_variance)
        listed = plan.workload_error(frame)
        assert plan.workload_error(ranges) == pytest.approx(listed, rel=1e-9), plan.strategy_name
        both = listed * frame.height + 3.0 * plan.workload_error(prefix_rows) * prefix_rows.height
        assert plan.workload_error(union) == pytest.approx(both / (frame.height + 3 * prefix_rows.height),
                                                           rel=1e-9), plan.strategy_name


def test_all_ranges_of_65536_cells_without_listing():
    """2.1e9 intervals, never listed: Basic and Privelet score all ranges of a 65,536-cell axis
    in well under a second each (the listing refuses past 2^26 intervals)."""
    a = [pdp.Ordinal("x", 0, 65535)]
    workload = pdp.workload.ranges(a)
    for name in ("basic", "privelet"):
        plan = pdp.plan(name, a, epsilon=1.0, neighbours="add_remove", noise="float")
        start = time.process_time()
        mse = plan.workload_error(workload)
        assert time.process_time() - start < 2.0
        # Basic: 2 lambda^2 times the mean range length (n + 2) / 3
        if name == "basic":
            assert mse == pytest.approx(2.0 * (65535 + 3) / 3, rel=1e-12)
        else:
            assert np.isfinite(mse) and mse > 0


def test_the_levels_chosen_for_a_workload_do_not_depend_on_epsilon_or_the_relation():
    """The chains are compared at unit scale (the optimal shares are scale-free), so only the
    budgets scale with epsilon / Delta."""
    workload = pdp.workload.ranges(ATTRS)
    chains = set()
    for epsilon, neighbours in ((1.0, "add_remove"), (1.0, "replace"), (0.5, "add_remove"), (4.0, "replace")):
        plan = pdp.plan("hierarchical", ATTRS, epsilon=epsilon, workload=workload, neighbours=neighbours)
        chains.add(str(plan.record()["levels"]))
    assert len(chains) == 1, chains


@pytest.mark.parametrize("epsilon", [1500.0, 5000.0, 1e4, 1e6])
def test_a_large_epsilon_is_planned_without_overflow(epsilon):
    """A large epsilon is valid input: the hierarchical plan, ``auto`` and ``compare`` (and a
    release chosen by ``strategy="workload"``) give finite error bars, with no float warning,
    however small the noise (a budget of thousands of Delta per level tuple)."""
    attrs = [pdp.Ordinal("age", 0, 99)]
    workload = pdp.workload.ranges(attrs)
    queries = pl.DataFrame({"age_lo": [0, 10, 50], "age_hi": [99, 19, 50]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for noise in ("exact", "float"):
            plan = pdp.plan("hierarchical", attrs, epsilon=epsilon, workload=workload, noise=noise)
            answer = {k: v.to_numpy() for k, v in plan.accuracy(queries).to_dict().items()}
            smaller = pdp.plan("hierarchical", attrs, epsilon=epsilon / 4, workload=workload, noise=noise)
            assert np.all(np.isfinite(answer["std"])) and np.all(answer["std"] >= 0)
            assert np.all(np.isfinite(answer["accuracy"])) and np.all(answer["accuracy"] > 0)
            assert np.all(answer["accuracy"] <= smaller.accuracy(queries)["accuracy"].to_numpy())
            assert 0 <= plan.workload_error(workload) < math.inf
            uniform = pdp.plan("hierarchical", attrs, epsilon=epsilon, noise=noise).accuracy(queries)
            assert np.all(np.isfinite(uniform["accuracy"].to_numpy()))
        chosen = pdp.plan("auto", attrs, epsilon=epsilon, workload=workload)
        table = pdp.compare(attrs, workload, epsilon=epsilon)
        assert table["rmse"].is_finite().all() and table["plan"][0] == chosen.strategy_name
        frame = pl.DataFrame({"age": [3, 3, 40, 99]})
        release = pdp.privelet(frame, attrs, epsilon=epsilon, workload=workload, strategy="workload", seed=1)
        assert release.range_count(age=(0, 99)) == pytest.approx(4.0, abs=0.5)
