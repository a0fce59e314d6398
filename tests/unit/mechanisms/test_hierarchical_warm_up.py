"""The hierarchical release loads its compiled kernels while the engine counts: the kernels are
ready afterwards, the release is the same, and no thread outlives it."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import numpy as np
import polars as pl

import polars_dp as pdp
import polars_dp.plans.base as plans_base
from polars_dp import compiled
from tests.helpers import REPO
from tests.helpers.compiled import assert_warm_up_changes_nothing, needs_compiled

module = importlib.import_module("polars_dp.mechanisms.hierarchical")
ATTRS = [pdp.Ordinal("a", 0, 40), pdp.Nominal("g", categories=["x", "y", "z"]), pdp.Ordinal("b", 0, 300)]

CHECK = """
import importlib, json
import polars_dp.counting.scatter as scatter
import polars_dp.kernels.compiled as compiled
import polars_dp.noise.lookups as lookups
hierarchical = importlib.import_module("polars_dp.mechanisms.hierarchical")
names = {compiled: ["int_block_sums_rows", "add_counts_rows", "binary_level_rows"],
         lookups: ["guide", "two_tables"], scatter: ["count_range"]}
def ready():
    return sorted(n for m, ks in names.items() for n in ks if m._active()[n].signatures)
before = ready()
hierarchical.warm_up()
guide = [str(sig) for sig in lookups._active()["guide"].signatures]
print(json.dumps([before, ready(), guide]))
"""


def _frame() -> pl.DataFrame:
    rng = np.random.default_rng(8)
    return pl.DataFrame({"a": rng.integers(0, 41, 3000), "g": rng.choice(["x", "y", "z"], 3000),
                         "b": rng.integers(0, 301, 3000)})


@needs_compiled
def test_warm_up_compiles_the_kernels_of_the_release():
    """In a fresh process: nothing compiled before, every kernel of the release after, the
    sampler's guide look-up for the table type the sampler uses (so the release compiles no
    second version of it)."""
    from polars_dp.noise.discrete import SIGNED_GUIDE

    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, check=True,
                         cwd=REPO).stdout.strip().splitlines()[-1]
    before, after, guide = json.loads(out)
    assert before == []
    assert any(f"Array({np.dtype(SIGNED_GUIDE).name}, 1, 'C'" in sig for sig in guide), guide
    assert after == sorted(["int_block_sums_rows", "add_counts_rows", "binary_level_rows", "guide",
                            "two_tables", "count_range"])


def test_release_is_the_same_with_and_without_the_warm_up(monkeypatch):
    monkeypatch.setattr(plans_base, "COMPILED_FROM", 0)  # as a large release: the compiled kernels
    assert_warm_up_changes_nothing(monkeypatch, module, "warm_up",
                                   lambda: pdp.hierarchical(_frame(), ATTRS, epsilon=1.0, seed=5).counts,
                                   ("in_background", lambda warm: None))


def test_no_warm_up_where_the_numpy_kernels_run(monkeypatch):
    """A small release runs the numpy kernels: numba is not loaded for it in the background."""
    started = []
    monkeypatch.setattr(module, "warm_up", lambda: started.append(1))
    pdp.hierarchical(_frame(), ATTRS, epsilon=1.0, seed=5)
    with compiled.numpy_only():
        assert compiled.in_background(module.warm_up) is None
    assert started == []
