"""SpatialRelease (PrivTree, UG, AG): partition, range counts, Arrow/Parquet, baselines, workloads."""

import json
import math

import numpy as np
import polars as pl
import pytest

import polars_dp as pdp
from polars_dp.errors import QueryError
from polars_dp.evaluation.references import exact_range_counts
from polars_dp.evaluation.spatial_workloads import SIZE_CLASSES, random_boxes, relative_errors
from polars_dp.kernels.morton import overlap_fraction
from polars_dp.mechanisms.spatial_grids import constrained_inference
from polars_dp.releases.metadata import read_metadata
from tests.helpers.morton import skewed


def release(mechanism, d, n_points=20_000, epsilon=1.0, seed=1, **kw):
    df = skewed(n_points, d, seed)
    cols = [f"c{j}" for j in range(d)]
    return getattr(df.dp, mechanism)(cols, bounds=[(-5, 5)] * d, epsilon=epsilon, seed=seed, **kw)


CASES = [("privtree", 1, {}), ("privtree", 2, {}), ("privtree", 2, {"fanout": 2}),
         ("privtree", 3, {"fanout": 4}),
         ("uniform_grid", 2, {}), ("uniform_grid", 3, {"n": 20_000}), ("adaptive_grid", 2, {}),
         ("adaptive_grid", 1, {"n": 20_000}), ("privelet_grid", 2, {"bits": 5}), ("privelet_grid", 1, {})]


@pytest.mark.parametrize(("mechanism", "d", "kw"), CASES)
def test_leaves_partition_the_box(mechanism, d, kw):
    r = release(mechanism, d, **kw)
    leaves = r.leaves
    assert leaves.columns == [f"c{j}_{s}" for j in range(d) for s in ("lo", "hi")] + ["depth", "count"]
    lo, hi = r.lo, r.hi
    assert np.all(hi > lo) and np.all(lo >= -5) and np.all(hi <= 5)
    assert np.prod(hi - lo, axis=1).sum() == pytest.approx(10.0**d, rel=1e-12)
    # no two leaves overlap (pairwise intersection volume, on a sample of leaves)
    idx = np.random.default_rng(0).choice(r.n_leaves, size=min(r.n_leaves, 600), replace=False)
    a_lo, a_hi = lo[idx], hi[idx]
    inter = np.clip(np.minimum(a_hi[:, None], a_hi[None]) - np.maximum(a_lo[:, None], a_lo[None]), 0, None)
    vol = np.prod(inter, axis=2)
    np.fill_diagonal(vol, 0.0)
    assert vol.max() == 0.0
    if mechanism == "privtree":  # Morton code ranges tile [0, 2^(d k)) exactly
        k, s = r.layout["bits"], r.layout["split_bits"]
        span = np.left_shift(np.int64(1), d * k - r.depth.astype(np.int64) * s)
        np.testing.assert_array_equal(r.codes[1:], r.codes[:-1] + span[:-1])
        assert r.codes[0] == 0 and r.codes[-1] + span[-1] == 2 ** (d * k)


def brute_force_answers(r, q_lo, q_hi):
    inter = np.clip(np.minimum(q_hi[:, None], r.hi[None]) - np.maximum(q_lo[:, None], r.lo[None]), 0, None)
    return (np.prod(inter / (r.hi - r.lo)[None], axis=2) * r.count).sum(axis=1)


