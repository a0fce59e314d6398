"""No refusal, fallback or path choice after counting may depend on the private data.

The thresholds on the paths after counting (``grep raise`` in ``mechanisms/``, ``noise/`` and
the kernels they call), and what decides each:

* exact PrivTree decisions (spatial and sequence trees), ``privtree_rule.privtree_split``:
  the old refusal of scores ``>= 2^42`` is gone, and so is the switch of the offsets
  ``x = theta - b`` from int64 to Python ints at scores ``>= 2^41``: scores saturate at the
  public ``SCORE_CAP = 2^41 - 1`` (a monotone 1-Lipschitz map: still a PrivTree score), so
  every count takes the int64 path; only a huge public ``depth delta`` takes Python ints
  (the same law, bit for bit under one seed).
* ``bernoulli_exp`` / ``integers_below``: bounds ``den k`` past ``2^64`` switch to Python
  ints (same law); nothing is refused.
* the exact samplers: ``MAX_COUNT_SCALE`` / ``MAX_SCALE`` refusals read only the public scale.
* UG / AG: ``check_domain_size`` of a grid sized from ``n`` (public under ``replace``, else
  noisy) and of AG's second level sized from the noisy first level: post-processing of a DP
  output, never of the exact counts.
* "exact PrivTree decisions need integer scores": scores are integer counts on every path
  (``count_column`` is checked to hold non-negative integers before anything is counted).
* Privelet's lattice bound (``privelet_exact``) is tested with that module.

Each test builds neighbouring datasets on both sides of a threshold and checks that both
release.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import polars_dp as pdp
from polars_dp.mechanisms import privtree_rule
from polars_dp.mechanisms.privtree_rule import (
    SCORE_CAP,
    decision_offsets,
    privtree_sequence_params,
    privtree_split,
)
from polars_dp.noise import bernoulli_exp, noise_source

THRESHOLDS = [(1 << 41) - 1, 1 << 41, (1 << 42) - 1, 1 << 42, 1 << 61]


@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
@pytest.mark.parametrize("big", THRESHOLDS)
def test_privtree_spatial_releases_on_both_sides_of_every_score_threshold(big, neighbours):
    """One heavy cell of weight ``big`` and its add/remove-one neighbour ``big + 1`` (for
    replace, a row moved out of the heavy cell): both release, with the same leaf structure
    law (the heavy cell splits down to the finest level with overwhelming probability)."""
    for weight in (big, big + 1):
        df = pl.DataFrame({"x": [0.1, 0.9], "n": [weight, 1 if neighbours == "add_remove" else 2]})
        rel = pdp.privtree(df, "x", bounds=(0.0, 1.0), epsilon=1.0, count_column="n", resolution=6,
                           neighbours=neighbours, seed=3)
        assert rel.n_leaves >= 7
        assert np.isfinite(rel.to_arrow().column("count").to_numpy()).all()


@pytest.mark.parametrize("big", THRESHOLDS)
def test_privtree_sequence_decisions_accept_every_score(big):
    """The sequence tree's decisions (scores are counts of (context, symbol) pairs) on both
    sides of each threshold, with the sequence PrivTree's own lambda and delta."""
    lam, delta = privtree_sequence_params(3, 5, 0.25, noise="exact")
    for depth in (0, 4):
        split = privtree_split(np.array([0, big, big + 1]), depth, lam=lam, delta=delta, theta=0.0,
                               rng=noise_source(1), noise="exact")
        assert split.shape == (3,) and split[1:].all()


def test_offsets_take_one_path_on_both_sides_of_the_old_int64_switch():
    """Scores of the old switch's two sides (``2^41 - 1`` and ``2^41``, neighbours) give int64
    offsets, exact for the saturated score; a huge public ``depth delta`` alone takes Python ints."""
    g = 1 << 20
    cap = SCORE_CAP
    for scores in ([cap], [cap, cap + 1], [cap + 1], [0, 1 << 62], np.array([1 << 63], dtype=np.uint64),
                   np.array([1 << 70, 3], dtype=object)):
        x = decision_offsets(np.asarray(scores), 2, 3 * g, 5 * g)
        assert x.dtype == np.int64
        for s, xi in zip(np.asarray(scores).tolist(), x.tolist(), strict=True):
            assert xi == min(5 * g + 2 * 3 * g - min(int(s), cap) * g, 3 * g)
    wide = decision_offsets(np.array([1, cap + 1]), 1, 1 << 70, 0)  # public: base 2^70 grid units
    assert wide.dtype == object and wide.tolist() == [(1 << 70) - g, (1 << 70) - cap * g]


