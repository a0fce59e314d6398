"""What a plan charges is exactly what its release spends on the noise it draws.

Every exact draw is spied on (its rational scale, :class:`tests.helpers.privacy.Draws`; PrivTree's
``lambda`` and ``delta``), and the loss is added up from the sensitivities the papers state
(:func:`sensitivities`, not read from the code): ``Delta / b`` per noisy part, ``(2 beta - 1) g /
((beta - 1) lambda)`` for PrivTree's decisions.  ``plan.epsilon_spent`` (what
:class:`~polars_dp.Session` and :class:`~polars_dp.Accountant` charge) must equal that sum as an
exact rational, for every registered mechanism under both neighbour relations, and every
``epsilon_effective`` a release records must be its part's ``Delta / b``.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

import polars_dp.mechanisms.sequences as sequences
import polars_dp.mechanisms.spatial_tree as spatial_tree
import polars_dp.plans.privtree_scales as privtree_scales
import polars_dp.plans.spatial as spatial_plans
from polars_dp.noise import GRID_BITS
from tests.helpers.privacy import CASES, FRAMES, Decisions, Draws, ln_below

EPSILONS = [1 / 3, 0.7]
L_TOP = 6  # max_length 5 + 1: the pairs one sequence adds (the sequence cases)


def _d(neighbours: str) -> int:
    return 2 if neighbours == "replace" else 1


def sensitivities(case_id: str, neighbours: str) -> list[int]:
    """L1 sensitivity of each noisy part the case draws, in the order it draws them; wavelets: ``Delta rho``
    (Privelet Lemma 1-4: ``rho = (1 + log2 8) * height 2`` for the grid attributes,
    ``(1 + 3)^2`` for Privelet* with bits=3); ``N`` under add/remove: 1; hierarchical: ``Delta`` per
    level tuple (each a partition of the domain), 4 levels of the 8-cell axis times 2 of the flat
    3-leaf one."""
    d = _d(neighbours)
    n = [1] if neighbours == "add_remove" else []
    return {"basic": [d], "privelet": [d * 8], "privtree": [d], "privtree_levels": [d, d, d],
            "privtree_subgrid": [d, d],
            "uniform_grid": [*n, d], "adaptive_grid": [*n, d, d], "privelet_grid": [d * 16],
            "privtree_sequences": [L_TOP, 1], "ngram_sequences": [3 * L_TOP],
            "hierarchical": [d] * 8}[case_id]


def tree_decisions(case_id: str, neighbours: str) -> tuple[int, int] | None:
    """Fanout and group factor of PrivTree's decisions (None: the mechanism draws none)."""
    if case_id.startswith("privtree_seq"):
        return 4, L_TOP
    if case_id.startswith("privtree"):
        return 4, _d(neighbours)
    return None


class SplitSpy:
    def __init__(self, monkeypatch):
        self.deltas: set[Fraction] = set()
        real = spatial_tree.privtree_split

        def split(score, depth, *, lam, delta, theta, rng, noise="exact"):
            self.deltas.add(Fraction(delta))
            return real(score, depth, lam=lam, delta=delta, theta=theta, rng=rng, noise=noise)

        for module in (spatial_tree, sequences):
            monkeypatch.setattr(module, "privtree_split", split)


def _parts(case_id: str, scales: list[Fraction], neighbours: str) -> list[tuple[int, Fraction]]:
    """(sensitivity, scale) of each noisy part.  A wavelet draws its lattice coefficients
    ``D(c) u(c)`` at ``D(c) lambda'`` (``D`` an integer, 1 on the Haar-only coefficients): one
    part of sensitivity ``Delta rho`` at ``lambda'``."""
    want = sensitivities(case_id, neighbours)
    if case_id in ("privelet", "privelet_grid"):
        base = min(scales)
        assert all((s / base).denominator == 1 for s in scales), scales
        return [(want[0], base)]
    assert len(scales) == len(want), (case_id, scales, want)  # one call per part (tiny inputs)
    return list(zip(want, scales, strict=True))


RUNS = [pytest.param(c, nb, id=f"{c.id}-{nb}") for c in CASES for nb in c.neighbour_relations()]


@pytest.mark.parametrize("epsilon", EPSILONS)
@pytest.mark.parametrize(("case", "neighbours"), RUNS)
def test_the_plan_charges_exactly_what_the_draws_spend(monkeypatch, case, neighbours, epsilon):
    draws, decisions, splits = Draws(monkeypatch), Decisions(monkeypatch), SplitSpy(monkeypatch)
    plan = case.plan(epsilon, neighbours)
    release = plan.run(FRAMES[case.shape](False), seed=3)
    spent = Fraction(0)
    tree = tree_decisions(case.id, neighbours)
    if tree is not None:
        beta, group = tree
        assert len(set(decisions.lambdas)) == 1 and len(splits.deltas) == 1
        lam = Fraction(decisions.lambdas[0], 1 << GRID_BITS)
        assert next(iter(splits.deltas)) >= lam * ln_below(beta), "delta < lambda ln(beta): not private"
        spent += Fraction(2 * beta - 1) * group / ((beta - 1) * lam)
    else:
        assert not decisions.lambdas
    parts = _parts(case.id, draws.scales, neighbours)
    spent += sum((Fraction(d) / s for d, s in parts), Fraction(0))
    assert plan.epsilon_spent == spent
    assert spent <= Fraction(epsilon)
    recorded = {k[: -len("noise_scale_exact")]: Fraction(v) for k, v in release.params.items()
                if k.endswith("noise_scale_exact")}
    listed = [Fraction(v) for v in release.params.get("noise_scales_exact", [])]  # one per level tuple
    assert recorded or listed, "an exact release records its scales"
    by_scale = {s: Fraction(d) / s for d, s in parts}
    if listed:
        assert sorted(listed) == sorted(s for _, s in parts), "the recorded scales are not the drawn ones"
        assert release.params["epsilon_effective"] == float(spent)
        return
    for prefix, scale in recorded.items():
        assert scale in by_scale, f"{prefix}noise_scale_exact {scale} was not drawn"
        assert release.params[f"{prefix}epsilon_effective"] == float(by_scale[scale]), prefix


TREE_CASES = [c for c in CASES if tree_decisions(c.id, "add_remove") is not None]


@pytest.mark.parametrize("noise", ["exact", "float"])
@pytest.mark.parametrize("case", TREE_CASES, ids=[c.id for c in TREE_CASES])
def test_tree_plans_hold_a_delta_of_at_least_lambda_ln_beta(monkeypatch, case, noise):
    """The plan holds PrivTree's ``delta`` and refuses, before any data, one below ``lambda
    ln(beta)`` (with ``delta = 0`` the decisions are not private and the tree grows without
    bound): here ``delta`` forced to 0 in the calibration."""
    plan = case.plan(noise=noise)
    beta = tree_decisions(case.id, "add_remove")[0]
    slack = 1 if noise == "exact" else 1 - Fraction(1, 10**12)  # float: lambda * math.log(beta)
    assert Fraction(plan.delta) >= Fraction(plan.lam) * ln_below(beta) * slack
    for module in (privtree_scales, spatial_plans):
        monkeypatch.setattr(module, "privtree_delta", lambda lam, fanout, noise="float": 0.0)
    with pytest.raises(AssertionError, match="delta >= lambda ln"):
        case.plan(noise=noise)
