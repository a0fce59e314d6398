"""Post-processing: non-negative projection (KKT), integer rounding, metadata, NULL std, errors."""

from __future__ import annotations

import duckdb
import numpy as np
import polars as pl
import pytest

import polars_dp as pdp
from polars_dp.errors import ParameterError, ReleaseFormatError
from polars_dp.plans.noise_model import Correlated
from polars_dp.releases.postprocess import project_nonnegative, round_keeping_total, verify_postprocessed


def noisy_grid(seed=0, mechanism="basic") -> pdp.GridRelease:
    rng = np.random.default_rng(seed)
    df = pl.DataFrame({"age": rng.integers(0, 40, 300), "job": rng.choice(["a", "b", "c"], 300)})
    attrs = [pdp.Ordinal("age", 0, 63), pdp.Nominal("job", categories=["a", "b", "c", "d"])]
    # the seeds were chosen with float noise (a positive total, some negative cells)
    return getattr(pdp, mechanism)(df, attrs, epsilon=0.2, seed=seed, noise="float")


@pytest.mark.parametrize("seed", range(5))
def test_projection_satisfies_the_optimality_conditions(seed):
    """x is the projection onto {x >= 0, sum x = T} iff x = max(v - t, 0) for one t with
    sum x = T (KKT): every positive x_i has v_i - x_i = t, every zero has v_i <= t."""
    v = np.random.default_rng(seed).normal(1.0, 3.0, size=(7, 11))
    x, record = project_nonnegative(v)
    t = record["threshold"]
    assert x.shape == v.shape and np.all(x >= 0)
    assert x.sum() == pytest.approx(v.sum(), rel=1e-12)
    pos = x > 0
    np.testing.assert_allclose(v[pos] - x[pos], t, rtol=1e-10, atol=1e-10)
    assert np.all(v[~pos] <= t + 1e-10)


def test_projection_small_example_and_non_positive_totals():
    x, rec = project_nonnegative(np.array([3.0, 1.0, -2.0]))       # t = 1: (2, 0, 0)
    np.testing.assert_allclose(x, [2.0, 0.0, 0.0])
    assert rec["threshold"] == pytest.approx(1.0)
    for v in ([-1.0, 0.5, -2.0], [1.0, -1.0]):                       # totals -2.5 and 0
        x, rec = project_nonnegative(np.array(v))
        assert np.all(x == 0) and rec["total"] == 0.0 and rec["threshold"] is None


@pytest.mark.parametrize("seed", range(5))
def test_rounding_keeps_the_rounded_total_and_is_nearest(seed):
    v = np.random.default_rng(seed).normal(2.0, 4.0, size=200)
    x, rec = round_keeping_total(v)
    assert np.all(x == np.round(x)) and x.sum() == round(v.sum()) == rec["total"]
    up = x == np.ceil(v)
    assert np.all(up | (x == np.floor(v)))
    frac = v - np.floor(v)
    strict_up = up & (np.ceil(v) != np.floor(v))
    if strict_up.any() and (~up).any():                              # largest fractions go up
        assert frac[strict_up].min() >= frac[~up].max()


def test_grid_postprocess_returns_a_new_recorded_release():
    r = noisy_grid()
    before = r.counts.copy()
    p = r.postprocess("nonnegative")
    assert np.array_equal(r.counts, before) and (r.counts < 0).any()  # the original is untouched
    assert np.all(p.counts >= 0) and p.counts.sum() == pytest.approx(r.counts.sum())
    steps = p.params["postprocessed"]
    assert [s["method"] for s in steps] == ["nonnegative"]
    assert steps[0]["total"] == pytest.approx(r.counts.sum())
    assert p.params["sensitivity"] == r.params["sensitivity"]
    assert (p.mechanism, p.epsilon, p.neighbours, p.noise_scale) == (r.mechanism, r.epsilon, r.neighbours,
                                                                      r.noise_scale)
    assert isinstance(p.noise_model, Correlated) and not isinstance(r.noise_model, Correlated)


@pytest.mark.parametrize("mechanism", ["basic", "privelet"])
def test_nonnegative_then_integer(mechanism):
    r = noisy_grid(1, mechanism)
    p = r.postprocess("nonnegative", "integer")
    assert np.all(p.counts >= 0) and np.all(p.counts == np.round(p.counts))
    assert p.counts.sum() == max(round(r.counts.sum()), 0)  # a total <= 0 projects to all zeros
    assert [s["method"] for s in p.params["postprocessed"]] == ["nonnegative", "integer"]
    again = p.postprocess("integer")                                  # steps accumulate
    assert [s["method"] for s in again.params["postprocessed"]] == ["nonnegative", "integer", "integer"]
    assert np.array_equal(again.counts, p.counts)


