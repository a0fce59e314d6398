from __future__ import annotations

import math

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy import stats

import polars_dp as pdp
from polars_dp.counting.frequency import frequency_matrix
from polars_dp.noise import make_rng

ALPHA = 1e-6  # false-failure probability of each statistical check


@pytest.fixture
def frame() -> pl.DataFrame:
    rng = np.random.default_rng(0)
    n = 5000
    return pl.DataFrame({
        "age": rng.integers(0, 100, n),
        "sex": rng.choice(["f", "m"], n),
        "job": rng.choice(["clerk", "agent", "civil", "software"], n),
    })


@pytest.fixture
def attrs() -> list:
    jobs = pdp.Hierarchy.from_dict({"Sales": ["clerk", "agent"], "Tech": ["civil", "software"]},
                                   level_names=["sector"])
    return [pdp.Ordinal("age", 0, 99, width=10), pdp.Nominal("sex", categories=["f", "m"]),
            pdp.Nominal("job", jobs)]


def laplace_scale_interval(n: int, scale: float) -> tuple[float, float]:
    """|Lap(b)| ~ Exp(b), so 2 * sum|noise| / b ~ chi2(2n): the 1-ALPHA interval of sum|noise|."""
    lo, hi = stats.chi2.ppf([ALPHA / 2, 1 - ALPHA / 2], 2 * n)
    return lo * scale / 2, hi * scale / 2


@pytest.mark.parametrize(("neighbours", "sensitivity"), [("replace", 2), ("add_remove", 1)])
def test_basic_noise_scale_and_variance(frame, attrs, neighbours, sensitivity):
    epsilon = 0.7
    truth = frequency_matrix(frame, attrs)
    noise = []
    for seed in range(40):  # 40 releases x 80 cells = 3200 independent draws
        r = frame.dp.basic(attrs, epsilon=epsilon, neighbours=neighbours, seed=seed)
        noise.append((r.counts - truth).ravel())
        assert r.noise_scale == pytest.approx(sensitivity / epsilon)
        assert r.params["sensitivity"] == sensitivity
    noise = np.concatenate(noise)
    b = sensitivity / epsilon
    lo, hi = laplace_scale_interval(noise.size, b)
    assert lo < np.abs(noise).sum() < hi
    # sample variance vs 2 b^2: Laplace kurtosis gives Var(s^2) ~ (24 b^4 - 4 b^4) / n
    z = (noise.var() - 2 * b**2) / math.sqrt(20 * b**4 / noise.size)
    assert abs(z) < stats.norm.isf(ALPHA / 2)


def test_every_cell_gets_its_own_draw(attrs):
    """Regression guard: empty cells must not share one noise value."""
    empty = pl.DataFrame({"age": [], "sex": [], "job": []},
                         schema={"age": pl.Int64, "sex": pl.String, "job": pl.String})
    r = empty.dp.basic(attrs, epsilon=1.0, seed=3, noise="float")
    assert np.unique(r.counts).size == r.n_cells
    # exact noise: integer values, so draws repeat; the cells must still not all be equal
    e = empty.dp.basic(attrs, epsilon=1.0, seed=3)
    assert np.array_equal(e.counts, np.round(e.counts)) and np.unique(e.counts).size > 5


def test_seed_reproduces_and_default_entropy_differs(frame, attrs):
    a = frame.dp.basic(attrs, epsilon=1.0, seed=11)
    b = frame.lazy().dp.basic(attrs, epsilon=1.0, seed=11)
    np.testing.assert_array_equal(a.counts, b.counts)
    c = frame.dp.basic(attrs, epsilon=1.0)
    d = frame.dp.basic(attrs, epsilon=1.0)
    assert not np.array_equal(c.counts, d.counts)


def test_make_rng_rejects_bad_seeds():
    for bad in (-1, 1.5, "1", True):
        with pytest.raises(pdp.ParameterError, match="seed"):
            make_rng(bad)
    g = np.random.default_rng(1)
    assert make_rng(g) is g


@pytest.mark.parametrize("epsilon", [0, -1, float("nan"), float("inf"), "one", None])
def test_bad_epsilon(frame, attrs, epsilon):
    with pytest.raises(pdp.ParameterError, match="epsilon"):
        frame.dp.basic(attrs, epsilon=epsilon)


def test_bad_neighbours(frame, attrs):
    with pytest.raises(pdp.ParameterError, match="'replace' .* 'add_remove'"):
        frame.dp.basic(attrs, epsilon=1.0, neighbours="swap")


