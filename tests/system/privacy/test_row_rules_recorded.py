"""Every release records the row rules its curator chose (``nulls``, ``on_out_of_domain``, when
not the default ``"raise"``), reads back with them (UG and AG decide from them whether the row
count may be used as is), shows them on its card, and an edited rule is refused on read."""

from __future__ import annotations

import pytest

import polars_dp as pdp
from tests.helpers.privacy import CASE_IDS, CASES, edited_table

RULES = {"grid": {"nulls": "drop", "on_out_of_domain": "clamp"},
         "points": {"nulls": "drop", "on_out_of_domain": "drop"},
         "sequences": {"nulls": "drop", "on_out_of_domain": "drop"}}


@pytest.mark.parametrize("neighbours", ["replace", "add_remove"])
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_the_row_rules_are_recorded_read_back_and_carded(case, neighbours, tmp_path):
    if neighbours not in case.neighbour_relations():
        pytest.skip("sequence models are defined under add/remove only")
    rules = RULES[case.shape]
    release = case.run(neighbours=neighbours, **rules)
    assert {k: release.params[k] for k in rules} == rules
    back = pdp.read_release(release.write_parquet(tmp_path / "r.parquet"))
    assert back.params == release.params
    assert back.card()["preprocessing"] == rules
    assert case.run(neighbours=neighbours).card()["preprocessing"] == {"nulls": "raise",
                                                                       "on_out_of_domain": "raise"}


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_a_rule_edited_to_another_value_is_refused(case):
    """The rebuilt plan validates the recorded rule: an unknown value, or the default spelled out
    (a writer records only what is not the default), is refused.  Removing a rule is caught where
    it changes a recorded decision (below); elsewhere only a signature covers it, as for the other
    descriptive entries (README, "Reading a release back is verifying it")."""
    release = case.run(**RULES[case.shape])
    for value in ("sometimes", "raise"):
        def edit(meta, value=value):
            meta["params"]["nulls"] = value

        with pytest.raises(pdp.ReleaseFormatError):
            pdp.read_release(edited_table(release, edit))


@pytest.mark.parametrize("case", [c for c in CASES if c.id in ("uniform_grid", "adaptive_grid")],
                         ids=["uniform_grid", "adaptive_grid"])
def test_a_removed_rule_is_refused_where_it_decided_the_row_count(case):
    """Under replace, UG and AG use the row count as is only when no row can be dropped: a file
    whose ``nulls="drop"`` is removed states a noisy count its rebuilt plan does not give."""
    release = case.run(neighbours="replace", **RULES[case.shape])
    assert release.params["n_source"].startswith("noisy")

    def drop_rule(meta):
        del meta["params"]["nulls"]
        del meta["params"]["on_out_of_domain"]

    with pytest.raises(pdp.ReleaseFormatError, match="n_source"):
        pdp.read_release(edited_table(release, drop_rule))
