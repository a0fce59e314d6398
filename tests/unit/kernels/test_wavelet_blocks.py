"""Blocked HN inverse, dense small-axis inverses and the exact int64 forward transform, checked
against the per-axis reference kernels on random inputs, for every mix of axis kinds."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from polars_dp import Hierarchy, Nominal, Ordinal
from polars_dp.errors import ParameterError
from polars_dp.kernels import lattice_blocks as TL
from polars_dp.kernels import scratch
from polars_dp.kernels import wavelet_blocks as TB
from polars_dp.kernels import wavelet_exact as TE
from polars_dp.kernels import wavelets as T

UNEVEN = Hierarchy.from_dict({"g1": ["a", "b", "c"], "g2": ["d", "e", "f", "g", "h"], "g3": ["i", "j"]})
UNBALANCED = Hierarchy.from_dict(["solo", {"g": ["a", {"deep": ["x", "y", "z"]}]}, {"h": ["p", "q"]}])
DEEP = Hierarchy.from_dict({f"g{i}": {f"s{i}{j}": [f"l{i}{j}{k}" for k in range(3)] for j in range(2)}
                           for i in range(2)})  # three levels, uniform fanouts
BIG = Hierarchy.from_dict({f"g{i}": [f"o{i}_{j}" for j in range(9 + i)] for i in range(6)})  # > dense limit

AXES = {
    "haar5": Ordinal("a", 0, 4),
    "haar70": Ordinal("b", 0, 69),  # padded to 128: level kernel
    "uneven": Nominal("c", UNEVEN),
    "unbalanced": Nominal("d", UNBALANCED),
    "big": Nominal("e", BIG),
    "deep": Nominal("g", DEEP),
    "two": Nominal("f", categories=["x", "y"]),
}


def reference_inverse(u, attrs, transformed):
    """The 1-D level-by-level inverses along the transformed axes, last to first."""
    for axis in reversed(range(len(attrs))):
        if transformed[axis]:
            u = T.inverse(u, attrs[axis], axis)
    return u


def coef_shape(attrs, transformed):
    return tuple(T.coefficient_count(a) if t else a.n_cells for a, t in zip(attrs, transformed, strict=True))


CASES = [
    (("haar70",), (True,)),
    (("big",), (True,)),
    (("haar5", "uneven"), (True, True)),
    (("uneven", "haar70"), (True, False)),
    (("haar70", "unbalanced", "two"), (False, True, True)),
    (("unbalanced", "haar5", "big"), (True, True, True)),
    (("two", "haar70", "uneven"), (True, False, True)),
    (("haar5", "two", "uneven", "haar5"), (True, True, True, True)),
    (("haar5", "two", "uneven"), (False, False, False)),
]


@pytest.mark.parametrize(("names", "transformed"), CASES)
@pytest.mark.parametrize("slab", [1, 37, 500, 1 << 21])
@pytest.mark.parametrize("dense", [0, TB.DENSE_INVERSE_ENTRIES])
def test_blocked_inverse_equals_per_axis_inverse(names, transformed, slab, dense, monkeypatch):
    monkeypatch.setattr(TB, "DENSE_INVERSE_ENTRIES", dense)  # 0: level kernels on every axis
    attrs = [AXES[n] for n in names]
    u = np.random.default_rng(len(names) + slab).normal(size=coef_shape(attrs, transformed))
    expected = reference_inverse(u, attrs, transformed)
    got = TB.hn_inverse(u, attrs, transformed, slab_cells=slab)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", list(AXES))
def test_dense_inverse_matrix_matches_level_kernels(name):
    a = AXES[name]
    u = np.random.default_rng(3).normal(size=(4, T.coefficient_count(a), 3))
    for axis in (1,):
        np.testing.assert_allclose(TB.inverse_axis(u, a, axis), T.inverse(u, a, axis), atol=1e-12)
    v = u[0].T.copy()  # axis last, then first
    np.testing.assert_allclose(TB.inverse_axis(v, a, 1), T.inverse(v, a, 1), atol=1e-12)
    np.testing.assert_allclose(TB.inverse_axis(v.T, a, 0), T.inverse(v.T, a, 0), atol=1e-12)


def test_blocked_inverse_adds_into_out():
    attrs, transformed = [AXES["haar5"], AXES["uneven"]], [True, True]
    u = np.random.default_rng(0).normal(size=coef_shape(attrs, transformed))
    base = np.random.default_rng(1).normal(size=(5, 10))
    out = base.copy()
    flat = u.reshape(-1)
    TB.hn_inverse_blocked(lambda i, j: flat[i:j], attrs, transformed, out, add=True, slab_cells=7)
    np.testing.assert_allclose(out, base + reference_inverse(u, attrs, transformed), atol=1e-12)


def test_blocked_inverse_reads_every_coefficient_once_in_order():
    attrs, transformed = [AXES["uneven"], AXES["haar5"], AXES["two"]], [True, False, True]
    seen = []

    def source(i, j):
        seen.append((i, j))
        return np.zeros(j - i)

    TB.hn_inverse_blocked(source, attrs, transformed, np.zeros((10, 5, 2)), slab_cells=16)
    starts = [s for s, _ in seen]
    assert starts == sorted(starts) and seen[0][0] == 0
    assert all(a[1] == b[0] for a, b in itertools.pairwise(seen))
    assert seen[-1][1] == int(np.prod(coef_shape(attrs, transformed)))


@pytest.mark.parametrize("name", list(AXES))
def test_integer_forward_is_exact(name):
    a = AXES[name]
    x = np.random.default_rng(5).integers(0, 1000, size=(3, a.n_cells, 2))
    num = TE.forward_int(x, a, 1)
    assert num.dtype == np.int64
    den = TE.denominators(a)
    np.testing.assert_allclose(num / den[None, :, None], T.forward(x.astype(float), a, 1), rtol=1e-13)
    # the numerators are the exact integers: recompute them with Python fractions-free int math
    exact = T.forward(x.astype(float), a, 1) * den[None, :, None]
    assert np.array_equal(num, np.rint(exact).astype(np.int64))


@pytest.mark.parametrize("name", ["uneven", "big", "deep", "two"])
def test_integer_forward_by_level_equals_the_segment_sums(name, monkeypatch):
    """Balanced hierarchies take the level-by-level kernel; it gives the same integers as the
    cumulative-sum kernel used for every hierarchy."""
    h = AXES[name].hierarchy
    tree = T.nominal_tree(h)
    assert tree.balanced
    x = np.random.default_rng(9).integers(-50, 1000, size=(4, h.n_leaves, 3))
    fast = TE.nominal_forward_int(x, h, 1)
    monkeypatch.setattr(tree, "balanced", False)
    assert np.array_equal(fast, TE.nominal_forward_int(x, h, 1))
    assert not T.nominal_tree(UNBALANCED).balanced


def test_nominal_denominators_are_two_f_minus_one():
    d = TE.nominal_denominators(UNEVEN)
    # root, then the 3 groups (fanout 3), then leaves under fanouts 3, 5, 2
    assert d.tolist() == [1, 4, 4, 4] + [4] * 3 + [8] * 5 + [2] * 2


def test_integer_forward_rejects_floats():
    with pytest.raises(ParameterError, match="integer"):
        TE.forward_int(np.ones(5), AXES["haar5"])


@pytest.mark.parametrize(("names", "transformed"), CASES)
@pytest.mark.parametrize("slab", [1, 50, 1 << 21])
def test_lattice_pipeline_equals_direct_formula(names, transformed, slab):
    """inverse(perturb(forward_int(M))) blocked == the direct whole-array computation, with
    the perturbation a deterministic function of the flat coefficient index."""
    attrs = [AXES[n] for n in names]
    shape = tuple(a.n_cells for a in attrs)
    m = np.random.default_rng(11).integers(0, 50, size=shape)
    coef = coef_shape(attrs, transformed)
    noise = np.random.default_rng(12).normal(size=coef)
    flat_noise = noise.reshape(-1)
    calls = []

    def perturb(num, den, start):
        assert num.dtype == np.int64
        calls.append(start)
        return num / den + flat_noise[start:start + num.size].reshape(num.shape)

    got = TL.hn_lattice_inverse(m, attrs, transformed, perturb, slab_cells=slab)
    num = TE.hn_forward_int(m, attrs, transformed)
    den = np.ones((), dtype=np.int64)
    for p in TE.hn_denominators(attrs, transformed):
        den = np.multiply.outer(den, p)
    expected = reference_inverse(num / den + noise, attrs, transformed)
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-9)
    assert calls == sorted(calls)


def test_lattice_pipeline_may_write_over_the_counts():
    attrs, transformed = [AXES["uneven"], AXES["haar70"]], [True, True]
    m = np.random.default_rng(2).integers(0, 9, size=(10, 70))
    expected = reference_inverse(T.hn_forward(m.astype(float), attrs, transformed), attrs, transformed)
    work = m.copy()
    got = TL.hn_lattice_inverse(work, attrs, transformed, lambda n, d, s: n / d,
                               out=work.view(np.float64), slab_cells=64)
    np.testing.assert_allclose(got, expected, atol=1e-9)
    np.testing.assert_allclose(got, m, atol=1e-9)


def test_outer_forward_keeps_the_scratch_to_a_column_block(monkeypatch):
    """The outer axes' forward runs column block by column block into one buffer; the scratch of
    one column block is not kept for the next (else every batch item after the first would
    touch scratch as large as that buffer)."""
    attrs = [Ordinal("u", 0, 2), AXES["haar70"], AXES["uneven"], Ordinal("w", 0, 299)]
    transformed = [False, True, True, True]
    counts = np.random.default_rng(3).integers(0, 5, size=tuple(a.n_cells for a in attrs))
    highs = []
    real_reset = scratch._Arena.reset

    def reset(self):
        highs.append(self.high)
        real_reset(self)

    monkeypatch.setattr(scratch._Arena, "reset", reset)
    slab = 4096
    expected = reference_inverse(T.hn_forward(counts.astype(float), attrs, transformed), attrs, transformed)
    got = TL.hn_lattice_inverse(counts, attrs, transformed, lambda n, d, s: n / d, slab_cells=slab)
    np.testing.assert_allclose(got, expected, atol=1e-8)
    store = T.coefficient_count(attrs[1]) * attrs[2].n_cells * attrs[3].n_cells * 8  # bytes, one item
    assert max(highs) < store / 4, (max(highs), store)


@pytest.mark.parametrize("m", [1, 2, 3, 5, 7, 11, 70, 101, 128, 1001])
def test_haar_unused_is_what_the_inverse_never_reads(m):
    """``haar_unused(m)``: exactly the coefficients whose node covers padding cells only, and
    exactly the ones no cell depends on (the rows of the inverse's matrix that are zero)."""
    p = T.haar_padded_length(m)
    listed = {j for a, b in T.haar_unused(m) for j in range(a, b)}
    levels = [(j, 1 << (j.bit_length() - 1)) for j in range(1, p)]  # (coefficient, nodes in its level)
    assert listed == {j for j, k in levels if (j - k) * (p // k) >= m}
    matrix = T.haar_inverse(np.eye(p), m, axis=-1)  # row j: the cells coefficient j reaches
    assert listed == {j for j in range(p) if not np.any(matrix[j])}
    u = np.random.default_rng(m).normal(size=p)
    changed = u.copy()
    changed[sorted(listed)] = np.random.default_rng(m + 1).normal(size=len(listed)) * 1e6
    assert np.array_equal(T.haar_inverse(u, m).view(np.int64), T.haar_inverse(changed, m).view(np.int64))


@pytest.mark.parametrize("slab", [56, 3 * 56, 5 * 56])  # 56 coefficients per outer row
def test_blocked_inverse_may_skip_the_unused_outer_rows(slab):
    """``skip_unused``: the outer Haar axis's rows over padding only (11 cells: rows 7, 14 and
    15 of 16) are never pulled, blocks are cut around them, the progress still counts every
    coefficient, and the output keeps its bits."""
    attrs, transformed = [Ordinal("a", 0, 10), AXES["uneven"], Ordinal("b", 0, 2)], [True, True, True]
    coef = coef_shape(attrs, transformed)
    inner = int(np.prod(coef[1:]))
    values = np.random.default_rng(4).normal(size=int(np.prod(coef)))
    runs = {}
    for skip in (False, True):
        seen, ticks = [], []

        def source(i, j, seen=seen):
            seen.append((i, j))
            return values[i:j].copy()

        buffer = np.zeros(coef[0] * int(np.prod([a.n_cells for a in attrs[1:]])))
        out = TB.hn_inverse_blocked(source, attrs, transformed, np.zeros(tuple(a.n_cells for a in attrs)),
                                    slab_cells=slab, buffer=buffer, advance=ticks.append, skip_unused=skip)
        assert sum(ticks) == values.size
        runs[skip] = (out, sorted(seen))
    assert np.array_equal(runs[True][0].view(np.int64), runs[False][0].view(np.int64))
    pulled = np.zeros(values.size, dtype=int)
    for i, j in runs[True][1]:
        pulled[i:j] += 1
    rows = pulled.reshape(coef[0], inner)
    assert np.all(rows[[7, 14, 15]] == 0) and np.all(np.delete(rows, [7, 14, 15], axis=0) == 1)
    assert T.haar_unused(11) == [(7, 8), (14, 16)]


def test_lattice_pipeline_never_perturbs_the_unused_outer_rows():
    """The exact pipeline hands ``perturb`` every coefficient a cell depends on, once, and none
    of the outer rows over padding only: no noise is drawn for them."""
    attrs, transformed = [Ordinal("a", 0, 10), AXES["uneven"], Ordinal("b", 0, 2)], [True, True, True]
    coef = coef_shape(attrs, transformed)
    handed = np.zeros(int(np.prod(coef)), dtype=int)

    def perturb(num, den, start):
        handed[start:start + num.size] += 1
        return num / den

    counts = np.random.default_rng(5).integers(0, 9, size=tuple(a.n_cells for a in attrs))
    got = TL.hn_lattice_inverse(counts, attrs, transformed, perturb, slab_cells=3 * 56)
    rows = handed.reshape(coef[0], -1)
    assert np.all(rows[[7, 14, 15]] == 0) and np.all(np.delete(rows, [7, 14, 15], axis=0) == 1)
    np.testing.assert_allclose(got, counts, atol=1e-9)