def test_arrow_layout_and_metadata(frame, attrs):
    r = frame.dp.basic(attrs, epsilon=0.5, seed=1)
    t = r.to_arrow()
    assert t.column_names == ["age_lo", "age_hi", "sex", "job", "job_sector", "count"]
    assert t.num_rows == 10 * 2 * 4
    assert t.schema.field("job").type == pa.dictionary(pa.int32(), pa.string())
    # rows enumerate cells in C order: the count column is the flattened matrix
    np.testing.assert_array_equal(t["count"].to_numpy(), r.counts.ravel())
    first = t.slice(0, 5).to_pylist()
    assert [row["job"] for row in first] == ["clerk", "agent", "civil", "software", "clerk"]
    assert [row["job_sector"] for row in first[:4]] == ["Sales", "Sales", "Tech", "Tech"]
    assert [(row["age_lo"], row["age_hi"]) for row in t.slice(0, 9).to_pylist()] == [(0, 9)] * 8 + [(10, 19)]
    meta = t.schema.metadata
    assert meta[b"polars_dp.mechanism"] == b"basic"
    assert meta[b"polars_dp.epsilon"] == b"0.5"
    assert meta[b"polars_dp.neighbours"] == b"replace"
    assert b"polars_dp.attributes" in meta and b"polars_dp.version" in meta


def test_parquet_round_trip_restores_an_equal_release(tmp_path, frame, attrs):
    r = frame.dp.basic(attrs, epsilon=0.5, neighbours="add_remove", seed=1)
    path = r.write_parquet(tmp_path / "release.parquet")
    back = pdp.read_release(path)
    assert isinstance(back, pdp.GridRelease)
    assert back == r
    assert back.attributes == tuple(attrs)
    assert (back.epsilon, back.neighbours, back.noise_scale) == (0.5, "add_remove", 2.0)
    assert pq.read_schema(path).metadata == r.to_arrow().schema.metadata
    assert back.range_count(job="Sales", age=(20, 49)) == pytest.approx(
        r.range_count(job="Sales", age=(20, 49)))


def test_failed_write_leaves_nothing_behind(tmp_path, frame, attrs, monkeypatch):
    r = frame.dp.basic(attrs, epsilon=0.5, seed=1)
    target = tmp_path / "release.parquet"
    target.write_bytes(b"previous release")

    def broken(table, where, **kwargs):
        with open(where, "wb") as fh:
            fh.write(b"partial")
        raise OSError("disk full")

    class BrokenWriter:  # the batch writer of write_parquet fails the same way
        def __init__(self, where, schema, **kwargs):
            self.where = where

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def write_batch(self, batch, **kwargs):
            broken(None, self.where)

    monkeypatch.setattr(pq, "write_table", broken)
    monkeypatch.setattr(pq, "ParquetWriter", BrokenWriter)
    with pytest.raises(OSError, match="disk full"):
        r.write_parquet(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["release.parquet"]
    assert target.read_bytes() == b"previous release"


def test_write_to_missing_directory_is_explained(tmp_path, frame, attrs):
    r = frame.dp.basic(attrs, epsilon=0.5, seed=1)
    with pytest.raises(pdp.ParameterError, match="does not exist"):
        r.write_parquet(tmp_path / "nope" / "r.parquet")


def test_read_release_rejects_foreign_tables(tmp_path):
    with pytest.raises(pdp.ReleaseFormatError, match="no polars_dp.release_type"):
        pdp.read_release(pa.table({"count": [1.0]}))
    with pytest.raises(pdp.ReleaseFormatError, match="does not exist"):
        pdp.read_release(tmp_path / "missing.parquet")
    (tmp_path / "junk.parquet").write_bytes(b"not parquet")
    with pytest.raises(pdp.ReleaseFormatError, match="not a readable Parquet"):
        pdp.read_release(tmp_path / "junk.parquet")


def test_metadata_is_lost_by_polars_but_the_release_reattaches_it(frame, attrs):
    r = frame.dp.basic(attrs, epsilon=0.5, seed=1)
    assert pl.from_arrow(r.to_arrow()).to_arrow().schema.metadata is None
    assert r.to_arrow().schema.metadata[b"polars_dp.mechanism"] == b"basic"


def test_range_count_predicates(frame, attrs):
    r = frame.dp.basic(attrs, epsilon=0.5, seed=1)
    m = r.counts
    assert r.range_count() == pytest.approx(m.sum())
    assert r.range_count(age=(10, 29), job="Tech") == pytest.approx(m[1:3, :, 2:4].sum())
    assert r.range_count(sex="m", job="agent") == pytest.approx(m[:, 1, 1].sum())
    with pytest.raises(pdp.QueryError, match="not an attribute"):
        r.range_count(height=(1, 2))
    with pytest.raises(pdp.QueryError, match="lo=30 > hi=20"):
        r.range_count(age=(30, 20))
    with pytest.raises(pdp.QueryError, match="outside the declared domain"):
        r.range_count(age=(0, 120))
    with pytest.raises(pdp.QueryError, match="job: 'Clerk' is not a label"):
        r.range_count(job="Clerk")


def test_read_release_refuses_a_directory_and_files_get_normal_permissions(tmp_path, frame, attrs):
    r = frame.dp.basic(attrs, epsilon=0.5, seed=1)
    (tmp_path / "d").mkdir()
    r.write_parquet(tmp_path / "d" / "a.parquet")
    with pytest.raises(pdp.ReleaseFormatError, match="is a directory"):
        pdp.read_release(tmp_path / "d")
    import os
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "d" / "a.parquet").stat().st_mode & 0o777 == 0o666 & ~umask
