"""PrivTree with counted top levels: calibration of the noise drawn, the least-squares
inference against a dense solve, exact error bars, storage and bad input."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

import polars_dp as pdp
import polars_dp.mechanisms.privtree_levels as levels_module
import polars_dp.mechanisms.spatial_tree as privtree_module
from polars_dp.cli.spec import SpecError, load_spec
from polars_dp.domains.box import as_box
from polars_dp.errors import ParameterError, ReleaseFormatError
from polars_dp.kernels.morton import MortonLayout
from polars_dp.kernels.tree_inference import infer_tree, node_variances
from polars_dp.kernels.tree_levels import level_tree, top_cells
from polars_dp.mechanisms.privtree_levels import (
    LEVELS_SHARE,
    MAX_TOP_CELLS,
    check_levels,
    default_levels,
    level_counts,
    level_weights,
)
from polars_dp.noise import laplace_scale
from polars_dp.releases.tree_levels import TopLevels, noise_variance
from tests.helpers.noise import assert_dlap

RELATIONS = [("replace", 2), ("add_remove", 1)]
BOUNDS = [(0.0, 1.0), (0.0, 1.0)]


def _frame(n: int = 6000, seed: int = 1) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    xy = np.vstack([rng.normal(0.3, 0.04, (n // 2, 2)), rng.random((n - n // 2, 2))]).clip(0, 0.999)
    return pl.DataFrame({"x": xy[:, 0], "y": xy[:, 1]})


def _random_tiling(rng: np.random.Generator, layout: MortonLayout, p_split: float, max_depth: int):
    """Leaves (first codes, depths) of a random tree: each node splits with ``p_split``."""
    starts, depths = [], []
    frontier = [(0, 0)]
    while frontier:
        prefix, dep = frontier.pop()
        if dep < max_depth and (dep == 0 or rng.random() < p_split):
            frontier += [((prefix << layout.split_bits) | c, dep + 1) for c in range(layout.fanout)]
        else:
            starts.append(prefix << layout.shift(dep))
            depths.append(dep)
    order = np.argsort(starts)
    return np.asarray(starts, dtype=np.int64)[order], np.asarray(depths, dtype=np.int64)[order]


def _dense_gls(tree, y, prec):
    """Weighted least squares by a dense solve over the finest nodes (for comparison)."""
    n_levels = len(tree.prefixes)
    # finest nodes: nodes without children
    kids = [np.bincount(tree.parent[lev + 1], minlength=tree.prefixes[lev].size) if lev + 1 < n_levels
            else np.zeros(tree.prefixes[lev].size, dtype=np.int64) for lev in range(n_levels)]
    finest = [(lev, i) for lev in range(n_levels) for i in np.nonzero(kids[lev] == 0)[0]]
    col = {f: j for j, f in enumerate(finest)}
    # membership: node (lev, i) -> set of finest columns below it
    below = [[[] for _ in range(tree.prefixes[lev].size)] for lev in range(n_levels)]
    for lev in range(n_levels - 1, -1, -1):
        for i in range(tree.prefixes[lev].size):
            if (lev, i) in col:
                below[lev][i].append(col[(lev, i)])
            if lev:
                below[lev - 1][tree.parent[lev][i]].extend(below[lev][i])
    rows, obs, w, node_rows = [], [], [], {}
    for lev in range(n_levels):
        for i in range(tree.prefixes[lev].size):
            a = np.zeros(len(finest))
            a[below[lev][i]] = 1
            node_rows[(lev, i)] = a
            if prec[lev][i] > 0:
                rows.append(a)
                obs.append(y[lev][i])
                w.append(prec[lev][i])
    A, W = np.array(rows), np.diag(w)
    cov = np.linalg.inv(A.T @ W @ A)
    xhat = cov @ A.T @ W @ np.array(obs)
    return xhat, cov, node_rows


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_inference_is_the_dense_weighted_least_squares(seed):
    """Two passes = dense GLS (estimates and per-node variances), with leaves shallower and
    deeper than the counted levels and unobserved inner nodes."""
    rng = np.random.default_rng(seed)
    layout = MortonLayout(2, 3, 2)
    starts, depth = _random_tiling(rng, layout, 0.45, 3)
    k = 1 + seed % 2
    tree = level_tree(starts, depth, layout, k)
    y = [rng.normal(10, 3, p.size) for p in tree.prefixes]
    prec = [np.full(p.size, 1.0 / (lev + 1)) if 1 <= lev <= k else np.zeros(p.size)
            for lev, p in enumerate(tree.prefixes)]
    for lev in np.unique(depth):  # leaves observed
        idx = tree.leaf_index[depth == lev]
        prec[lev][idx] += 0.7
    est = infer_tree(tree.parent, y, prec)
    xhat, cov, node_rows = _dense_gls(tree, y, prec)
    P = node_variances(est, tree.parent)
    for lev in range(len(tree.prefixes)):
        for i in range(tree.prefixes[lev].size):
            a = node_rows[(lev, i)]
            assert est.xhat[lev][i] == pytest.approx(a @ xhat, rel=1e-9, abs=1e-9)
            assert P[lev][i] == pytest.approx(a @ cov @ a, rel=1e-9)
        if lev:  # consistency: a node is the sum of its children
            sums = np.bincount(tree.parent[lev], weights=est.xhat[lev], minlength=tree.prefixes[lev - 1].size)
            inner = np.bincount(tree.parent[lev], minlength=tree.prefixes[lev - 1].size) > 0
            np.testing.assert_allclose(sums[inner], est.xhat[lev - 1][inner], rtol=1e-12)


@pytest.mark.parametrize("seed", [3, 4])
def test_noise_std_is_the_exact_variance_of_the_linear_answer(seed):
    """The answer is linear in the noisy counts: its weights, read off by unit perturbations,
    give the variance ``sum w_i^2 var_i`` that ``noise_std`` must equal."""
    rng = np.random.default_rng(seed)
    layout = MortonLayout(2, 4, 2)
    box = as_box(["x", "y"], BOUNDS)
    starts, depth = _random_tiling(rng, layout, 0.5, 4)
    k, scales, leaf_scale = 2, [3.0, 2.0], 1.5
    noisy = rng.normal(20, 5, top_cells(k, 2))
    leaves = rng.normal(5, 2, starts.size)
    q_lo = rng.random((6, 2)) * 0.6
    q_hi = q_lo + rng.random((6, 2)) * 0.5
    q_lo[0], q_hi[0] = 0.0, 1.0  # the whole box

    def answer(top, lv):
        t = TopLevels.infer(starts, depth, layout, k, top, scales, lv, leaf_scale, "exact")
        return t.range_counts(box, q_lo, q_hi, variance=True)

    base, var = answer(noisy, leaves)
    expected = np.zeros(q_lo.shape[0])
    for j in range(noisy.size):
        e = np.zeros(noisy.size)
        e[j] = 1.0
        lev = 1 if j < 4 else 2
        expected += (answer(noisy + e, leaves)[0] - base) ** 2 * noise_variance(scales[lev - 1], "exact")
    for j in range(leaves.size):
        e = np.zeros(leaves.size)
        e[j] = 1.0
        expected += (answer(noisy, leaves + e)[0] - base) ** 2 * noise_variance(leaf_scale, "exact")
    np.testing.assert_allclose(var, expected, rtol=1e-7)
    # and a discrete Laplace of scale b has variance 2 e^(-1/b) / (1 - e^(-1/b))^2 < 2 b^2
    assert noise_variance(2.0, "exact") < noise_variance(2.0, "float") == 8.0


def test_level_counts_partition_and_unit_changes():
    """Each level partitions the box: adding a point changes one count per level by 1 (L1
    sensitivity 1 per level; a replace moves it: at most 2)."""
    layout = MortonLayout(2, 5, 2)
    rng = np.random.default_rng(7)
    codes = np.sort(rng.integers(0, 1 << 10, 300))
    base = level_counts(codes, None, layout, 3)
    assert [c.size for c in base] == [4, 16, 64]
    assert all(int(c.sum()) == codes.size for c in base)
    for new in rng.integers(0, 1 << 10, 20):
        added = level_counts(np.sort(np.r_[codes, new]), None, layout, 3)
        assert [int(np.abs(a - b).sum()) for a, b in zip(added, base, strict=True)] == [1, 1, 1]
        moved = np.sort(np.r_[codes[1:], new])
        replaced = level_counts(moved, None, layout, 3)
        assert all(int(np.abs(a - b).sum()) <= 2 for a, b in zip(replaced, base, strict=True))
    weights = np.ones(codes.size, dtype=np.int64) * 2
    doubled = level_counts(codes, weights, layout, 3)
    assert all(np.array_equal(d, 2 * b) for d, b in zip(doubled, base, strict=True))


@pytest.mark.parametrize(("neighbours", "factor"), RELATIONS)
def test_calibration_of_the_noise_drawn(neighbours, factor, monkeypatch):
    """Spy on every ``add_noise`` call: the leaves and each level get discrete Laplace of
    ``factor / eps`` with the documented split, the budgets add up to epsilon, and the noise
    drawn on each level's exact counts follows that law."""
    calls = []
    real = levels_module.add_noise

    def spy(values, scale, src, noise):
        before = values.copy()
        real(values, scale, src, noise)
        calls.append((Fraction(scale), values - before))

    monkeypatch.setattr(levels_module, "add_noise", spy)
    monkeypatch.setattr(privtree_module, "add_noise", spy)
    eps, share = 60.0, 0.5
    frame = _frame(1000)
    k = 3
    draws: dict[int, list[np.ndarray]] = {}
    for seed in range(120):
        calls.clear()
        r = pdp.privtree(frame, ["x", "y"], bounds=BOUNDS, epsilon=eps, tree_share=share, seed=seed,
                         neighbours=neighbours, levels=k)
        assert len(calls) == k + 1  # the leaves, then one call per level
        for j, (_, noise) in enumerate(calls):
            draws.setdefault(j, []).append(noise)
            assert np.array_equal(noise, np.round(noise))  # integer noise on integer counts
    eps_count = Fraction(eps) - Fraction(eps) * Fraction(share)
    eps_top = eps_count * LEVELS_SHARE
    w = level_weights(k, 2)
    eps_levels = [eps_top * x / sum(w) for x in w]
    eps_leaf = eps_count - eps_top
    assert eps_leaf + sum(eps_levels) + Fraction(eps) * Fraction(share) == Fraction(eps)
    assert r.params["epsilon_leaf"] == pytest.approx(float(eps_leaf))
    assert r.params["epsilon_levels"] == pytest.approx([float(e) for e in eps_levels])
    assert r.params["epsilon_tree"] + r.params["epsilon_leaf"] + sum(r.params["epsilon_levels"]) == \
        pytest.approx(eps)
    assert w[1] / w[0] == pytest.approx(2 ** (1 / 3), rel=1e-5)  # Cormode et al.'s ratio in 2-D
    assert [d[0].size for j, d in sorted(draws.items()) if j] == [4, 16, 64]
    for j in range(1, k + 1):
        assert_dlap(np.concatenate(draws[j]), float(factor / eps_levels[j - 1]))
    # the leaves' law is tested with levels=0 in test_noise_calibration; here their scale
    assert calls[0][0] == Fraction(laplace_scale(factor, eps_leaf, "exact"))
    assert [c[0] for c in calls[1:]] == [Fraction(laplace_scale(factor, e, "exact")) for e in eps_levels]


