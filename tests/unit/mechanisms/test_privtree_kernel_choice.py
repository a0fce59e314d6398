"""Which kernels a PrivTree release runs: the numpy ones, whatever its public inputs (its point
and node counts are private and never decide); the compiled ones give the same release, bit for
bit; a release in a fresh process never imports numba."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import polars as pl
import pytest

import polars_dp as pdp
from polars_dp.plans.spatial import PrivTreePlan
from tests.helpers import REPO
from tests.helpers.compiled import lookup_choices, needs_compiled

BOX = [(0, 1), (0, 1)]


def _points(n: int = 20_000) -> pl.DataFrame:
    rng = np.random.default_rng(5)
    return pl.DataFrame({"x": rng.beta(2, 5, n), "y": rng.random(n)})


@pytest.mark.parametrize("kw", [{}, {"resolution": 3}, {"levels": 1}, {"noise": "float"}, {"fanout": 2}])
def test_the_plan_never_asks_for_the_compiled_kernels(kw):
    assert not pdp.plan("privtree", ["x", "y"], bounds=BOX, epsilon=1.0, **kw).compiled_kernels


@pytest.mark.parametrize("kw", [{}, {"levels": 1}, {"epsilon": 1e-3}])
def test_the_release_runs_the_plans_choice_and_both_give_the_same_bits(monkeypatch, kw):
    seen = lookup_choices(monkeypatch)
    monkeypatch.setenv("POLARS_DP_COMPILED", "1")
    kw = dict(kw)
    eps = kw.pop("epsilon", 1.0)
    runs = []
    for use_compiled in (True, False):
        seen.clear()
        monkeypatch.setattr(PrivTreePlan, "compiled_kernels", property(lambda self, c=use_compiled: c))
        runs.append(pdp.privtree(_points(), ["x", "y"], bounds=BOX, epsilon=eps, seed=4, **kw))
        assert seen and set(seen) == {use_compiled}
    a, b = runs
    assert np.array_equal(a.count.view(np.int64), b.count.view(np.int64))
    assert np.array_equal(a.depth, b.depth) and np.array_equal(a.lo, b.lo) and np.array_equal(a.hi, b.hi)


FRESH = """
import sys
import numpy as np, polars as pl, polars_dp as pdp
rng = np.random.default_rng(0)
df = pl.DataFrame({"x": rng.random(100_000), "y": rng.random(100_000)})
pdp.privtree(df, ["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=1.0, seed=1, levels=int(sys.argv[1]))
df.dp.privtree(["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=1.0, seed=1)
print("numba" in sys.modules)
"""


@needs_compiled
@pytest.mark.parametrize("levels", [0, 1])
def test_a_release_never_imports_numba(levels):
    """Importing numba and loading the kernels costs a fresh process 0.5-1.4 s of CPU."""
    out = subprocess.run([sys.executable, "-c", FRESH, str(levels)], capture_output=True, text=True,
                         check=True, cwd=REPO).stdout.split()
    assert out == ["False"]
