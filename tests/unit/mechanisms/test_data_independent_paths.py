"""No refusal, fallback or path choice after counting may depend on the private data.

The thresholds on the paths after counting (``grep raise`` in ``mechanisms/``, ``noise/`` and
the kernels they call), and what decides each:

* exact PrivTree decisions (spatial and sequence trees), ``privtree_rule.privtree_split``:
  the old refusal of scores ``>= 2^42`` is gone; scores of magnitude ``>= 2^41`` (or a huge
  public ``depth delta``) switch the offsets ``x = theta - b`` from int64 to Python ints, a
  switch with the same law (tested below on both sides, bit for bit under one seed).
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
from polars_dp.mechanisms.privtree_rule import decision_offsets, privtree_sequence_params, privtree_split
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


def test_offsets_are_exact_on_both_sides_of_the_int64_switch():
    g = 1 << 20
    below = decision_offsets(np.array([(1 << 41) - 1]), 2, 3 * g, 5 * g)
    above = decision_offsets(np.array([(1 << 41) - 1, 1 << 41]), 2, 3 * g, 5 * g)
    assert below.dtype == np.int64 and above.dtype == object
    for s, x in zip([(1 << 41) - 1, 1 << 41], above, strict=True):
        assert x == min(5 * g + 2 * 3 * g - s * g, 3 * g)
    assert int(below[0]) == above[0]


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
