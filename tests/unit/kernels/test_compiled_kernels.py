"""The compiled twins (numba, the ``fast`` extra) give the numpy kernels' bits, and the numpy
kernels keep the fixed orders the twins repeat."""

from __future__ import annotations

import numpy as np
import pytest

import polars_dp as pdp
from polars_dp.kernels import compiled
from polars_dp.kernels import wavelet_exact as TE
from polars_dp.kernels import wavelets as T
from tests.helpers.compiled import needs_compiled

HIERARCHIES = [
    pdp.Hierarchy.from_dict({f"g{g}": list(range(g * 64, (g + 1) * 64)) for g in range(8)}),
    pdp.Hierarchy.from_dict({"a": {"x": [1, 2, 3], "y": [4, 5]}, "b": [6, 7, 8, 9], "c": [10, 11]}),
    pdp.Hierarchy.flat(list(range(7))),
    pdp.Hierarchy.flat(list(range(300))),  # a group longer than numpy's pairwise block
]



def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and np.array_equal(np.ascontiguousarray(a).view(np.int64),
                                                 np.ascontiguousarray(b).view(np.int64))


@pytest.mark.parametrize("h", HIERARCHIES, ids=lambda h: f"{h.n_leaves}leaves")
def test_sibling_sums_are_left_to_right(h):
    t = T.nominal_tree(h)
    kids = np.random.default_rng(1).normal(0, 1e3, (2, t.n_nodes - 1, 3))
    got = T.sibling_sums(kids, t)
    for g, (a, n) in enumerate(zip(t.group_start, t.group_size, strict=True)):
        acc = kids[:, a].copy()
        for j in range(1, n):
            acc = acc + kids[:, a + j]
        assert same_bits(got[:, g], acc)


@needs_compiled
@pytest.mark.parametrize("h", HIERARCHIES, ids=lambda h: f"{h.n_leaves}leaves")
@pytest.mark.parametrize(("pre", "post"), [(3, 1001), (5, 1), (1, 4)])
def test_compiled_nominal_inverse_gives_the_numpy_bits(monkeypatch, h, pre, post):
    n = T.nominal_tree(h).n_nodes
    u = np.random.default_rng(pre * post).normal(0, 1e4, (pre, n, post))
    monkeypatch.setenv("POLARS_DP_COMPILED", "1")
    fast = T.nominal_inverse(u, h, 1).copy()
    monkeypatch.setenv("POLARS_DP_COMPILED", "0")
    assert same_bits(fast, T.nominal_inverse(u, h, 1))


@needs_compiled
@pytest.mark.parametrize("m", [301, 1001, 2, 1])
def test_compiled_noise_first_rows_give_the_numpy_bits(m):
    """``fl(N / P) / D``, ``N = P y + P H^-1(z)`` (``z``'s rows taken in any order), in one pass
    per row: the bits of the numpy kernels run one after the other."""
    p = T.haar_padded_length(m)
    rng = np.random.default_rng(m)
    z = rng.integers(-10**7, 10**7, (40, p))
    y = rng.integers(-2**61, 2**61, (40, m))
    den = rng.integers(1, 200, 40).astype(np.float64)
    which = rng.permutation(40)
    out = np.empty((40, m))
    assert compiled.noise_first_rows(z, which, y, den, out, TE.SCALED_LIMIT)
    assert same_bits(out, TE.scaled_to_float(y, TE.haar_inverse_scaled(z[which], m), p) / den[:, None])
    z[3, 0] = TE.SCALED_LIMIT // p  # P max|z| reaches the limit: left to the exact numpy path
    untouched = out.copy()
    assert not compiled.noise_first_rows(z, which, y, den, out, TE.SCALED_LIMIT)
    assert same_bits(out, untouched)


@needs_compiled
@pytest.mark.parametrize("h", HIERARCHIES, ids=lambda h: f"{h.n_leaves}leaves")
@pytest.mark.parametrize(("pre", "post"), [(3, 1001), (5, 1), (1, 4)])
def test_compiled_nominal_numerators_give_the_numpy_integers(monkeypatch, h, pre, post):
    v = np.random.default_rng(pre + post).integers(0, 2**40, (pre, h.n_leaves, post))
    v.reshape(-1)[0] = 2**62  # wraps modulo 2^64 in both
    monkeypatch.setenv("POLARS_DP_COMPILED", "1")
    fast = TE.nominal_forward_int(v, h, 1).copy()
    monkeypatch.setenv("POLARS_DP_COMPILED", "0")
    assert np.array_equal(fast, TE.nominal_forward_int(v, h, 1))


@needs_compiled
@pytest.mark.parametrize("m", [101, 70, 64, 3, 2, 1])
@pytest.mark.parametrize("head_rows", [0, 1, "cells", "all"])
@pytest.mark.parametrize("cols", [1000, 7])
def test_compiled_haar_columns_forward_gives_the_numpy_integers(m, head_rows, cols):
    p = T.haar_padded_length(m)
    h = {"cells": m, "all": p}.get(head_rows, head_rows)
    h = min(h, p)
    x = np.random.default_rng(m + cols).integers(0, 2**40, (m, cols))
    x[0, 0] = 2**62  # wraps modulo 2^64 in both
    head, tail = np.empty((h, cols), np.int64), np.empty((p - h, cols), np.int64)
    assert compiled.haar_columns_forward(x, head, tail)
    assert np.array_equal(np.vstack([head, tail]), T.haar_sums_and_differences(x, 0))


@needs_compiled
def test_compiled_haar_columns_forward_may_write_over_its_input():
    m, cols = 101, 600
    x = np.random.default_rng(2).integers(0, 1000, (m, cols))
    want = T.haar_sums_and_differences(x, 0)
    head, tail = x, np.empty((128 - m, cols), np.int64)  # the cells' rows hold the first coefficients
    assert compiled.haar_columns_forward(x, head, tail)
    assert np.array_equal(np.vstack([head, tail]), want)


@needs_compiled
@pytest.mark.parametrize("m", [101, 70, 64, 3, 2, 1])
@pytest.mark.parametrize("head_rows", [0, "cells", "all"])
@pytest.mark.parametrize("add", [False, True])
def test_compiled_haar_columns_inverse_gives_the_numpy_bits(m, head_rows, add):
    p, cols = T.haar_padded_length(m), 1000
    h = min({"cells": m, "all": p}.get(head_rows, head_rows), p)
    rng = np.random.default_rng(m)
    c = rng.normal(0, 1e5, (p, cols))
    base = rng.normal(0, 1e3, (m, cols))
    levels = np.array(list(T.haar_inverse_levels(m)), dtype=np.int64).reshape(-1, 3)
    out = base.copy()
    assert compiled.haar_columns_inverse(c[:h].copy(), c[h:].copy(), levels, out, add)
    want = T.haar_inverse(c, m, 0)
    assert same_bits(out, base + want if add else want)


@needs_compiled
def test_compiled_haar_columns_inverse_may_write_over_its_input():
    m, p, cols = 101, 128, 600
    c = np.random.default_rng(3).normal(0, 1e5, (p, cols))
    want = T.haar_inverse(c, m, 0)
    head, tail = c[:m].copy(), c[m:].copy()
    levels = np.array(list(T.haar_inverse_levels(m)), dtype=np.int64).reshape(-1, 3)
    assert compiled.haar_columns_inverse(head, tail, levels, head, False)  # out is the head's memory
    assert same_bits(head, want)
