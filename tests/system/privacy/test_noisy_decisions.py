"""Every choice a release makes from the data is made from noisy values, never from exact ones.

The noise is forced (:mod:`tests.helpers.privacy`): every count draw is ``C``, or every PrivTree
comparison answers "split" / "stop".  The structure must then be what the documented rule gives
on the noisy values (the exact counts plus ``C``; the forced decisions), which differs from what
the exact counts alone would give: a rule fed the exact counts fails.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

import polars_dp as pdp
from tests.helpers.privacy import ALPHABET, CASES, Decisions, constant_draws, point_frame

C = 1000
CASE = {c.id: c for c in CASES}


def _first_level_counts(frame: pl.DataFrame, m1: int) -> np.ndarray:
    """Exact points per cell of the ``m1 x m1`` grid of the unit box (C order), a reference."""
    cells = np.clip(np.floor(frame.select(["x", "y"]).to_numpy() * m1), 0, m1 - 1).astype(np.int64)
    return np.bincount(cells[:, 0] * m1 + cells[:, 1], minlength=m1 * m1).astype(np.float64)


@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
def test_grid_sizes_follow_the_noisy_counts(monkeypatch, neighbours):
    """UG's side ``m`` and AG's first-level side from the noisy ``N`` (``N + C`` under add/remove;
    ``N`` is public under replace), AG's second-level sides ``m2_i`` from the noisy first-level
    counts ``v_i + C`` (module docstring of :mod:`polars_dp.mechanisms.spatial_grids`)."""
    constant_draws(monkeypatch, C)
    frame = point_frame()
    n = frame.height + (C if neighbours == "add_remove" else 0)
    ug = CASE["uniform_grid"].run(neighbours=neighbours)
    eps_grid = float(ug.params["epsilon_grid"])
    assert ug.params["n_used"] == n
    assert ug.layout["m"] == max(1, math.ceil((n * eps_grid / 10.0) ** 0.5))

    plan = CASE["adaptive_grid"].plan(neighbours=neighbours)
    ag = plan.run(frame, seed=1)
    m1 = max(10, math.ceil(max(1, math.ceil((n * eps_grid / 10.0) ** 0.5)) / 4))
    assert ag.layout["m1"] == m1
    noisy_v = _first_level_counts(frame, m1) + C
    want = np.maximum(1, np.ceil((noisy_v * float(plan.epsilon_level2) / 5.0) ** 0.5)).astype(int)
    exact = np.maximum(1, np.ceil((_first_level_counts(frame, m1) * float(plan.epsilon_level2) / 5.0) ** 0.5))
    assert not np.array_equal(want, exact)  # the construction tells the two rules apart
    np.testing.assert_array_equal(ag.layout["m2"], want)


@pytest.mark.parametrize("forced", [True, False])
@pytest.mark.parametrize("case_id", ["privtree", "privtree_levels", "privtree_sequences"])
def test_tree_splits_are_the_noisy_decisions(monkeypatch, case_id, forced):
    """With every noisy comparison answering ``forced``, the tree is the root alone ("stop") or
    the complete tree to the public depth limit ("split"), whatever the counts."""
    decisions = Decisions(monkeypatch, forced)
    release = CASE[case_id].run()
    assert decisions.lambdas, "no noisy decision was drawn"
    if case_id == "privtree_sequences":
        # split: every node below '#'-free contexts splits up to depth l_top = 6
        depth = release.height if forced else 0
        assert depth == (6 if forced else 0)
        return
    layout = release.layout
    full = 1 << (layout["split_bits"] * (2 * layout["bits"] // layout["split_bits"]))
    assert release.n_leaves == (full if forced else 1)


def test_the_node_cap_keeps_the_first_splits_in_bfs_order(monkeypatch):
    """Past ``max_nodes`` only the first nodes (BFS order) that the noisy decisions split are
    split: here the node of symbol 1, although the node of symbol 3 holds nearly every position."""
    Decisions(monkeypatch, True)
    frame = pl.DataFrame({"s": [[3, 3, 3, 3]] * 30 + [[1, 2]]})
    beta = len(ALPHABET) + 1
    release = pdp.privtree_sequences(frame, "s", alphabet=ALPHABET, max_length=5, epsilon=1.0,
                                     max_nodes=1 + 2 * beta, seed=1)
    assert release.params["capped"] is True
    assert release.n_nodes == 1 + 2 * beta
    # the second child group hangs from the first depth-1 node in BFS order (symbol 1)
    assert set(release.parent[1 + beta:].tolist()) == {1}
