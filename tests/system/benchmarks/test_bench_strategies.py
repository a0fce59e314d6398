"""bench_strategies --optimiser: the optimiser's wall and CPU time per workload, fast against
exhaustive, and the targets it prints."""

from __future__ import annotations

import math

import pytest

from benchmarks import bench_strategies
from polars_dp.kernels import level_budgets as LB


def test_optimiser_rows_time_fast_and_exhaustive_with_the_same_rmse():
    table = bench_strategies.optimiser_rows(quick=True)
    labels = [label for label, *_ in bench_strategies.rows(quick=True)]
    assert [r["workload"] for r in table] == [x for label in labels for x in (label, label)]
    assert [r["mode"] for r in table] == ["fast", "exhaustive"] * len(labels)
    for fast, slow in zip(table[::2], table[1::2], strict=True):
        assert fast["rmse"] <= slow["rmse"] * (1 + 1e-6)
        assert fast["tuples"] == slow["tuples"] >= fast["measured"] >= 1
        for r in (fast, slow):
            assert all(
                math.isfinite(r[k]) and r[k] >= 0
                for k in ("levels_wall", "levels_cpu", "budgets_wall", "budgets_cpu")
            )
    # the shortcuts are back on after the exhaustive runs
    assert LB.INSERT_STEPS is not None and LB.SCREEN_MARGIN is not None
    assert LB.RELAXATION_ITERATIONS < LB.ITERATIONS


def test_exhaustive_mode_restores_the_shortcuts_on_error():
    before = {k: getattr(LB, k) for k in bench_strategies.EXHAUSTIVE}
    with pytest.raises(RuntimeError), bench_strategies.exhaustive():
        assert {k: getattr(LB, k) for k in bench_strategies.EXHAUSTIVE} == bench_strategies.EXHAUSTIVE
        raise RuntimeError
    assert {k: getattr(LB, k) for k in bench_strategies.EXHAUSTIVE} == before


def test_the_optimiser_case_prints_times_and_targets(capsys):
    assert bench_strategies.main(["--optimiser", "--quick"]) == 0
    out = capsys.readouterr().out
    assert "levels wall" in out and "budgets wall" in out
    assert "target: budget optimisation <= 5 s CPU" in out and ": met" in out
    assert "fast / exhaustive RMSE: at most" in out
    assert out.count("exhaustive  ") == len(bench_strategies.rows(quick=True))  # one row each
