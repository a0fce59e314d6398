"""A release is an Arrow stream (PyCapsule interface): every Arrow consumer takes the object itself.

Each consumer's table must equal ``to_arrow()`` (metadata included where the consumer keeps it),
the stream must be re-callable, and a grid is streamed batch by batch from its counts.
"""

from __future__ import annotations

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pytest

import polars_dp as pdp
from polars_dp.releases import base as release_base


def grid_release():
    rng = np.random.default_rng(0)
    n = 3_000
    df = pl.DataFrame({"age": rng.integers(0, 100, n), "city": rng.choice(["a", "b", "c"], n)})
    hierarchy = pdp.Hierarchy.from_dict({"north": ["a", "b"], "south": ["c"]}, level_names=["region"])
    return df.dp.privelet([pdp.Ordinal("age", 0, 99), pdp.Nominal("city", hierarchy)],
                          epsilon=1.0, seed=3)


def spatial_release():
    rng = np.random.default_rng(1)
    df = pl.DataFrame({"x": rng.uniform(0, 1, 4_000), "y": rng.normal(0.5, 0.1, 4_000).clip(0, 1)})
    return df.dp.privtree(["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=1.0, seed=2)


def sequence_release():
    rng = np.random.default_rng(2)
    seqs = [rng.choice(list("abc"), rng.integers(1, 6)).tolist() for _ in range(400)]
    return pl.DataFrame({"s": seqs}).dp.privtree_sequences("s", alphabet="abc", max_length=5,
                                                           epsilon=2.0, seed=1)


RELEASES = {"grid": grid_release, "spatial": spatial_release, "sequence": sequence_release}


@pytest.fixture(params=sorted(RELEASES), scope="module")
def release(request):
    return RELEASES[request.param]()


@pytest.fixture
def small_batches(monkeypatch):
    """Stream in batches of 30 rows, so every release spans several batches."""
    rows = 30
    original = release_base.Release.to_batches
    monkeypatch.setattr(release_base.Release, "to_batches", lambda self, rows_=rows: original(self, rows_))
    return rows


def test_pa_table_equals_to_arrow_with_metadata(release, small_batches):
    expected = release.to_arrow()
    got = pa.table(release)
    assert got.num_rows == expected.num_rows > small_batches
    assert got.equals(expected, check_metadata=True)
    assert got.schema.metadata == expected.schema.metadata
    assert pdp.read_release(got) == release  # the streamed table verifies as a release


def test_stream_is_recallable_and_batched(release, small_batches):
    first = pa.RecordBatchReader.from_stream(release)
    batches = list(first)
    assert all(b.num_rows <= small_batches for b in batches)
    assert sum(b.num_rows for b in batches) == release.to_arrow().num_rows
    again = pa.RecordBatchReader.from_stream(release).read_all()  # a fresh stream
    assert again.equals(release.to_arrow(), check_metadata=True)


def test_schema_capsule(release):
    schema = pa.schema(release)
    assert schema == release.to_arrow().schema
    assert schema.metadata == release.to_arrow().schema.metadata


def test_polars_dataframe_of_a_release(release, small_batches):
    assert pl.DataFrame(release).equals(release.to_polars())
    assert pl.from_arrow(pa.table(release)).equals(release.to_polars())


def plain(frame: pl.DataFrame) -> pl.DataFrame:
    """Categorical labels as strings (DuckDB reads Arrow dictionaries as VARCHAR)."""
    return frame.with_columns(pl.col(pl.Categorical).cast(pl.String))


def test_duckdb_replacement_scan_and_register(release, small_batches):
    expected = float(np.sum(release.to_arrow().column("count").to_numpy()))
    rel = release  # DuckDB finds the Python variable by name  # noqa: F841
    total, rows = duckdb.sql("SELECT sum(count), count(*) FROM rel").fetchall()[0]
    assert total == pytest.approx(expected, rel=1e-12, abs=1e-9)
    assert rows == release.to_arrow().num_rows
    con = duckdb.connect()
    con.register("r", release)
    for _ in range(2):  # DuckDB opens the stream on every query
        assert con.sql("SELECT * FROM r").pl().equals(plain(release.to_polars()), null_equal=True)


def test_pandas_from_arrow(release):
    pd = pytest.importorskip("pandas")
    if not hasattr(pd.DataFrame, "from_arrow"):
        pytest.skip("pandas < 3.0 has no DataFrame.from_arrow")
    got = pd.DataFrame.from_arrow(release)
    expected = release.to_arrow().to_pandas()
    pd.testing.assert_frame_equal(got, expected)


def test_grid_batches_are_built_from_the_counts(small_batches):
    """Each batch of a grid is its own slice of cells (a mutant that streamed one whole table
    would give a single batch)."""
    release = grid_release()
    reader = release.to_batches(small_batches)
    sizes = [b.num_rows for b in reader]
    starts = range(0, release.n_cells, small_batches)
    assert sizes == [min(small_batches, release.n_cells - s) for s in starts]


def test_bad_batch_size():
    with pytest.raises(pdp.ParameterError, match="positive integer"):
        grid_release().to_batches(0)


def test_grid_stream_is_lazy(monkeypatch):
    """Reading the first batch builds that batch only (never the whole table), and the count
    column is a view of the release's counts, not a copy."""
    release = grid_release()
    built = []
    original = type(release)._table

    def recording(self, start=0, stop=None):
        built.append((start, stop))
        return original(self, start, stop)

    monkeypatch.setattr(type(release), "_table", recording)
    reader = release.to_batches(100)
    first = reader.read_next_batch()
    assert built == [(0, 100)]
    assert np.shares_memory(first.column("count").to_numpy(), release.counts)
    reader.read_next_batch()
    assert built == [(0, 100), (100, 200)]
