"""Which look-ups the exact sampler runs: a direct ``discrete_laplace`` call picks them from its
requested size (public), the mechanisms' samplers (``sample_noise``, ``add_noise``) never from
theirs (it may come from the data).  The draws are the same either way, word for word, and a
small direct request in a fresh process never imports numba."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from polars_dp import compiled
from polars_dp.noise import add_noise, discrete_laplace, noise_source, sample_noise
from tests.helpers import REPO
from tests.helpers.compiled import lookup_choices, needs_compiled

SCALES = [(2, 1), (7, 3), (400, 1), (8316, 1), (2_000_000, 1)]  # the guide table and the split sampler


@pytest.mark.parametrize("scale", SCALES)
def test_a_direct_call_picks_by_its_size(monkeypatch, scale):
    monkeypatch.setenv("POLARS_DP_COMPILED", "1")
    monkeypatch.setattr(compiled, "numba_imported", lambda: False)
    seen = lookup_choices(monkeypatch)
    monkeypatch.setattr(compiled, "SIZED_FROM", 1000)
    discrete_laplace(noise_source(1), *scale, 999)
    assert seen and not any(seen)
    seen.clear()
    discrete_laplace(noise_source(1), *scale, (10, 100))
    assert seen and all(seen)


@pytest.mark.parametrize("scale", SCALES)
def test_the_mechanisms_samplers_never_pick_by_size(monkeypatch, scale):
    monkeypatch.setenv("POLARS_DP_COMPILED", "1")
    monkeypatch.setattr(compiled, "numba_imported", lambda: False)
    seen = lookup_choices(monkeypatch)
    for size_from in (1, 1 << 40):
        monkeypatch.setattr(compiled, "SIZED_FROM", size_from)
        sample_noise(noise_source(1), scale[0] / scale[1], 999, "exact")
        add_noise(np.zeros(999), scale[0] / scale[1], noise_source(1), "exact")
        with compiled.numpy_only():
            sample_noise(noise_source(1), scale[0] / scale[1], 999, "exact")
    assert len(seen) == 6
    assert seen == [True, True, False] * 2


@needs_compiled
@pytest.mark.parametrize("scale", SCALES)
def test_both_choices_give_the_same_draws(monkeypatch, scale):
    monkeypatch.setattr(compiled, "numba_imported", lambda: False)
    draws = []
    for size_from in (0, 1 << 40):
        monkeypatch.setattr(compiled, "SIZED_FROM", size_from)
        src = noise_source(11)
        sizes = (1, 70_000, (3, 100_001))
        draws.append(np.concatenate([discrete_laplace(src, *scale, n).ravel() for n in sizes]))
        draws.append(src.words(4))  # and the same words consumed
    assert np.array_equal(draws[0], draws[2])
    assert np.array_equal(draws[1], draws[3])


FRESH = """
import sys
import polars_dp.compiled as compiled
from polars_dp.noise import discrete_laplace, noise_source
if sys.argv[1] == "large":
    compiled.SIZED_FROM = 1 << 20
discrete_laplace(noise_source(1), 2, 1, 1 << 20)
discrete_laplace(noise_source(1), 528, 1, 1 << 20)
print("numba" in sys.modules)
"""


@needs_compiled
@pytest.mark.parametrize(("size", "numba"), [("small", "False"), ("large", "True")])
def test_a_small_direct_request_never_imports_numba(size, numba):
    """2^20 draws take 10-30 ms in numpy; numba's import 0.5-1.4 s of CPU in a fresh process."""
    out = subprocess.run([sys.executable, "-c", FRESH, size], capture_output=True, text=True, check=True,
                         cwd=REPO).stdout.split()
    assert out == [numba]
