"""PrivTree on 2-D points: an adaptive quadtree whose leaves carry noisy counts.

    python examples/spatial_privtree.py [--points N] [--out DIR]

Generated longitude / latitude points (a few dense clusters over a sparse background) are
released with PrivTree (Zhang, Xiao, Xie, SIGMOD 2016).  Look at: the tree splits deep where
points are dense and stays shallow elsewhere (the leaf depths), range counts with their
``noise_std`` (leaf noise only: the uniformity error inside partly covered leaves is not in
it), and the leaf boxes drawn to DIR/privtree_leaves.png (when matplotlib is installed) and
written as GeoParquet (DIR/privtree_leaves.parquet, readable by GeoPandas and DuckDB).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import polars as pl

import polars_dp as pdp

BOUNDS = [(-10.0, 10.0), (40.0, 60.0)]  # public: longitude, latitude


def places(n: int, seed: int = 0) -> pl.DataFrame:
    """Synthetic points: three clusters and a uniform background (not real places)."""
    rng = np.random.default_rng(seed)
    centres = np.array([[2.3, 48.9], [-0.1, 51.5], [4.9, 52.4]])
    k = n * 3 // 4
    cluster = centres[rng.integers(0, 3, k)] + rng.normal(0, 0.3, (k, 2))
    background = rng.uniform([-10, 40], [10, 60], (n - k, 2))
    xy = np.clip(np.vstack([cluster, background]), [-10, 40], [10, 60])
    return pl.DataFrame({"lon": xy[:, 0], "lat": xy[:, 1]})


def plot_leaves(release: pdp.SpatialRelease, path: Path) -> bool:
    """Leaf boxes coloured by noisy density; False when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.collections import PolyCollection
    except ImportError:
        return False
    leaves = release.leaves
    lo = leaves.select("lon_lo", "lat_lo").to_numpy()
    hi = leaves.select("lon_hi", "lat_hi").to_numpy()
    corners = np.stack([lo, np.column_stack([hi[:, 0], lo[:, 1]]), hi,
                        np.column_stack([lo[:, 0], hi[:, 1]])], axis=1)  # (leaves, 4, 2)
    density = np.maximum(leaves["count"].to_numpy(), 0) / np.prod(hi - lo, axis=1)
    fig, ax = plt.subplots(figsize=(6, 6))
    patches = PolyCollection(corners, cmap="viridis", edgecolor="white", linewidth=0.2)
    patches.set_array(np.log1p(density))
    ax.add_collection(patches)
    ax.set_xlim(*BOUNDS[0])
    ax.set_ylim(*BOUNDS[1])
    ax.set_title(f"PrivTree leaves (epsilon={release.epsilon}), colour: log(1 + noisy density)")
    fig.colorbar(patches, ax=ax)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=20_000)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--out", help="folder for the figure and the GeoParquet file (default: a temp dir)")
    args = parser.parse_args(argv)
    out = Path(args.out or tempfile.mkdtemp(prefix="polars_dp_example_"))
    out.mkdir(parents=True, exist_ok=True)

    tree = places(args.points).dp.privtree(["lon", "lat"], bounds=BOUNDS, epsilon=args.epsilon)
    print(tree)
    depths = tree.leaves.group_by("depth").len().sort("depth")
    print("leaves per depth (deep where the points are dense):")
    print(dict(zip(depths["depth"].to_list(), depths["len"].to_list(), strict=True)))

    boxes = pl.DataFrame({"id": ["Paris area", "west", "whole box"], "lon_lo": [1.3, -10.0, None],
                          "lon_hi": [3.3, -5.0, None], "lat_lo": [47.9, 40.0, None],
                          "lat_hi": [49.9, 60.0, None]})
    print("\nrange counts (noise_std: leaf noise only, not the uniformity error):")
    print(tree.range_counts(boxes, std=True))

    if plot_leaves(tree, out / "privtree_leaves.png"):
        print(f"\nleaf plot: {out / 'privtree_leaves.png'}")
    else:
        print("\nmatplotlib is not installed: no plot (pip install 'polars-dp[plot]')")
    path = tree.write_parquet(out / "privtree_leaves.parquet", geometry=True, crs="OGC:CRS84")
    print(f"GeoParquet leaves: {path} (geopandas.read_parquet reads the polygons)")


if __name__ == "__main__":
    main()
