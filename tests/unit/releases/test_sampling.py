"""Synthetic rows from grid and tree releases: columns, dtypes, supports, frequencies, errors."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import polars_dp as pdp
from polars_dp.errors import EmptyReleaseError, ParameterError

#: A frequency is accepted within this many binomial standard deviations of n p.
SIGMAS = 5.0


def grid(counts, attrs) -> pdp.GridRelease:
    counts = np.asarray(counts, dtype=np.float64).reshape([a.n_cells for a in attrs])
    return pdp.GridRelease(counts, attrs, mechanism="basic", epsilon=1.0, neighbours="replace",
                           noise_scale=2.0, params={"sensitivity": 2})


def within_binomial(observed: np.ndarray, p: np.ndarray, n: int) -> bool:
    """|observed - n p| <= SIGMAS sqrt(n p (1 - p)) for every cell (plus 0 where p = 0)."""
    expected = n * p
    return bool(np.all(np.abs(observed - expected) <= SIGMAS * np.sqrt(expected * (1 - p)) + 1e-9))


def mixed_release() -> pdp.GridRelease:
    attrs = [pdp.Ordinal("age", 0, 6, width=5),                     # bins [0, 4], [5, 6]
             pdp.Ordinal("score", 0.0, 1.0, width=0.25),            # 5 bins, the last is {1.0}
             pdp.Nominal("job", {"tech": ["dev", "ops"], "care": ["nurse"]}),
             pdp.Nominal("code", categories=[7, 11]),
             pdp.Nominal("flag", categories=[True, False])]
    rng = np.random.default_rng(3)
    counts = rng.normal(3.0, 3.0, size=[a.n_cells for a in attrs])
    return grid(counts, attrs)


def test_grid_sample_columns_dtypes_and_support():
    r = mixed_release()
    rows = r.sample(20_000, seed=1)
    assert rows.columns == ["age", "score", "job", "code", "flag"]
    assert rows.dtypes == [pl.Int64, pl.Float64, pl.String, pl.Int64, pl.Boolean]
    assert rows.height == 20_000
    # every row lies in a cell with a positive count (the cell is recomputed from the values)
    idx = np.column_stack([
        rows["age"].to_numpy() // 5,
        r.attributes[1].value_to_cell(rows["score"].to_numpy()),
        rows["job"].replace_strict(["dev", "ops", "nurse"], [0, 1, 2]).to_numpy(),
        rows["code"].replace_strict([7, 11], [0, 1]).to_numpy(),
        (~rows["flag"]).cast(pl.Int64).to_numpy(),
    ])
    assert np.all(r.counts[tuple(idx.T)] > 0)
    assert set(rows["age"].unique()) <= set(range(7))
    score = rows["score"].to_numpy()
    assert score.min() >= 0.0 and score.max() <= 1.0


def test_grid_sample_frequencies_follow_the_positive_counts():
    attrs = [pdp.Ordinal("a", 0, 5), pdp.Nominal("b", categories=["x", "y"])]
    counts = np.array([[5.0, -3.0], [0.0, 1.0], [2.5, 7.0], [-0.5, 4.0], [3.0, 3.0], [1.0, 0.0]])
    n = 200_000
    rows = grid(counts, attrs).sample(n, seed=7)
    observed = np.zeros_like(counts)
    np.add.at(observed, (rows["a"].to_numpy(), (rows["b"] == "y").cast(pl.Int64).to_numpy()), 1)
    p = np.clip(counts, 0, None) / np.clip(counts, 0, None).sum()
    assert np.all(observed[p == 0] == 0)
    assert within_binomial(observed, p, n)


def test_integer_bins_are_uniform_and_the_narrow_last_bin_stays_inside():
    attrs = [pdp.Ordinal("a", 10, 16, width=5)]                     # [10, 14] and [15, 16]
    n = 100_000
    values = grid([1.0, 1.0], attrs).sample(n, seed=2)["a"].to_numpy()
    freq = np.bincount(values - 10, minlength=7)
    p = np.array([0.1] * 5 + [0.25] * 2)
    assert within_binomial(freq, p, n)


def test_float_bins_are_uniform_inside_the_bin():
    attrs = [pdp.Ordinal("x", -1.0, 1.0, width=0.5)]                # 5 bins; the last is {1.0}
    values = grid([0.0, 1.0, 0.0, 0.0, 1.0], attrs).sample(50_000, seed=4)["x"].to_numpy()
    inside = values[values < 1.0]
    assert np.all((inside >= -0.5) & (inside < 0.0))
    assert np.all(values[values >= 0.0] == 1.0)
    # uniform on [-0.5, 0): the mean of U(a, b) is (a + b) / 2 with std (b - a) / sqrt(12 m)
    assert abs(inside.mean() + 0.25) <= SIGMAS * 0.5 / np.sqrt(12 * inside.size)


def test_seed_reproduces_and_none_uses_fresh_entropy():
    r = mixed_release()
    assert r.sample(500, seed=9).equals(r.sample(500, seed=9))
    assert not r.sample(500).equals(r.sample(500))


@pytest.mark.parametrize("n", [-1, 1.5, "3", True, None])
def test_bad_n_is_a_parameter_error(n):
    with pytest.raises(ParameterError, match="n "):
        mixed_release().sample(n, seed=0)


def test_zero_rows_keep_the_schema():
    rows = mixed_release().sample(0, seed=0)
    assert rows.height == 0 and rows.dtypes[:2] == [pl.Int64, pl.Float64]


def test_no_positive_cell_is_a_typed_error():
    r = grid([-1.0, 0.0, -3.0], [pdp.Ordinal("a", 0, 2)])
    with pytest.raises(EmptyReleaseError, match="no cell with a positive count"):
        r.sample(5, seed=0)
    assert issubclass(EmptyReleaseError, ParameterError)


def test_zero_rows_of_a_release_without_a_positive_count_are_an_empty_frame():
    attrs = mixed_release().attributes
    rows = grid(np.full([a.n_cells for a in attrs], -1.0), attrs).sample(0, seed=0)
    assert rows.height == 0 and rows.schema == mixed_release().sample(3, seed=0).schema
    r = spatial()
    empty = pdp.SpatialRelease(r.box, r.lo, r.hi, r.depth, -np.abs(r.count), codes=r.codes,
                               layout=r.layout, mechanism=r.mechanism, epsilon=r.epsilon,
                               neighbours=r.neighbours, params=r.params)
    points = empty.sample(0)
    assert points.height == 0 and points.schema == r.sample(3, seed=0).schema


def spatial(seed=0):
    rng = np.random.default_rng(seed)
    df = pl.DataFrame({"x": rng.random(5000), "y": rng.random(5000) ** 3})
    return df.dp.privtree(["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=0.5, seed=seed)


def test_tree_sample_points_lie_in_positive_leaves_with_the_right_frequencies():
    r = spatial()
    n = 100_000
    rows = r.sample(n, seed=5)
    assert rows.columns == ["x", "y"] and rows.dtypes == [pl.Float64, pl.Float64]
    pts = rows.to_numpy()
    inside = np.all((pts[:, None, :] >= r.lo[None]) & (pts[:, None, :] < r.hi[None]), axis=2)
    leaf = inside.argmax(axis=1)
    assert np.all(inside.sum(axis=1) == 1)                           # leaves tile the box
    observed = np.bincount(leaf, minlength=r.n_leaves)
    p = np.clip(r.count, 0, None) / np.clip(r.count, 0, None).sum()
    assert np.all(observed[p == 0] == 0) and (p == 0).any()          # some leaves were negative
    assert within_binomial(observed, p, n)


def test_tree_sample_bad_input():
    r = spatial()
    with pytest.raises(ParameterError):
        r.sample(-2)
    empty = pdp.SpatialRelease(r.box, r.lo, r.hi, r.depth, -np.abs(r.count), codes=r.codes,
                            layout=r.layout, mechanism=r.mechanism, epsilon=r.epsilon,
                            neighbours=r.neighbours, params=r.params)
    with pytest.raises(EmptyReleaseError):
        empty.sample(3)