@pytest.mark.parametrize(("mechanism", "d", "kw"), CASES)
def test_range_counts_equal_the_brute_force_uniformity_sum(mechanism, d, kw):
    r = release(mechanism, d, **kw)
    rng = np.random.default_rng(3)
    a, b = rng.uniform(-5, 5, (300, d)), rng.uniform(-5, 5, (300, d))
    q_lo, q_hi = np.minimum(a, b), np.maximum(a, b)
    q_hi[:5] = q_lo[:5]  # degenerate boxes
    q_lo[5:10], q_hi[5:10] = -5.0, 5.0  # the whole box
    sides = (("lo", q_lo), ("hi", q_hi))
    boxes = pl.DataFrame({f"c{j}_{s}": arr[:, j] for j in range(d) for s, arr in sides})
    got = r.range_count_array(boxes)
    expected = brute_force_answers(r, q_lo, q_hi)
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-6 * np.abs(r.count).sum())
    np.testing.assert_allclose(got[5:10], r.count.sum(), rtol=1e-12)
    assert r.range_count() == pytest.approx(r.count.sum())
    framed = r.range_counts(boxes.with_row_index("id").lazy())
    assert framed.columns == ["id", *boxes.columns, "count"]
    np.testing.assert_array_equal(framed["count"].to_numpy(), got)
    one = {f"c{j}": (float(q_lo[20, j]), float(q_hi[20, j])) for j in range(d)}
    assert r.range_count(**one) == pytest.approx(expected[20], rel=1e-9, abs=1e-6 * np.abs(r.count).sum())


def test_range_counts_are_close_to_the_truth_with_a_large_budget():
    df = skewed(50_000, 2, seed=4)
    bounds = [(-5, 5), (-5, 5)]
    boxes = random_boxes(["c0", "c1"], bounds, 200, volume="large", seed=2)
    truth = exact_range_counts(df, ["c0", "c1"], bounds, boxes)
    for mechanism in ("privtree", "uniform_grid", "adaptive_grid"):
        r = getattr(df.dp, mechanism)(["c0", "c1"], bounds=bounds, epsilon=50.0, seed=5)
        err = relative_errors(r.range_count_array(boxes), truth, df.height)
        assert np.median(err) < 0.05, mechanism


def test_arrow_metadata_and_parquet_round_trip(tmp_path):
    r = release("privtree", 2, fanout=2, theta=1.5)
    meta = read_metadata(r.to_arrow())
    for key in ("mechanism", "epsilon", "neighbours", "bounds", "columns"):
        assert key in meta, key
    params = json.loads(meta["params"])
    for key in ("lambda", "delta", "theta", "fanout", "tree_share"):  # parameters: in params only
        assert key in params and key not in meta, key
    assert meta["mechanism"] == "privtree" and params["fanout"] == 2 and params["theta"] == 1.5
    for rel in (r, release("uniform_grid", 2), release("adaptive_grid", 2)):
        path = rel.write_parquet(tmp_path / f"{rel.mechanism}.parquet")
        back = pdp.read_release(path)
        assert isinstance(back, pdp.SpatialRelease) and back == rel
        boxes = random_boxes(rel.columns, [(-5, 5)] * 2, 50, volume="medium", seed=1)
        np.testing.assert_array_equal(back.range_count_array(boxes), rel.range_count_array(boxes))


def test_query_errors():
    r = release("privtree", 2)
    with pytest.raises(QueryError):
        r.range_count(zz=(0, 1))
    with pytest.raises(QueryError):
        r.range_count(c0=(1, 0))
    with pytest.raises(QueryError):
        r.range_count(c0=1)
    with pytest.raises(QueryError):
        r.range_counts(pl.DataFrame({"c0_lo": [0.0], "c0_high": [1.0]}))
    with pytest.raises(QueryError, match="must hold numbers"):
        r.range_counts(pl.DataFrame({"c0_lo": ["0.0"]}))
    # a null bound means the whole range, as in SQL and for grid releases
    with_null = r.range_count_array(pl.DataFrame({"c0_lo": [0.0, None]}))
    assert with_null[1] == pytest.approx(r.count.sum())
    assert with_null[0] == pytest.approx(r.range_count(c0=(0.0, 5.0)))
    # so does None in a single query's pair (it raised a bare TypeError); a non-number is refused
    assert r.range_count(c0=(None, 1.5)) == r.range_count(c0=(-5.0, 1.5))
    assert r.range_count(c0=(1.5, None), c1=(None, None)) == r.range_count(c0=(1.5, 5.0))
    for bad in ("0", True, [0]):
        with pytest.raises(QueryError, match=r"c0: lo=.* is not a number"):
            r.range_count(c0=(bad, 1.0))
    with pytest.raises(QueryError, match=r"^c0: lo=-1.0 > hi=-2.0; the range is empty$"):
        r.range_count(c0=(-1.0, -2.0))


