"""Exact Privelet never refuses or changes path on the data: numerators beyond int64 are exact.

The path (int64 numerators, or int64 modulo 2^64 plus float64 numerators) is chosen from the
declared hierarchies alone; these tests put totals on both sides of every size threshold the
lattice arithmetic has (the old 2^52 refusal, 2^62 and 2^63 for int64, 2^64 for the residue,
the 2^53 total bound) and check that every release is the float inverse of the exact noisy
numerators, computed here with Python integers.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import polars as pl
import pytest

import polars_dp as pdp
import polars_dp.mechanisms.wavelet_lattice as privelet_exact
from polars_dp.errors import ParameterError
from polars_dp.kernels import wavelet_blocks as TB
from polars_dp.kernels import wavelet_exact as TE
from polars_dp.kernels import wavelets as T
from polars_dp.noise import noise_source
from tests.helpers.samplers import with_out

F = 40
WIDE = [pdp.Nominal(c, pdp.Hierarchy.flat([f"{c}{i}" for i in range(F)])) for c in "abc"]
NARROW = [pdp.Ordinal("x", 0, 63),
          pdp.Nominal("occ", pdp.Hierarchy.from_dict({f"g{g}": [f"o{g}_{i}" for i in range(16)]
                                                      for g in range(4)}))]
LEAF = (F - 1) ** 3  # the largest |D u| per unit of total: a leaf x leaf x leaf coefficient


def _thresholds() -> list[int]:
    old = (2 * F) ** 3  # the former refusal: total x prod(2 f_max) >= 2^52
    assert privelet_exact.lattice_bound(WIDE, [True] * 3) == LEAF
    return [2**52 // old, 2**62 // LEAF, 2**63 // LEAF, 2**64 // LEAF, privelet_exact.MAX_TOTAL - 1]


def _exact_numerators(counts: np.ndarray, attrs, transformed) -> np.ndarray:
    """``D u`` in Python integers (object arrays through the same formulas)."""
    x = counts.astype(object)
    for axis, (a, t) in enumerate(zip(attrs, transformed, strict=True)):
        if t:
            x = TE.forward_numerators(x, a, axis)
    return x


def _denominators(attrs, transformed) -> np.ndarray:
    den = np.ones((), dtype=np.int64)
    for p in TE.hn_denominators(attrs, transformed):
        den = np.multiply.outer(den, p)
    return den


def _run_recorded(monkeypatch, counts: np.ndarray, attrs, transformed, noise: int | None, seed: int = 1):
    """Run ``add_wavelet_noise_exact`` with the sampler replaced by a constant ``noise`` (or the real
    sampler when None); return (release, the noisy coefficients handed to the inverse)."""
    shape = tuple(T.coefficient_count(a) if t else a.n_cells for a, t in zip(attrs, transformed, strict=True))
    coef = np.full(int(np.prod(shape)), np.nan)
    real = privelet_exact.lattice_perturb

    def recording(scale, src, factors):
        perturb = real(scale, src, factors)

        def record(numerators, denominators, start, **kw):
            out = perturb(numerators, denominators, start, **kw)
            coef[start:start + out.size] = out.ravel()
            return out

        return record

    monkeypatch.setattr(privelet_exact, "lattice_perturb", recording)
    if noise is not None:
        monkeypatch.setattr(privelet_exact, "discrete_laplace",
                            with_out(lambda src, t, s, size: np.full(size, noise, dtype=np.int64)))
    work = counts.astype(np.float64)
    privelet_exact.add_wavelet_noise_exact(work, attrs, transformed, Fraction(3, 2), noise_source(seed))
    monkeypatch.undo()
    assert not np.isnan(coef).any()  # every coefficient handed over exactly once
    return work, coef.reshape(shape)


def _expected(counts: np.ndarray, attrs, transformed, noise: int) -> np.ndarray:
    x = _exact_numerators(counts, attrs, transformed) + noise
    den = _denominators(attrs, transformed)
    flat = [float(v) for v in x.ravel()]  # correctly rounded
    return np.asarray(flat).reshape(x.shape) / den


def _assert_coefficients(got: np.ndarray, counts, attrs, transformed, noise: int) -> None:
    x = _exact_numerators(counts, attrs, transformed) + noise
    want = _expected(counts, attrs, transformed, noise)
    inside = np.vectorize(lambda v: -2**63 <= v < 2**63, otypes=[bool])(x)
    # float(X) itself (bit for bit) wherever X fits int64, a function of X within 2 ulp beyond
    np.testing.assert_array_equal(got[inside], want[inside])
    np.testing.assert_allclose(got[~inside], want[~inside], rtol=2**-51, atol=0)


@pytest.mark.parametrize("total", [t + d for t in _thresholds() for d in (0, 1)])
def test_wide_lattice_is_exact_on_both_sides_of_every_threshold(monkeypatch, total):
    rng = np.random.default_rng(total % 1000)
    counts = rng.integers(0, 5, size=(F, F, F)).astype(object)
    counts[3, 5, 7] += total - int(counts.sum())
    counts = counts.astype(np.int64)
    assert privelet_exact.needs_wide(WIDE, [True] * 3)
    release, coef = _run_recorded(monkeypatch, counts, WIDE, [True] * 3, noise=0)
    _assert_coefficients(coef, counts, WIDE, [True] * 3, 0)
    assert np.isfinite(release).all()
    expected = TB.hn_inverse(coef, WIDE, [True] * 3)
    np.testing.assert_array_equal(release, expected)


@pytest.mark.parametrize("noise", [2**62, 2**63 - 1, -(2**63 - 1), 2**62 - 1])
@pytest.mark.parametrize("case", ["narrow", "wide"])
def test_noise_near_the_int64_limits_is_added_exactly(monkeypatch, noise, case):
    """Draws reaching 2^62 (a property of the noise alone) are summed exactly on both paths."""
    if case == "narrow":
        attrs, tr = NARROW, [True, True]
        counts = np.random.default_rng(3).integers(0, 1000, size=(64, 64))
        counts[0, 0] = 2**52
    else:
        attrs, tr = WIDE, [True] * 3
        counts = np.random.default_rng(4).integers(0, 3, size=(F, F, F))
        counts[1, 2, 3] = 2**40
    assert privelet_exact.needs_wide(attrs, tr) == (case == "wide")
    _, coef = _run_recorded(monkeypatch, counts, attrs, tr, noise=noise)
    _assert_coefficients(coef, counts, attrs, tr, noise)


@pytest.mark.parametrize(("attrs", "untransformed", "slab"), [
    (NARROW, [], 1 << 21),
    (NARROW, [], 300),
    ([*NARROW, pdp.Ordinal("y", 0, 9)], ["y"], 500),
    ([pdp.Ordinal("y", 0, 9), *NARROW], ["y"], 1 << 21),
])
def test_wide_path_equals_narrow_path_where_both_apply(monkeypatch, attrs, untransformed, slab):
    """Same seed, same data: the wide arithmetic gives the narrow path's release bit for bit."""
    rng = np.random.default_rng(9)
    n = 5000
    cols = {}
    for a in attrs:
        if isinstance(a, pdp.Nominal):
            cols[a.column] = [a.hierarchy.leaves[i] for i in rng.integers(0, a.hierarchy.n_leaves, n)]
        else:
            cols[a.column] = rng.integers(0, a.n_cells, n)
    frame = pl.DataFrame(cols)
    monkeypatch.setattr(privelet_exact, "SLAB_CELLS", slab)
    assert not privelet_exact.needs_wide(attrs, [a.column not in untransformed for a in attrs])
    narrow = pdp.privelet(frame, attrs, epsilon=0.5, untransformed=untransformed, seed=17).counts
    monkeypatch.setattr(privelet_exact, "needs_wide", lambda *a: True)
    wide = pdp.privelet(frame, attrs, epsilon=0.5, untransformed=untransformed, seed=17).counts
    np.testing.assert_array_equal(narrow, wide)


