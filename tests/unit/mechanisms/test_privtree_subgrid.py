"""privtree_subgrid: PrivTree leaves with noisy sub-grids and consistent counts (issue 41).

Sensitivities by enumeration of every unit change on a small tree (both relations), the budget
split and group factor from the plan, the exact noise_std from the answer's linear decomposition
(computed here from the sub-cell boxes, not from the release's code), the answers against the
generic Morton traversal of the sub-cells, the Parquet / GeoParquet round trips verified by
re-planning, edited files refused, and bad input.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

import polars_dp as pdp
from polars_dp.kernels.linear_density import linear_morton_sums
from polars_dp.kernels.morton import MortonLayout
from polars_dp.kernels.spatial_sums import morton_tree_sums
from polars_dp.kernels.subgrid import subcells
from polars_dp.kernels.tail_bounds import chernoff_accuracy
from polars_dp.mechanisms.spatial_subgrid import code_range_counts
from polars_dp.noise import GRID_BITS
from tests.helpers.privacy import Decisions, Draws

BOX = [(0.0, 1.0), (0.0, 1.0)]


def _points(n: int = 6000, seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.normal(0.3, 0.05, n // 2), rng.uniform(0, 1, n - n // 2)]).clip(0, 1)
    y = np.concatenate([rng.normal(0.6, 0.08, n // 2), rng.uniform(0, 1, n - n // 2)]).clip(0, 1)
    return pl.DataFrame({"x": x, "y": y})


@pytest.fixture(scope="module")
def release() -> pdp.SpatialRelease:
    return pdp.privtree_subgrid(_points(), ["x", "y"], bounds=BOX, epsilon=0.5, seed=3)


def _boxes(n: int = 60, seed: int = 1) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    lo, hi = np.sort(rng.random((2, n, 2)), axis=0)
    return pl.DataFrame({"x_lo": lo[:, 0], "x_hi": hi[:, 0], "y_lo": lo[:, 1], "y_hi": hi[:, 1]})


# ---------------------------------------------------------------------------- privacy
@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
def test_count_sensitivity_by_enumeration_of_unit_changes(neighbours):
    """A 4x4 finest grid, fanout 4: leaves = the root's children with child 0 split again;
    sub-grids of 0-2 bits.  Every neighbour of a 9-point dataset (a point added in any cell,
    removed, or moved to any cell) changes the leaf counts and the sub-cell counts by at most the
    plan's sensitivity in L1, and some neighbour reaches it."""
    plan = pdp.plan(
        "privtree_subgrid", ["x", "y"], bounds=BOX, epsilon=1.0, resolution=2, neighbours=neighbours
    )
    layout = plan.tree_layout
    assert (layout.bits, layout.split_bits) == (2, 2)
    starts = np.array([0, 1, 2, 3, 4, 8, 12], dtype=np.int64)
    depth = np.array([2, 2, 2, 2, 1, 1, 1])
    k = np.array([0, 0, 0, 0, 2, 1, 0])
    sub = subcells(starts, depth, k, layout).starts
    total = layout.total_bits

    def counts(codes: list[int]) -> tuple[np.ndarray, np.ndarray]:
        c = np.sort(np.asarray(codes, dtype=np.int64))
        return code_range_counts(c, None, starts, total), code_range_counts(c, None, sub, total)

    data = [0, 0, 3, 5, 6, 9, 9, 13, 15]
    base_leaf, base_sub = counts(data)
    assert base_leaf.sum() == base_sub.sum() == len(data)
    if neighbours == "add_remove":
        others = [[*data, c] for c in range(16)] + [data[:i] + data[i + 1 :] for i in range(len(data))]
    else:
        others = [data[:i] + [c] + data[i + 1 :] for i in range(len(data)) for c in range(16)]
    worst = [
        max(int(np.abs(counts(o)[j] - base).sum()) for o in others)
        for j, base in enumerate((base_leaf, base_sub))
    ]
    assert (
        worst
        == [plan.count_sensitivity, plan.count_sensitivity]
        == [1 if neighbours == "add_remove" else 2] * 2
    )


