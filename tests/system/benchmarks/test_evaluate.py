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
    assert res.height == 6 * 3
    assert set(res["mechanism"]) == {"PrivTree+levels", "PrivTree", "UG", "AG", "Privelet*",
                                     "privtree_subgrid"}
    assert (res["size"] >= 1).all() and res["relative_error"].is_finite().all()


def test_spatial_ratio_table_by_hand():
    def row(dataset, eps, mech, cls, per_release):
        return {"dataset": dataset, "epsilon": eps, "mechanism": mech, "query_class": cls,
                "relative_error": float(np.mean(per_release)),
                "std_error": spatial_experiment.standard_error(per_release),
                "releases": len(per_release)}
    rows = [
        # AG is the better baseline here: ratio 0.08 / 0.1, z = -0.02 / sqrt(0.01^2 + 0.02^2)
        row("geo", 0.4, "PrivTree", "small", [0.2, 0.2, 0.2]),
        row("geo", 0.4, "AG", "small", [0.08, 0.1, 0.12]),
        row("geo", 0.4, "privtree_subgrid", "small", [0.06, 0.08, 0.1]),
        # PrivTree is the better baseline; a tie (ratio 1.02)
        row("geo", 0.4, "PrivTree", "large", [0.1, 0.1]),
        row("geo", 0.4, "AG", "large", [0.3, 0.3]),
        row("geo", 0.4, "privtree_subgrid", "large", [0.102, 0.102]),
        # no AG: not a comparable cell
        row("geo", 0.8, "PrivTree", "small", [0.1]),
        row("geo", 0.8, "privtree_subgrid", "small", [0.1]),
        row("geo", 0.4, "UG", "small", [0.01]),
    ]
    table = spatial_experiment.ratio_table(pl.DataFrame(rows))
    assert table["query_class"].to_list() == ["small", "large"]
    assert table["best"].to_list() == ["AG", "PrivTree"]
    assert table["ratio"].to_list() == pytest.approx([0.8, 1.02])
    assert table["z"][0] == pytest.approx(-0.02 / np.sqrt(2 * (0.02 / np.sqrt(3)) ** 2))
    assert table["z"][1] == float("inf")  # no spread: the difference is certain
    assert table["releases"].to_list() == [3, 2]
    assert spatial_experiment.ratio_verdict(table) == {"cells": 2, "below": 1, "ties": 1, "above": 0}


def _tiny_spatial_data(folder, n=3_000):
    """Clustered stand-ins of the GeoNames and flights files (same names and columns)."""
    rng = np.random.default_rng(9)
    centres = rng.uniform([-120, -40], [120, 60], (6, 2))
    geo = centres[rng.integers(0, 6, n)] + rng.normal(0, 3, (n, 2))
    pl.DataFrame({"longitude": geo[:, 0], "latitude": geo[:, 1]}).write_parquet(
        folder / "spatial_geonames_cities500.parquet")
    airports = np.column_stack([rng.uniform(-125, -70, 12), rng.uniform(25, 48, 12)])
    ends = airports[rng.integers(0, 12, (n, 2))] + rng.normal(0, 0.05, (n, 2, 2))
    pl.DataFrame({"origin_lon": ends[:, 0, 0], "origin_lat": ends[:, 0, 1],
                  "dest_lon": ends[:, 1, 0], "dest_lat": ends[:, 1, 1]}).write_parquet(
        folder / "flights_nyc2013.parquet")


def test_spatial_cli_writes_the_ratio_and_fanout_tables(tmp_path):
    pytest.importorskip("matplotlib")
    folder, out = tmp_path / "data", tmp_path / "out"
    folder.mkdir()
    _tiny_spatial_data(folder)
    argv = ["--quick", "--only", "spatial", "--no-progress", "--data", str(folder), "--out", str(out),
            "--spatial-queries", "30", "--spatial-repeats", "2", "--spatial-secondary-repeats", "0"]
    assert evaluate.main(argv) == 0
    text = (out / "spatial.md").read_text()
    assert "--spatial-repeats 2 --spatial-secondary-repeats 0" in text
    section = text.split("## privtree_subgrid against min(PrivTree, AG)")[1].split("\n## ")[0]
    section, default_tree = section.split("\n### Against PrivTree's default tree in 4-D (fanout 4)")
    flights_cells = 3 * len(evaluate.QUICK.spatial_epsilons)
    assert f" of {flights_cells} cells below min(PrivTree fanout 4, AG)**" in default_tree
    assert "flights:" in default_tree and "geonames:" not in default_tree
    cells = 2 * len(evaluate.QUICK.spatial_epsilons) * 3
    assert f" of {cells} cells below min(PrivTree, AG)**" in section
    rows = [line for line in section.splitlines() if line.startswith("| 0.") or line.startswith("| 1.")]
    assert len(rows) == 2 * len(evaluate.QUICK.spatial_epsilons)
    assert all(line.count("z = ") == 3 for line in rows)
    assert "## PrivTree fanout 4 against fanout 2^d (flights)" in text
    assert "(geonames)" not in text.split("## PrivTree fanout 4")[1].split("\n")[0]
    results = pl.read_csv(out / "spatial.csv")
    assert set(results["mechanism"]) == {"PrivTree", "AG", "privtree_subgrid", "PrivTree fanout 4"}
    assert results.filter(pl.col("mechanism") == "PrivTree fanout 4")["dataset"].unique().to_list() == [
        "flights"]
    assert (results["releases"] == 2).all() and (results["std_error"] >= 0).all()


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


def test_headline_counts_the_spatial_cells_below_the_baselines(tmp_path):
    errors = {("small", "PrivTree"): 0.1, ("small", "AG"): 0.2, ("small", "privtree_subgrid"): 0.05,
              ("large", "PrivTree"): 0.4, ("large", "AG"): 0.2, ("large", "privtree_subgrid"): 0.205}
    rows = [{"dataset": "geo", "n": 10, "epsilon": 0.4, "mechanism": m, "query_class": c,
             "relative_error": e, "std_error": 0.01, "releases": 5, "size": 1.0, "seconds": 0.1}
            for (c, m), e in errors.items()]
    pl.DataFrame(rows).write_csv(tmp_path / "spatial.csv")
    text = evaluate.headline(tmp_path)
    assert "below min(PrivTree, AG) in 1 of 2 (dataset, ε, class) cells, within 3% above it in 1" in text
    assert "ratio 0.50-1.02" in text
