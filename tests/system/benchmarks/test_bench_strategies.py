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


def _run(mechanism, wall, hwm, before=1 << 30):
    return {"mechanism": mechanism, "wall": wall, "cpu": wall * 0.9, "minflt": 10, "plan_wall": 1.0,
            "plan_cpu": 1.0, "rss_before": before, "hwm": hwm, "load": 1.0, "cells": 8, "measured": 3}


@pytest.mark.parametrize(("wall", "hwm", "ok"), [(30.0, 3 << 30, True), (50.0, 3 << 30, False),
                                                  (30.0, 5 << 30, False)])
def test_the_census_release_case_prints_medians_ratios_and_verdicts(monkeypatch, capsys, wall, hwm, ok):
    """Each release a fresh child (stubbed here), interleaved with the order alternating; the
    verdicts from the medians of the per-pair ratios against 2x Privelet+."""
    calls = []

    def fake(mechanism, rows, quick):
        calls.append(mechanism)
        return _run(mechanism, wall, hwm) if mechanism == "hierarchical" else _run(mechanism, 20.0, 2 << 30)

    monkeypatch.setattr(bench_strategies, "_release_run", fake)
    assert bench_strategies.print_census_release(1000, 3) is ok
    assert calls == ["hierarchical", "privelet+", "privelet+", "hierarchical", "hierarchical", "privelet+"]
    out = capsys.readouterr().out
    assert f"wall <= 2x Privelet+: {'met' if wall <= 40 else 'NOT met'} ({wall / 20:.2f}" in out
    verdict = "met" if hwm <= 4 << 30 else "NOT met"
    assert f"peak memory <= 2x Privelet+: {verdict} ({hwm / (2 << 30):.2f}" in out
    assert out.count("hierarchical ") >= 3 and "medians over 3 pairs" in out


def test_a_failed_child_is_reported_and_fails_the_case(monkeypatch, capsys):
    monkeypatch.setattr(bench_strategies, "_release_run",
                        lambda m, rows, quick: {"mechanism": m, "error": "MemoryError"} if m == "hierarchical"
                        else _run(m, 20.0, 2 << 30))
    assert bench_strategies.print_census_release(1000, 3) is False
    assert "failed: MemoryError" in capsys.readouterr().out