def test_std_is_null_after_post_processing_and_survives_parquet(tmp_path):
    r = noisy_grid()
    p = r.postprocess("nonnegative")
    queries = pl.DataFrame({"id": [0, 1], "age_lo": [0, 10], "age_hi": [5, None], "job": ["a", None]})
    assert r.range_counts(queries, std=True)["std"].null_count() == 0
    got = p.range_counts(queries, std=True)
    assert got["std"].null_count() == 2 and got["std"].dtype == pl.Float64
    assert p.range_std(age=(0, 5)) is None  # one convention: None / null, never NaN
    back = pdp.read_release(p.write_parquet(tmp_path / "p.parquet"))
    assert back == p and back.params["postprocessed"] == p.params["postprocessed"]
    assert back.range_counts(queries, std=True)["std"].null_count() == 2
    np.testing.assert_allclose(back.range_counts(queries)["count"], got["count"])


def test_sql_std_is_null_after_post_processing():
    p = noisy_grid().postprocess("nonnegative")
    con = duckdb.connect()
    p.to_duckdb(con, "rel")
    count, std, lo, hi = con.execute("SELECT * FROM rel_range_count(age_lo := 0, age_hi := 5)").fetchall()[0]
    assert std is None and lo is None and hi is None and count == pytest.approx(p.range_count(age=(0, 5)))


def test_tree_postprocess(tmp_path):
    rng = np.random.default_rng(2)
    df = pl.DataFrame({"x": rng.random(3000), "y": rng.random(3000) ** 4})
    r = df.dp.privtree(["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=0.3, seed=2)
    p = r.postprocess("nonnegative")
    assert (r.count < 0).any() and np.all(p.count >= 0)
    assert p.count.sum() == pytest.approx(r.count.sum())
    assert np.array_equal(p.lo, r.lo) and np.array_equal(p.codes, r.codes)
    boxes = pl.DataFrame({"x_lo": [0.0, 0.2], "x_hi": [0.5, 0.3]})
    assert r.range_counts(boxes, std=True)["noise_std"].null_count() == 0
    assert p.range_counts(boxes, std=True)["noise_std"].null_count() == 2
    assert p.range_std(x=(0.0, 0.5)) is None and r.range_std(x=(0.0, 0.5)) > 0
    back = pdp.read_release(p.write_parquet(tmp_path / "t.parquet"))
    assert back == p and isinstance(back.noise_model, Correlated)
    assert back.range_counts(boxes, std=True)["noise_std"].null_count() == 2


def test_unknown_or_missing_step_lists_the_valid_ones():
    r = noisy_grid()
    with pytest.raises(ParameterError, match=r"\('nonnegative', 'integer'\).*'clip'"):
        r.postprocess("clip")
    with pytest.raises(ParameterError, match="nonnegative"):
        r.postprocess()
    rng = np.random.default_rng(0)
    tree = pl.DataFrame({"x": rng.random(100)}).dp.privtree(["x"], bounds=[(0, 1)], epsilon=1.0, seed=0)
    with pytest.raises(ParameterError, match=r"\('nonnegative',\).*'integer'"):
        tree.postprocess("integer")


def test_recorded_steps_can_be_verified_against_the_counts():
    r = noisy_grid(3)
    verify_postprocessed(r.counts, r.params)                          # nothing recorded: passes
    p = r.postprocess("nonnegative", "integer")
    verify_postprocessed(p.counts, p.params)
    verify_postprocessed(r.postprocess("nonnegative").counts, r.postprocess("nonnegative").params)
    shifted = p.counts.copy()
    shifted.flat[0] += 1
    with pytest.raises(ReleaseFormatError, match="sum"):
        verify_postprocessed(shifted, p.params)
    moved = p.counts.copy()
    j = int(np.flatnonzero(moved.reshape(-1) > 0)[0])
    moved.flat[j] += 0.5
    moved.flat[(j + 1) % moved.size] -= 0.5
    with pytest.raises(ReleaseFormatError, match="fractional|negative"):
        verify_postprocessed(moved, p.params)
    negative = np.zeros_like(p.counts)
    negative.flat[0], negative.flat[1] = -1.0, p.counts.sum() + 1
    with pytest.raises(ReleaseFormatError, match="negative"):
        verify_postprocessed(negative, p.params)
    with pytest.raises(ReleaseFormatError, match="list of steps"):
        verify_postprocessed(p.counts, {"postprocessed": [{"method": "smooth"}]})
