"""The samplers' compiled table look-ups (numba, the ``fast`` extra) give the numpy draws, word for word."""

from __future__ import annotations

import numpy as np
import pytest

from polars_dp.noise import discrete_laplace, noise_source
from tests.helpers.compiled import needs_compiled


@needs_compiled
@pytest.mark.parametrize("scale", [(2, 1), (7, 3), (66, 1), (400, 1), (8316, 1), (300_000, 1), (2e6, 1)])
def test_compiled_lookups_give_the_numpy_draws(monkeypatch, scale):
    t, s = int(scale[0]), scale[1]
    draws = []
    for flag in ("1", "0"):
        monkeypatch.setenv("POLARS_DP_COMPILED", flag)
        src = noise_source(11)
        draws.append(np.concatenate([discrete_laplace(src, t, s, n) for n in (1, 70_000, 300_001)]))
        draws.append(src.words(4))  # and the same words consumed
    assert np.array_equal(draws[0], draws[2])
    assert np.array_equal(draws[1], draws[3])
