"""The counted-levels ablation (benchmarks/ablation_privtree_levels.py): its partitions tile the
box, its exact counts are the points of each node, and a tiny run on synthetic points."""

from __future__ import annotations

import functools

import numpy as np
import polars as pl
import pytest

import polars_dp as pdp
from benchmarks import ablation_privtree_levels as ablation
from benchmarks.evaluation.data import Points
from polars_dp.counting.points import finest_cells
from polars_dp.kernels.morton import MortonLayout, morton_codes

BOUNDS = {"x": (0.0, 1.0), "y": (0.0, 1.0)}


def clustered(n: int = 3_000, seed: int = 3) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    x = np.clip(np.r_[rng.normal(0.3, 0.02, n // 2), rng.random(n - n // 2)], 0, 1)
    y = np.clip(np.r_[rng.normal(0.6, 0.03, n // 2), rng.random(n - n // 2)], 0, 1)
    return pl.DataFrame({"x": x, "y": y})


def layout_of(rel: pdp.SpatialRelease) -> MortonLayout:
    return MortonLayout(rel.box.d, rel.layout["bits"], rel.layout["split_bits"])


def assert_tiles(starts: np.ndarray, depth: np.ndarray, layout: MortonLayout) -> None:
    """Code ranges ``[start, start + 2^shift)`` in order, without gap or overlap, cover the box."""
    span = np.int64(1) << (layout.total_bits - layout.split_bits * depth.astype(np.int64))
    assert starts[0] == 0
    assert np.array_equal(starts[1:], (starts + span)[:-1])
    assert starts[-1] + span[-1] == np.int64(1) << layout.total_bits


@pytest.fixture(scope="module")
def release() -> pdp.SpatialRelease:
    return pdp.privtree(clustered(), ["x", "y"], bounds=list(BOUNDS.values()), epsilon=1.0, seed=5,
                        resolution=12)


def test_refined_partition_tiles_and_splits_only_shallow_leaves(release):
    lay = layout_of(release)
    starts, depth = np.asarray(release.codes, np.int64), np.asarray(release.depth, np.int64)
    assert depth.min() < 4 < depth.max()  # both kinds of leaves occur
    s, d = ablation.refined(starts, depth, lay, 4)
    assert_tiles(s, d, lay)
    assert d.min() == 4
    deep = depth >= 4
    assert np.array_equal(np.sort(s[d > 4]), np.sort(starts[depth > 4]))
    expected = int(deep.sum()) + int(np.sum(4 ** (4 - depth[~deep])))
    assert s.size == expected


def test_exact_counts_are_the_points_in_each_node(release):
    frame = clustered()
    lay = layout_of(release)
    raw, weights = finest_cells(frame, release.box, lay.bits, functools.partial(morton_codes, bits=lay.bits))
    codes = np.asarray(raw, np.int64)
    ones = np.ones(codes.size, np.int64) if weights is None else np.asarray(weights)
    cum = np.r_[np.int64(0), np.cumsum(ones)]
    starts, depth = np.asarray(release.codes, np.int64), np.asarray(release.depth, np.int64)
    counts = ablation.exact_counts(codes, cum, starts, depth, lay)
    assert counts.sum() == frame.height
    lo, hi = lay.node_boxes(starts, depth, release.box)  # brute force on the points (half-open cells)
    pts = frame.to_numpy()
    for i in np.argsort(-counts)[:5]:
        top = np.isclose(hi[i], 1.0)
        inside = np.all((pts >= lo[i]) & ((pts < hi[i]) | (top & (pts <= hi[i]))), axis=1)
        assert counts[i] == inside.sum()


def test_finest_nodes_of_a_levels_release_tile_and_keep_the_counts():
    rel = pdp.privtree(clustered(), ["x", "y"], bounds=list(BOUNDS.values()), epsilon=1.0, seed=5,
                       resolution=12, levels=4)
    lay = layout_of(rel)
    s, d, c = ablation.finest_nodes(rel)
    assert_tiles(s, d, lay)
    assert d.min() == 4  # every leaf shallower than 4 is split into its level-4 cells
    assert c.sum() == pytest.approx(float(np.sum(rel.count)), rel=1e-9, abs=1e-6)
    full = {"q": (np.array([[0.0, 0.0]]), np.array([[1.0, 1.0]]))}
    got = ablation.answer(s, d, c, lay, rel.box, full)["q"]
    assert got[0] == pytest.approx(float(np.sum(rel.count)), rel=1e-9, abs=1e-6)


def test_tiny_run_has_every_variant_and_the_exact_rows_lose_the_noise():
    points = Points("synthetic", clustered(), dict(BOUNDS))
    res = ablation.run(points, epsilons=(0.5,), releases=1, n_queries=40, seed=1)
    variants = set(res["variant"].to_list())
    assert variants == {"levels=0", "levels=1", "levels=2", "levels=4", "levels=6", "levels=6, finest",
                        "exact leaves", "exact level-6 cells"}
    assert res.height == 3 * len(variants)
    assert res["relative_error"].is_finite().all()
    text = ablation.table(res)
    assert text.count("\n") == 1 + 3 and "exact leaves" in text.splitlines()[0]
    rows = ablation.ratios(res).splitlines()[2:]
    wide = res.pivot("variant", index="query_class", values="relative_error")
    for line in rows:
        cells = [c.strip() for c in line.strip("|").split("|")]
        row = wide.filter(pl.col("query_class") == cells[1]).row(0, named=True)
        counted = {v: row[v] for v in variants if v[:7] == "levels=" and v[7:].isdigit() and v != "levels=0"}
        assert cells[4] == min(counted, key=lambda v: counted[v])  # the best counted k, from the leaves
        assert float(cells[2]) == pytest.approx(row["exact leaves"] / row["levels=0"], abs=0.006)
