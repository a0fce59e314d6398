"""A release's ``params`` are its plan's record: every registered mechanism's release is written,
read back (re-planned from its record) and compared; a record that no plan accepts is refused
naming the entry at fault."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

import polars_dp as pdp
from polars_dp.plans import REGISTRY
from polars_dp.plans.noise_model import noise_model_to_json
from polars_dp.releases.integrity import check_equal

RNG = np.random.default_rng(11)
FRAMES = {
    "grid": pl.DataFrame({"age": RNG.integers(0, 8, 120), "job": RNG.choice(["a", "b"], 120)}),
    "points": pl.DataFrame({"x": RNG.random(150), "y": RNG.random(150)}),
    "sequences": pl.DataFrame({"s": ["ab", "b", "ba", "aab", "a"] * 8}),
}
DOMAINS = {
    "grid": ([[pdp.Ordinal("age", 0, 7), pdp.Nominal("job", ["a", "b"])]], {}),
    "points": ([["x", "y"]], {"bounds": [(0.0, 1.0), (0.0, 1.0)]}),
    "sequences": (["s"], {"alphabet": ["a", "b"], "max_length": 3}),
}


def _release(name: str, noise: str = "exact") -> pdp.Release:
    shape = REGISTRY[name].shape
    args, options = DOMAINS[shape]
    return pdp.plan(name, *args, epsilon=1.0, noise=noise, **options).run(FRAMES[shape], seed=3)


@pytest.mark.parametrize("noise", ["exact", "float"])
@pytest.mark.parametrize("name", list(REGISTRY))
def test_every_mechanism_round_trips_through_its_record(name, noise, tmp_path):
    release = _release(name, noise)
    back = pdp.read_release(release.write_parquet(tmp_path / "r.parquet"))
    assert back == release  # header, params, type entries and payload
    assert dict(back.params) == dict(release.params)
    model = getattr(release, "noise_model", None)
    if model is not None:
        assert noise_model_to_json(back.noise_model) == noise_model_to_json(model)
    plan = back.plan  # the plan rebuilt from the file: its record is the file's params
    assert plan.name == name and type(plan) is type(release.plan)
    data = {k: release.params[k] for k in plan.data_keys() if k in release.params}
    assert plan.record(**data) == dict(release.params)
    assert plan.epsilon_spent == release.plan.epsilon_spent


def _edited(release: pdp.Release, **params) -> pa.Table:
    table = release.to_arrow()
    meta = dict(table.schema.metadata)
    record = {**json.loads(meta[b"polars_dp.params"]), **params}
    meta[b"polars_dp.params"] = json.dumps(record).encode()
    meta.pop(b"polars_dp.checksum")  # the record is refused before any checksum is looked at
    return table.replace_schema_metadata(meta)


@pytest.mark.parametrize("name", list(REGISTRY))
def test_an_unknown_entry_is_refused_naming_it(name):
    with pytest.raises(pdp.ReleaseFormatError, match="'params' has an entry 'colour'"):
        pdp.read_release(_edited(_release(name), colour="blue"), unverified=True)


def test_an_unknown_mechanism_is_refused_naming_it():
    table = _release("basic").to_arrow()
    meta = {**table.schema.metadata, b"polars_dp.mechanism": b"histogram_of_wishes"}
    with pytest.raises(pdp.ReleaseFormatError, match="'mechanism' is 'histogram_of_wishes'"):
        pdp.read_release(table.replace_schema_metadata(meta))


@pytest.mark.parametrize(("name", "entry", "value"), [
    ("privtree", "tree_share", "half"),       # an option the plan is rebuilt with
    ("privtree", "fanout", 2.5),
    ("privtree_sequences", "tree_share", [0.25]),
    ("ngram_sequences", "height", "three"),
    ("uniform_grid", "c", "ten"),
    ("privelet_grid", "bits", None),
    ("privelet", "rho", "7"),                 # a value the plan computes
    ("basic", "sensitivity", True),
    ("uniform_grid", "n_used", "many"),      # a value only the data decides
    ("privtree_sequences", "capped", "no"),
])
def test_an_entry_of_the_wrong_type_is_refused_naming_it(name, entry, value):
    with pytest.raises(pdp.ReleaseFormatError, match=rf"'params\.{entry}'"):
        pdp.read_release(_edited(_release(name), **{entry: value}), unverified=True)


def test_a_missing_entry_the_plan_needs_is_refused_naming_it():
    release = _release("privtree")
    table = release.to_arrow()
    meta = dict(table.schema.metadata)
    meta[b"polars_dp.params"] = json.dumps({k: v for k, v in release.params.items()
                                            if k != "tree_share"}).encode()
    with pytest.raises(pdp.ReleaseFormatError, match="no 'tree_share' entry"):
        pdp.read_release(table.replace_schema_metadata(meta), unverified=True)


@pytest.mark.parametrize(("recorded", "expected"), [(True, 1), (1, True), (False, 0)])
def test_a_flag_is_not_a_number(recorded, expected):
    with pytest.raises(pdp.ReleaseFormatError, match="'params.levels' is"):
        check_equal("params.levels", recorded, expected)
    check_equal("params.levels", expected, expected)


HEADER = ("mechanism", "epsilon", "neighbours", "noise")


@pytest.mark.parametrize("name", list(REGISTRY))
def test_the_header_and_record_are_views_of_the_plan(name, tmp_path):
    release = _release(name)
    for key in (*HEADER, "params"):
        assert isinstance(getattr(type(release), key), property), key  # read, never stored
    plan = release.plan
    assert (release.mechanism, release.epsilon, release.neighbours, release.noise) == (
        plan.release_mechanism, float(plan.epsilon), plan.neighbours, plan.noise)
    data = {k: release.params[k] for k in plan.data_keys() if k in release.params}
    assert dict(release.params) == plan.record(**data)
    back = pdp.read_release(release.write_parquet(tmp_path / "r.parquet"))
    assert back.plan is not plan and dict(back.params) == back.plan.record(**data)


def test_a_header_field_given_beside_a_plan_must_be_the_plans():
    release = _release("basic")
    with pytest.raises(pdp.ParameterError, match="epsilon"):
        pdp.GridRelease(release.counts, release.attributes, mechanism="basic", epsilon=2.0,
                        neighbours=release.neighbours, noise_scale=release.noise_scale, noise="exact",
                        plan=release.plan)


def test_a_release_built_by_hand_keeps_its_stated_header():
    release = pdp.GridRelease(np.zeros(3), (pdp.Ordinal("a", 0, 2),), mechanism="handmade", epsilon=0.5,
                              neighbours="replace", noise_scale=1.0, noise="exact", params={"note": 1})
    assert (release.mechanism, release.epsilon, release.neighbours, release.noise) == (
        "handmade", 0.5, "replace", "exact")
    assert dict(release.params) == {"note": 1}
