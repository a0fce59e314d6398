"""Small releases of each type that the DuckDB tests register (seeded: test data only)."""

from __future__ import annotations

import numpy as np
import polars as pl

import polars_dp as pdp

__all__ = ["POINTS", "small_sequence_release", "small_tree_release"]

POINTS = pl.DataFrame({"x": np.random.default_rng(3).beta(2, 5, 3_000),
                       "y": np.random.default_rng(4).beta(5, 2, 3_000)})


def small_tree_release(**options: object) -> pdp.SpatialRelease:
    """A PrivTree release of :data:`POINTS` on the unit square."""
    return POINTS.dp.privtree(["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=1.0, seed=2, **options)


def small_sequence_release() -> pdp.SequenceRelease:
    """A PrivTree sequence model over the alphabet ``abc``."""
    frame = pl.DataFrame({"s": ["abcab", "ba", "ccc", "a", "abab"] * 60})
    return frame.dp.privtree_sequences("s", alphabet="abc", max_length=5, epsilon=3.0, seed=1)
