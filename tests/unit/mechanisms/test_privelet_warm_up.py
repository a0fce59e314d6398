"""Loading the exact pipeline's compiled kernels while the engine counts: the kernels are ready
afterwards, the release is the same, no thread outlives it, and a failing warm-up costs nothing."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import numpy as np
import polars as pl
import pytest

import polars_dp as pdp
import polars_dp.mechanisms.wavelet as wavelet
import polars_dp.mechanisms.wavelet_lattice as privelet_exact
import polars_dp.plans.base as plans_base
from polars_dp import compiled
from polars_dp.errors import DomainError
from tests.helpers import REPO
from tests.helpers.compiled import assert_warm_up_changes_nothing, needs_compiled

ATTRS = [pdp.Ordinal("a", 0, 40), pdp.Nominal("g", categories=["x", "y", "z"]), pdp.Ordinal("b", 0, 300)]


@pytest.fixture(autouse=True)
def compiled_release(monkeypatch):
    """These releases are small; as large ones they take the compiled kernels and the warm-up."""
    monkeypatch.setattr(plans_base, "COMPILED_FROM", 0)


def _frame() -> pl.DataFrame:
    rng = np.random.default_rng(8)
    return pl.DataFrame({"a": rng.integers(0, 41, 3000), "g": rng.choice(["x", "y", "z"], 3000),
                         "b": rng.integers(0, 301, 3000)})


CHECK = """
import json
import polars_dp.counting.scatter as scatter
import polars_dp.kernels.compiled as compiled
import polars_dp.noise.lookups as lookups
from polars_dp.mechanisms import wavelet_lattice
names = {compiled: ["min_max", "noise_first_rows", "nominal_rows", "nominal_numerator_rows",
                    "haar_columns_forward", "haar_columns_inverse"],
         lookups: ["guide", "two_tables"], scatter: ["count_range"]}
def ready():
    return sorted(n for m, ks in names.items() for n in ks if m._active()[n].signatures)
before = ready()
wavelet_lattice.warm_up()
print(json.dumps([before, ready()]))
"""


@needs_compiled
def test_warm_up_compiles_the_kernels_of_the_pipeline():
    """In a fresh process: nothing compiled before, every kernel of the pipeline after."""
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, check=True,
                         cwd=REPO).stdout.strip().splitlines()[-1]
    before, after = json.loads(out)
    assert before == []
    assert after == sorted(["min_max", "noise_first_rows", "nominal_rows", "nominal_numerator_rows",
                            "haar_columns_forward", "haar_columns_inverse", "guide", "two_tables",
                            "count_range"])


def test_no_warm_up_when_the_compiled_kernels_are_switched_off(monkeypatch):
    monkeypatch.setenv("POLARS_DP_COMPILED", "0")
    assert privelet_exact.warm_up_in_background() is None


def test_no_warm_up_where_the_numpy_kernels_run():
    with compiled.numpy_only():
        assert privelet_exact.warm_up_in_background() is None


def test_release_is_the_same_with_and_without_the_warm_up(monkeypatch):
    assert_warm_up_changes_nothing(monkeypatch, wavelet, "warm_up_in_background",
                                   lambda: pdp.privelet(_frame(), ATTRS, epsilon=1.0, seed=5).counts,
                                   ("warm_up_in_background", lambda: None))


@pytest.mark.parametrize("where", ["warm-up", "counting"])
def test_a_failing_warm_up_changes_nothing(monkeypatch, where):
    """A failure in the warm-up is dropped (the release runs the same kernels itself); a failure
    in the counting still reaches the caller, after the warm-up thread was joined."""
    want = pdp.privelet(_frame(), ATTRS, epsilon=1.0, seed=5).counts

    def broken():
        raise RuntimeError("warm-up failed")

    monkeypatch.setattr(privelet_exact, "warm_up", broken)
    if where == "warm-up":
        got = pdp.privelet(_frame(), ATTRS, epsilon=1.0, seed=5).counts
        assert np.array_equal(got.view(np.int64), want.view(np.int64))
    else:
        with pytest.raises(DomainError, match="outside the declared domain"):
            pdp.privelet(_frame().with_columns(pl.col("a") + 100), ATTRS, epsilon=1.0, seed=5)
    assert not [t for t in threading.enumerate() if t.name == "polars-dp-warm-up"]
