"""The fast Haar and nominal kernels against their references (bit for bit), and the scratch arena."""

from __future__ import annotations

import numpy as np
import pytest

from polars_dp.kernels import scratch
from polars_dp.kernels import wavelet_exact as WE
from polars_dp.kernels import wavelets as T


# ---------------------------------------------------------------- references (the padded formulas)
def reference_forward(x: np.ndarray, axis: int) -> np.ndarray:
    """Zero-pad to ``P``, then per level details ``even - odd`` and sums ``even + odd``."""
    x = np.moveaxis(np.asarray(x), axis, -1)
    m = x.shape[-1]
    p = 1 << (m - 1).bit_length()
    s = np.zeros((*x.shape[:-1], p), dtype=x.dtype)
    s[..., :m] = x
    out = np.empty_like(s)
    half = p
    while half > 1:
        half //= 2
        even, odd = s[..., 0:2 * half:2], s[..., 1:2 * half:2]
        out[..., half:2 * half] = even - odd
        s = even + odd
    out[..., 0] = s[..., 0]
    return np.moveaxis(out, -1, axis)


def reference_inverse(u: np.ndarray, m: int, axis: int) -> np.ndarray:
    """Scale level ``k`` by ``1 / W`` (``W = P / 2^k``, the base by ``1 / P``), then
    ``(s + d, s - d)`` level by level, all ``P`` cells, cut to ``m`` at the end."""
    u = np.moveaxis(np.asarray(u, dtype=np.float64), axis, -1)
    p = u.shape[-1]
    w = np.empty(p)
    w[0] = p
    k = 1
    while k < p:
        w[k:2 * k] = p // k
        k *= 2
    c = u * (1.0 / w)
    s = c[..., 0:1]
    k = 1
    while k < p:
        nxt = np.empty((*c.shape[:-1], 2 * k))
        nxt[..., 0::2] = s + c[..., k:2 * k]
        nxt[..., 1::2] = s - c[..., k:2 * k]
        s = nxt
        k *= 2
    return np.moveaxis(s[..., :m], -1, axis)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype == np.float64:
        return bool(np.array_equal(a.view(np.int64), b.view(np.int64)))
    return bool(np.array_equal(a, b))


LENGTHS = [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 100, 101, 127, 129, 1001]
LAYOUTS = [((), ()), ((3,), ()), ((), (4,)), ((2,), (3,))]


@pytest.mark.parametrize("m", LENGTHS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ["int64", "float64"])
def test_forward_matches_the_padded_reference_bit_for_bit(m, layout, dtype):
    before, after = layout
    rng = np.random.default_rng(m)
    shape = (*before, m, *after)
    if dtype == "int64":  # wrapping int64 sums included: the kernel is exact modulo 2^64
        x = rng.integers(-(1 << 62), 1 << 62, shape)
    else:
        x = rng.standard_normal(shape) * 1e6
    got = T.haar_sums_and_differences(x, len(before))
    assert same_bits(got, reference_forward(x, len(before)))
    if dtype == "int64":
        assert same_bits(WE.haar_forward_int(x, len(before)), reference_forward(x, len(before)))


