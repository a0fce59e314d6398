from __future__ import annotations

import duckdb
import numpy as np
import polars as pl
import pytest

import polars_dp as pdp

COLUMNS = ["x", "y"]
BOUNDS = [(0.0, 100.0), (-50.0, 50.0)]


@pytest.fixture(scope="module")
def points() -> pl.DataFrame:
    rng = np.random.default_rng(4)
    n = 20_000
    x = np.clip(rng.normal(30, 8, n), 0, 100)
    y = np.clip(rng.normal(10, 15, n), -50, 50)
    return pl.DataFrame({"x": x, "y": y})


@pytest.fixture(scope="module", params=["privtree", "uniform_grid", "adaptive_grid", "privtree_subgrid"])
def release(request, points) -> pdp.SpatialRelease:
    kwargs = {} if request.param.startswith("privtree") else {"n": points.height}
    return getattr(points.dp, request.param)(COLUMNS, bounds=BOUNDS, epsilon=1.0, seed=2, **kwargs)


def test_sql_answers_equal_python(release):
    con = duckdb.connect()
    release.to_duckdb(con, "pts")
    boxes = pdp.random_boxes(COLUMNS, BOUNDS, 300, volume="medium", seed=1)
    boxes = boxes.with_columns(pl.Series("id", np.arange(boxes.height)))
    con.register("boxes", boxes.to_arrow())
    got = con.sql("SELECT * FROM pts_range_counts('boxes') ORDER BY id").pl()
    want = release.range_counts(boxes)["count"].to_numpy()
    assert got.height == boxes.height
    np.testing.assert_allclose(got["count"].to_numpy(), want, rtol=1e-6, atol=1e-6)
    single = con.sql("SELECT count FROM pts_range_count(x_lo := 20, x_hi := 40, y_hi := 0)").fetchall()
    assert single[0][0] == pytest.approx(release.range_count(x=(20, 40), y=(-50, 0)), rel=1e-9, abs=1e-9)
    whole = con.sql("SELECT count FROM pts_range_count()").fetchall()[0][0]
    assert whole == pytest.approx(release.count.sum(), rel=1e-9)
    plain = con.sql("SELECT sum(count) FROM pts").fetchall()[0][0]
    assert plain == pytest.approx(whole, rel=1e-9)
    shuffled = boxes.sample(fraction=1.0, shuffle=True, seed=2)
    con.register("shuffled", shuffled.to_arrow())
    ids = [row[0] for row in con.sql("SELECT id FROM pts_range_counts('shuffled')").fetchall()]
    assert ids == sorted(ids)                        # rows in id order without an ORDER BY


def test_sql_round_trip_and_errors(release):
    con = duckdb.connect()
    pdp.duckdb.register(con, "pts", release)
    back = pdp.duckdb.read_release(con, "pts")
    assert back == release
    with pytest.raises(duckdb.Error, match="x: lo=40.0 > hi=20.0"):
        con.sql("SELECT * FROM pts_range_count(x_lo := 40, x_hi := 20)").fetchall()
    with pytest.raises(pdp.ParameterError, match="plain SQL identifier"):
        pdp.duckdb.register(con, "bad name", release)


@pytest.mark.parametrize(("bounds", "column", "value"), [
    ("x_lo := -9, x_hi := 1", "x_lo", -9.0), ("y_hi := 1000", "y_hi", 1000.0),
    ("x_lo := 100.5", "x_lo", 100.5), ("y_lo := 'nan'::DOUBLE", "y_lo", None),
])
def test_sql_refuses_a_box_outside_the_bounds_with_pythons_sentence(release, bounds, column, value):
    """A bound outside the declared box is an error in SQL as in Python (never clipped), with the
    same sentence; in the batch macro it names the query's id."""
    con = duckdb.connect()
    release.to_duckdb(con, "pts")
    with pytest.raises(duckdb.Error, match=rf"{column}: \S+ is outside the declared domain") as sql_error:
        con.sql(f"SELECT * FROM pts_range_count({bounds})").fetchall()
    if value is not None:
        with pytest.raises(pdp.QueryError) as python_error:
            release.range_count(**{column[0]: (value, value) if column.endswith("lo") else (None, value)})
        assert str(python_error.value) in str(sql_error.value)
    con.sql("CREATE TABLE qs AS SELECT 1 AS id, 0.0 AS x_lo, 1.0 AS x_hi UNION ALL SELECT 2, 0.0, 101.0")
    with pytest.raises(duckdb.Error, match=r"x_hi: 101.0 is outside the declared domain .*\(query id=2\)"):
        con.sql("SELECT * FROM pts_range_counts('qs')").fetchall()