@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
def test_budget_split_and_tree_group_factor(neighbours):
    eps = Fraction(7, 10)
    plan = pdp.plan("privtree_subgrid", ["x", "y"], bounds=BOX, epsilon=0.7, neighbours=neighbours)
    delta = 1 if neighbours == "add_remove" else 2
    assert plan.epsilon_tree == Fraction(0.7) * Fraction(0.2)
    assert plan.epsilon_leaf == (Fraction(0.7) - plan.epsilon_tree) * Fraction(0.5)
    assert plan.epsilon_tree + plan.epsilon_leaf + plan.epsilon_sub == Fraction(0.7)
    want_lam = Fraction(7) * delta / (3 * Fraction(plan.epsilon_tree))  # (2 beta - 1) g / ((beta - 1) eps_t)
    assert want_lam <= Fraction(plan.lam) < want_lam + Fraction(1, 2**20)
    assert Fraction(plan.leaf_scale) >= delta / Fraction(plan.epsilon_leaf)
    assert Fraction(plan.sub_scale) >= delta / Fraction(plan.epsilon_sub)
    spent = (
        Fraction(7 * delta) / (3 * Fraction(plan.lam))
        + delta / Fraction(plan.leaf_scale)
        + delta / Fraction(plan.sub_scale)
    )
    assert plan.epsilon_spent == spent <= eps


@pytest.mark.parametrize(("d", "share"), [(1, 0.2), (2, 0.2), (3, 0.2), (4, 0.3), (5, 0.3)])
def test_the_default_tree_share_follows_the_number_of_dimensions(d, share, tmp_path):
    """0.2 of epsilon up to 3-D, 0.3 from 4-D (a public rule of the declared box); the release
    records the share it used, and a file re-planned from that record verifies."""
    cols = [f"c{k}" for k in range(d)]
    plan = pdp.plan("privtree_subgrid", cols, bounds=[(0, 1)] * d, epsilon=0.7)
    assert plan.epsilon_tree == Fraction(0.7) * Fraction(share)
    assert plan.epsilon_tree + plan.epsilon_leaf + plan.epsilon_sub == Fraction(0.7)
    assert plan.record()["tree_share"] == share
    given = pdp.plan("privtree_subgrid", cols, bounds=[(0, 1)] * d, epsilon=0.7, tree_share=share)
    assert given.epsilon_tree == plan.epsilon_tree and given.lam == plan.lam
    frame = pl.DataFrame({c: np.random.default_rng(k).random(200) for k, c in enumerate(cols)})
    release = frame.dp.privtree_subgrid(cols, bounds=[(0, 1)] * d, epsilon=0.7, seed=3)
    assert release.params["tree_share"] == share
    release.write_parquet(tmp_path / "r.parquet")
    assert pdp.read_release(tmp_path / "r.parquet").verified


@pytest.mark.parametrize(("d", "share"), [(2, Fraction(2, 10)), (4, Fraction(3, 10))])
def test_the_noise_drawn_spends_the_default_share_of_each_dimension(monkeypatch, d, share):
    """On the draws themselves (spied, not read from the plan): the split decisions spend
    ``(2 beta - 1) / ((beta - 1) lambda) <= share epsilon`` and each count vector ``1 / scale <=
    (1 - share) epsilon / 2``, each within the 2^-20 grid of its bound; with another share in
    4-D (0.2) the first check fails."""
    draws, decisions = Draws(monkeypatch), Decisions(monkeypatch)
    cols = [f"c{k}" for k in range(d)]
    frame = pl.DataFrame({c: np.random.default_rng(k).random(300) for k, c in enumerate(cols)})
    frame.dp.privtree_subgrid(cols, bounds=[(0, 1)] * d, epsilon=0.7, seed=4)
    assert len(set(decisions.lambdas)) == 1 and len(draws.scales) == 2
    lo, hi = 1 - Fraction(1, 1 << 12), 1 + Fraction(1, 10**12)  # the grid below; float shares above
    tree = Fraction(7) / (3 * Fraction(decisions.lambdas[0], 1 << GRID_BITS))  # beta = 4
    assert Fraction(0.7) * share * lo < tree <= Fraction(0.7) * share * hi
    for scale in draws.scales:
        assert Fraction(0.7) * (1 - share) / 2 * lo < 1 / scale <= Fraction(0.7) * (1 - share) / 2 * hi


