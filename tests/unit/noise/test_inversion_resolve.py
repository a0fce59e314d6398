"""The single-threshold shortcut of the inversion tables answers exactly as the search does."""

from __future__ import annotations

import numpy as np
import pytest

from polars_dp.noise import discrete as D
from polars_dp.noise import noise_source

TABLES = [("two_sided", 3, 1, 0, D.inversion_table_length(3, 1)),
          ("two_sided", 341, 1, 0, D.inversion_table_length(341, 1)),
          ("two_sided_trunc", 5544, 1, D.DIGIT, D.DIGIT),
          ("geometric", 5544, D.DIGIT, 0, D.inversion_table_length(5544, D.DIGIT)),
          ("truncated", 1000, 1, D.DIGIT, D.DIGIT - 1)]


def probes(tab: D.InversionTable) -> np.ndarray:
    """Random words, every threshold and its neighbours, and every bucket's ends."""
    rng = np.random.default_rng(7)
    f = tab.ascending.astype(np.uint64)
    shift = np.uint64(63 - D.GUIDE_BITS)
    starts = np.arange(1 << D.GUIDE_BITS, dtype=np.uint64) << shift
    ends = starts + np.uint64((1 << (63 - D.GUIDE_BITS)) - 1)
    near = np.concatenate([f, f - np.uint64(1), f + np.uint64(1)])
    rand = rng.integers(0, 1 << 63, 200_000, dtype=np.uint64)
    return np.concatenate([rand, near, starts, ends]) & D.MASK63


@pytest.mark.parametrize("spec", TABLES, ids=lambda s: f"{s[0]}-{s[1]}/{s[2]}")
def test_resolve_equals_search_for_every_probe(spec):
    tab = D.inversion_table(*spec)
    u = probes(tab)
    single = tab.single_base >= 0
    assert single.any()  # the shortcut is exercised
    # ties (u equal to a threshold) refine with further bits: same source state on both sides
    got = tab.resolve(u, noise_source(3))
    want = tab.search(u, noise_source(3))
    assert np.array_equal(got, want)


@pytest.mark.parametrize("spec", TABLES, ids=lambda s: f"{s[0]}-{s[1]}/{s[2]}")
def test_single_buckets_hold_exactly_one_threshold(spec):
    tab = D.inversion_table(*spec)
    shift = 63 - D.GUIDE_BITS
    buckets = (tab.ascending >> np.uint64(shift)).astype(np.int64)
    per_bucket = np.bincount(buckets, minlength=1 << D.GUIDE_BITS)
    single = tab.single_base >= 0
    assert np.array_equal(single, per_bucket == 1)
    b = np.flatnonzero(single)
    assert np.array_equal(tab.single_threshold[b] >> np.uint64(shift), b.astype(np.uint64))
    above = tab.length - np.searchsorted(tab.ascending, tab.single_threshold[b], side="right")
    assert np.array_equal(tab.single_base[b], above)


def test_count_below_and_discrete_laplace_unchanged_by_the_shortcut(monkeypatch):
    """With the shortcut disabled (every bucket searched) the draws are the same, word for word."""
    draws = {}
    for mode in ("shortcut", "search"):
        if mode == "search":
            monkeypatch.setattr(D.InversionTable, "resolve", D.InversionTable.search)
        src = noise_source(11)
        draws[mode] = np.concatenate([D.discrete_laplace(src, 341, 1, 50_000),
                                      D.discrete_laplace(src, 5544, 1, 50_000),
                                      D.geometric(src, 5544, 1, 20_000)])
    assert np.array_equal(draws["shortcut"], draws["search"])
