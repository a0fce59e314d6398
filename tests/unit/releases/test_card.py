"""The release card (:mod:`polars_dp.releases.card`): every release type, its accuracy figures
from the noise law, its publication marks and its checksum."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest

import polars_dp as pdp
from polars_dp.releases.card import RANGE_ENDS

GRID = pl.DataFrame({"a": [1, 2, 3, 9, 9, 4], "b": ["x", "y", "x", "y", "x", "x"]})
ATTRS = [pdp.Ordinal("a", 0, 9), pdp.Nominal("b", ["x", "y"])]
POINTS = pl.DataFrame({"x": np.random.default_rng(0).uniform(0, 1, 300),
                       "y": np.random.default_rng(1).uniform(0, 1, 300)})
WORDS = pl.DataFrame({"s": ["abc", "ab", "ba", "c", "cab", "bb"]})


def exact_tail(scale: float, alpha: float) -> int:
    """The smallest k with P(|DLap(scale)| > k) = 2 q^(k+1) / (1 + q) <= alpha, q = exp(-1/scale)."""
    q, k = math.exp(-1.0 / scale), 0
    while 2 * q ** (k + 1) / (1 + q) > alpha:
        k += 1
    return k


def make(mechanism: str, **kwargs):
    if mechanism in ("basic", "privelet"):
        return getattr(pdp, mechanism)(GRID, ATTRS, epsilon=1.0, **kwargs)
    if mechanism in ("privtree", "uniform_grid", "adaptive_grid", "privelet_grid"):
        return getattr(pdp, mechanism)(POINTS, ["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=1.0, **kwargs)
    return getattr(pdp, mechanism)(WORDS, "s", alphabet=list("abc"), max_length=4, epsilon=1.0, **kwargs)


MECHANISMS = ["basic", "privelet", "privtree", "uniform_grid", "adaptive_grid", "privelet_grid",
              "privtree_sequences", "ngram_sequences"]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_every_release_type_has_a_card_with_every_field(mechanism, tmp_path):
    release = make(mechanism, seed=3)
    path = release.write_parquet(tmp_path / "r.parquet")
    read = pdp.read_release(path)
    card = read.card()
    json.dumps(card)  # JSON-ready
    assert card["mechanism"]["name"] == read.mechanism and card["mechanism"]["paper"]
    assert card["privacy_unit"] == "one row" and card["neighbours"] == read.neighbours
    assert card["epsilon"]["stated"] == 1.0 and 0 < card["epsilon"]["effective"] <= 1.0
    assert card["noise"]["kind"] == "exact" and "discrete Laplace" in card["noise"]["family"]
    assert card["seeded"] and card["verified"] and card["not_for_publication"]
    assert "PCG64" in card["noise"]["random_source"]
    assert card["checksum"] == pq.read_schema(path).metadata[b"polars_dp.checksum"].decode()
    assert card["library"]["version"] == pdp.__version__ and card["domain"]
    registry = card["opendp_registry"]
    assert registry["privacy_loss"]["privacy_parameters"] == {"epsilon": 1.0}
    assert registry["dp_flavor"]["input_metric"] == {"replace": "change-one distance",
                                                     "add_remove": "symmetric distance"}[read.neighbours]
    assert set(registry) == {"dp_flavor", "privacy_loss", "model", "accounting", "implementation"}
    assert card["accuracy"]["alpha"] == 0.05


def test_an_unseeded_exact_release_is_fit_for_publication_and_float_noise_is_not():
    card = make("basic").card()
    assert not card["not_for_publication"] and "ChaCha20" in card["noise"]["random_source"]
    floating = make("basic", noise="float").card()
    assert floating["not_for_publication"] and "float noise" in floating["not_for_publication_reasons"][0]
    unverified = make("basic")
    unverified.verified = False
    reasons = unverified.card()["not_for_publication_reasons"]
    assert reasons == ["unverified: no checksum vouches for the values"]


def test_basic_accuracy_follows_the_laplace_law():
    release = make("basic", seed=1)
    scale = 2.0  # replace-one: sensitivity 2, epsilon 1
    accuracy = release.card(alpha=0.01)["accuracy"]
    assert accuracy["cell"]["std"] == pytest.approx(math.sqrt(2) * scale)
    assert accuracy["cell"]["accuracy"] == exact_tail(scale, 0.01)
    total = math.sqrt(2 * scale**2 * release.n_cells)
    assert accuracy["total"]["std"] == pytest.approx(total)
    for worst in accuracy["worst_single_attribute_range"]:  # the whole axis: the most cells
        assert worst["std"] == pytest.approx(total) and worst["exhaustive"]


def test_privelet_worst_range_is_the_worst_of_every_range():
    release = make("privelet", seed=1)
    accuracy = release.card()["accuracy"]
    for j, worst in enumerate(accuracy["worst_single_attribute_range"]):
        n = release.shape[j]
        stds = []
        for start in range(n):
            for stop in range(start + 1, n + 1):
                lo, hi = [0, 0], list(release.shape)
                lo[j], hi[j] = start, stop
                stds.append(math.sqrt(release.range_variance(np.array([lo]), np.array([hi]))[0]))
        assert worst["std"] == pytest.approx(max(stds))
    cells = [math.sqrt(release.range_variance(np.array([[i, k]]), np.array([[i + 1, k + 1]]))[0])
             for i in range(10) for k in range(2)]
    assert accuracy["cell"]["std"] == pytest.approx(max(cells))
    assert accuracy["total"]["std"] == pytest.approx(release.range_std())


def test_a_long_attribute_is_searched_on_evenly_spaced_ends():
    attrs = [pdp.Ordinal("a", 0, 4 * RANGE_ENDS)]
    release = pdp.privelet(pl.DataFrame({"a": [1, 5, 7]}), attrs, epsilon=1.0, seed=2)
    worst = release.card()["accuracy"]["worst_single_attribute_range"][0]
    assert not worst["exhaustive"] and worst["std"] >= release.range_std(a=(0, 4 * RANGE_ENDS))


def test_spatial_accuracy_per_leaf_and_where_there_is_no_error_bar():
    release = make("privtree", seed=1)
    scale = release.params["leaf_noise_scale"]
    accuracy = release.card()["accuracy"]
    assert accuracy["leaf"]["std"] == pytest.approx(math.sqrt(2) * scale)
    assert accuracy["leaf"]["accuracy"] == exact_tail(scale, 0.05)
    assert accuracy["total"]["std"] == pytest.approx(release.range_std())
    for mechanism in ("adaptive_grid", "privelet_grid"):
        card = make(mechanism, seed=1).card()["accuracy"]
        assert not card["available"] and card["reason"] and card["leaf"]["std"] is None
    processed = make("basic", seed=1).postprocess("nonnegative").card()["accuracy"]
    assert not processed["available"] and "post-processed" in processed["reason"]


def test_sequence_accuracy_per_leaf_bin_and_root_bin():
    release = make("privtree_sequences", seed=1)
    scale = release.params["leaf_noise_scale"]
    accuracy = release.card()["accuracy"]
    assert accuracy["leaf_bin"]["std"] == pytest.approx(math.sqrt(2) * scale)
    assert accuracy["leaf_bin"]["accuracy"] == exact_tail(scale, 0.05)
    leaves = int(release.is_leaf.sum())
    assert accuracy["root_bin"]["draws"] == leaves
    assert accuracy["root_bin"]["std"] == pytest.approx(math.sqrt(2 * leaves) * scale)
    ngram = make("ngram_sequences", seed=1)
    root = ngram.card()["accuracy"]["root_bin"]
    assert root["std"] == pytest.approx(math.sqrt(2) * ngram.params["noise_scale"]) and root["draws"] == 1


def test_effective_epsilon_is_the_rebuilt_plans_exact_spend():
    release = make("privtree", seed=1)
    plan = pdp.plan("privtree", ["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=1.0)
    card = release.card()["epsilon"]
    assert Fraction(card["effective_exact"]) == plan.epsilon_spent < 1


def test_a_session_release_card_carries_its_ledger():
    session = pdp.Session(GRID, epsilon=2.0, neighbours="replace")
    release = session.basic(ATTRS, epsilon=1.0, label="ages")
    assert release.card()["ledger"]["entries"][0]["label"] == "ages"


def test_a_bad_alpha_is_refused():
    with pytest.raises(pdp.ParameterError, match="alpha must lie strictly between 0 and 1"):
        make("basic", seed=1).card(alpha=1.5)


def test_a_binned_range_is_named_by_its_first_and_last_values():
    """``first`` / ``last`` of a range are values of the domain: a binned axis's range ends at its
    last bin's last value (94), not at that bin's label (90)."""
    frame = pl.DataFrame({"age": [15, 40, 94]})
    card = pdp.basic(frame, [pdp.Ordinal("age", 15, 94, width=5)], epsilon=1.0, seed=1).card()
    (worst,) = card["accuracy"]["worst_single_attribute_range"]
    assert (worst["first"], worst["last"]) == (15, 94)


def test_every_mechanism_a_release_may_record_cites_its_paper():
    """A card names the paper of its mechanism: a registered mechanism without an entry would
    print an empty citation."""
    from polars_dp.plans.base import REGISTRY, known_mechanisms, paper_of

    missing = [m for m in known_mechanisms() if not paper_of(m)]
    assert not missing, f"add the paper of {missing} to its plan class's `papers`"
    for entry in REGISTRY.values():  # each plan cites exactly the mechanisms it may record
        assert set(entry.plan_class.papers) == set(entry.plan_class.release_mechanisms), entry.name
    assert paper_of("no such mechanism") == ""