# ---------------------------------------------------------------------------- answers and error bars
def _fractions(release: pdp.SpatialRelease, boxes: pl.DataFrame) -> np.ndarray:
    """``f[q, i]``: the fraction of sub-cell ``i``'s box inside query ``q`` (from the boxes only)."""
    q_lo = boxes.select("x_lo", "y_lo").to_numpy()[:, None, :]
    q_hi = boxes.select("x_hi", "y_hi").to_numpy()[:, None, :]
    lo, hi = release.lo[None], release.hi[None]
    return np.prod(np.clip(np.minimum(hi, q_hi) - np.maximum(lo, q_lo), 0, None) / (hi - lo), axis=2)


def test_noise_std_is_the_exact_variance_of_the_linear_answer(release):
    """An answer is ``sum_i f_i x_i`` with ``x = u + w (v - S) / M`` per leaf: coefficient ``f_i - c``
    on ``u_i`` and ``c = F w / M`` on ``v_L``.  Its variance ``sum a^2 sigma^2`` (the exact
    discrete-Laplace variances) is the release's ``noise_std ** 2``; the Chernoff bound with
    ``V = sum a^2 b^2`` and magnitudes ``max(b)`` is its ``noise_lo`` / ``noise_hi``."""
    boxes = _boxes()
    sub = release.subgrid
    f = _fractions(release, boxes)
    m = sub.sizes.astype(float)
    leaf = np.repeat(np.arange(m.size), sub.sizes)
    t_l, t_s = math.exp(-1 / sub.leaf_scale), math.exp(-1 / sub.sub_scale)
    var_l, var_s = 2 * t_l / (1 - t_l) ** 2, 2 * t_s / (1 - t_s) ** 2
    w = m * var_s / (m * var_s + var_l)
    big_f = np.stack([np.bincount(leaf, weights=row, minlength=m.size) for row in f])
    c = big_f * w / m
    a_sub, a_leaf = f - c[:, leaf], c
    assert np.all(np.abs(a_sub) <= 1 + 1e-12) and np.all((a_leaf >= 0) & (a_leaf <= 1))
    x = sub.noisy_sub + (w * (sub.noisy_leaf - np.bincount(leaf, weights=sub.noisy_sub)) / m)[leaf]
    np.testing.assert_allclose(release.count, x, rtol=1e-12, atol=1e-9)
    got = release.range_counts(boxes, alpha=0.05)
    np.testing.assert_allclose(got["count"], f @ x, rtol=1e-9, atol=1e-6)
    var = (a_sub**2).sum(1) * var_s + (a_leaf**2).sum(1) * var_l
    np.testing.assert_allclose(got["noise_std"] ** 2, var, rtol=1e-9)
    units = (a_sub**2).sum(1) * sub.sub_scale**2 + (a_leaf**2).sum(1) * sub.leaf_scale**2
    half = chernoff_accuracy(units, max(sub.leaf_scale, sub.sub_scale), 0.05)
    np.testing.assert_allclose(got["noise_hi"] - got["count"], half, rtol=1e-9)
    whole = release.range_std()
    assert whole**2 == pytest.approx(float(np.sum(1 / (1 / var_l + 1 / (m * var_s)))), rel=1e-9)