def test_passthrough_is_one_name_or_several_and_id_is_always_allowed():
    r = release("privtree", 2)
    queries = pl.DataFrame({"id": [7], "label": ["all"], "c0_lo": [0.0]})
    expected = r.range_count(c0=(0.0, 5.0))
    for passthrough in ("label", ["label"], ("label",)):
        out = r.range_counts(queries, passthrough=passthrough)
        assert out["id"].to_list() == [7] and out["label"].to_list() == ["all"]
        assert out["count"][0] == pytest.approx(expected)
        assert r.range_count_array(queries, passthrough=passthrough)[0] == pytest.approx(expected)
    with pytest.raises(QueryError, match="query column 'label' is not one of"):
        r.range_counts(queries, passthrough="lab")


# ---------------------------------------------------------------- baselines
def test_uniform_grid_side_and_noise_scale():
    r = release("uniform_grid", 2, n=20_000, epsilon=0.5)
    assert r.layout["m"] == math.ceil(math.sqrt(20_000 * 0.5 / 10))
    assert r.params["noise_scale"] == pytest.approx(1 / 0.5)
    r = release("uniform_grid", 2, epsilon=0.5, neighbours="replace")
    assert r.params["n_used"] == 20_000 and r.params["noise_scale"] == pytest.approx(2 / 0.5)
    r = release("uniform_grid", 2, epsilon=0.5, n_share=0.1)
    assert r.params["epsilon_grid"] == pytest.approx(0.45)
    assert abs(r.params["n_used"] - 20_000) < 200  # Lap(1/0.05): P[|X| > 200] = e^-10


def test_adaptive_grid_parameters_and_constrained_inference():
    r = release("adaptive_grid", 2, n=20_000, epsilon=1.0)
    assert r.layout["m1"] == max(10, math.ceil(math.sqrt(20_000 / 10) / 4))
    assert len(r.layout["m2"]) == r.layout["m1"] ** 2
    assert r.n_leaves == sum(m * m for m in r.layout["m2"])
    rng = np.random.default_rng(0)
    owner = np.repeat(np.arange(3), [1, 4, 9])
    v, u = rng.normal(50, 5, 3), rng.normal(5, 2, owner.size)
    out = constrained_inference(v, u, owner, 0.3)
    for cell, m in enumerate((1, 4, 9)):
        sel = owner == cell
        expected = (0.09 * m * v[cell] + 0.49 * u[sel].sum()) / (0.09 * m + 0.49)
        assert out[sel].sum() == pytest.approx(expected)
        np.testing.assert_allclose(np.diff(out[sel]), np.diff(u[sel]))  # differences kept