def test_issue_reproducer_both_neighbours_release():
    """Both sides of the old ``total x prod(2 f_max) >= 2^52`` refusal release, and with one
    seed they differ by the unit change (the same draws, exact numerators)."""
    attrs = [pdp.Nominal(c, pdp.Hierarchy.flat([f"{c}{i}" for i in range(200)])) for c in "abc"]

    def data(n):
        return pl.DataFrame({"a": ["a0"], "b": ["b0"], "c": ["c0"], "n": [n]})

    lo = pdp.privelet(data(70_368_744), attrs, epsilon=1.0, count_column="n", seed=5).counts
    hi = pdp.privelet(data(70_368_745), attrs, epsilon=1.0, count_column="n", seed=5).counts
    change = hi - lo
    unit = np.zeros_like(change)
    unit[0, 0, 0] = 1.0
    np.testing.assert_allclose(change, unit, rtol=0, atol=1e-6)


def test_too_wide_a_lattice_is_refused_from_the_declaration_alone():
    big = [pdp.Nominal(c, pdp.Hierarchy.flat([f"{c}{i}" for i in range(4096)])) for c in "abcd"]
    with pytest.raises(ParameterError, match="too wide"):
        privelet_exact.check_wide(big, [True] * 4)
    privelet_exact.check_wide(big, [True, True, True, False])  # three axes are fine
    privelet_exact.check_wide(WIDE, [True] * 3)


@pytest.mark.parametrize("total", [2**62 // (F - 1) ** 2, 2**63 // (F - 1) ** 2 + 1, 2**53 - 1])
def test_two_axes_beyond_int64_take_the_wide_path(monkeypatch, total):
    """``(f - 1)^2 x total`` passes 2^63 here: the public bound must send this domain to the
    wide path (a bound a few times too small would keep it narrow and wrap)."""
    attrs, tr = WIDE[:2], [True, True]
    counts = np.random.default_rng(6).integers(0, 4, size=(F, F))
    counts[2, 9] += total - int(counts.sum())
    assert privelet_exact.needs_wide(attrs, tr)
    _, coef = _run_recorded(monkeypatch, counts, attrs, tr, noise=0)
    _assert_coefficients(coef, counts, attrs, tr, 0)
