"""The same rows as every input kind, the attributes they are counted on, a brute-force oracle
(tests only; the engine and Spark tests share them)."""

from __future__ import annotations

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa

import polars_dp as pdp


class CStream:
    """Only the Arrow PyCapsule stream interface (no pyarrow or Polars type)."""

    def __init__(self, table: pa.Table, chunk: int = 300):
        self.table, self.chunk = table, chunk

    def __arrow_c_stream__(self, requested_schema=None):
        return self.table.to_reader(max_chunksize=self.chunk).__arrow_c_stream__(requested_schema)


def inputs(frame: pl.DataFrame) -> dict:
    """The same rows as every non-Spark input kind."""
    table = frame.to_arrow()
    return {
        "polars": frame,
        "lazy": frame.lazy(),
        "arrow_table": table,
        "arrow_reader": table.to_reader(max_chunksize=300),
        "c_stream": CStream(table),
        "duckdb": duckdb.connect().from_arrow(table),
    }


KINDS = list(inputs(pl.DataFrame({"a": [1]})))

HIER = pdp.Hierarchy.from_dict({"x": ["p", "q'", "r"], "y": {"y1": ["s"], "y2": ["t", "u\\v"]}})
ATTRS = [pdp.Ordinal("age", 0, 49, 7), pdp.Nominal("job", HIER), pdp.Ordinal("score", -1.0, 1.0, 0.25),
         pdp.Nominal("k", categories=[7, 3, 5]), pdp.Nominal("c", categories=list(range(10, 20))),
         pdp.Ordinal("x", 0, 10, width=5)]


def table(n: int = 2000, seed: int = 3) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    score = rng.uniform(-1, 1, n)
    score[:7] = [-1.0, 1.0, 0.25, 0.75, -0.5, 0.3, 0.1]  # bin boundaries, decimal rounding
    return pl.DataFrame({"age": rng.integers(0, 50, n), "job": rng.choice(list(HIER.leaves), n),
                         "score": score, "k": rng.choice([7, 3, 5], n).astype(np.int32),
                         "c": rng.integers(10, 20, n),
                         "x": rng.integers(0, 11, n).astype(np.float64)})  # whole numbers as floats


def brute_force(frame: pl.DataFrame, attrs) -> np.ndarray:
    """Row-by-row oracle with plain Python arithmetic."""
    out = np.zeros([a.n_cells for a in attrs])
    pos = [{v: i for i, v in enumerate(a.cell_labels())} if a.kind == "nominal" else None for a in attrs]
    for row in frame.select(a.column for a in attrs).iter_rows():
        idx = []
        for a, p, v in zip(attrs, pos, row, strict=True):
            idx.append(p[v] if p is not None else int(np.floor((v - a.lo) / a.width + 1e-9)))
        out[tuple(idx)] += 1
    return out


def points(n: int = 3000, seed: int = 5) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.normal(0.3, 0.05, n // 2), rng.uniform(0, 1, n - n // 2)]).clip(0, 1)
    y = np.concatenate([rng.normal(0.6, 0.1, n // 2), rng.uniform(-1, 1, n - n // 2)]).clip(-1, 1)
    x[:3], y[:3] = [0.0, 1.0, 0.5], [-1.0, 1.0, 0.0]
    return pl.DataFrame({"x": x, "y": y})
