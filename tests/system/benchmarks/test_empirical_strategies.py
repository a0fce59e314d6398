"""The empirical check of the hierarchical error formula: its all-ranges identity and a quick run."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from benchmarks import empirical_strategies


@pytest.mark.parametrize("shape", [(7,), (5, 4), (3, 4, 2)])
def test_all_ranges_mse_is_the_mean_over_every_box_listed(shape):
    x = np.random.default_rng(len(shape)).normal(size=shape)
    ranges = [[(a, b) for a in range(n) for b in range(a, n)] for n in shape]
    listed = [x[tuple(slice(a, b + 1) for a, b in combo)].sum() ** 2 for combo in itertools.product(*ranges)]
    assert empirical_strategies.all_ranges_mse(x) == pytest.approx(float(np.mean(listed)), rel=1e-12)


def test_quick_run_finds_the_formula_within_its_sampling_error(capsys):
    assert empirical_strategies.main(["--quick", "--releases", "30", "--queries", "50"]) == 0
    out = capsys.readouterr().out
    assert out.count(" ok") == 3 and "MISSED" not in out
