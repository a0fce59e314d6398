"""A black-box check of the guarantee on neighbouring datasets, for every registered mechanism.

For a dataset ``D`` and its neighbour ``D'`` (one more row or sequence), ``R`` seeded releases of
each (:data:`RUNS`; a fixed seed per release, so the test is deterministic), and events ``S`` on the
released total ``T`` (``T >= t`` and ``T <= t`` at thresholds around the exact totals), epsilon-DP
requires ``P[S | D] <= e^epsilon P[S | D']`` and the reverse.  A violation is reported when the
one-sided Clopper-Pearson bounds at level ``1 - ALPHA`` separate: ``lower(P[S | D]) > e^epsilon
upper(P[S | D'])``; a correct mechanism fails one check with probability below ``ALPHA``.  The
test has power: Basic with a halved noise scale, on one cell (where the total is one count
plus one draw and the bound is tight), is detected.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from scipy.stats import beta

import polars_dp as pdp
import polars_dp.plans.grid as grid_plans
from tests.helpers.privacy import ALPHABET, BOX, CASES, FRAMES, Case

EPSILON = 2.0
RUNS = 150
ALPHA = 1e-4  # per check: the 132 checks in all keep a false failure below 1.4 %
#: Small set-ups of every registered mechanism (coarse resolutions: fast releases).
SMALL = [*(c for c in CASES if c.shape == "grid"),
         Case("privtree", "privtree", (["x", "y"],), {"bounds": BOX, "resolution": 2}),
         Case("privtree_levels", "privtree", (["x", "y"],), {"bounds": BOX, "resolution": 2, "levels": 1}),
         Case("privtree_subgrid", "privtree_subgrid", (["x", "y"],), {"bounds": BOX, "resolution": 2}),
         *(c for c in CASES if c.id in ("uniform_grid", "adaptive_grid")),
         Case("privelet_grid", "privelet_grid", (["x", "y"],), {"bounds": BOX, "bits": 1}),
         Case("privtree_sequences", "privtree_sequences", ("s",), {"alphabet": ALPHABET, "max_length": 3}),
         Case("ngram_sequences", "ngram_sequences", ("s",),
              {"alphabet": ALPHABET, "max_length": 3, "height": 2})]
ONE_CELL = Case("basic_one_cell", "basic", ([pdp.Ordinal("a", 0, 7, width=8)],))


def test_the_small_cases_cover_the_registry():
    assert {c.mechanism for c in SMALL} == set(pdp.plans.REGISTRY)


def _total(release) -> float:
    if release.release_type == "grid":
        return float(release.counts.sum())
    if release.release_type == "tree":
        return float(release.count.sum())
    return float(release.hist[0].sum())  # the root: every (context, symbol) pair


def _exact_total(case: Case, neighbour: bool) -> float:
    frame = FRAMES[case.shape](neighbour)
    if case.shape == "sequences":  # each sequence adds its truncated length + 1 pairs
        return float(sum(min(len(s), case.options["max_length"]) + 1 for s in frame["s"].to_list()))
    return float(frame.height)


def _totals(case: Case, neighbour: bool) -> np.ndarray:
    plan = case.plan(EPSILON, "add_remove")
    frame = FRAMES[case.shape](neighbour)
    offset = 1_000_000 if neighbour else 0
    return np.array([_total(plan.run(frame, seed=offset + s)) for s in range(RUNS)])


def _violations(a: np.ndarray, b: np.ndarray, thresholds: list[float]) -> list[str]:
    """Events whose Clopper-Pearson bounds show ``P[S | a] > e^eps P[S | b]`` or the reverse."""
    out = []
    for t in thresholds:
        for name, event in ((f"T >= {t}", lambda x, t=t: x >= t), (f"T <= {t}", lambda x, t=t: x <= t)):
            ka, kb = int(event(a).sum()), int(event(b).sum())
            for (k1, k2, label) in ((ka, kb, "D over D'"), (kb, ka, "D' over D")):
                lower = beta.ppf(ALPHA, k1, RUNS - k1 + 1) if k1 > 0 else 0.0
                upper = beta.ppf(1 - ALPHA, k2 + 1, RUNS - k2) if k2 < RUNS else 1.0
                if lower > math.exp(EPSILON) * upper:
                    out.append(f"{name}, {label}: {k1}/{RUNS} against {k2}/{RUNS}")
    return out


def _thresholds(case: Case) -> list[float]:
    lo, hi = _exact_total(case, False), _exact_total(case, True)
    mid = (lo + hi) / 2
    return [mid - 1, mid, mid + 1]


@pytest.mark.parametrize("case", SMALL, ids=[c.id for c in SMALL])
def test_neighbouring_outputs_are_epsilon_close(case):
    found = _violations(_totals(case, False), _totals(case, True), _thresholds(case))
    assert not found, f"{case.id} is not {EPSILON}-DP on these events: {found}"


def test_a_halved_scale_is_detected(monkeypatch):
    """The same check on Basic with its noise scale halved (so ``2 epsilon``-DP only) finds a
    violation: the events have the power the test relies on."""
    assert not _violations(_totals(ONE_CELL, False), _totals(ONE_CELL, True), _thresholds(ONE_CELL))
    real = grid_plans.laplace_scale
    monkeypatch.setattr(grid_plans, "laplace_scale", lambda d, e, noise: real(d, e, noise) / 2)
    assert _violations(_totals(ONE_CELL, False), _totals(ONE_CELL, True), _thresholds(ONE_CELL))


# ---------------------------------------------------------------------------- privacy unit
#: Three rows per person, all in one cell; the neighbour lacks person 0's three rows.
PEOPLE = 12
ONE_CELL_ATTRS = [pdp.Ordinal("a", 0, 7, width=8)]


def _people(neighbour: bool):
    ids = [p for p in range(PEOPLE) if not (neighbour and p == 0) for _ in range(3)]
    return pl.DataFrame({"person": ids, "a": [p % 8 for p in ids]})


def _unit_totals(unit, neighbour: bool) -> np.ndarray:
    frame = _people(neighbour)
    offset = 1_000_000 if neighbour else 0
    return np.array([float(pdp.basic(frame, ONE_CELL_ATTRS, epsilon=EPSILON, neighbours="add_remove",
                                     privacy_unit=unit, seed=offset + s).counts.sum()) for s in range(RUNS)])


def _unit_violations(unit) -> list[str]:
    mid = (3 * PEOPLE + 3 * (PEOPLE - 1)) / 2
    return _violations(_unit_totals(unit, False), _unit_totals(unit, True), [mid - 1, mid, mid + 1])


def test_one_persons_rows_removed_is_epsilon_close_with_the_unit_declared():
    """Target of the privacy unit: a 3-row-per-person table and its neighbour without one
    person's rows; with ``Rows(max_per=3, id_column="person")`` the release is ``EPSILON``-DP on
    these events (the scale is ``3 / EPSILON``)."""
    found = _unit_violations(pdp.Rows(max_per=3, id_column="person"))
    assert not found, f"the declared unit is not {EPSILON}-DP on these events: {found}"


def test_one_persons_rows_removed_breaks_epsilon_without_the_unit():
    """The same pair with one row per individual (``Rows()``, scale ``1 / EPSILON``): the
    person moves the total by 3, the release is only ``3 EPSILON``-DP for them, and the check
    finds it."""
    assert _unit_violations(pdp.Rows())
