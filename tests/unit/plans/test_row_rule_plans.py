"""Plans and the row rules: which options each family offers, and what a dropped row costs."""

from __future__ import annotations

import pytest

import polars_dp as pdp


@pytest.mark.parametrize("mechanism", ["uniform_grid", "adaptive_grid"])
def test_under_replace_n_is_noisy_when_out_of_domain_rows_are_dropped(mechanism):
    """A replaced row that the rule drops changes N by one: N is then noisy and budgeted (as under
    nulls="drop"); "clamp" keeps every row, so N stays public."""
    plan = pdp.plan(mechanism, ["x"], bounds=[(0.0, 1.0)], epsilon=1.0, neighbours="replace",
                    on_out_of_domain="drop")
    assert not plan.n_public and plan.n_scale is not None and plan.epsilon_n > 0
    assert pdp.plan(mechanism, ["x"], bounds=[(0.0, 1.0)], epsilon=1.0, neighbours="replace",
                    on_out_of_domain="clamp").n_public


@pytest.mark.parametrize("mechanism", ["basic", "privelet", "privtree", "uniform_grid", "adaptive_grid",
                                       "privelet_grid"])
def test_grid_and_spatial_plans_offer_drop_and_clamp(mechanism):
    first = ["x"] if mechanism not in ("basic", "privelet") else [pdp.Ordinal("x", 0, 1)]
    extra = {} if mechanism in ("basic", "privelet") else {"bounds": [(0.0, 1.0)]}
    for rule in ("raise", "clamp", "drop"):
        assert pdp.plan(mechanism, first, epsilon=1.0, on_out_of_domain=rule, **extra).options[
            "on_out_of_domain"] == rule


@pytest.mark.parametrize("mechanism", ["privtree_sequences", "ngram_sequences"])
def test_sequence_plans_offer_drop_and_no_clamp(mechanism):
    plan = pdp.plan(mechanism, "s", alphabet="ab", max_length=3, epsilon=1.0, nulls="drop",
                    on_out_of_domain="drop")
    assert plan.options["nulls"] == plan.options["on_out_of_domain"] == "drop"
    with pytest.raises(pdp.ParameterError, match="'raise', 'drop'") as err:
        pdp.plan(mechanism, "s", alphabet="ab", max_length=3, epsilon=1.0, on_out_of_domain="clamp")
    assert err.value.parameter == "on_out_of_domain"