def test_answers_are_those_of_the_sub_cells_as_morton_leaves(release):
    """The leaf-level traversal gives the generic answers over the sub-cells in the bit layout,
    for the uniform and for the linear density."""
    boxes = _boxes(seed=4)
    q_lo, q_hi = (boxes.select(f"x_{s}", f"y_{s}").to_numpy() for s in ("lo", "hi"))
    layout = MortonLayout(2, int(release.layout["bits"]), int(release.layout["split_bits"]))
    assert layout.split_bits == 1
    want = morton_tree_sums(release.codes, release.count, layout, release.box, q_lo, q_hi)
    np.testing.assert_allclose(release.range_count_array(boxes), want, rtol=1e-9, atol=1e-6)
    beta = release.linear_slopes()
    want_linear = linear_morton_sums(
        release.codes, release.count, release.lo, release.hi, beta, layout, release.box, q_lo, q_hi
    )
    np.testing.assert_allclose(
        release.range_count_array(boxes, density="linear"), want_linear, rtol=1e-9, atol=1e-6
    )
    assert release.range_count() == pytest.approx(release.count.sum())
    assert not np.allclose(want_linear, want)  # the linear density moves partly covered answers


def test_sub_grids_follow_the_noisy_leaf_counts(release):
    sub = release.subgrid
    plan = release.plan
    np.testing.assert_array_equal(sub.k, plan.subcell_bits(sub.noisy_leaf, sub.depth))
    assert sub.k.max() > 0 and release.n_leaves == int(sub.sizes.sum()) > sub.k.size
    assert release.params["fanout"] == 4 and release.params["max_subcell_bits"] == 8
    assert np.all(sub.noisy_leaf == np.round(sub.noisy_leaf))  # exact noise: integers
    assert "Qardaji" in str(release.card())


# ---------------------------------------------------------------------------- files
def test_parquet_round_trip_is_verified_by_replanning(release, tmp_path):
    path = tmp_path / "sg.parquet"
    release.write_parquet(path)
    back = pdp.read_release(path)
    assert back == release and back.verified
    assert back.subgrid is not None and back.plan.record() == {
        k: v for k, v in release.params.items() if k in back.plan.record()
    }
    boxes = _boxes(seed=5)
    a, b = release.range_counts(boxes, alpha=0.1), back.range_counts(boxes, alpha=0.1)
    assert a.equals(b)
    assert set(back.leaves.columns) == {"x_lo", "x_hi", "y_lo", "y_hi", "depth", "count"}


def test_geoparquet_round_trip(release, tmp_path):
    path = tmp_path / "sg_geo.parquet"
    release.write_parquet(path, geometry=True)
    back = pdp.read_release(path)
    assert back == release
    import pyarrow.parquet as pq

    assert "geometry" in pq.read_schema(path).names


def test_postprocessed_release_reads_back_without_error_bars(release, tmp_path):
    pp = release.postprocess("nonnegative")
    assert pp.count.min() >= 0
    path = tmp_path / "pp.parquet"
    pp.write_parquet(path)
    back = pdp.read_release(path)
    assert back == pp
    assert back.range_counts(_boxes(3), std=True)["noise_std"].null_count() == 3


@pytest.mark.parametrize(
    "column, edit",
    [
        ("leaf_noisy_count", lambda a: np.r_[a[0] + 1, a[1:]]),
        ("noisy_count", lambda a: np.r_[a[0] + 1, a[1:]]),
        ("count", lambda a: np.r_[a[0] + 1, a[1:]]),
        ("subgrid_bits", lambda a: np.r_[a[0] + 1, a[1:]].astype(np.int32)),
    ],
)
def test_an_edited_measurement_is_refused(release, column, edit):
    table = release.to_arrow()
    i = table.column_names.index(column)
    edited = table.set_column(i, column, pa.array(edit(table.column(column).to_numpy())))
    with pytest.raises(pdp.ReleaseFormatError, match="edited"):
        pdp.SpatialRelease.from_arrow(edited)


