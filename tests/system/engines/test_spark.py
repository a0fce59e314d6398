"""Spark DataFrames count in Spark and give the same cells, errors and seeded releases as Polars.

Few tests on purpose: Spark runs locally (``local[2]``) through the session fixture in
conftest.py, which skips only when pyspark or Java is missing.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import polars_dp as pdp
from polars_dp.counting.frequency import frequency_matrix
from tests.helpers.engines import ATTRS, brute_force, points, table


def test_spark_counts_errors_and_count_column(spark):
    frame = table(1000)
    np.testing.assert_array_equal(frequency_matrix(spark.createDataFrame(frame.to_arrow()), ATTRS),
                                  brute_force(frame, ATTRS))
    bad = frame.with_columns(
        pl.when(pl.col("score") > 0.5).then(pl.col("score") * 3).otherwise(pl.col("score")),
        pl.when(pl.col("age") > 45).then(None).otherwise(pl.col("age")).alias("age"))
    sbad = spark.createDataFrame(bad.to_arrow())
    with pytest.raises(pdp.DomainError) as polars_err:
        frequency_matrix(bad, ATTRS, nulls="drop")
    with pytest.raises(pdp.DomainError) as spark_err:
        frequency_matrix(sbad, ATTRS, nulls="drop")
    assert str(spark_err.value) == str(polars_err.value)
    np.testing.assert_array_equal(frequency_matrix(sbad, ATTRS, nulls="drop", on_out_of_domain="clamp"),
                                  frequency_matrix(bad, ATTRS, nulls="drop", on_out_of_domain="clamp"))
    grouped = frame.group_by([a.column for a in ATTRS]).len("n").with_columns(pl.col("n").cast(pl.Int64))
    np.testing.assert_array_equal(frequency_matrix(spark.createDataFrame(grouped.to_arrow()), ATTRS,
                                                   count_column="n"), brute_force(frame, ATTRS))
    with pytest.raises(pdp.ColumnNotFoundError, match="'nope' is not in the input"):
        frequency_matrix(sbad, [pdp.Ordinal("nope", 0, 1)])


def test_spark_same_seed_same_release(spark):
    frame = table(1000)
    rel = spark.createDataFrame(frame.to_arrow())
    for mechanism in (pdp.basic, pdp.privelet):
        a = mechanism(rel, ATTRS[:3], epsilon=1.0, seed=4)
        b = mechanism(frame, ATTRS[:3], epsilon=1.0, seed=4)
        assert a.to_arrow().equals(b.to_arrow())
    pts = points(2000)
    spts = spark.createDataFrame(pts.to_arrow())
    for mechanism in (pdp.privtree, pdp.uniform_grid):
        a = mechanism(spts, ["x", "y"], bounds=[(0, 1), (-1, 1)], epsilon=1.0, seed=4)
        b = mechanism(pts, ["x", "y"], bounds=[(0, 1), (-1, 1)], epsilon=1.0, seed=4)
        assert a.to_arrow().equals(b.to_arrow())


def test_spark_row_rules_and_saturated_counts_match_polars(spark):
    """One row of each kind (null, NaN, +-inf, outside, Int64 min, a fraction in an integer
    domain, an unknown category, null / negative / past-int64 counts): the rules count the same
    cells in Spark as in Polars, and without them each row is the same DomainError."""
    good = {"i": 1, "f": 1.0, "x": 0.5, "g": "a", "n": 1}
    bad = [("x", None), ("x", float("nan")), ("x", float("inf")), ("x", -5.0), ("i", -(2**63)), ("f", 2.5),
           ("g", "zz"), ("n", None), ("n", -3), ("n", 2**62), ("n", 2**62), ("n", 2**62)]
    schema = {"i": pl.Int64, "f": pl.Float64, "x": pl.Float64, "g": pl.String, "n": pl.Int64}
    frame = pl.DataFrame([good] + [{**good, c: v} for c, v in bad], schema=schema)
    attrs = [pdp.Ordinal("i", 0, 9), pdp.Ordinal("f", 0, 9), pdp.Ordinal("x", 0.0, 1.0, 0.25),
             pdp.Nominal("g", categories=["a", "b"])]
    sframe = spark.createDataFrame(frame.to_arrow())
    for rule in ("drop", "clamp"):
        want = frequency_matrix(frame, attrs, nulls="drop", on_out_of_domain=rule, count_column="n")
        got = frequency_matrix(sframe, attrs, nulls="drop", on_out_of_domain=rule, count_column="n")
        np.testing.assert_array_equal(got, want)
        assert want.max() == 2**53
    with pytest.raises(pdp.DomainError, match="'i'.*on_out_of_domain='clamp'"):
        frequency_matrix(sframe, attrs, count_column="n")


def test_spark_bounds_each_persons_rows(spark):
    """``Rows(max_per=k, id_column=...)`` truncates in Spark: at most ``k`` rows per person, a
    null identifier refused (or its rows dropped), the release's cells those of the kept rows."""
    frame = table(200).with_columns(person=pl.int_range(pl.len()) % 7)
    unit = pdp.Rows(max_per=3, id_column="person")
    sdf = spark.createDataFrame(frame.to_arrow())
    release = pdp.basic(sdf, ATTRS[:2], epsilon=1e9, seed=2, privacy_unit=unit)
    assert release.counts.sum() == pytest.approx(21, abs=1e-3)  # 7 people, 3 rows each
    assert release.params["privacy_unit"] == {"max_per": 3, "id_column": "person"}
    nulls = spark.createDataFrame(frame.with_columns(person=pl.when(pl.col("person") == 0).then(None)
                                                     .otherwise(pl.col("person"))).to_arrow())
    with pytest.raises(pdp.DomainError, match="'person' has .* null"):
        pdp.basic(nulls, ATTRS[:2], epsilon=1.0, privacy_unit=unit)
    kept = pdp.basic(nulls, ATTRS[:2], epsilon=1e9, seed=2, privacy_unit=unit, nulls="drop")
    assert kept.counts.sum() == pytest.approx(18, abs=1e-3)


def test_a_spark_dataframe_without_to_arrow_is_refused_with_what_to_do():
    """pyspark before 4.0 has no ``DataFrame.toArrow``: a ParameterError naming the version."""
    from polars_dp.counting.engines.spark import count_spark
    from polars_dp.counting.spec import CountSpec

    class OldSparkFrame:  # what a pyspark 3 DataFrame lacks
        pass

    spec = CountSpec.make(ATTRS, on_out_of_domain="raise", nulls="raise", count_column=None, integer=False)
    with pytest.raises(pdp.ParameterError, match="pyspark >= 4.0"):
        count_spark(OldSparkFrame(), spec, dense=True)
