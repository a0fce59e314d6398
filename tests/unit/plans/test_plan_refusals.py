"""Every refusal that depends on public inputs only is the plan's: before the data, before the charge."""

from __future__ import annotations

import math
from fractions import Fraction

import polars as pl
import pytest

import polars_dp as pdp
from polars_dp.noise import MAX_COUNT_SCALE, MAX_SCALE
from tests.helpers.budget import CALLS, RELATIONS, Untouchable

TINY = 2.0**-60  # every mechanism's scale is then past 2^56


def _options(name: str, neighbours: str) -> dict:
    _, _, options = CALLS[name]
    if "neighbours" in {o.name for o in pdp.plans.plan_class(name).options_table}:
        return {**options, "neighbours": neighbours}
    return options


@pytest.mark.parametrize("name, neighbours", RELATIONS)
def test_a_scale_past_its_limit_is_refused_by_the_plan_unread_and_uncharged(name, neighbours):
    _, args, _ = CALLS[name]
    options = _options(name, neighbours)
    with pytest.raises(pdp.ParameterError, match=r"exceeds 2\^(45|56)") as info:
        pdp.plan(name, *args, epsilon=TINY, **options)
    assert info.value.parameter == "epsilon" and name.split("_")[0] in str(info.value)
    data = Untouchable()
    acct = pdp.Accountant(total=1.0, neighbours=neighbours)
    with pytest.raises(pdp.ParameterError, match="exceeds"):
        acct.run(getattr(pdp, name), data, *args, epsilon=TINY, **options)
    session = pdp.Session(data, epsilon=1.0, neighbours=neighbours)
    with pytest.raises(pdp.ParameterError, match="exceeds"):
        getattr(session, name)(*args, epsilon=TINY, **options)
    with pytest.raises(pdp.ParameterError, match="exceeds"):
        getattr(pdp, name)(data, *args, epsilon=TINY, **options)
    assert acct.spent == 0 and acct.ledger == [] and session.spent == 0 and data.touched == []
    pdp.plan(name, *args, epsilon=TINY, **{**options, "noise": "float"})  # float noise: no limit


def test_the_limits_are_exact_at_their_boundary():
    """Basic under replace: scale ``2 / epsilon`` on the ``2^-20`` grid, at most ``2^45``;
    Privelet: the lattice draw ``D lambda'`` at most ``2^56`` (``D = 2 (3 - 1) = 4`` here)."""
    attrs = [pdp.Ordinal("a", 0, 3)]
    at = pdp.plan("basic", attrs, epsilon=2.0**-44)
    assert at.scale == MAX_COUNT_SCALE
    with pytest.raises(pdp.ParameterError, match=r"exceeds 2\^45"):
        pdp.plan("basic", attrs, epsilon=math.nextafter(2.0**-44, 0))
    nominal = [pdp.Nominal("n", categories=["x", "y", "z"])]
    lattice = pdp.plan("privelet", nominal, epsilon=1.0)
    assert lattice.exact_draws()[0][1] == 4 * Fraction(lattice.scale)
    eps = float(Fraction(4 * 2 * lattice.rho) / MAX_SCALE)  # D x 2 rho / eps = 2^56 exactly
    assert 4 * Fraction(pdp.plan("privelet", nominal, epsilon=eps).scale) == MAX_SCALE
    with pytest.raises(pdp.ParameterError, match=r"exceeds 2\^56"):
        pdp.plan("privelet", nominal, epsilon=math.nextafter(eps, 0))


def test_epsilon_for_never_answers_a_scale_that_cannot_be_drawn():
    attrs = [pdp.Ordinal("a", 0, 3)]
    queries = pl.DataFrame({"a_lo": [0], "a_hi": [3]})
    plan = pdp.plan("basic", attrs, epsilon=1.0)
    eps = plan.epsilon_for(queries, accuracy=1e17)
    assert Fraction(pdp.plan("basic", attrs, epsilon=eps).scale) <= MAX_COUNT_SCALE


def test_a_too_wide_lattice_is_refused_by_the_plan():
    big = [pdp.Nominal(c, pdp.Hierarchy.flat([f"{c}{i}" for i in range(4096)])) for c in "abcd"]
    with pytest.raises(pdp.ParameterError, match="too wide"):
        pdp.plan("privelet", big, epsilon=1.0)
    data = Untouchable()
    acct = pdp.Accountant(total=1.0)
    with pytest.raises(pdp.ParameterError, match="too wide"):
        acct.run(pdp.privelet, data, big, epsilon=1.0)
    assert acct.spent == 0 and data.touched == []
    pdp.plan("privelet", big, epsilon=1.0, noise="float")
    pdp.plan("privelet", big, epsilon=1.0, untransformed=["d"])  # three axes are fine


@pytest.mark.parametrize("name", ["privtree", "privtree_sequences"])
@pytest.mark.parametrize("theta", [math.inf, math.nan, -1.0])
def test_an_unusable_threshold_is_refused_by_the_plan(name, theta):
    _, args, options = CALLS[name]
    data = Untouchable()
    acct = pdp.Accountant(total=1.0, neighbours="add_remove")
    with pytest.raises(pdp.ParameterError, match="theta"):
        acct.run(getattr(pdp, name), data, *args, epsilon=1.0, theta=theta, **options)
    assert acct.spent == 0 and data.touched == []
