"""GeoParquet 1.1 leaves of 2-D spatial releases: WKB polygons, the bbox covering, ``geo`` metadata."""

from __future__ import annotations

import json

import duckdb
import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest

import polars_dp as pdp
from polars_dp.releases import io as release_io
from polars_dp.releases.geoparquet import ACCEPTED_CRS, wkb_polygons

# The essential constraints of the GeoParquet 1.1.0 ``geo`` metadata (format-specs/schema.json of
# the GeoParquet specification), restated; a PROJJSON crs is checked for being an object with a
# CRS ``type`` (the full PROJJSON schema is a remote reference).
GEO_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "required": ["version", "primary_column", "columns"],
    "properties": {
        "version": {"const": "1.1.0"},
        "primary_column": {"type": "string", "minLength": 1},
        "columns": {
            "type": "object", "minProperties": 1,
            "additionalProperties": {
                "type": "object",
                "required": ["encoding", "geometry_types"],
                "properties": {
                    "encoding": {"const": "WKB"},
                    "geometry_types": {"type": "array", "uniqueItems": True, "items": {
                        "type": "string",
                        "pattern": "^(GeometryCollection|(Multi)?(Point|LineString|Polygon))( Z)?$"}},
                    "crs": {"oneOf": [{"type": "null"},
                                      {"type": "object", "required": ["type"],
                                       "properties": {"type": {"type": "string", "pattern": "CRS$"}}}]},
                    "edges": {"enum": ["planar", "spherical"]},
                    "orientation": {"const": "counterclockwise"},
                    "bbox": {"type": "array", "items": {"type": "number"},
                             "oneOf": [{"minItems": 4, "maxItems": 4}, {"minItems": 6, "maxItems": 6}]},
                    "epoch": {"type": "number"},
                    "covering": {"type": "object", "minProperties": 1, "properties": {"bbox": {
                        "type": "object", "required": ["xmin", "xmax", "ymin", "ymax"],
                        "properties": {k: {"type": "array", "minItems": 2, "maxItems": 2,
                                           "items": [{"type": "string"}, {"const": k}]}
                                       for k in ("xmin", "xmax", "ymin", "ymax")}}}},
                },
            },
        },
    },
}


def points(n=5_000, seed=0):
    rng = np.random.default_rng(seed)
    return pl.DataFrame({"lon": rng.normal(2, 3, n).clip(-10, 10), "lat": rng.uniform(40, 60, n)})


@pytest.fixture(scope="module")
def tree():
    return points().dp.privtree(["lon", "lat"], bounds=[(-10, 10), (40, 60)], epsilon=1.0, seed=1)


def geo_of(path):
    return json.loads(pq.read_schema(path).metadata[b"geo"])


def decode_wkb(column) -> np.ndarray:
    """(leaves, 5, 2) ring coordinates, checking the WKB header of every polygon."""
    data = np.concatenate([np.frombuffer(v, dtype=np.uint8) for v in column.to_pylist()]).reshape(-1, 93)
    assert np.all(data[:, 0] == 1)  # little endian
    header = data[:, 1:13].copy().view("<u4")
    assert np.all(header == [3, 1, 5])  # Polygon, one ring, five points
    return data[:, 13:].copy().view("<f8").reshape(-1, 5, 2)