def test_split_decisions_keep_their_budget(monkeypatch):
    """The split decisions draw with the same lambda/delta/theta with and without levels."""
    seen = []
    real = privtree_module.privtree_split

    def spy(score, depth, **kw):
        seen.append((kw["lam"], kw["delta"], kw["theta"]))
        return real(score, depth, **kw)

    monkeypatch.setattr(privtree_module, "privtree_split", spy)
    frame = _frame()
    pdp.privtree(frame, ["x", "y"], bounds=BOUNDS, epsilon=0.5, seed=1, levels=0)
    without = set(seen)
    seen.clear()
    pdp.privtree(frame, ["x", "y"], bounds=BOUNDS, epsilon=0.5, seed=1, levels=4)
    assert set(seen) == without and len(without) == 1


def test_levels_zero_is_the_leaves_only_release():
    """``levels=0`` draws exactly what the paper's PrivTree draws (same leaves, same noise,
    same table) and counts nothing else; ``levels >= 1`` keeps the same tree."""
    frame = _frame()
    a = pdp.privtree(frame, ["x", "y"], bounds=BOUNDS, epsilon=0.8, seed=5, levels=0)
    b = pdp.privtree(frame, ["x", "y"], bounds=BOUNDS, epsilon=0.8, seed=5, levels=0)
    c = pdp.privtree(frame, ["x", "y"], bounds=BOUNDS, epsilon=0.8, seed=5, levels=2)
    assert a.levels is None and "levels" not in a.params and "noisy_count" not in a.to_arrow().column_names
    assert a._payload_equal(b)
    assert np.array_equal(a.codes, c.codes) and np.array_equal(a.depth, c.depth)
    assert c.levels is not None and not np.array_equal(a.count, c.count)
    assert a.params["epsilon_leaf"] == pytest.approx(0.4) and c.params["epsilon_leaf"] < 0.4


