"""GeoParquet 1.1 leaves of a 2-D spatial release: a WKB polygon and a ``bbox`` covering per leaf.

``SpatialRelease.write_parquet(path, geometry=True, crs=...)`` writes the usual leaf table
(``<x>_lo``, ``<x>_hi``, ``<y>_lo``, ``<y>_hi``, ``depth``, ``count``, ...) plus

* ``geometry``: each leaf box as a WKB ``Polygon`` (little endian, one exterior ring of 5
  points, counterclockwise), built for all leaves at once with numpy (93 bytes per leaf);
* ``bbox``: the GeoParquet 1.1 covering column, a struct of ``xmin, ymin, xmax, ymax``;
* ``geo`` file metadata (GeoParquet 1.1.0: primary column, encoding, geometry types, CRS,
  orientation, the overall bbox and the covering).

The first box column is x (easting / longitude), the second y (northing / latitude): the
GeoParquet axis order, whatever the CRS's own axis order.  Accepted ``crs`` values
(:data:`ACCEPTED_CRS`): ``None`` (the default: ``"crs": null``, the CRS is unknown),
``"OGC:CRS84"`` or ``"EPSG:4326"`` (WGS 84 longitude/latitude; the release bounds must then
lie within [-180, 180] x [-90, 90]), or a PROJJSON object (a dict, e.g.
``pyproj.CRS("EPSG:3857").to_json_dict()``), stored as given.  The geometry is derived from
the box columns; ``read_release`` verifies the release from those columns and the checksum,
and ignores the geometry columns.  A release with d != 2 has no polygon per leaf and refuses
``geometry=True`` (its per-dimension ``_lo`` / ``_hi`` bounds are the geometry).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from polars_dp.domains.box import Box
from polars_dp.errors import ParameterError

GEOPARQUET_VERSION = "1.1.0"
GEOMETRY_COLUMN = "geometry"
BBOX_COLUMN = "bbox"

#: How ``crs=`` may be given (named in the error for anything else).
ACCEPTED_CRS = ("None (unknown CRS)", "'OGC:CRS84'", "'EPSG:4326'", "a PROJJSON dict")

#: WKB of a polygon with one ring of 5 points: byte order, type, rings, points, 10 doubles.
_WKB_POLYGON = np.dtype([("order", "u1"), ("type", "<u4"), ("rings", "<u4"), ("points", "<u4"),
                         ("xy", "<f8", (10,))])


def _wgs84(name: str, lon_first: bool, authority: str, code: int | str) -> dict[str, Any]:
    """PROJJSON of the WGS 84 geographic CRS (degrees) with its authority id."""
    lon = {"name": "Geodetic longitude", "abbreviation": "Lon", "direction": "east", "unit": "degree"}
    lat = {"name": "Geodetic latitude", "abbreviation": "Lat", "direction": "north", "unit": "degree"}
    return {
        "$schema": "https://proj.org/schemas/v0.5/projjson.schema.json",
        "type": "GeographicCRS",
        "name": name,
        "datum": {"type": "GeodeticReferenceFrame", "name": "World Geodetic System 1984",
                  "ellipsoid": {"name": "WGS 84", "semi_major_axis": 6378137,
                                "inverse_flattening": 298.257223563}},
        "coordinate_system": {"subtype": "ellipsoidal", "axis": [lon, lat] if lon_first else [lat, lon]},
        "id": {"authority": authority, "code": code},
    }


_NAMED_CRS = {"OGC:CRS84": _wgs84("WGS 84 (CRS84)", True, "OGC", "CRS84"),
              "EPSG:4326": _wgs84("WGS 84", False, "EPSG", 4326)}


def geo_crs(crs: object, box: Box) -> dict[str, Any] | None:
    """The PROJJSON (or ``None``) stored for ``crs``; see :data:`ACCEPTED_CRS`."""
    if crs is None:
        return None
    if isinstance(crs, str):
        projjson = _NAMED_CRS.get(crs.strip().upper())
        if projjson is None:
            raise ParameterError(f"unknown crs {crs!r}; give one of {', '.join(ACCEPTED_CRS)}")
        if np.any(box.lo < [-180, -90]) or np.any(box.hi > [180, 90]):
            raise ParameterError(
                f"crs {crs!r} is longitude/latitude but the release bounds are "
                f"{list(zip(box.lo.tolist(), box.hi.tolist(), strict=True))}; columns {box.columns} "
                "must be (longitude, latitude) within [-180, 180] x [-90, 90]")
        return dict(projjson)
    if isinstance(crs, Mapping):
        if not (isinstance(crs.get("type"), str) and crs["type"].endswith("CRS")):
            raise ParameterError("a PROJJSON crs must be a dict with a 'type' such as 'GeographicCRS' or "
                                 f"'ProjectedCRS'; got keys {sorted(crs)[:8]}")
        try:
            return json.loads(json.dumps(dict(crs)))
        except (TypeError, ValueError) as exc:
            raise ParameterError(f"the PROJJSON crs is not JSON: {exc}") from None
    raise ParameterError(f"crs must be one of {', '.join(ACCEPTED_CRS)}; got {type(crs).__name__}")


def wkb_polygons(xmin: np.ndarray, ymin: np.ndarray, xmax: np.ndarray, ymax: np.ndarray) -> pa.Array:
    """WKB polygons of axis-aligned boxes (counterclockwise ring), as one binary array."""
    n = len(xmin)
    wkb = np.zeros(n, dtype=_WKB_POLYGON)
    wkb["order"], wkb["type"], wkb["rings"], wkb["points"] = 1, 3, 1, 5
    xs = np.stack([xmin, xmax, xmax, xmin, xmin], axis=1)
    ys = np.stack([ymin, ymin, ymax, ymax, ymin], axis=1)
    wkb["xy"][:, 0::2], wkb["xy"][:, 1::2] = xs, ys
    offsets = np.arange(n + 1, dtype=np.int32) * np.int32(_WKB_POLYGON.itemsize)  # per batch: < 2^31
    buffers = [None, pa.py_buffer(offsets), pa.py_buffer(wkb.view(np.uint8))]
    return pa.Array.from_buffers(pa.binary(), n, buffers)


def geo_metadata(box: Box, crs: dict[str, Any] | None) -> dict[str, Any]:
    """The GeoParquet 1.1 ``geo`` metadata of the leaf polygons of ``box``."""
    covering = {k: [BBOX_COLUMN, k] for k in ("xmin", "ymin", "xmax", "ymax")}
    return {"version": GEOPARQUET_VERSION, "primary_column": GEOMETRY_COLUMN,
            "columns": {GEOMETRY_COLUMN: {
                "encoding": "WKB", "geometry_types": ["Polygon"], "crs": crs, "edges": "planar",
                "orientation": "counterclockwise",
                "bbox": [float(box.lo[0]), float(box.lo[1]), float(box.hi[0]), float(box.hi[1])],
                "covering": {"bbox": covering}}}}


def with_geometry(reader: pa.RecordBatchReader, box: Box, crs: object) -> pa.RecordBatchReader:
    """``reader``'s leaf batches with the ``geometry`` and ``bbox`` columns and ``geo`` metadata.

    Raises :class:`ParameterError` (before anything is written) for d != 2 or a bad ``crs``."""
    if box.d != 2:
        raise ParameterError(
            f"geometry=True needs a 2-D spatial release; this one has d={box.d} columns {box.columns}: "
            "its leaves are written as per-dimension <col>_lo / <col>_hi bounds only")
    projjson = geo_crs(crs, box)
    x, y = box.columns
    bbox_type = pa.struct([(k, pa.float64()) for k in ("xmin", "ymin", "xmax", "ymax")])
    meta = dict(reader.schema.metadata or {})
    meta[b"geo"] = json.dumps(geo_metadata(box, projjson)).encode()
    fields = [*reader.schema, pa.field(GEOMETRY_COLUMN, pa.binary()), pa.field(BBOX_COLUMN, bbox_type)]
    schema = pa.schema(fields, metadata=meta)

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in reader:
            bounds = [batch.column(name).to_numpy().astype(np.float64)
                      for name in (f"{x}_lo", f"{y}_lo", f"{x}_hi", f"{y}_hi")]
            bbox = pa.StructArray.from_arrays([pa.array(b) for b in bounds], fields=list(bbox_type))
            yield pa.RecordBatch.from_arrays([*batch.columns, wkb_polygons(*bounds), bbox], schema=schema)

    return pa.RecordBatchReader.from_batches(schema, batches())


__all__ = ["ACCEPTED_CRS", "GEOPARQUET_VERSION", "geo_crs", "geo_metadata", "wkb_polygons", "with_geometry"]
