from __future__ import annotations

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
    assert acct.spent == pytest.approx(1.0) and acct.remaining == 0.0
    assert [label for label, _ in acct.ledger] == ["basic", "privelet"]
    with pytest.raises(pdp.BudgetExceededError, match="only 0 of the total 1 is left"):
        acct.run(frame.dp.basic, ATTRS, epsilon=0.01)
    assert len(acct.ledger) == 2


def test_float_sums_that_equal_the_total_fit(frame):
    acct = pdp.Accountant(total=0.3)
    acct.run(frame.dp.basic, ATTRS, epsilon=0.1)
    acct.run(frame.dp.basic, ATTRS, epsilon=0.2)  # 0.1 + 0.2 = 0.30000000000000004
    assert len(acct.ledger) == 2


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
