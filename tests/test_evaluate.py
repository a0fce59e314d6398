"""Smoke tests of the evaluation (benchmarks/evaluate.py): metrics against hand-computed
values, and tiny end-to-end experiments on synthetic data."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from benchmarks.evaluation import data, metrics, report
from benchmarks.evaluation.progress import seeds


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
    from polars_dp.counts import frequency_matrix

    m = frequency_matrix(table.frame, table.attributes)  # raises on any out-of-domain row
    assert m.sum() == 2_000


def test_gss_declaration_is_public_and_counts_every_complete_row(shared_data):
    table = data.gss_wages(shared_data)
    assert table.shape == (72, 2, 538, 1000)
    assert table.attributes[2].hierarchy.height == 3
    from polars_dp.counts import frequency_matrix

    m = frequency_matrix(table.frame, table.attributes, **table.options)
    complete = table.frame.drop_nulls(["age", "gender", "occ10", "realrinc"]).collect().height
    assert m.sum() == complete