def test_saturated_scores_draw_the_decisions_of_the_cap():
    """Same seed: a score past the cap decides exactly as the cap.  With ``lambda = 2^40`` the
    cap stays a leaf with probability ``e^-2 / 2`` (about 27 of 400 nodes), ``2^45`` would not."""
    for noise in ("exact", "float"):
        runs = [privtree_split(np.array(s, dtype=dtype), 0, lam=2.0**40, delta=0.0, theta=0.0,
                               rng=noise_source(4), noise=noise)
                for s, dtype in (([SCORE_CAP] * 400, np.int64), ([1 << 45] * 400, np.int64),
                                 ([1 << 90] * 400, object))]
        assert 5 <= (~runs[0]).sum() <= 60  # binomial(400, 0.068): mean 27, sd 5
        np.testing.assert_array_equal(runs[0], runs[1])
        np.testing.assert_array_equal(runs[0], runs[2])


@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
def test_privtree_runs_one_code_path_either_side_of_the_old_switch(neighbours, monkeypatch):
    """Neighbouring datasets whose heavy cell holds ``2^41 - 1`` and ``2^41`` points: the
    offsets of every decision are computed the same way (a spy on their dtypes)."""
    seen: list[list[str]] = []
    offsets = privtree_rule.decision_offsets
    monkeypatch.setattr(privtree_rule, "decision_offsets",
                        lambda *a: seen[-1].append(str((out := offsets(*a)).dtype)) or out)
    for weight in (SCORE_CAP, SCORE_CAP + 1):
        seen.append([])
        df = pl.DataFrame({"x": [0.1, 0.9], "n": [weight, 1 if neighbours == "add_remove" else 2]})
        pdp.privtree(df, "x", bounds=(0.0, 1.0), epsilon=1.0, count_column="n", resolution=6,
                     neighbours=neighbours, seed=3)
    assert set(seen[0]) == set(seen[1]) == {"int64"}


def test_the_int64_and_python_int_paths_draw_the_same_decisions():
    """Same seed, same words: the wide path is the same function of the random bits."""
    num = np.array([0, 1, 5, 17, 123_456, 1 << 40], dtype=np.int64)
    for den in (1, 7, 1 << 20, (1 << 62) + 3):
        a = bernoulli_exp(noise_source(8), np.tile(num, 200), den)
        b = bernoulli_exp(noise_source(8), np.tile(num, 200).astype(object), den)
        np.testing.assert_array_equal(a, b)


def test_sequence_mechanisms_release_for_neighbours():
    seqs = [[1, 2, 3], [2, 2], [3]] * 5
    for data in (seqs, seqs + [[1, 1, 1, 1, 1]]):
        df = pl.DataFrame({"s": data})
        for mech in (pdp.privtree_sequences, pdp.ngram_sequences):
            rel = mech(df, "s", alphabet=[1, 2, 3], max_length=5, epsilon=1.0, seed=2)
            assert rel.to_arrow().num_rows > 0


@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
def test_grid_mechanisms_release_for_neighbours_with_heavy_cells(neighbours):
    """Basic on a heavy cell of weight ``2^42`` and its neighbour, UG and AG on 1000 and 1001
    (AG's second level grows with the noisy count, so no larger weight): both release."""
    for weight in ((1 << 42), (1 << 42) + 1):
        df = pl.DataFrame({"x": [0, 9], "n": [weight, 1]})
        basic = pdp.basic(df, [pdp.Ordinal("x", 0, 9)], epsilon=1.0, count_column="n",
                          neighbours=neighbours, seed=1)
        assert basic.to_arrow().num_rows == 10
    for weight in (1000, 1001):
        df = pl.DataFrame({"x": [0.05, 0.95], "n": [weight, 1]})
        for mech in (pdp.uniform_grid, pdp.adaptive_grid):
            rel = mech(df, "x", bounds=(0.0, 1.0), epsilon=1.0, n=4, count_column="n",
                       neighbours=neighbours, seed=1)
            assert rel.n_leaves >= 1
