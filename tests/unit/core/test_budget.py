from __future__ import annotations

import functools
import math
from decimal import Decimal
from fractions import Fraction

import polars as pl
import pytest

import polars_dp as pdp
from tests.helpers.budget import CALLS, RELATIONS, Guarded, Untouchable

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
    spent = [pdp.plan(m, ATTRS, epsilon=e).epsilon_spent for m, e in (("basic", 0.3), ("privelet", 0.7))]
    assert acct.spent_exact == sum(spent) and acct.remaining == float(1 - sum(spent))  # exact arithmetic
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
    planned = pdp.plan("privtree_sequences", "s", alphabet=[1, 2], max_length=4, epsilon=0.5)
    assert model.epsilon == 0.5 and acct.spent_exact == planned.epsilon_spent
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


# ---------------------------------------------------------------------------- judged on the plan
WRAPPED = {  # seeded or float releases hidden in wrappers, each with the data somewhere else
    "partial seed": lambda f: (functools.partial(pdp.basic, seed=3), (f, ATTRS)),
    "partial of df.dp seed": lambda f: (functools.partial(f.dp.basic, seed=3), (ATTRS,)),
    "nested partials, positional": lambda f: (
        functools.partial(functools.partial(pdp.basic, f), ATTRS, seed=0), ()),
    "data by keyword": lambda f: (functools.partial(pdp.basic, frame=f, seed=3), (ATTRS,)),
    "partial float": lambda f: (functools.partial(pdp.basic, noise="float"), (f, ATTRS)),
    "partial float privtree": lambda f: (functools.partial(pdp.privtree, noise="float", bounds=[(0, 1)]),
                                         (f, ["a"])),
    "partial neighbours": lambda f: (functools.partial(f.dp.basic, neighbours="add_remove"), (ATTRS,)),
}


@pytest.mark.parametrize("case", list(WRAPPED))
def test_a_wrapper_is_judged_on_its_plan_before_any_charge_or_read(case):
    """A seed, float noise or another relation bound into a functools.partial is seen on the
    plan: refused before the charge, and the data (which refuses any read) is never read."""
    data = Guarded()
    mechanism, args = WRAPPED[case](data.frame)
    acct = pdp.Accountant(total=1.0)
    with pytest.raises(pdp.ParameterError, match="seed|noise='float'|neighbours"):
        acct.run(mechanism, *args, epsilon=0.3)
    assert acct.spent == 0 and acct.ledger == [] and data.reads == 0


def test_a_callable_whose_plan_cannot_be_seen_is_refused_unrun():
    calls = []

    def mine(frame, attributes, **kwargs):
        calls.append(kwargs)
        return pdp.basic(frame, attributes, seed=3, **kwargs)

    acct = pdp.Accountant(total=1.0)
    data = Untouchable()
    for opaque in (mine, lambda f, a, **k: pdp.basic(f, a, seed=3, **k),
                   functools.partial(mine, data), pdp.Session(data, epsilon=1.0, neighbours="replace").basic):
        with pytest.raises(pdp.ParameterError, match="cannot see the plan"):
            acct.run(opaque, data, ATTRS, epsilon=0.3)
    assert calls == [] and acct.spent == 0 and data.touched == []


def test_wrapped_and_positional_calls_run_their_plan(frame):
    acct = pdp.Accountant(total=1.0, neighbours="add_remove")
    a = acct.run(functools.partial(pdp.basic, frame, ATTRS), epsilon=0.25)
    b = acct.run(functools.partial(pdp.basic, epsilon=0.25), frame, ATTRS)
    c = acct.run(functools.partial(frame.dp.privelet, ATTRS, epsilon=0.25, noise="exact"))
    assert [r.neighbours for r in (a, b, c)] == ["add_remove"] * 3 and not any(r.seeded for r in (a, b, c))
    spent = pdp.plan("basic", ATTRS, epsilon=0.25, neighbours="add_remove").epsilon_spent
    assert acct.spent_exact == 2 * spent + pdp.plan("privelet", ATTRS, epsilon=0.25,
                                                    neighbours="add_remove").epsilon_spent
    with pytest.raises(pdp.ParameterError, match="basic has no option 'sede'"):
        acct.run(pdp.basic, Untouchable(), ATTRS, epsilon=0.1, sede=3)
    assert len(acct.ledger) == 3


