"""The budget proven on the noise a release actually draws, exactly.

Every exact noise call is spied on (the discrete Laplace samplers' scale, PrivTree's
``lambda`` and ``delta``), and the privacy loss is added up from the sensitivities stated in
the papers (not read from the code): ``Delta / scale`` per noisy part (Laplace mechanism),
``(2 beta - 1) group / ((beta - 1) lambda)`` for PrivTree's decisions (Zhang et al. 2016,
Thm. 3.1 with ``delta / lambda >= ln beta``, checked against an independent 50-digit ``ln``),
all in exact rationals.  The total must not exceed ``epsilon`` for every mechanism, both
neighbour relations, at epsilons off the ``2^-20`` grid (and PrivTree's decisions must not
exceed their documented ``tree_share`` of it).  Each noisy part is one sampler call
here (small inputs: no chunking), so a call the spec does not list fails the test too.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import polars as pl
import pytest

import polars_dp as pdp
import polars_dp.mechanisms.sequences as sequences
import polars_dp.mechanisms.spatial_tree as privtree
from polars_dp import noise as N
from polars_dp.noise import discrete
from tests.helpers.privacy import ln_below
from tests.helpers.samplers import with_out

REAL_DLAP, REAL_SPLIT = discrete.draw_discrete_laplace, privtree.privtree_split

EPSILONS = [0.3, 0.7, 1 / 3, 0.123, 2.5]


class Spy:
    def __init__(self, monkeypatch):
        self.scales: list[Fraction] = []
        self.decisions: list[tuple[Fraction, Fraction]] = []
        real_dlap, real_split = REAL_DLAP, REAL_SPLIT

        def dlap(src, t, s, size):
            self.scales.append(Fraction(int(t), int(s)))
            return real_dlap(src, t, s, size)

        def split(score, depth, *, lam, delta, theta, rng, noise="exact"):
            self.decisions.append((Fraction(lam), Fraction(delta)))
            return real_split(score, depth, lam=lam, delta=delta, theta=theta, rng=rng, noise=noise)

        for module in (discrete, N):  # every exact draw, direct (discrete_laplace) or not, passes here
            monkeypatch.setattr(module, "draw_discrete_laplace", with_out(dlap))
        for module in (privtree, sequences):
            monkeypatch.setattr(module, "privtree_split", split)


def tree_loss(spy: Spy, beta: int, group: int) -> Fraction:
    """PrivTree's decisions: one ``lambda``, one ``delta`` for every level, ``delta >= lambda ln
    beta``; they spend ``(2 beta - 1) group / ((beta - 1) lambda)``."""
    assert spy.decisions, "no split decision was drawn"
    assert len(set(spy.decisions)) == 1, "the levels used different lambda or delta"
    lam, delta = spy.decisions[0]
    assert delta >= lam * ln_below(beta)
    return Fraction(2 * beta - 1) * group / ((beta - 1) * lam)


def parts_loss(spy: Spy, sensitivities: list[int]) -> Fraction:
    assert len(spy.scales) == len(sensitivities), (spy.scales, sensitivities)
    return sum((Fraction(d) / s for d, s in zip(sensitivities, spy.scales, strict=True)), Fraction(0))


def _sens(neighbours: str) -> int:
    return 2 if neighbours == "replace" else 1


@pytest.fixture(scope="module")
def points() -> pl.DataFrame:
    rng = np.random.default_rng(0)
    return pl.DataFrame({"x": rng.random(300), "y": rng.random(300)})


@pytest.mark.parametrize("epsilon", EPSILONS)
@pytest.mark.parametrize("neighbours", ["replace", "add_remove"])
def test_grid_mechanisms_spend_at_most_epsilon(monkeypatch, epsilon, neighbours):
    df = pl.DataFrame({"a": [0, 1, 1, 7, 3], "b": ["p", "q", "q", "r", "p"]})
    attrs = [pdp.Ordinal("a", 0, 7), pdp.Nominal("b", pdp.Hierarchy.flat(["p", "q", "r"]))]
    d = _sens(neighbours)

    spy = Spy(monkeypatch)
    pdp.basic(df, attrs, epsilon=epsilon, neighbours=neighbours, seed=1)
    assert parts_loss(spy, [d]) <= Fraction(epsilon)

    spy = Spy(monkeypatch)  # Haar on 8 cells: rho = 1 + log2 8 = 4; b untransformed (factor 1)
    pdp.privelet(df, attrs, epsilon=epsilon, neighbours=neighbours, untransformed=["b"], seed=1)
    assert parts_loss(spy, [d * 4]) <= Fraction(epsilon)


@pytest.mark.parametrize("epsilon", EPSILONS)
@pytest.mark.parametrize("neighbours", ["replace", "add_remove"])
def test_spatial_mechanisms_spend_at_most_epsilon(monkeypatch, points, epsilon, neighbours):
    d = _sens(neighbours)
    noisy_n = [1] if neighbours == "add_remove" else []  # n is public under replace
    kw = {"bounds": [(0, 1), (0, 1)], "epsilon": epsilon, "neighbours": neighbours, "seed": 2}

    spy = Spy(monkeypatch)
    pdp.uniform_grid(points, ["x", "y"], **kw)
    assert parts_loss(spy, [*noisy_n, d]) <= Fraction(epsilon)

    spy = Spy(monkeypatch)
    pdp.adaptive_grid(points, ["x", "y"], **kw)
    assert parts_loss(spy, [*noisy_n, d, d]) <= Fraction(epsilon)

    spy = Spy(monkeypatch)  # Privelet*: Haar on 2^3 cells per axis, rho = (1 + 3)^2
    pdp.privelet_grid(points, ["x", "y"], bits=3, **kw)
    assert parts_loss(spy, [d * 16]) <= Fraction(epsilon)

    spy = Spy(monkeypatch)  # fanout 4 in 2-d; the tree's group factor is the histogram's
    pdp.privtree(points, ["x", "y"], tree_share=0.5, **kw)
    tree = tree_loss(spy, 4, d)
    assert tree <= Fraction(0.5) * Fraction(epsilon)  # the documented split: tree_share of epsilon
    assert tree + parts_loss(spy, [d]) <= Fraction(epsilon)


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_sequence_mechanisms_spend_at_most_epsilon(monkeypatch, epsilon):
    """Add/remove one sequence changes at most ``l_top = max_length + 1`` (context, symbol)
    pairs: the leaves' sensitivity and the tree's group factor; n-grams count each pair at
    ``height`` levels; the length law is a histogram of one entry per sequence."""
    df = pl.DataFrame({"s": [[1, 2, 3], [2, 2], [3], [1, 1, 2, 3]] * 30})
    max_length, l_top = 5, 6

    spy = Spy(monkeypatch)
    pdp.privtree_sequences(df, "s", alphabet=[1, 2, 3], max_length=max_length, epsilon=epsilon,
                           tree_share=0.25, seed=3)
    tree = tree_loss(spy, 4, l_top)
    assert tree <= Fraction(0.25) * Fraction(epsilon)  # the documented split: tree_share of epsilon
    assert tree + parts_loss(spy, [l_top, 1]) <= Fraction(epsilon)

    spy = Spy(monkeypatch)
    pdp.ngram_sequences(df, "s", alphabet=[1, 2, 3], max_length=max_length, epsilon=epsilon, height=3, seed=3)
    assert parts_loss(spy, [3 * l_top]) <= Fraction(epsilon)