# ---------------------------------------------------------------------------- surfaces and bad input
def test_frames_lazyframes_and_session():
    df = _points(800, seed=2)
    a = df.dp.privtree_subgrid(["x", "y"], bounds=BOX, epsilon=1.0, seed=5)
    b = df.lazy().dp.privtree_subgrid(["x", "y"], bounds=BOX, epsilon=1.0, seed=5)
    c = pdp.privtree_subgrid(df, ["x", "y"], bounds=BOX, epsilon=1.0, seed=5)
    for other in (b, c):  # the same release (made apart, they may differ in the second they were created)
        assert other.leaves.equals(a.leaves) and other.params == a.params
        assert other.subgrid.columns().keys() == a.subgrid.columns().keys()
        assert all(np.array_equal(x, y) for x, y in zip(other.subgrid.columns().values(),
                                                        a.subgrid.columns().values(), strict=True))
    session = pdp.Session(df, epsilon=2.0, neighbours="add_remove")
    got = session.privtree_subgrid(["x", "y"], bounds=BOX, epsilon=1.0)
    plan = pdp.plan("privtree_subgrid", ["x", "y"], bounds=BOX, epsilon=1.0)
    assert got.mechanism == "privtree_subgrid" and not got.seeded
    assert session.spent == float(plan.epsilon_spent) < 1.0


@pytest.mark.parametrize(
    "options, option, accepted",
    [
        ({"tree_share": 0.0}, "tree_share", "between 0 and 1"),
        ({"tree_share": 1.2}, "tree_share", "between 0 and 1"),
        ({"leaf_share": 1.0}, "leaf_share", "between 0 and 1"),
        ({"c2": 0.0}, "c2", "> 0"),
        ({"c2": -3.0}, "c2", "> 0"),
        ({"max_subcell_bits": -1}, "max_subcell_bits", ""),
        ({"max_subcell_bits": 11, "resolution": 5}, "max_subcell_bits", r"\[0, 10\]"),
        ({"fanout": 3}, "fanout", "power of two"),
    ],
)
def test_bad_options_name_the_option_and_the_accepted_range(options, option, accepted):
    with pytest.raises(pdp.ParameterError, match=option) as info:
        pdp.privtree_subgrid(_points(50), ["x", "y"], bounds=BOX, epsilon=1.0, **options)
    assert not accepted or __import__("re").search(accepted, str(info.value))


def test_a_misspelled_density_is_refused(release):
    with pytest.raises(pdp.ParameterError, match="density must be one of"):
        release.range_counts(_boxes(2), density="liner")
    with pytest.raises(pdp.ParameterError, match="density"):
        release.range_count(density="Linear", x=(0.1, 0.2))


def test_a_subgrid_release_names_its_sub_cells_and_its_leaves():
    """Its rows are sub-cells: the repr and the size text say so, with the number of leaves."""
    rng = np.random.default_rng(5)
    frame = pl.DataFrame({"x": rng.uniform(0, 1, 3000), "y": rng.uniform(0, 1, 3000)})
    rel = pdp.privtree_subgrid(frame, ["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=1.0, seed=1)
    leaves = rel.subgrid.starts.size
    assert f"sub_cells={rel.n_leaves:,}, leaves={leaves:,}" in repr(rel)
    assert rel.size_text() == f"{rel.n_leaves:,} sub-cells in {leaves:,} PrivTree leaves"
    assert rel.n_leaves >= leaves


def test_float_noise_takes_the_same_budget_split():
    exact = pdp.plan("privtree_subgrid", ["x", "y"], bounds=BOX, epsilon=0.7)
    floats = pdp.plan("privtree_subgrid", ["x", "y"], bounds=BOX, epsilon=0.7, noise="float")
    for part in ("epsilon_tree", "epsilon_leaf", "epsilon_sub"):
        assert isinstance(getattr(floats, part), float)
        assert getattr(floats, part) == float(getattr(exact, part))
