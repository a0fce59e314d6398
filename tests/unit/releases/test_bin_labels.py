"""A binned ordinal axis is labelled by its bins' ranges, ``<column>_lo`` / ``<column>_hi``, in
every table a grid release gives (Arrow, Polars, DuckDB, Parquet); an axis of single values keeps
``<column>`` (issue #38, 3: the lower value alone read as the value, ``age BETWEEN 20 AND 30``
counted ages 20-34)."""

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import polars_dp as pdp
from polars_dp.releases.metadata import read_metadata

INTEGER = pdp.Ordinal("age", 15, 94, width=5)
FLOAT = pdp.Ordinal("lat", 44.0, 46.0, width=0.5)


def frame() -> pl.DataFrame:
    rng = np.random.default_rng(11)
    return pl.DataFrame({"age": rng.integers(15, 95, 4000), "lat": rng.uniform(44.0, 46.0, 4000),
                         "year": rng.integers(2000, 2004, 4000), "sex": rng.choice(["f", "m"], 4000)})


@pytest.fixture(scope="module")
def release() -> pdp.GridRelease:
    attrs = [INTEGER, FLOAT, pdp.Ordinal("year", 2000, 2003), pdp.Nominal("sex", categories=["f", "m"])]
    return pdp.basic(frame(), attrs, epsilon=1.0, seed=4)


def test_every_table_labels_a_bin_by_its_range(release, tmp_path):
    expected = ["age_lo", "age_hi", "lat_lo", "lat_hi", "year", "sex", "count"]
    con = duckdb.connect()
    release.to_duckdb(con, "r")
    path = release.write_parquet(tmp_path / "r.parquet")
    tables = {"arrow": pa.table(release).column_names, "polars": pl.DataFrame(release).columns,
              "to_polars": release.to_polars().columns, "parquet": pq.read_schema(path).names,
              "scan": pdp.scan_release(path).collect_schema().names(),
              "duckdb": [c for c in con.sql("SELECT * FROM r").columns if c not in ("cell", "prefix")]}
    for surface, columns in tables.items():
        assert columns == expected, surface
    rows = release.to_polars().unique(["age_lo", "age_hi", "lat_lo", "lat_hi"], maintain_order=True)
    assert rows["age_lo"].unique().sort().to_list() == list(range(15, 95, 5))
    assert set(zip(rows["age_lo"], rows["age_hi"], strict=True)) == {(a, a + 4) for a in range(15, 95, 5)}
    lat = set(zip(rows["lat_lo"], rows["lat_hi"], strict=True))
    assert lat == {(44.0, 44.5), (44.5, 45.0), (45.0, 45.5), (45.5, 46.0), (46.0, 46.0)}  # last: closed


def aligned(attribute: pdp.Ordinal) -> list[tuple[float, float]]:
    """Every query range on bin boundaries (both sides aligned, lo < hi)."""
    cells = np.arange(attribute.n_cells)
    lo = np.asarray(attribute.cell_labels())
    if attribute.integer:
        hi = np.minimum(lo + attribute.width - 1, attribute.hi)
        return [(int(lo[i]), int(hi[j])) for i in cells for j in cells if i <= j]
    edges = [*lo.tolist(), attribute.hi]
    return [(a, b) for a in edges for b in edges if a < b]


@pytest.mark.parametrize("attribute", [INTEGER, FLOAT], ids=["integer", "float"])
def test_a_where_on_the_ranges_sums_the_cells_range_count_sums(attribute):
    """The labels follow the query rule: ``WHERE c_lo >= a AND c_hi <= b`` over the table is
    ``range_count(c=(a, b))`` for every aligned range (integer bins inclusive, float bins
    half-open, the last float bin closed at the domain's hi)."""
    release = pdp.basic(frame(), [attribute], epsilon=1.0, seed=2)
    con = duckdb.connect()
    release.to_duckdb(con, "r")
    c = attribute.column
    for a, b in aligned(attribute):
        got = con.execute(f"SELECT coalesce(sum(count), 0) FROM r WHERE {c}_lo >= ? AND {c}_hi <= ?",
                          [a, b]).fetchall()[0][0]
        assert got == pytest.approx(release.range_count(**{c: (a, b)}), abs=1e-9), (a, b)


def test_a_single_value_axis_keeps_its_name(release):
    table = release.to_polars()
    assert table["year"].unique().sort().to_list() == [2000, 2001, 2002, 2003]


def legacy(table: pa.Table, column: str) -> pa.Table:
    """``table`` as written before bins were labelled by their range: ``column`` holds each
    bin's lower value (the checksum covers the counts, not the label columns)."""
    lo = table.column(f"{column}_lo")
    out = table.drop_columns([f"{column}_lo", f"{column}_hi"])
    return out.add_column(0, column, lo).replace_schema_metadata(table.schema.metadata)


@pytest.mark.parametrize("shuffle", [False, True])
def test_a_table_in_the_older_layout_still_reads(release, tmp_path, shuffle):
    table = legacy(legacy(release.to_arrow(), "age"), "lat")
    if shuffle:  # read by label rather than by position
        table = table.take(np.random.default_rng(1).permutation(table.num_rows))
    path = tmp_path / "old.parquet"
    pq.write_table(table, path)
    assert read_metadata(pq.read_schema(path))["checksum"]
    for back in (pdp.read_release(path), pdp.read_release(table)):
        assert back == release
        np.testing.assert_array_equal(back.counts, release.counts)
        assert back.to_polars().columns[:4] == ["age_lo", "age_hi", "lat_lo", "lat_hi"]  # written anew


def test_a_binned_column_name_that_collides_is_refused():
    with pytest.raises(pdp.ParameterError, match="age_lo"):
        pdp.basic(pl.DataFrame({"age": [20], "age_lo": [1]}),
                  [pdp.Ordinal("age", 0, 99, width=5), pdp.Ordinal("age_lo", 0, 9)], epsilon=1.0)
