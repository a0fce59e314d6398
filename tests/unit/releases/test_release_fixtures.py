"""Releases written by polars-dp 0.4.0 (format 2; ``tests/data/v0_4_0_*.parquet``, one per
mechanism and notable variant, made by ``tests/data/make_v0_4_0.py``) read back with the same
header, ``params``, noise model, type entries and payload as when they were written
(``tests/data/v0_4_0.json``), and the same seeded calls still make the same releases, bit for bit.

One change is deliberate: sequence models recorded ``eps_tree``, ``eps_leaf`` and ``eps_length``
where every other release writes ``epsilon_*``; they are now written and read under the one
spelling (:data:`RENAMED`)."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

import polars_dp as pdp
from tests.data.make_v0_4_0 import cases, describe
from tests.helpers import TESTS_DATA

#: The former spelling of a params entry -> the one every release writes now.
RENAMED = {"eps_tree": "epsilon_tree", "eps_leaf": "epsilon_leaf", "eps_length": "epsilon_length"}
AS_WRITTEN = json.loads((TESTS_DATA / "v0_4_0.json").read_text())
EXPECTED = {name: {**e, "params": {RENAMED.get(k, k): v for k, v in e["params"].items()}}
            for name, e in AS_WRITTEN.items()}
FILES = sorted(TESTS_DATA.glob("v0_4_0_*.parquet"))


def test_the_renamed_entries_were_written_under_their_former_names():
    written = {k for e in AS_WRITTEN.values() for k in e["params"]}
    assert set(RENAMED) <= written and not set(RENAMED.values()) & {
        k for e in AS_WRITTEN.values() if e["release_type"] == "sequence_model" for k in e["params"]}


def test_every_case_has_its_file_and_every_mechanism_a_case():
    assert sorted(EXPECTED) == sorted(cases()) == sorted(p.stem.removeprefix("v0_4_0_") for p in FILES)
    recorded = {e["mechanism"] for e in EXPECTED.values()}
    assert set(pdp.plans.known_mechanisms()) <= recorded


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_reads_back_as_written(name):
    path = TESTS_DATA / f"v0_4_0_{name}.parquet"
    release = pdp.read_release(path)
    assert release.verified is True
    assert describe(release) == EXPECTED[name]
    assert pdp.read_release(pq.read_table(path)) == release  # the table path places the same payload


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_seeded_call_makes_the_same_release(name):
    made = describe(cases()[name]())
    want = {k: v for k, v in EXPECTED[name].items() if k not in ("created", "version")}
    assert {k: v for k, v in made.items() if k not in ("created", "version")} == want
