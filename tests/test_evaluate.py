"""Smoke tests of the evaluation (benchmarks/evaluate.py): metrics against hand-computed
values, and tiny end-to-end experiments on synthetic data."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from benchmarks.evaluation import data, metrics, report
from benchmarks.evaluation.progress import seeds


def test_square_and_relative_error_by_hand():
    est, act = np.array([12.0, 3.0, 0.0]), np.array([10.0, 5.0, 1.0])
    assert metrics.square_error(est, act).tolist() == [4.0, 4.0, 1.0]
    # |12-10|/max(10,4) = 0.2; |3-5|/max(5,4) = 0.4; |0-1|/max(1,4) = 0.25
    assert metrics.relative_error(est, act, 4.0).tolist() == pytest.approx([0.2, 0.4, 0.25])
    assert metrics.sanity_bound(37_735) == pytest.approx(37.735)
    with pytest.raises(ValueError, match="sanity_bound"):
        metrics.relative_error(est, act, 0.0)


def test_coverage_and_quintiles_by_hand():
    starts = np.array([[0, 0], [0, 1], [2, 0]])
    stops = np.array([[4, 10], [2, 6], [3, 1]])
    # (4*10)/40 = 1, (2*5)/40 = 0.25, (1*1)/40 = 0.025
    assert metrics.coverage(starts, stops, (4, 10)).tolist() == pytest.approx([1.0, 0.25, 0.025])
    values = np.array([9, 1, 5, 3, 7, 0, 2, 8, 4, 6])
    groups = metrics.quintile_index(values)
    # ranks 0..9 -> groups 0,0,1,1,2,2,3,3,4,4
    assert groups.tolist() == [4, 0, 2, 1, 3, 0, 1, 4, 2, 3]
    means = metrics.group_means(groups, values.astype(float), 5)
    assert means.tolist() == [0.5, 2.5, 4.5, 6.5, 8.5]


def test_exact_box_counts_with_weights_and_chunks():
    points = np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0], [1.0, 3.0]])
    lo = np.array([[0.0, 0.0], [0.5, 0.5], [5.0, 5.0]])
    hi = np.array([[1.0, 1.0], [2.0, 3.0], [6.0, 6.0]])
    assert metrics.exact_box_counts(points, lo, hi, chunk_cells=4).tolist() == [2, 3, 0]
    w = np.array([1.0, 10.0, 100.0, 1000.0])
    assert metrics.exact_box_counts(points, lo, hi, weights=w).tolist() == [11, 1110, 0]


def test_top_k_precision_and_total_variation_by_hand():
    assert metrics.top_k_precision([(1,), (2,), (3,)], [(2,), (1,), (4,)], 3) == pytest.approx(2 / 3)
    assert metrics.top_k_precision([(1,)], [(1,), (2,)], 2) == 0.5
    # p = (.5, .5, 0), q = (.25, .25, .5): TV = (.25 + .25 + .5) / 2 = .5
    assert metrics.total_variation(np.array([2, 2, 0]), np.array([1, 1, 2])) == pytest.approx(0.5)
    # negative estimates are clipped: q = (1, 0, 0)
    assert metrics.total_variation(np.array([1, 1, 0]), np.array([3, -2, 0])) == pytest.approx(0.5)
    assert metrics.total_variation(np.array([1, 0]), np.array([0, 0])) == pytest.approx(0.5)


def test_ngram_counts_and_exact_top_k_match_brute_force():
    rng = np.random.default_rng(3)
    seqs = [list(rng.integers(1, 4, rng.integers(1, 7))) for _ in range(40)]
    symbols = np.concatenate(seqs)
    offsets = np.concatenate([[0], np.cumsum([len(s) for s in seqs])])
    brute: dict[tuple[int, ...], int] = {}
    for s in seqs:
        for i in range(len(s)):
            for j in range(i + 1, len(s) + 1):
                key = tuple(int(x) for x in s[i:j])
                brute[key] = brute.get(key, 0) + 1
    codes, counts = metrics.ngram_counts(symbols, offsets, 2, base=4)
    got = dict(zip(metrics.decode_ngrams(codes, 2, 4), counts.tolist(), strict=True))
    assert got == {k: v for k, v in brute.items() if len(k) == 2}
    top, top_counts = metrics.exact_top_k(symbols, offsets, 8, base=4)
    assert [brute[s] for s in top] == top_counts.tolist()
    assert sorted(brute.values(), reverse=True)[:8] == top_counts.tolist()


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