def test_polygons_are_the_leaf_boxes_counterclockwise(tmp_path, tree, monkeypatch):
    monkeypatch.setattr(release_io, "ROW_GROUP_ROWS", 50)  # several batches and row groups
    path = tree.write_parquet(tmp_path / "leaves.parquet", geometry=True)
    assert pq.ParquetFile(path).metadata.num_row_groups == -(-tree.n_leaves // 50)
    table = pq.read_table(path)
    ring = decode_wkb(table.column("geometry"))
    leaves = tree.leaves
    lo = np.column_stack([leaves["lon_lo"], leaves["lat_lo"]])
    hi = np.column_stack([leaves["lon_hi"], leaves["lat_hi"]])
    np.testing.assert_array_equal(ring.min(axis=1), lo)
    np.testing.assert_array_equal(ring.max(axis=1), hi)
    np.testing.assert_array_equal(ring[:, 0], ring[:, 4])  # closed
    x, y = ring[..., 0], ring[..., 1]
    signed = 0.5 * np.sum(x[:, :-1] * y[:, 1:] - x[:, 1:] * y[:, :-1], axis=1)
    np.testing.assert_allclose(signed, np.prod(hi - lo, axis=1))  # > 0: counterclockwise, full box
    bbox = table.column("bbox").combine_chunks()
    for key, want in (("xmin", lo[:, 0]), ("ymin", lo[:, 1]), ("xmax", hi[:, 0]), ("ymax", hi[:, 1])):
        np.testing.assert_array_equal(bbox.field(key).to_numpy(), want)


def test_geo_metadata_follows_geoparquet_1_1(tmp_path, tree):
    path = tree.write_parquet(tmp_path / "leaves.parquet", geometry=True, crs="OGC:CRS84")
    geo = geo_of(path)
    column = geo["columns"][geo["primary_column"]]
    assert geo["version"] == "1.1.0" and column["encoding"] == "WKB"
    assert column["geometry_types"] == ["Polygon"] and column["bbox"] == [-10.0, 40.0, 10.0, 60.0]
    assert column["covering"]["bbox"]["xmin"] == ["bbox", "xmin"]
    assert column["crs"]["id"] == {"authority": "OGC", "code": "CRS84"}
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(geo, GEO_SCHEMA)
    broken = json.loads(json.dumps(geo))
    broken["columns"]["geometry"]["covering"]["bbox"]["xmin"] = ["bbox", "ymin"]
    with pytest.raises(jsonschema.ValidationError):  # the schema test itself can fail
        jsonschema.validate(broken, GEO_SCHEMA)


def test_crs_forms(tmp_path, tree):
    assert geo_of(tree.write_parquet(tmp_path / "a.parquet", geometry=True))["columns"]["geometry"]["crs"] \
        is None
    crs = geo_of(tree.write_parquet(tmp_path / "b.parquet", geometry=True, crs="epsg:4326"))
    assert crs["columns"]["geometry"]["crs"]["id"] == {"authority": "EPSG", "code": 4326}
    projjson = {"type": "ProjectedCRS", "name": "my grid", "id": {"authority": "EPSG", "code": 3857}}
    got = geo_of(tree.write_parquet(tmp_path / "c.parquet", geometry=True, crs=projjson))
    assert got["columns"]["geometry"]["crs"] == projjson


@pytest.mark.parametrize("crs", ["EPSG:3857", "WGS84", 4326])
def test_unknown_crs_names_the_accepted_forms(tmp_path, tree, crs):
    with pytest.raises(pdp.ParameterError, match="OGC:CRS84") as info:
        tree.write_parquet(tmp_path / "x.parquet", geometry=True, crs=crs)
    assert all(form in str(info.value) for form in ACCEPTED_CRS)
    assert not list(tmp_path.iterdir())  # nothing written


def test_bad_projjson_and_lonlat_bounds(tmp_path):
    far = pl.DataFrame({"x": [0.0, 500.0], "y": [0.0, 10.0]})
    release = far.dp.uniform_grid(["x", "y"], bounds=[(0, 1000), (0, 10)], epsilon=1.0, seed=0, n=2)
    with pytest.raises(pdp.ParameterError, match="longitude/latitude"):
        release.write_parquet(tmp_path / "x.parquet", geometry=True, crs="OGC:CRS84")
    with pytest.raises(pdp.ParameterError, match="PROJJSON"):
        release.write_parquet(tmp_path / "x.parquet", geometry=True, crs={"name": "no type"})
    with pytest.raises(pdp.ParameterError, match="geometry=True"):
        release.write_parquet(tmp_path / "x.parquet", crs="OGC:CRS84")
    assert not list(tmp_path.iterdir())


def test_geometry_only_for_two_dimensional_spatial_releases(tmp_path):
    rng = np.random.default_rng(0)
    cube = pl.DataFrame({f"c{j}": rng.uniform(0, 1, 500) for j in range(3)})
    for d in (1, 3):
        cols = [f"c{j}" for j in range(d)]
        release = cube.dp.privtree(cols, bounds=[(0, 1)] * d, epsilon=1.0, seed=0)
        with pytest.raises(pdp.ParameterError, match=f"2-D spatial release; this one has d={d}"):
            release.write_parquet(tmp_path / "x.parquet", geometry=True)
    grid = cube.dp.basic([pdp.Ordinal("c0", 0, 1, width=0.25)], epsilon=1.0, seed=0)
    seqs = pl.DataFrame({"s": [["a", "b"], ["b"]]}).dp.privtree_sequences(
        "s", alphabet="ab", max_length=3, epsilon=1.0, seed=0)
    for release in (grid, seqs):
        with pytest.raises(pdp.ParameterError, match="has no geometry"):
            release.write_parquet(tmp_path / "x.parquet", geometry=True)
    assert not list(tmp_path.iterdir())


def test_read_release_and_scan_still_verify(tmp_path, tree):
    path = tree.write_parquet(tmp_path / "leaves.parquet", geometry=True, crs="OGC:CRS84")
    assert pdp.read_release(path) == tree
    assert pdp.scan_release(path).select("count").collect()["count"].to_list() == tree.count.tolist()


def test_duckdb_reads_the_geoparquet(tmp_path, tree):
    path = tree.write_parquet(tmp_path / "leaves.parquet", geometry=True, crs="OGC:CRS84")
    con = duckdb.connect()
    n, total = con.sql(f"SELECT count(*), sum(count) FROM read_parquet('{path}')").fetchall()[0]
    assert n == tree.n_leaves and total == pytest.approx(float(tree.count.sum()))
    east = con.sql(f"SELECT sum(count) FROM read_parquet('{path}') WHERE bbox.xmin >= 0").fetchall()[0][0]
    assert east == pytest.approx(float(tree.count[tree.lo[:, 0] >= 0].sum()))
    types = dict(con.sql(f"DESCRIBE SELECT * FROM read_parquet('{path}')").fetchall()[i][:2]
                 for i in range(9))
    assert types["geometry"].upper().startswith(("GEOMETRY", "BLOB"))


def test_geopandas_reads_the_leaves(tmp_path, tree):
    gpd = pytest.importorskip("geopandas")
    path = tree.write_parquet(tmp_path / "leaves.parquet", geometry=True, crs="EPSG:4326")
    frame = gpd.read_parquet(path)
    assert frame.crs is not None and frame.crs.to_epsg() == 4326
    assert len(frame) == tree.n_leaves
    np.testing.assert_allclose(frame.geometry.bounds.to_numpy(),
                               np.column_stack([tree.lo[:, 0], tree.lo[:, 1], tree.hi[:, 0], tree.hi[:, 1]]))
    assert frame.geometry.is_valid.all() and frame.geometry.exterior.is_ccw.all()
    np.testing.assert_allclose(frame["count"].to_numpy(), tree.count)


def test_wkb_matches_shapely():
    shapely = pytest.importorskip("shapely")
    lo, hi = np.array([[0.0, 1.0], [2.5, -3.0]]), np.array([[1.0, 2.0], [4.0, 0.5]])
    wkb = wkb_polygons(lo[:, 0], lo[:, 1], hi[:, 0], hi[:, 1]).to_pylist()
    for i, blob in enumerate(wkb):
        assert shapely.from_wkb(blob).equals(shapely.box(lo[i, 0], lo[i, 1], hi[i, 0], hi[i, 1]))
