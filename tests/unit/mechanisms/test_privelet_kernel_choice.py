"""Which kernels a grid release runs: the numpy ones below ``COMPILED_FROM`` noisy values (the
plan's coefficients, a public size), the compiled ones from it.  Both give the same release, bit
for bit; a small release in a fresh process never imports numba."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import polars as pl
import pytest

import polars_dp as pdp
import polars_dp.mechanisms.wavelet_lattice as wavelet_lattice
import polars_dp.plans.base as plans_base
from tests.helpers import REPO
from tests.helpers.compiled import needs_compiled

OCC = pdp.Hierarchy.from_dict({f"g{g}": list(range(g * 8, (g + 1) * 8)) for g in range(4)})
ATTRS = [pdp.Ordinal("a", 0, 40), pdp.Nominal("g", categories=["x", "y", "z"]), pdp.Nominal("o", OCC),
         pdp.Ordinal("b", 0, 300)]


def _frame() -> pl.DataFrame:
    rng = np.random.default_rng(3)
    n = 5000
    return pl.DataFrame({"a": rng.integers(0, 41, n), "g": rng.choice(["x", "y", "z"], n),
                         "o": rng.integers(0, 32, n), "b": rng.integers(0, 301, n)})


@pytest.mark.parametrize(("mechanism", "kw"), [("privelet", {}), ("privelet", {"untransformed": ["a"]}),
                                                ("basic", {})])
def test_the_rule_is_the_plans_size(monkeypatch, mechanism, kw):
    plan = pdp.plan(mechanism, ATTRS, epsilon=1.0, **kw)
    assert plan.noisy_values == plan.coefficients
    monkeypatch.setattr(plans_base, "COMPILED_FROM", plan.coefficients)
    assert plan.compiled_kernels
    monkeypatch.setattr(plans_base, "COMPILED_FROM", plan.coefficients + 1)
    assert not plan.compiled_kernels


def test_plans_whose_size_the_data_decides_keep_the_compiled_kernels():
    plan = pdp.plan("adaptive_grid", ["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=1.0)
    assert plan.noisy_values is None
    assert plan.compiled_kernels


@needs_compiled
@pytest.mark.parametrize("noise", ["exact", "float"])
@pytest.mark.parametrize(("mechanism", "kw"), [("privelet", {}), ("privelet", {"untransformed": ["a", "g"]}),
                                                ("basic", {})])
def test_both_kernel_sets_give_the_same_release(monkeypatch, noise, mechanism, kw):
    runs = {}
    for name, threshold in (("compiled", 0), ("numpy", 1 << 62)):
        monkeypatch.setattr(plans_base, "COMPILED_FROM", threshold)
        runs[name] = getattr(pdp, mechanism)(_frame(), ATTRS, epsilon=1.0, noise=noise, seed=11, **kw).counts
    assert np.array_equal(runs["compiled"].view(np.int64), runs["numpy"].view(np.int64))


@needs_compiled
@pytest.mark.parametrize("large", [False, True])
def test_the_warm_up_starts_for_large_exact_releases_only(monkeypatch, large):
    started = []
    monkeypatch.setattr(wavelet_lattice, "warm_up", lambda: started.append(1))  # the thread's work
    monkeypatch.setattr(plans_base, "COMPILED_FROM", 0 if large else 1 << 62)
    pdp.privelet(_frame(), ATTRS, epsilon=1.0, seed=1)
    pdp.privelet(_frame(), ATTRS, epsilon=1.0, noise="float", seed=1)
    assert started == ([1] if large else [])


FRESH = """
import sys
import numpy as np, polars as pl, polars_dp as pdp
import polars_dp.plans.base as plans_base
if sys.argv[2] == "large":
    plans_base.COMPILED_FROM = 0
df = pl.DataFrame({"a": np.arange(1000) % 41, "b": np.arange(1000) % 301})
getattr(pdp, sys.argv[1])(df, [pdp.Ordinal("a", 0, 40), pdp.Ordinal("b", 0, 300)], epsilon=1.0, seed=1)
print("numba" in sys.modules)
"""


@needs_compiled
@pytest.mark.parametrize("mechanism", ["privelet", "basic"])
@pytest.mark.parametrize(("size", "numba"), [("small", "False"), ("large", "True")])
def test_a_small_release_never_imports_numba(mechanism, size, numba):
    """Importing numba and loading the kernels costs a fresh process 0.6-0.8 s of CPU."""
    out = subprocess.run([sys.executable, "-c", FRESH, mechanism, size], capture_output=True, text=True,
                         check=True, cwd=REPO).stdout.split()
    assert out == [numba]