@pytest.mark.parametrize("m", LENGTHS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_inverse_matches_the_level_reference_bit_for_bit(m, layout):
    before, after = layout
    p = T.haar_padded_length(m)
    u = np.random.default_rng(m).standard_normal((*before, p, *after)) * 1e3
    got = T.haar_inverse(u, m, len(before))
    assert same_bits(got, reference_inverse(u, m, len(before)))


def test_inverse_inverts_the_forward_of_counts():
    x = np.random.default_rng(3).integers(0, 50, (5, 1001))
    back = T.haar_inverse(T.haar_forward(x, 1), 1001, 1)
    assert np.array_equal(back, x.astype(np.float64))


def test_forward_of_an_odd_tail_is_the_padded_one():
    """The last cell of an odd line pairs with padding: detail ``x - 0``, sum ``x + 0``."""
    x = np.array([[5, 3, 7]])
    assert T.haar_sums_and_differences(x, 1).tolist() == [[15, 1, 2, 7]]


# ---------------------------------------------------------------- the scratch arena
def test_arena_reuses_one_buffer_after_reset():
    with scratch.arena():
        a = scratch.empty((1000,), np.int64)  # larger than the (empty) buffer: a plain array
        scratch.empty((10,), np.float64)
        scratch.reset()  # grows the buffer to the high-water mark of the block
        b = scratch.empty((1000,), np.int64)
        c = scratch.empty((10,), np.float64)
        assert not np.shares_memory(a, b)
        assert not np.shares_memory(b, c)  # one block's arrays never overlap
        scratch.reset()
        d = scratch.empty((1000,), np.int64)
        assert np.shares_memory(b, d)  # the next block reuses the front of the buffer
    e = scratch.empty((1000,), np.int64)
    assert not np.shares_memory(d, e)  # outside a context: np.empty


def test_kernels_inside_an_arena_give_the_same_values():
    x = np.random.default_rng(4).integers(0, 9, (3, 6, 101))
    want_f = T.haar_sums_and_differences(x, 2)
    want_i = T.haar_inverse(want_f.astype(np.float64), 101, 2)
    with scratch.arena():
        for _ in range(3):
            scratch.reset()
            got_f = T.haar_sums_and_differences(x, 2)
            got_i = T.haar_inverse(got_f.astype(np.float64), 101, 2)
            assert same_bits(got_f, want_f) and same_bits(got_i, want_i)


# ---------------------------------------------------------------- nominal kernels
def hierarchies():
    from polars_dp import Hierarchy
    return {
        "census": Hierarchy.from_dict({f"g{g}": [f"o{g}_{j}" for j in range(64)] for g in range(8)}),
        "three_levels": Hierarchy.from_dict({f"a{i}": {f"b{i}{j}": [f"c{i}{j}{k}" for k in range(3)]
                                                       for j in range(4)} for i in range(5)}),
        "uneven": Hierarchy.from_dict({"g1": ["a", "b", "c"], "g2": ["d", "e", "f", "g", "h"],
                                       "g3": ["i", "j"]}),
        "two": Hierarchy.flat([0, 1]),
    }


@pytest.mark.parametrize("name", ["census", "three_levels", "uneven", "two"])
@pytest.mark.parametrize("post", [1, 7, 9, 1001])
def test_nominal_inverse_leaf_broadcast_matches_the_gather(name, post, monkeypatch):
    h = hierarchies()[name]
    t = T.nominal_tree(h)
    u = np.random.default_rng(post).standard_normal((2, t.n_nodes, post)) * 100
    got = T.nominal_inverse(u, h, 1)
    assert (t.leaf_run is not None) == (name != "uneven")  # uneven: groups of 3, 5, 2 leaves
    monkeypatch.setattr(t, "leaf_run", None)  # the gather of the offsets, leaf by leaf
    assert same_bits(got, T.nominal_inverse(u, h, 1))


@pytest.mark.parametrize("name", ["census", "three_levels", "two"])
@pytest.mark.parametrize("post", [1, 9, 1001])
def test_nominal_forward_int_by_level_matches_the_prefix_sum_formula(name, post, monkeypatch):
    """Balanced hierarchies take the level sums (block reductions); the prefix-sum formula of
    the unbalanced case is the reference, int64 and wrapping included."""
    h = hierarchies()[name]
    t = T.nominal_tree(h)
    assert t.balanced
    rng = np.random.default_rng(post)
    shape = (2, t.n_leaves, post)
    for x in (rng.integers(0, 1000, shape), rng.integers(-(1 << 62), 1 << 62, shape)):
        got = WE.nominal_forward_int(x, h, 1)
        monkeypatch.setattr(t, "balanced", False)
        want = WE.nominal_forward_int(x, h, 1)
        monkeypatch.setattr(t, "balanced", True)
        assert same_bits(got, want)


@pytest.mark.parametrize("post", [1, 8, 100])
def test_segment_sums_equal_reduceat_for_integers(post):
    rng = np.random.default_rng(post)
    for fan in (np.array([4, 4, 4]), np.array([2, 5, 1]), np.array([64] * 8)):
        x = rng.integers(-(1 << 62), 1 << 62, (3, int(fan.sum()), post))
        want = np.add.reduceat(x, np.r_[0, np.cumsum(fan)[:-1]], axis=1)
        assert same_bits(T.segment_sums(x, fan), want)


def test_segment_sums_refuse_floats():
    from polars_dp.errors import ParameterError
    with pytest.raises(ParameterError, match="integers only"):
        T.segment_sums(np.ones((1, 4, 8)), np.array([2, 2]))


@pytest.mark.parametrize("m", [1, 2, 5, 64, 101, 1001])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_inverse_with_a_divisor_is_the_inverse_of_the_quotients(m, layout):
    """``haar_inverse(X, divisor=D)`` == ``haar_inverse(X / D)`` bit for bit, int64 ``X`` beyond
    2^53 included (converted to float64 as ``/`` converts them) and float ``X``."""
    before, after = layout
    p = T.haar_padded_length(m)
    rng = np.random.default_rng(m + len(before))
    shape = (*before, p, *after)
    den_shape = (*before, 1, *after)
    den = rng.choice(np.array([1, 2, 14, 126, 252, 3 * 5 * 7 * 11]), den_shape)
    for x in (rng.integers(-(1 << 62), 1 << 62, shape), rng.integers(-1000, 1000, shape),
              rng.standard_normal(shape) * 1e9):
        got = T.haar_inverse(x, m, len(before), divisor=den)
        assert same_bits(got, T.haar_inverse(x / den, m, len(before)))
    assert same_bits(T.haar_inverse(x, m, len(before), divisor=np.int64(7)),
                     T.haar_inverse(x / 7, m, len(before)))
