"""``strategy="workload"`` on the grid mechanisms: the release is the one of ``plan("auto", ...)``
(the least exact expected error over the workload), recording the chosen plan's own mechanism,
and reads back verified."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import polars_dp as pdp
from polars_dp.errors import ParameterError
from polars_dp.plans import BasicPlan, PriveletPlan
from polars_dp.plans.auto import candidate_plans

GRID = [pdp.Ordinal("x", 0, 63), pdp.Ordinal("y", 0, 63)]
SMALL = [pdp.Ordinal("a", 0, 11),
         pdp.Nominal("b", pdp.Hierarchy.from_dict({"g": ["x", "y"], "h": ["z", "w"]}))]


def _frame(attrs, rows=400, seed=0):
    rng = np.random.default_rng(seed)
    out = {}
    for a in attrs:
        if isinstance(a, pdp.Nominal):
            out[a.column] = rng.choice(["x", "y", "z", "w"], rows).tolist()
        else:
            out[a.column] = rng.integers(0, a.n_cells, rows).tolist()
    return pl.DataFrame(out)


def _same(one, other) -> bool:
    """Equal releases up to their creation time (second resolution)."""
    def meta(r):
        return {k: v for k, v in r.metadata().items() if k != "created"}
    return meta(one) == meta(other) and np.array_equal(one.counts, other.counts)


@pytest.mark.parametrize("name", ["privelet", "basic"])
def test_the_release_is_the_auto_plans(name, tmp_path):
    workload = pdp.workload.marginals(GRID, 1)
    df = _frame(GRID)
    auto = pdp.plan("auto", GRID, epsilon=1.0, workload=workload)
    assert auto.release_mechanism == "hierarchical"
    chosen = pdp.plan(name, GRID, epsilon=1.0, workload=workload, strategy="workload")
    assert type(chosen) is type(auto) and chosen.record() == auto.record()
    release = getattr(pdp, name)(df, GRID, epsilon=1.0, workload=workload, strategy="workload", seed=5)
    assert release.mechanism == "hierarchical" and release.params == auto.record()
    assert _same(release, auto.run(df, seed=5))
    method = getattr(df.dp, name)
    assert _same(method(GRID, epsilon=1.0, workload=workload, strategy="workload", seed=5), release)
    path = tmp_path / "r.parquet"
    release.write_parquet(path)
    assert pdp.read_release(path) == release


def test_a_basic_choice_is_basics_release(tmp_path):
    """Ties keep the first candidate: on the identity workload with float noise Basic, whose
    release is exactly pdp.basic's."""
    workload = pdp.workload.identity(SMALL)
    df = _frame(SMALL)
    release = pdp.privelet(df, SMALL, epsilon=1.0, workload=workload, strategy="workload", noise="float",
                           seed=2)
    assert release.mechanism == "basic"
    assert _same(release, pdp.basic(df, SMALL, epsilon=1.0, noise="float", seed=2))
    path = tmp_path / "b.parquet"
    release.write_parquet(path)
    assert pdp.read_release(path) == release


def test_options_pass_to_the_candidates():
    workload = pdp.workload.ranges(SMALL)
    chosen = pdp.plan("privelet", SMALL, epsilon=0.5, workload=workload, strategy="workload",
                      neighbours="add_remove", noise="float")
    errors = [p.workload_error(workload) for p in candidate_plans(SMALL, epsilon=0.5, workload=workload,
                                                                  neighbours="add_remove", noise="float")]
    assert chosen.neighbours == "add_remove" and chosen.noise == "float" and chosen.epsilon == 0.5
    assert chosen.workload_error(workload) == min(errors)


def test_a_session_charges_the_chosen_plan():
    workload = pdp.workload.marginals(GRID, 1)
    session = pdp.Session(_frame(GRID), epsilon=2.0, neighbours="replace")
    release = session.privelet(GRID, epsilon=1.0, workload=workload, strategy="workload")
    plan = pdp.plan("auto", GRID, epsilon=1.0, workload=workload)
    assert release.mechanism == "hierarchical"
    assert session.spent == pytest.approx(float(plan.epsilon_spent), rel=1e-15)


def test_untransformed_workload_takes_a_declared_workload():
    """``untransformed="workload"`` with a declared workload picks the transformed set of least
    error over it (scored from per-axis sums): the least among Basic and every Privelet+ subset."""
    for workload in (pdp.workload.ranges(SMALL), pdp.workload.prefixes(SMALL[:1]),
                     pdp.workload.total(SMALL) + pdp.workload.identity(SMALL[1:])):
        plan = pdp.plan("privelet", SMALL, epsilon=1.0, untransformed="workload", workload=workload)
        subsets = [p for p in candidate_plans(SMALL, epsilon=1.0, workload=workload)
                   if p.release_mechanism != "hierarchical"]
        best = min(subsets, key=lambda p: p.workload_error(workload))
        assert plan.transformed == best.transformed
        assert plan.workload_error(workload) == pytest.approx(best.workload_error(workload), rel=1e-12)
        assert plan.record()["untransformed_choice"] == "workload"
    wide = [pdp.Ordinal("a", 0, 1023), SMALL[1]]
    chosen = pdp.plan("privelet", wide, epsilon=1.0, untransformed="workload",
                      workload=pdp.workload.prefixes(wide[:1]))
    assert chosen.transformed == ("a",) and chosen.release_mechanism == "privelet+"


@pytest.mark.parametrize(("call", "match"), [
    (lambda: pdp.plan("privelet", SMALL, epsilon=1.0, strategy="workload"), "needs workload="),
    (lambda: pdp.plan("privelet", SMALL, epsilon=1.0, strategy="workload", untransformed=["a"],
                      workload=pdp.workload.ranges(SMALL)), "drop untransformed="),
    (lambda: pdp.plan("basic", SMALL, epsilon=1.0, workload=pdp.workload.ranges(SMALL)),
     "only with strategy='workload'"),
    (lambda: pdp.plan("basic", SMALL, epsilon=1.0, strategy="best", workload=pdp.workload.ranges(SMALL)),
     "strategy"),
    (lambda: PriveletPlan(SMALL, epsilon=1.0, strategy="workload", workload=pdp.workload.ranges(SMALL)),
     "build the plan with"),
    (lambda: BasicPlan(SMALL, epsilon=1.0, strategy="workload", workload=pdp.workload.ranges(SMALL)),
     "build the plan with"),
    (lambda: pdp.plan("privelet", SMALL, epsilon=1.0, strategy="workload",
                      workload=pdp.workload.ranges([pdp.Ordinal("z", 0, 3)])), "'z', which is not"),
])
def test_refusals(call, match):
    with pytest.raises(ParameterError, match=match) as info:
        call()
    assert info.value.parameter in ("workload", "untransformed", "strategy")
