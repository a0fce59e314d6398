"""Every sequence estimate says whether it is direct or extrapolated (#38, item 7).

The std of an estimate is the noise only.  A direct estimate is one noisy bin, so +-1.96 std
covers the truth as often as the noise law says; an extrapolated one rests on the Markov
assumption, whose bias the std does not cover.  The data below break that assumption on
purpose: after ``b``, the next symbol is ``c`` if the string started with ``a`` and ``e`` if it
started with ``d``, and the released models do not hold ``ab`` / ``db`` as nodes, so ``abc``
is estimated as ``f(ab) h(b)[c] / |h(b)|``: 400 instead of 1,000, whatever the noise.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

import polars_dp as pdp
from tests.helpers.sequences import substring_counts

N = 1000
SEQS = ["abc"] * N + ["dbe"] * N + ["a", "d", "b", "ab", "db"] * N
SEEDS = range(60)


def _ngram(seed: int) -> pdp.SequenceRelease:
    """Nodes of depth <= 1: strings of up to 2 symbols are single bins, longer ones extrapolated."""
    return pl.DataFrame({"s": SEQS}).dp.ngram_sequences("s", alphabet="abcde", max_length=3, epsilon=1.0,
                                                       height=2, seed=seed)


def _pst_root(seed: int) -> pdp.SequenceRelease:
    """A PST whose public threshold keeps the root a leaf but with probability 1 / (2 beta) =
    1/12 (PrivTree's decision on a score far below theta): single symbols are direct, every
    longer string extrapolated."""
    return pl.DataFrame({"s": SEQS}).dp.privtree_sequences("s", alphabet="abcde", max_length=3, epsilon=1.0,
                                                           theta=1e9, seed=seed)


CASES = {  # model, its nodes, direct strings (one noisy bin each, no two alike), extrapolated ones
    "ngram": (_ngram, 7, ["a", "b", "d", "ab", "db", "bc", "be"], ["abc", "dbe", "abe", "dbc"]),
    "pst": (_pst_root, 1, ["a", "b", "d", "e"], ["ab", "db", "bc", "be", "abc", "dbe"]),
}


def _single_bin_coverage(scale: float) -> float:
    """P(|X| <= 1.96 sqrt(2) scale) for X discrete Laplace, P(X = x) ~ q^|x|, q = exp(-1/scale):
    P(|X| > k) = 2 q^(k + 1) / (1 + q)."""
    k = math.floor(1.96 * math.sqrt(2.0) * scale)
    q = math.exp(-1.0 / scale)
    return 1.0 - 2.0 * q ** (k + 1) / (1.0 + q)


@pytest.mark.parametrize("case", list(CASES))
def test_direct_estimates_keep_their_coverage_extrapolated_ones_do_not(case):
    build, nodes, direct, extrapolated = CASES[case]
    strings = direct + extrapolated
    truth = np.array([substring_counts([list(s) for s in SEQS], 3)[tuple(q)] for q in strings], float)
    covered, flags = [], []
    for seed in SEEDS:
        model = build(seed)
        if model.n_nodes != nodes:  # a PST whose root split (the public tree; the leaf noise is
            continue                # drawn apart from the decisions, so its law is unchanged)
        table = model.frequency_table(strings)
        assert table.columns == ["string", "count", "std", "extrapolated"]
        covered.append(np.abs(table["count"].to_numpy() - truth) <= 1.96 * table["std"].to_numpy())
        flags.append(table["extrapolated"].to_numpy())
    covered_m, flags_m = np.array(covered), np.array(flags)
    assert len(covered) >= 40
    # here the flags are the same at every seed: strings of the shapes the tree holds are direct
    assert not flags_m[:, :len(direct)].any() and flags_m[:, len(direct):].all()
    # direct: one bin each (its clip at 0 only moves it towards a count >= 0), independent bins
    # and seeds, so the number covered is Binomial(n, p) with p from the discrete Laplace law
    scale = model.params.get("noise_scale", model.params.get("leaf_noise_scale"))
    p = _single_bin_coverage(float(scale))
    n = covered_m[:, :len(direct)].size
    assert covered_m[:, :len(direct)].sum() >= n * p - 4 * math.sqrt(n * p * (1 - p))
    assert p > 0.93
    # extrapolated: the Markov bias is hundreds of noise sds; the intervals (nearly) never cover
    assert covered_m[:, len(direct):].mean() < 0.05


def test_a_direct_string_is_exact_without_noise():
    """At a huge epsilon the noise vanishes: direct estimates are the true counts, and the
    extrapolated ones are off by the Markov bias (the reason for the flag)."""
    model = pl.DataFrame({"s": SEQS}).dp.ngram_sequences("s", alphabet="abcde", max_length=3, epsilon=1e9,
                                                        height=2, seed=0)
    table = model.frequency_table(["ab", "abc"])
    truth = substring_counts([list(s) for s in SEQS], 3)
    assert table["extrapolated"].to_list() == [False, True]
    assert table["count"][0] == pytest.approx(truth[("a", "b")], abs=1)
    assert table["count"][1] == pytest.approx(2 * N * N / (5 * N), abs=1)  # f(ab) h(b)[c] / |h(b)|
    assert truth[("a", "b", "c")] == N


def test_top_k_marks_the_same_estimates():
    model = _ngram(0)
    top = model.top_k(30)
    assert top.columns == ["string", "count", "extrapolated"]
    again = model.frequency_table(top["string"].to_list())
    assert top["extrapolated"].to_list() == again["extrapolated"].to_list()
    assert top["extrapolated"].to_list() == [len(s) > 2 for s in top["string"].to_list()]


def test_std_docstrings_say_the_std_is_the_noise_only():
    for doc in (pdp.SequenceRelease.frequencies.__doc__, pdp.SequenceRelease.frequency_table.__doc__):
        text = " ".join(doc.split())
        assert "noise" in text and "extrapolated" in text and "does not cover" in text


def test_a_string_longer_than_max_length_counts_zero():
    """No substring of a sequence truncated to ``max_length`` symbols is longer (#38: it was
    7.6e-55): frequency 0 exactly, std 0, not extrapolated; top_k never goes beyond it."""
    model = _ngram(0)
    table = model.frequency_table(["a" * 4, "abcd", "abc"])
    assert table["count"].to_list()[:2] == [0.0, 0.0] and table["std"].to_list()[:2] == [0.0, 0.0]
    assert table["extrapolated"].to_list() == [False, False, True]
    assert model.frequency("a" * 30) == 0.0
    assert model.frequencies(["abcde" * 10, "a"], std=True)[1][0] == 0.0
    assert model.top_k(10**4, max_len=20)["string"].list.len().max() <= model.max_length


def test_a_text_string_is_one_symbol_per_character_only_for_a_text_alphabet():
    model = _ngram(0)
    assert model.frequency("ab") == model.frequency(["a", "b"])
    ints = pl.DataFrame({"s": [[1, 2], [2, 3]] * 50}).dp.ngram_sequences(
        "s", alphabet=[1, 2, 3], max_length=3, epsilon=1.0, height=2, seed=0)
    with pytest.raises(pdp.QueryError, match="holds integers"):
        ints.frequency("12")  # was read as [1, 2]: ambiguous beside the symbol 12


def test_no_strings_and_no_positive_estimate_give_empty_frames():
    model = _ngram(0)
    assert model.frequency_table([]).columns == ["string", "count", "std", "extrapolated"]
    assert model.frequency_table([]).height == 0 and model.frequencies([]).size == 0
    empty = pdp.SequenceRelease(alphabet="ab", max_length=3, parent=[-1], prepended=[-1], hist=[[-1.0] * 3],
                                mechanism="ngram", epsilon=1.0)
    assert empty.top_k(5).height == 0 and empty.top_k(5).columns == ["string", "count", "extrapolated"]
