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