@pytest.mark.parametrize("name, neighbours", RELATIONS)
def test_every_release_is_charged_its_plans_exact_spend(name, neighbours):
    """Accountant.run (a function or a plan) and Session charge ``plan.epsilon_spent`` exactly,
    every mechanism, both relations."""
    frame, args, options = CALLS[name]
    if "neighbours" in {o.name for o in pdp.plans.plan_class(name).options_table}:
        options = {**options, "neighbours": neighbours}
    spent = pdp.plan(name, *args, epsilon=0.3, **options).epsilon_spent
    acct = pdp.Accountant(total=1.0, neighbours=neighbours)
    acct.run(getattr(pdp, name), frame, *args, epsilon=0.3, **options)
    acct.run(pdp.plan(name, *args, epsilon=0.3, **options), frame)
    session = pdp.Session(frame, epsilon=1.0, neighbours=neighbours)
    release = getattr(session, name)(*args, epsilon=0.3, **options)
    assert acct.spent_exact == 2 * spent and session._accountant.spent_exact == spent
    assert release.params["ledger"]["entries"][0]["epsilon_spent"] == float(spent)


# ---------------------------------------------------------------------------- exact totals
@pytest.mark.parametrize("total", ["0.3", "3/10", Fraction(3, 10), Decimal("0.3"), " 0.30 "])
def test_an_exact_total_fits_a_tenth_then_a_fifth(frame, total):
    acct = pdp.Accountant(total=total)
    acct.run(frame.dp.basic, ATTRS, epsilon=0.1)  # spends exactly 1/10
    acct.run(frame.dp.basic, ATTRS, epsilon=0.2)  # exactly 1/5
    assert acct.spent_exact == acct.total_exact == Fraction(3, 10) and acct.remaining == 0
    assert acct.total == 0.3
    session = pdp.Session(frame, epsilon=total, neighbours="replace")
    session.basic(ATTRS, epsilon=0.1)
    session.basic(ATTRS, epsilon=0.2)
    assert session.remaining == 0 and session.total == 0.3


def test_a_float_total_says_how_to_be_exact(frame):
    acct = pdp.Accountant(total=0.3)
    acct.run(frame.dp.basic, ATTRS, epsilon=0.1)
    with pytest.raises(pdp.BudgetExceededError, match=r"a fractions\.Fraction or a decimal string "
                       r"\(total='0\.3'\), a mechanism's exact epsilon as a fractions\.Fraction"):
        acct.run(frame.dp.basic, ATTRS, epsilon=0.2)
    exact = pdp.Accountant(total="0.3")  # what the hint says works
    exact.run(frame.dp.basic, ATTRS, epsilon=Fraction(1, 10))
    exact.run(frame.dp.basic, ATTRS, epsilon=Fraction(1, 5))
    assert exact.spent_exact == Fraction(3, 10)


def test_exact_charges_and_bad_totals():
    acct = pdp.Accountant(total="1")
    for _ in range(10):
        acct.charge("0.1", "mine")
    assert acct.spent_exact == 1
    with pytest.raises(pdp.BudgetExceededError):
        acct.charge(Fraction(1, 10**30), "one more")
    for bad in ("0.1.2", "", "-0.3", "0", "nan", "inf", True, None, Decimal("NaN"), float("inf"), "1/0"):
        with pytest.raises(pdp.ParameterError, match="total must be a finite number > 0"):
            pdp.Accountant(total=bad)
