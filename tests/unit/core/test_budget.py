from __future__ import annotations

import math
from fractions import Fraction

import polars as pl
import pytest

import polars_dp as pdp

ATTRS = [pdp.Ordinal("a", 0, 9)]


@pytest.fixture
def frame() -> pl.DataFrame:
    return pl.DataFrame({"a": [1, 2, 3, 9]})


def test_accountant_composes_and_refuses_past_the_total(frame):
    acct = pdp.Accountant(total=1.0)
    r1 = acct.run(frame.dp.basic, ATTRS, epsilon=0.3)
    r2 = acct.run(pdp.privelet, frame, ATTRS, epsilon=0.7)
    assert (r1.epsilon, r2.epsilon) == (0.3, 0.7)
    assert r1.neighbours == r2.neighbours == "replace"
    assert acct.spent == pytest.approx(1.0)
    assert acct.remaining == float(1 - Fraction(0.3) - Fraction(0.7))  # 5.6e-17: exact arithmetic
    assert [label for label, _ in acct.ledger] == ["basic", "privelet"]
    with pytest.raises(pdp.BudgetExceededError, match="of the total 1 is left"):
        acct.run(frame.dp.basic, ATTRS, epsilon=0.01)
    assert len(acct.ledger) == 2


def test_charges_compose_exactly_with_no_slack(frame):
    """Exact sums of the floats' binary values: 0.1 + 0.2 exceeds 0.3 (0.1 and 0.2 lie above
    their decimals, 0.3 below), a spend one ulp past the total is refused, and exact binary
    fractions fill the total to the last bit."""
    acct = pdp.Accountant(total=0.3)
    acct.run(frame.dp.basic, ATTRS, epsilon=0.1)
    with pytest.raises(pdp.BudgetExceededError, match="add exactly"):
        acct.run(frame.dp.basic, ATTRS, epsilon=0.2)
    assert len(acct.ledger) == 1
    acct = pdp.Accountant(total=1.0)
    acct.charge(0.5, "a")
    with pytest.raises(pdp.BudgetExceededError):
        acct.charge(math.nextafter(0.5, 1.0), "b")  # 1.0000000000000001 > 1 (was let in by a 1e-9 slack)
    with pytest.raises(pdp.BudgetExceededError):
        acct.charge(0.5 + 1e-10, "c")
    acct.charge(0.375, "d")
    acct.charge(0.125, "e")
    assert acct.spent_exact == 1 and acct.remaining == 0.0
    with pytest.raises(pdp.BudgetExceededError):
        acct.charge(5e-324, "f")


def test_float_noise_is_refused_unless_allowed_and_then_recorded(frame):
    acct = pdp.Accountant(total=1.0)
    with pytest.raises(pdp.ParameterError, match="allow_float=True"):
        acct.run(frame.dp.basic, ATTRS, epsilon=0.1, noise="float")
    assert acct.ledger == []
    acct = pdp.Accountant(total=1.0, allow_float=True)
    acct.run(frame.dp.basic, ATTRS, epsilon=0.1, noise="float")
    acct.run(frame.dp.basic, ATTRS, epsilon=0.1)
    assert [label for label, _ in acct.ledger] == ["basic (noise='float')", "basic"]
    session = pdp.Session(frame, epsilon=1.0, neighbours="replace")
    with pytest.raises(pdp.ParameterError, match="allow_float=True"):
        session.basic(ATTRS, epsilon=0.1, noise="float")
    assert session.spent == 0
    session = pdp.Session(frame, epsilon=1.0, neighbours="replace", allow_float=True)
    rel = session.basic(ATTRS, epsilon=0.1, noise="float")
    session.basic(ATTRS, epsilon=0.1)
    assert [e["noise"] for e in session.ledger] == ["float", "exact"]
    assert rel.params["ledger"]["entries"][0]["noise"] == "float"


def test_failed_release_keeps_its_charge_and_relations_do_not_mix(frame):
    acct = pdp.Accountant(total=1.0, neighbours="add_remove")
    with pytest.raises(pdp.DomainError):
        acct.run(pl.DataFrame({"a": [99]}).dp.basic, ATTRS, epsilon=0.5)
    assert acct.spent == 0.5  # the error depended on the data: no refund
    r = acct.run(frame.dp.basic, ATTRS, epsilon=0.5)
    assert r.neighbours == "add_remove" and r.noise_scale == 2.0
    with pytest.raises(pdp.BudgetExceededError):
        acct.run(frame.dp.basic, ATTRS, epsilon=0.1)
    with pytest.raises(pdp.ParameterError, match="neighbours='add_remove'"):
        acct.run(frame.dp.basic, ATTRS, epsilon=0.1, neighbours="replace")
    with pytest.raises(pdp.ParameterError, match="total"):
        pdp.Accountant(total=0)


def test_sequence_models_run_under_add_remove_only():
    seqs = pl.DataFrame({"s": [[1, 2], [2, 2, 1]]})
    acct = pdp.Accountant(total=1.0, neighbours="add_remove")
    model = acct.run(seqs.dp.privtree_sequences, "s", alphabet=[1, 2], max_length=4, epsilon=0.5)
    assert model.epsilon == 0.5 and acct.spent == 0.5
    with pytest.raises(pdp.ParameterError, match="add/remove-one neighbours only"):
        pdp.Accountant(total=1.0).run(seqs.dp.privtree_sequences, "s", alphabet=[1, 2], max_length=4,
                                      epsilon=0.5)


def test_seeded_releases_are_refused_before_any_charge(frame):
    """A seed fixes the noise: seeded releases of neighbouring data cancel it, so they compose
    with nothing."""
    acct = pdp.Accountant(total=1.0)
    with pytest.raises(pdp.ParameterError, match="seed"):
        acct.run(frame.dp.basic, ATTRS, epsilon=0.3, seed=1)
    assert acct.spent == 0.0 and acct.ledger == []
    r = acct.run(frame.dp.basic, ATTRS, epsilon=0.3, seed=None)
    assert not r.seeded