def test_default_levels_and_bad_input():
    lay2 = MortonLayout(2, 31, 2)
    lay4 = MortonLayout(4, 15, 4)
    lay1 = MortonLayout(1, 3, 1)
    assert default_levels(lay2) == levels_module.DEFAULT_LEVEL_BITS // 2
    assert default_levels(lay4) == max(1, levels_module.DEFAULT_LEVEL_BITS // 4)
    assert default_levels(lay1) == min(3, levels_module.DEFAULT_LEVEL_BITS)  # capped at the max depth
    assert check_levels(None, lay2) == default_levels(lay2) and check_levels(0, lay2) == 0
    for bad in (-1, 1.5, "2", True):
        with pytest.raises(ParameterError, match="levels") as bad_type:
            check_levels(bad, lay2)
        assert bad_type.value.parameter == "levels"
    with pytest.raises(ParameterError, match=f"{MAX_TOP_CELLS:,}") as too_many:
        check_levels(13, lay2)
    assert too_many.value.parameter == "levels"
    assert check_levels(11, lay2) == 11
    with pytest.raises(ParameterError, match="maximum depth 3") as too_deep:
        check_levels(4, lay1)
    assert too_deep.value.parameter == "levels"
    frame = _frame(200)
    with pytest.raises(ParameterError, match="levels <= 11") as through_function:
        pdp.privtree(frame, ["x", "y"], bounds=BOUNDS, epsilon=1.0, levels=20)
    assert through_function.value.parameter == "levels"
    with pytest.raises(ParameterError, match="levels"):
        frame.dp.privtree(["x", "y"], bounds=BOUNDS, epsilon=1.0, levels=-2)


def _release(levels=3, **kw):
    return pdp.privtree(_frame(), ["x", "y"], bounds=BOUNDS, epsilon=1.0, seed=2, levels=levels, **kw)


def test_round_trip_and_verification(tmp_path):
    r = _release()
    boxes = pl.DataFrame({"x_lo": [0.1, 0.0, 0.25], "x_hi": [0.6, 1.0, 0.35],
                          "y_lo": [0.2, 0.0, 0.25], "y_hi": [0.9, 1.0, 0.35]})
    back = pdp.read_release(r.to_arrow())
    assert back._payload_equal(r)
    np.testing.assert_allclose(back.levels.top_counts(), r.levels.top_counts())
    want = r.range_counts(boxes, std=True)
    assert back.range_counts(boxes, std=True).equals(want)
    path = tmp_path / "t.parquet"
    r.write_parquet(path)
    assert pdp.read_release(path).range_counts(boxes, std=True).equals(want)
    # answers: the coarsest nodes, consistent; whole box = root estimate
    assert want["count"][1] == pytest.approx(r.levels.estimate.xhat[0][0])
    assert want["noise_std"][1] == pytest.approx(np.sqrt(r.levels.estimate.V[0][0]))
    assert r.range_count(x=(0.1, 0.6), y=(0.2, 0.9)) == pytest.approx(want["count"][0])
    assert r.range_std(x=(0.1, 0.6), y=(0.2, 0.9)) == pytest.approx(want["noise_std"][0])

    table = r.to_arrow()
    meta = dict(table.schema.metadata)
    import json
    lv = json.loads(meta[b"polars_dp.levels"])
    edits = []
    for key in ("noisy", "inferred"):
        changed = json.loads(json.dumps(lv))
        changed[key][3] += 5.0
        edits.append({**meta, b"polars_dp.levels": json.dumps(changed).encode()})
    changed = json.loads(json.dumps(lv))
    changed["scales"][0] *= 0.5
    edits.append({**meta, b"polars_dp.levels": json.dumps(changed).encode()})
    edits.append({**meta, b"polars_dp.levels": b"[1, 2]"})
    for m in edits:
        with pytest.raises(ReleaseFormatError):
            pdp.read_release(table.replace_schema_metadata(m))
    for col in ("count", "noisy_count"):
        values = table.column(col).to_numpy().copy()
        values[7] += 1.0
        edited = table.set_column(table.column_names.index(col), col, pa.array(values))
        with pytest.raises(ReleaseFormatError):
            pdp.read_release(edited)


def test_postprocess_after_inference():
    r = _release()
    p = r.postprocess("nonnegative")
    assert (p.count >= 0).all() and p.count.sum() == pytest.approx(r.count.sum())
    assert p.levels is not None and np.array_equal(p.levels.top_counts(), r.levels.top_counts())
    back = pdp.read_release(p.to_arrow())
    assert np.allclose(back.count, p.count)
    boxes = pl.DataFrame({"x_lo": [0.1], "x_hi": [0.6]})
    out = p.range_counts(boxes, std=True)
    assert out["noise_std"][0] is None
    # the post-processed counts are the projection of the inferred ones, not of the noisy leaves
    q = pdp.privtree(_frame(), ["x", "y"], bounds=BOUNDS, epsilon=1.0, seed=2, levels=0)
    q = q.postprocess("nonnegative")
    assert not np.allclose(q.count, p.count)


def test_inference_reduces_the_noise_of_large_boxes():
    """The point of the levels: a large box's noise variance is below what the same leaves'
    noise would give without the inference (sum of its leaves' variances)."""
    r = _release(levels=3)
    box = pl.DataFrame({"x_lo": [0.0], "x_hi": [0.5], "y_lo": [0.0], "y_hi": [0.5]})
    std = r.range_counts(box, std=True)["noise_std"][0]
    inside = np.all((r.lo >= 0) & (r.hi <= 0.5), axis=1).sum()
    raw = np.sqrt(inside * noise_variance(r.params["leaf_noise_scale"], "exact"))
    assert inside > 50 and std < raw


@pytest.mark.parametrize("make", [
    lambda f: pdp.privtree(f, ["x", "y"], bounds=BOUNDS, epsilon=1.0, seed=1, levels=0),
    lambda f: pdp.privtree(f, ["x", "y"], bounds=BOUNDS, epsilon=1.0, seed=1, levels=2),
    lambda f: pdp.uniform_grid(f, ["x", "y"], bounds=BOUNDS, epsilon=1.0, seed=1),
    lambda f: pdp.adaptive_grid(f, ["x", "y"], bounds=BOUNDS, epsilon=1.0, seed=1),
    lambda f: pdp.privtree(f, ["x", "y"], bounds=BOUNDS, epsilon=1.0, seed=1,
                           levels=2).postprocess("nonnegative"),
], ids=["privtree", "privtree-levels", "ug", "ag", "postprocessed"])
def test_sql_macros_return_noise_std_as_python(make):
    duckdb = pytest.importorskip("duckdb")
    r = make(_frame(3000))
    con = duckdb.connect()
    r.to_duckdb(con, "t")
    boxes = pl.DataFrame({"id": [1, 2, 3], "x_lo": [0.2, 0.0, 0.25], "x_hi": [0.7, 1.0, 0.3],
                          "y_lo": [0.1, None, 0.3], "y_hi": [0.3, None, 0.31]})
    con.register("b", boxes.to_arrow())
    got = con.sql("SELECT id, count, noise_std FROM t_range_counts('b') ORDER BY id").pl()
    try:
        want = r.range_counts(boxes, std=True)
    except pdp.QueryError:  # no error bar in Python (AG): NULL in SQL
        want = r.range_counts(boxes).with_columns(pl.lit(None, pl.Float64).alias("noise_std"))
    np.testing.assert_allclose(got["count"].to_numpy(), want["count"].to_numpy(), rtol=1e-9)
    if want["noise_std"].null_count():
        assert got["noise_std"].null_count() == 3
    else:
        np.testing.assert_allclose(got["noise_std"].to_numpy(), want["noise_std"].to_numpy(), rtol=1e-9)
    one = con.sql("SELECT count, noise_std FROM t_range_count(x_lo := 0.2, x_hi := 0.7, y_lo := 0.1, "
                  "y_hi := 0.3)").fetchall()
    assert one[0][0] == pytest.approx(want["count"][0], rel=1e-9)
    assert (one[0][1] is None) == (want["noise_std"][0] is None)
    r.to_duckdb(con, "t", replace=True)  # re-registering replaces the function too
    assert con.sql("SELECT count(*) FROM t_range_counts('b')").fetchall()[0][0] == 3


def test_domain_file_levels(tmp_path):
    path = tmp_path / "tree.toml"
    path.write_text('mechanism = "privtree"\nepsilon = 1\nbounds = {x = [0, 1], y = [0, 1]}\n'
                    '[options]\nlevels = 3\n')
    spec = load_spec(path)
    assert spec.options == {"levels": 3}
    path.write_text('mechanism = "uniform_grid"\nepsilon = 1\nbounds = {x = [0, 1], y = [0, 1]}\n'
                    '[options]\nlevels = 3\n')
    with pytest.raises(SpecError, match=r":5: options.levels: levels counts the top levels of a tree, and "
                                        r"uniform_grid has no tree"):
        load_spec(path)


def test_noise_variance_hook():
    r = _release(levels=2)
    boxes = pl.DataFrame({"x_lo": [0.1, 0.0], "x_hi": [0.6, 1.0]})
    want = r.range_counts(boxes, std=True)["noise_std"].to_numpy() ** 2
    np.testing.assert_allclose(r.noise_variance_array(boxes), want)
    assert np.isnan(r.postprocess("nonnegative").noise_variance_array(boxes)).all()
