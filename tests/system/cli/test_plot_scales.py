"""Plot scales: density colours of deep PrivTree leaves, colour bars of the two-panel grid plot."""

from __future__ import annotations

import argparse

import numpy as np
import polars as pl
import pytest

import polars_dp as pdp

pytest.importorskip("matplotlib")
from polars_dp.cli import plot


@pytest.fixture(scope="module")
def coincident() -> pdp.SpatialRelease:
    """Points of which a third sit on one spot: PrivTree splits there down to tiny leaves."""
    rng = np.random.default_rng(5)
    x, y = rng.uniform(0, 1, 20_000), rng.uniform(0, 1, 20_000)
    x[:7000], y[:7000] = 0.3, 0.7
    return pdp.privtree(pl.DataFrame({"x": x, "y": y}), ["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=2.0,
                        seed=3)


def test_density_scale_follows_the_area_not_the_deepest_leaves(coincident):
    leaves = coincident.leaves
    area = ((leaves["x_hi"] - leaves["x_lo"]) * (leaves["y_hi"] - leaves["y_lo"])).to_numpy()
    density = np.maximum(leaves["count"].to_numpy(), 0) / area
    positive = density > 0
    assert density[positive].max() / density[positive].min() > 1e9  # what the old scale spanned
    lo, hi = plot.density_limits(density, area)
    assert 0 < lo < hi and hi / lo < 1e4
    outside = area[positive & ((density < lo) | (density > hi))].sum() / area[positive].sum()
    assert outside <= 2 * plot.DENSITY_CLIP + 1e-9


def test_density_limits_of_a_flat_picture():
    assert plot.density_limits(np.array([2.0, 2.0, 0.0]), np.array([1.0, 1.0, 1.0])) == (2.0, 2.0)


def test_grid_colour_bars_sit_under_their_own_panels():
    rng = np.random.default_rng(1)
    df = pl.DataFrame({"a": rng.integers(0, 12, 2000), "b": rng.choice(["p", "q", "r"], 2000)})
    b = pdp.Nominal("b", {"pq": ["p", "q"], "r": ["r"]})
    release = pdp.privelet(df, [pdp.Ordinal("a", 0, 11), b], epsilon=1.0, seed=1)  # std varies by cell
    fig = plot._figure((8, 4), 100)
    plot._grid(fig, release, argparse.Namespace(x="a", y="b"))
    fig.canvas.draw()
    panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    bars = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
    assert len(panels) == 2 and len(bars) == 2
    for panel, bar, label in zip(panels, bars, ["noisy count", "noise std"], strict=True):
        p, b = panel.get_position(), bar.get_position()
        assert p.x0 - 1e-6 <= (b.x0 + b.x1) / 2 <= p.x1 + 1e-6, label  # centred under its panel
        assert b.y1 <= p.y0 + 1e-6
        assert bar.get_xlabel() == label
