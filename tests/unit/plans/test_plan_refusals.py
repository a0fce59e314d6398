"""Every refusal that depends on public inputs only is the plan's: before the data, before the charge."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import polars as pl
import pytest

import polars_dp as pdp
from polars_dp.kernels.wavelet_exact import hn_denominators
from polars_dp.noise import MAX_COUNT_SCALE, MAX_SCALE
from polars_dp.plans.lattice import max_lattice_factor
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


def test_a_huge_declared_domain_is_refused_where_an_array_would_be_built():
    """A plan over 2^40 cells builds (its scales and Basic's or Privelet's closed-form error bars
    need no per-cell array); the workload's per-axis Gram statistics, the count and a cell index
    past int64 are refused with DomainTooLargeError saying what to change, from the declared
    domain alone (never numpy's MemoryError, OverflowError or ValueError)."""
    big = [pdp.Ordinal("a", 0, 2**40)]
    for name in ("basic", "privelet", "hierarchical"):
        plan = pdp.plan(name, big, epsilon=1.0)
        assert 0 < plan.range_std(a=(0, 10)) < math.inf
    assert pdp.plan("privelet", big, epsilon=1.0).noise_scale == pytest.approx(2 * 42)  # rho = 1 + 41
    workload = pdp.workload.ranges(big)
    for make in (lambda: pdp.plan("hierarchical", big, epsilon=1.0, workload=workload),
                 lambda: pdp.plan("auto", big, epsilon=1.0, workload=workload),
                 lambda: pdp.plan("privelet", big, epsilon=1.0, untransformed="workload", workload=workload),
                 lambda: pdp.compare(big, workload, epsilon=1.0),
                 lambda: pdp.plan("basic", big, epsilon=1.0).workload_error(workload)):
        with pytest.raises(pdp.DomainTooLargeError, match=r"an axis of the workload has [0-9,]+ cells "
                                                          r"\('ranges' queries on 1,099,511,627,777 cells"
                                                          r".* use coarser bins") as info:
            make()
        assert type(info.value) is pdp.DomainTooLargeError
    for name in ("basic", "privelet", "hierarchical"):  # the count refuses before reading a row
        data = Untouchable()
        with pytest.raises(pdp.DomainTooLargeError, match="use coarser bins"):
            pdp.plan(name, big, epsilon=1.0).run(data)
        assert data.touched == []

    huge = [pdp.Ordinal("a", 0, 2**70), pdp.Ordinal("b", 0, 9)]
    queries = pl.DataFrame({"a_lo": [0], "a_hi": [10]})
    for name in ("basic", "privelet", "hierarchical"):
        plan = pdp.plan(name, huge, epsilon=1.0)
        assert plan.noise_scale > 0
        for ask, args, options in ((plan.range_std, (), {"a": (0, 10)}), (plan.accuracy, (queries,), {}),
                                   (plan.epsilon_for, (queries,), {"accuracy": 1e9})):
            with pytest.raises(pdp.DomainTooLargeError, match=r"'a' declares 1.2e\+21 cells, past the "
                                                              r".* int64.* use coarser bins"):
                ask(*args, **options)


def test_the_largest_lattice_factor_reads_no_per_cell_array():
    """Privelet's largest draw factor is the product of the transformed nominal axes' largest
    denominators, as the per-axis arrays give it, without building one per ordinal cell."""
    hier = pdp.Hierarchy.from_dict({"g": ["x", "y", "z"], "h": ["u", "v"]})
    attrs = [pdp.Ordinal("a", 0, 12), pdp.Nominal("n", hier),
             pdp.Nominal("m", pdp.Hierarchy.flat(list("abcd")))]
    for transformed in itertools.product([False, True], repeat=3):
        listed = math.prod(int(d.max()) for d in hn_denominators(attrs, transformed))
        assert max_lattice_factor(attrs, transformed) == listed
    assert max_lattice_factor([pdp.Ordinal("a", 0, 2**70)], [True]) == 1


@pytest.mark.parametrize(("name", "args", "kwargs"), [
    ("basic", ([pdp.Ordinal("a", 0, 99_999)],), {}),
    ("privelet", ([pdp.Ordinal("a", 0, 99_999)],), {}),
    ("hierarchical", ([pdp.Ordinal("a", 0, 99_999)],), {}),
    ("ngram_sequences", ("s",), {"alphabet": list("abcdefgh"), "max_length": 4, "height": 6}),
])
def test_a_domain_too_large_for_the_machine_is_refused_before_the_charge(name, args, kwargs, monkeypatch):
    """The memory a release needs is a public fact (its declaration and the machine): on a 1 MiB
    machine the accountant and a session refuse, charging nothing and reading no row; the same
    plan runs where memory allows."""
    from polars_dp.domains import size
    plan = pdp.plan(name, *args, epsilon=0.5, **kwargs)
    need = math.prod(plan.working_size()["shape"]) * plan.working_size()["bytes_per_cell"]
    monkeypatch.setattr(size, "total_memory_bytes", lambda: 1 << 20)  # a 1 MiB machine
    assert need > 1 << 20
    data = Untouchable()
    acct = pdp.Accountant(total=1.0, neighbours=plan.neighbours)
    with pytest.raises(pdp.DomainTooLargeError, match="this machine has 0.0 GiB"):
        acct.run(plan, data)
    session = pdp.Session(data, epsilon=1.0, neighbours=plan.neighbours)
    with pytest.raises(pdp.DomainTooLargeError):
        getattr(session, name)(*args, epsilon=0.5, **kwargs)
    assert acct.spent == 0 and session.spent == 0 and data.touched == []
    monkeypatch.setattr(size, "total_memory_bytes", lambda: need)
    plan.check_size()  # exactly enough: allowed
