"""Smoke tests of the evaluation (benchmarks/evaluate.py): metrics against hand-computed
values, and tiny end-to-end experiments on synthetic data."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import polars_dp as pdp
from benchmarks import evaluate
from benchmarks.evaluation import (
    data,
    metrics,
    privelet_experiment,
    report,
    sequence_experiment,
    spatial_experiment,
)
from benchmarks.evaluation.progress import seeds
from polars_dp.counting.frequency import frequency_matrix
from polars_dp.evaluation.workloads import random_workload


def test_square_error_by_hand():
    est, act = np.array([12.0, 3.0, 0.0]), np.array([10.0, 5.0, 1.0])
    assert metrics.square_error(est, act).tolist() == [4.0, 4.0, 1.0]


def test_quintiles_by_hand():
    values = np.array([9, 1, 5, 3, 7, 0, 2, 8, 4, 6])
    groups = metrics.quintile_index(values)
    # ranks 0..9 -> groups 0,0,1,1,2,2,3,3,4,4
    assert groups.tolist() == [4, 0, 2, 1, 3, 0, 1, 4, 2, 3]
    means = metrics.group_means(groups, values.astype(float), 5)
    assert means.tolist() == [0.5, 2.5, 4.5, 6.5, 8.5]


def test_total_variation_by_hand():
    # p = (.5, .5, 0), q = (.25, .25, .5): TV = (.25 + .25 + .5) / 2 = .5
    assert metrics.total_variation(np.array([2, 2, 0]), np.array([1, 1, 2])) == pytest.approx(0.5)
    # negative estimates are clipped: q = (1, 0, 0)
    assert metrics.total_variation(np.array([1, 1, 0]), np.array([3, -2, 0])) == pytest.approx(0.5)
    assert metrics.total_variation(np.array([1, 0]), np.array([0, 0])) == pytest.approx(0.5)


def test_seeds_are_reproducible_and_independent():
    a = np.random.default_rng(seeds(1, "privelet", "gss", 0.5)).random(3)
    b = np.random.default_rng(seeds(1, "privelet", "gss", 0.5)).random(3)
    c = np.random.default_rng(seeds(1, "privelet", "gss", 0.75)).random(3)
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_markdown_table_and_wide():
    frame = pl.DataFrame({"epsilon": [0.5, 0.5], "mechanism": ["Basic", "Privelet+"],
                          "square_error": [1234567.0, 0.5]})
    table = report.wide(frame, ["epsilon"], "square_error")
    assert table.columns == ["epsilon", "Basic", "Privelet+"]
    text = report.markdown_table(table)
    assert text.splitlines() == ["| epsilon | Basic | Privelet+ |", "|---:|---:|---:|",
                                 "| 0.5 | 1.23e+06 | 0.5 |"]


def test_synthetic_census_matches_its_public_domain():
    table = data.synthetic_census(2_000, seed=1)
    assert table.shape == (101, 2, 512, 1001)
    assert table.attributes[2].hierarchy.height == 3
    m = frequency_matrix(table.frame, table.attributes)  # raises on any out-of-domain row
    assert m.sum() == 2_000


def test_gss_declaration_is_public_and_counts_every_complete_row(shared_data):
    table = data.gss_wages(shared_data)
    assert table.shape == (72, 2, 538, 1000)
    assert table.attributes[2].hierarchy.height == 3
    m = frequency_matrix(table.frame, table.attributes, **table.options)
    complete = table.frame.drop_nulls(["age", "gender", "occ10", "realrinc"]).collect().height
    assert m.sum() == complete


# ---------------------------------------------------------------------- tiny end-to-end runs
def _tiny_table(n: int = 3_000) -> data.Table:
    rng = np.random.default_rng(5)
    occupation = pdp.Hierarchy.from_dict({"a": [0, 1, 2, 3], "b": [4, 5, 6, 7]})
    frame = pl.DataFrame({
        "age": rng.integers(0, 16, n), "gender": rng.choice(["f", "m"], n),
        "occ": rng.integers(0, 8, n), "income": np.minimum(rng.geometric(0.1, n), 31),
    }).lazy()
    attrs = [pdp.Ordinal("age", 0, 15), pdp.Nominal("gender", categories=["f", "m"]),
             pdp.Nominal("occ", occupation), pdp.Ordinal("income", 0, 31)]
    return data.Table("tiny", frame, attrs)


def test_privelet_experiment_end_to_end(tmp_path):
    table = _tiny_table()
    queries = random_workload(table.attributes, 300, seed=1)
    # epsilon so large that the noise is negligible: every error must vanish, which checks that
    # the true answers and the releases' answers refer to the same cells
    exact = privelet_experiment.run(table, queries, epsilons=(1e9,), show_progress=False)
    assert exact.height == 4 * 5
    assert exact["square_error"].max() < 1e-6 and exact["relative_error"].max() < 1e-6
    assert exact["queries"].sum() == 4 * 300
    cover = exact.filter(pl.col("mechanism") == "Basic").sort("quintile")["coverage"].to_numpy()
    assert np.all(np.diff(cover) > 0)
    noisy = privelet_experiment.run(table, queries, epsilons=(1.0,), show_progress=False, seed=3)
    assert (noisy["square_error"] > 0).all()
    recorded = dict(noisy.select("mechanism", "untransformed").unique().iter_rows())
    assert recorded["Privelet"] == "none" and recorded["Privelet+"] == "age, gender"
    pytest.importorskip("matplotlib")
    path = report.plot_privelet(noisy, tmp_path / "p.png", title="tiny")
    assert path.stat().st_size > 1_000


def test_spatial_truth_matches_brute_force_and_experiment_runs():
    rng = np.random.default_rng(2)
    xy = np.column_stack([rng.normal(0, 10, 4_000).clip(-50, 49), rng.uniform(0, 5, 4_000)])
    points = data.Points("toy", pl.DataFrame({"x": xy[:, 0], "y": xy[:, 1]}),
                         {"x": (-50.0, 50.0), "y": (0.0, 5.0)})
    sets = spatial_experiment.workloads(points, 40, seed=1)
    boxes = sets["large"]
    lo = boxes.select("x_lo", "y_lo").to_numpy()
    hi = boxes.select("x_hi", "y_hi").to_numpy()
    brute = ((xy[None] >= lo[:, None]) & (xy[None] <= hi[:, None])).all(axis=2).sum(axis=1)
    assert spatial_experiment.true_counts(points, boxes).tolist() == brute.tolist()
    res = spatial_experiment.run(points, n_queries=40, epsilons=(1.0,), show_progress=False)
    assert res.height == 5 * 3
    assert set(res["mechanism"]) == {"PrivTree+levels", "PrivTree", "UG", "AG", "Privelet*"}
    assert (res["size"] >= 1).all() and res["relative_error"].is_finite().all()


def test_sequence_experiment_truncation_without_loss_is_exact():
    rng = np.random.default_rng(4)
    seqs = [rng.integers(1, 4, rng.integers(1, 6)).tolist() for _ in range(400)]
    frame = pl.DataFrame({"pages": seqs})
    models = sequence_experiment.models(alphabet=(1, 2, 3), max_length=5)
    res = sequence_experiment.run(frame, epsilons=(0.5, 2.0), ks=(3, 5), alphabet=(1, 2, 3),
                                  models_=models, show_progress=False, max_length=5, samples=5000)
    assert res.height == 2 * len(models)
    # sequences are at most 5 long, so truncation to 5 keeps every occurrence: exact answers
    truncate = res.filter(pl.col("mechanism") == sequence_experiment.TRUNCATE)
    assert truncate["precision@3"].to_list() == [1.0, 1.0]
    assert truncate["precision@5"].to_list() == [1.0, 1.0]
    assert truncate["tv_pairs"].max() == pytest.approx(0.0, abs=1e-12)
    private = res.filter(pl.col("mechanism") != sequence_experiment.TRUNCATE)
    assert private["tv_pairs"].is_between(0, 1).all()
    assert private["tv_length"].is_between(0, 1).all() and truncate["tv_length"].max() == 0.0


def test_cli_without_real_data_stops_with_a_message(tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["--quick", "--no-progress", "--data", str(tmp_path / "absent"), "--out", str(out)]
    assert evaluate.main(argv) == 0
    printed = capsys.readouterr().out
    assert "Real datasets not found" in printed and "--synthetic-only" in printed
    assert not any(out.iterdir())


def test_runner_without_real_data_skips_its_experiment(tmp_path, capsys):
    args = evaluate.parse_args(["--quick", "--no-progress"])
    result = evaluate.RUNNERS["spatial"](args, evaluate.QUICK, None, tmp_path)
    assert result == {"skipped": "no real data"}
    assert "skipping the spatial experiment" in capsys.readouterr().out


def test_headline_reads_the_ratio_from_the_tables(tmp_path):
    rows = [{"dataset": "gss", "epsilon": 1.0, "quintile": 5, "coverage": 0.4, "mechanism": m,
             "square_error": e} for m, e in (("Basic", 900.0), ("Privelet+", 30.0))]
    pl.DataFrame(rows).write_csv(tmp_path / "privelet.csv")
    assert "Basic's average square error is 30x Privelet+'s" in evaluate.headline(tmp_path)
