"""Blocked and streamed prefix sums: bit-identical to one cumulative sum per axis."""

from __future__ import annotations

import numpy as np
import pytest

import polars_dp as pdp
from polars_dp.kernels import prefix as P

SHAPES = [(7,), (5, 9), (4, 3, 6), (3, 1, 4, 2), (300,)]


def per_axis_prefix(counts):
    """The definition: a zero border, then one whole-array cumulative sum per axis."""
    out = np.zeros(tuple(n + 1 for n in counts.shape))
    out[(slice(1, None),) * counts.ndim] = counts
    for axis in range(counts.ndim):
        np.cumsum(out, axis=axis, out=out)
    return out


def random_boxes(shape, n, rng):
    a = np.stack([rng.integers(0, s + 1, n) for s in shape], 1)
    b = np.stack([rng.integers(0, s + 1, n) for s in shape], 1)
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    hi = np.where(hi == lo, np.minimum(lo + 1, np.array(shape)), hi)
    lo = np.where(hi == lo, hi - 1, lo)
    return lo, hi


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("block", [1, 5, 64, 1 << 21])
def test_blocks_are_bit_identical_to_per_axis_cumsums(shape, block):
    counts = np.random.default_rng(len(shape)).laplace(size=shape) * 1e3
    expected = per_axis_prefix(counts)
    rows = np.concatenate([r.copy() for _, r in P.prefix_row_blocks(counts, block)])
    assert np.array_equal(rows, expected)
    assert np.array_equal(P.prefix_sums(counts), expected)
    lo, hi = random_boxes(shape, 40, np.random.default_rng(1))
    assert np.array_equal(P.streamed_box_sums(counts, lo, hi, block), P.box_sums(expected, lo, hi))


def test_box_sums_are_range_sums():
    counts = np.random.default_rng(3).integers(0, 9, (4, 5, 6)).astype(float)
    lo, hi = random_boxes(counts.shape, 30, np.random.default_rng(4))
    want = [counts[tuple(slice(a, b) for a, b in zip(s, t, strict=True))].sum()
            for s, t in zip(lo, hi, strict=True)]
    np.testing.assert_allclose(P.streamed_box_sums(counts, lo, hi, 7), want, atol=1e-9)


def test_release_without_cached_prefix_answers_identically():
    attrs = [pdp.Ordinal("a", 0, 9), pdp.Nominal("b", categories=["x", "y", "z"])]
    counts = np.random.default_rng(5).laplace(size=(10, 3)) * 10
    cached = pdp.GridRelease(counts, attrs, mechanism="basic", epsilon=1.0, neighbours="replace",
                             noise_scale=2.0)
    tight = pdp.GridRelease(counts, attrs, mechanism="basic", epsilon=1.0, neighbours="replace",
                            noise_scale=2.0)
    tight.prefix_cache_bytes = 0
    queries = [{"a": (2, 7)}, {"b": "y"}, {"a": (0, 9), "b": "z"}, {}]
    for q in queries:
        assert tight.range_count(**q) == cached.range_count(**q)
    assert "_prefix_cache" not in tight.__dict__
    assert "_prefix_cache" in cached.__dict__