@pytest.mark.parametrize("mechanism", ["uniform_grid", "adaptive_grid"])
def test_baselines_reject_bad_input(mechanism):
    df = pl.DataFrame({"x": [0.1, 2.0], "y": [0.1, 0.2]})
    with pytest.raises(pdp.DomainError):
        getattr(df.dp, mechanism)(["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=1.0)
    for kw in ({"epsilon": 0}, {"n": -3}, {"c": 0}, {"bounds": [(0, 1), (1, 0)]}, {"neighbours": "x"}):
        args = {"bounds": [(0, 3), (0, 1)], "epsilon": 1.0, **kw}
        with pytest.raises(pdp.ParameterError):
            getattr(df.dp, mechanism)(["x", "y"], **args)


# ---------------------------------------------------------------- workloads
def test_random_boxes_have_the_requested_volume_and_stay_inside():
    bounds = [(-180, 180), (-90, 90)]
    for name, (lo, hi) in SIZE_CLASSES.items():
        q = random_boxes(["lon", "lat"], bounds, 2000, volume=name, seed=1)
        frac = ((q["lon_hi"] - q["lon_lo"]) * (q["lat_hi"] - q["lat_lo"])).to_numpy() / (360 * 180)
        assert frac.min() >= lo * (1 - 1e-9) and frac.max() < hi
        assert np.allclose((q["lon_hi"] - q["lon_lo"]) / 360, (q["lat_hi"] - q["lat_lo"]) / 180)
        assert q["lon_lo"].min() >= -180 and q["lon_hi"].max() <= 180
        assert q["lat_lo"].min() >= -90 and q["lat_hi"].max() <= 90
    with pytest.raises(pdp.ParameterError):
        random_boxes(["x"], [(0, 1)], 5, volume=(0.5, 0.1))


def test_exact_range_counts_and_relative_errors():
    df = skewed(3000, 3, seed=9)
    cols = ["c0", "c1", "c2"]
    q = random_boxes(cols, [(-5, 5)] * 3, 400, volume=(0.001, 0.3), seed=3)
    got = exact_range_counts(df, cols, [(-5, 5)] * 3, q, max_work=5000)
    x = df.to_numpy()
    lo = q.select(f"{c}_lo" for c in cols).to_numpy()
    hi = q.select(f"{c}_hi" for c in cols).to_numpy()
    brute = np.all((x[None] >= lo[:, None]) & (x[None] <= hi[:, None]), axis=2).sum(axis=1)
    np.testing.assert_array_equal(got, brute)
    err = relative_errors(np.array([10.0, 0.0, 5.0]), np.array([8.0, 1.0, 100.0]), 4000)
    np.testing.assert_allclose(err, [2 / 8, 1 / 4, 95 / 100])


def test_privelet_grid_scale_and_whole_box():
    r = release("privelet_grid", 2, bits=4, epsilon=2.0)
    assert r.layout["m"] == 16 and r.n_leaves == 256
    assert r.params["noise_scale"] == pytest.approx((1 + 4) ** 2 / 2.0)  # rho = (1 + log2 m)^2, add/remove
    big = release("privelet_grid", 2, bits=4, epsilon=1e7)
    assert big.range_count() == pytest.approx(20_000, abs=1.0)
    with pytest.raises(pdp.ParameterError):
        release("privelet_grid", 2, bits=0)


@pytest.mark.parametrize(("mechanism", "d", "kw"), [c for c in CASES if c[0] in ("privtree", "uniform_grid")])
def test_std_is_the_leaf_noise_through_the_uniformity_weights(mechanism, d, kw):
    r = release(mechanism, d, **kw, **({"levels": 0} if mechanism == "privtree" else {}))
    rng = np.random.default_rng(8)
    a, b = rng.uniform(-5, 5, (200, d)), rng.uniform(-5, 5, (200, d))
    q_lo, q_hi = np.minimum(a, b), np.maximum(a, b)
    sides = (("lo", q_lo), ("hi", q_hi))
    boxes = pl.DataFrame({f"c{j}_{s}": arr[:, j] for j in range(d) for s, arr in sides})
    got = r.range_counts(boxes, std=True)
    np.testing.assert_array_equal(got["count"].to_numpy(), r.range_count_array(boxes))
    # explicit linear map: every leaf's weight is its overlapped volume fraction
    weights = overlap_fraction(q_lo[:, None, :], q_hi[:, None, :], r.lo[None], r.hi[None])
    scale = r.params["leaf_noise_scale" if mechanism == "privtree" else "noise_scale"]
    expected = np.sqrt(2 * scale**2 * (weights**2).sum(axis=1))
    np.testing.assert_allclose(got["noise_std"].to_numpy(), expected, rtol=1e-9)
    assert "std" not in got.columns  # the name says it: leaf noise only, not the uniformity error
    assert r.range_std(c0=(-5, 5)) == pytest.approx(math.sqrt(2 * scale**2 * r.n_leaves), rel=1e-9)


def test_uniform_grid_std_matches_empirical_noise():
    """400 UG releases with a public n (a fixed grid, so the answers vary by the noise only);
    per box, the sample variance of the answers vs std**2, with
    Var(s^2) <= (2 + 3) sigma^4 / R (Laplace combinations) and Bonferroni."""
    df = skewed(5_000, 2, seed=3)
    boxes = pl.DataFrame({"c0_lo": [-5.0, -2.3, 0.1], "c0_hi": [5.0, 1.7, 0.4],
                          "c1_lo": [-5.0, -4.0, -1.0], "c1_hi": [0.0, 3.3, 4.5]})
    reps = 400
    answers = np.empty((reps, boxes.height))
    for seed in range(reps):
        r = df.dp.uniform_grid(["c0", "c1"], bounds=[(-5, 5)] * 2, epsilon=0.5, n=5_000, seed=seed)
        out = r.range_counts(boxes, std=True)
        answers[seed] = out["count"].to_numpy()
    sigma2 = out["noise_std"].to_numpy() ** 2
    z = (answers.var(axis=0) - sigma2) / (sigma2 * math.sqrt(5 / reps))
    assert np.all(np.abs(z) < 5.5), (answers.var(axis=0) / sigma2)  # two-sided 1e-6 / 3 boxes


@pytest.mark.parametrize("mechanism", ["adaptive_grid", "privelet_grid"])
def test_std_is_null_where_leaf_noise_is_correlated(mechanism):
    """One rule with post-processed releases and the SQL macros: no error bar stated -> null."""
    r = release(mechanism, 2)
    got = r.range_counts(pl.DataFrame({"c0_lo": [0.0]}), alpha=0.05).row(0, named=True)
    assert got["count"] == pytest.approx(r.range_count(c0=(0.0, 5.0)))
    assert got["noise_std"] is None and got["noise_lo"] is None and got["noise_hi"] is None
    assert r.range_std(c0=(0.0, 5.0)) is None
    assert r.range_noise_interval(0.05, c0=(0.0, 5.0)) == (None, None)
    assert np.isnan(r.noise_variance_array(pl.DataFrame({"c0_lo": [0.0]}))).all()
    assert np.isnan(r.leaf_noise_accuracy(np.array([1.0, 2.0]), 0.05)).all()


def test_replace_neighbours_with_dropped_nulls_estimate_n_privately():
    """Under replace neighbours the row count is public only while no row is dropped."""
    df = skewed(4_000, 2)
    cols, bounds = ["c0", "c1"], [(-5, 5)] * 2
    exact = df.dp.uniform_grid(cols, bounds=bounds, epsilon=1.0, neighbours="replace", seed=1)
    assert exact.params["n_used"] == 4_000 and exact.params["n_source"].startswith("exact")
    dropped = df.dp.uniform_grid(cols, bounds=bounds, epsilon=1.0, neighbours="replace",
                                 nulls="drop", seed=1)
    assert dropped.params["n_source"].startswith("noisy")
    assert dropped.params["epsilon_grid"] < 1.0


def test_utility_benchmark_estimates_n_privately_under_add_remove():
    """The benchmark's grids never get the exact N (it is not public under add/remove)."""
    import importlib

    bench = importlib.import_module("benchmarks.utility_privtree")
    df = pl.DataFrame({"longitude": [0.0, 1.0, 2.0], "latitude": [0.0, 1.0, 2.0]})
    for name in ("UG", "AG"):
        release = bench.mechanisms()[name](df, 1.0, 0)
        assert release.neighbours == "add_remove" and release.params["n_source"].startswith("noisy")
