"""On the wide lattice the exact pipeline folds the division by ``D`` into the last Haar axis's
inverse, and gives the unfolded pipeline's release bit for bit (recovered numerators too).
(The narrow lattice skips that axis's forward instead: ``test_privelet_noise_first``.)"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import polars_dp as pdp
import polars_dp.mechanisms.wavelet_lattice as privelet_exact
from polars_dp.kernels import lattice_blocks as TL
from polars_dp.noise import noise_source
from tests.helpers.samplers import with_out
from tests.helpers.wavelet_cases import CASES, OCC


def release(counts, attrs, transformed, slab, monkeypatch, *, fold: bool, seed: int = 3):
    monkeypatch.setattr(privelet_exact, "SLAB_CELLS", slab)
    monkeypatch.setattr(privelet_exact, "needs_wide", lambda *a: True)
    real = privelet_exact.lattice_perturb
    if not fold:  # the same perturb without its ``undivided`` variant: divided in perturb
        def plain(scale, src, factors):
            perturb = real(scale, src, factors)
            return lambda *a, **k: perturb(*a, **k)
        monkeypatch.setattr(privelet_exact, "lattice_perturb", plain)
    calls = []
    real_inverse = TL.haar_inverse

    def spy(u, m, axis=-1, divisor=None):
        calls.append(divisor is not None)
        return real_inverse(u, m, axis, divisor=divisor)

    monkeypatch.setattr(TL, "haar_inverse", spy)
    work = counts.astype(np.float64)
    privelet_exact.add_wavelet_noise_exact(work, attrs, transformed, Fraction(7, 3), noise_source(seed))
    monkeypatch.setattr(privelet_exact, "lattice_perturb", real)
    monkeypatch.setattr(TL, "haar_inverse", real_inverse)
    return work, calls


def same_bits(a, b):
    return a.shape == b.shape and np.array_equal(a.view(np.int64), b.view(np.int64))


@pytest.mark.parametrize(("attrs", "transformed", "slab"), CASES)
def test_folded_division_gives_the_same_release(monkeypatch, attrs, transformed, slab):
    shape = tuple(a.n_cells for a in attrs)
    counts = np.random.default_rng(5).poisson(3.0, shape)
    folded, calls = release(counts, attrs, transformed, slab, monkeypatch, fold=True)
    assert any(calls)  # the fold ran (other calls: the cached dense matrices of small axes)
    plain, calls = release(counts, attrs, transformed, slab, monkeypatch, fold=False)
    assert not any(calls)
    assert same_bits(folded, plain)


def test_folded_division_with_recovered_numerators(monkeypatch):
    """Recovered ``float(X)`` (draws beyond 2^62 on the wide lattice) is divided in the inverse
    exactly as in ``perturb``."""
    attrs, transformed, slab = CASES[1]
    counts = np.random.default_rng(6).poisson(2.0, tuple(a.n_cells for a in attrs))
    counts[1, 2, 3] = 2**52
    # draws near 2^63: X = D u + Z leaves int64 wherever D u > 0 (kept modulo 2^64, then recovered)
    monkeypatch.setattr(privelet_exact, "discrete_laplace",
                        with_out(lambda src, t, s, size: np.full(size, 2**63 - 1 - 12345, dtype=np.int64)))
    folded, calls = release(counts, attrs, transformed, slab, monkeypatch, fold=True)
    assert any(calls)
    plain, _ = release(counts, attrs, transformed, slab, monkeypatch, fold=False)
    assert same_bits(folded, plain)
    assert np.abs(folded).max() > 2.0**55  # the huge draws reached the release


def test_dense_last_axes_are_not_folded(monkeypatch):
    """A last axis small enough for the dense inverse keeps the division in ``perturb``."""
    attrs = [OCC, pdp.Ordinal("x", 0, 20)]
    counts = np.random.default_rng(7).poisson(2.0, (OCC.n_cells, 21))
    folded, calls = release(counts, attrs, [True, True], 1 << 21, monkeypatch, fold=True)
    assert not any(calls)
    plain, _ = release(counts, attrs, [True, True], 1 << 21, monkeypatch, fold=False)
    assert same_bits(folded, plain)
