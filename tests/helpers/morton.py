"""Spatial test data: skewed points and random Morton partitions."""

from __future__ import annotations

import numpy as np
import polars as pl


def random_leaves(layout, rng, n_splits=40, max_depth=6):
    """A random Morton partition (first codes sorted, depths) made by splitting random leaves."""
    starts, depth = np.array([0], dtype=np.int64), np.array([0], dtype=np.int64)
    for _ in range(n_splits):
        ok = np.nonzero(depth < min(layout.max_depth, max_depth))[0]
        i = rng.choice(ok)
        shift = layout.shift(int(depth[i]) + 1)
        kids = starts[i] + (np.arange(layout.fanout, dtype=np.int64) << shift)
        starts = np.concatenate([np.delete(starts, i), kids])
        depth = np.concatenate([np.delete(depth, i), np.full(layout.fanout, depth[i] + 1)])
        order = np.argsort(starts)
        starts, depth = starts[order], depth[order]
    return starts, depth


def skewed(n, d, seed=0):
    """``n`` points in ``[-5, 5]^d`` (columns ``c0, c1, ...``): half in a narrow cluster, half uniform."""
    rng = np.random.default_rng(seed)
    cols = {}
    for j in range(d):
        hot = rng.normal(0.2 + 0.15 * j, 0.03, n // 2).clip(0, 1)
        cols[f"c{j}"] = np.concatenate([hot, rng.uniform(0, 1, n - n // 2)]) * 10 - 5
    return pl.DataFrame(cols)
