"""TreeRelease: a partition of a public box into leaf boxes with noisy counts.

The output of PrivTree and of the grid baselines (UG, AG).  One row per leaf: ``<col>_lo``,
``<col>_hi`` for each column, ``depth`` and the noisy ``count`` (plus, for a PrivTree, the
leaf's first Morton code ``morton``, which encodes the tree).  Range counts use the
uniformity assumption (:mod:`polars_dp.spatial_queries`).  Everything here is
post-processing of the mechanism's output; the release holds no reference to the input.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from polars_dp.errors import QueryError, ReleaseFormatError
from polars_dp.release import Release, read_metadata, register_release_type
from polars_dp.spatial import Box, MortonLayout, as_box
from polars_dp.spatial_queries import (
    grid_prefix_sums,
    grid_sums,
    grid_weight_squares,
    morton_tree_sums,
    two_level_grid_sums,
)

LAYOUTS = ("morton", "grid", "two_level_grid")


@register_release_type
class TreeRelease(Release):
    """Leaves of a spatial decomposition with noisy counts.

    ``layout`` says how the leaves tile the box: ``{"kind": "morton", "bits": k,
    "split_bits": s}`` (a PrivTree; ``codes`` holds each leaf's first Morton code),
    ``{"kind": "grid", "m": m}`` (``m^d`` cells in C order) or ``{"kind": "two_level_grid",
    "m1": m1, "m2": [...]}`` (first-level cells in C order, each cut into its own ``m2^d``
    cells, leaves grouped by first-level cell).
    """

    release_type = "tree"

    def __init__(self, box: Box, lo: np.ndarray, hi: np.ndarray, depth: np.ndarray, count: np.ndarray,
                 *, layout: Mapping[str, Any], mechanism: str, epsilon: float, neighbours: str,
                 params: Mapping[str, Any] | None = None, codes: np.ndarray | None = None,
                 created: str | None = None, library_version: str | None = None, noise: str = "float",
                 seeded: bool = False):
        if layout.get("kind") not in LAYOUTS:
            raise ReleaseFormatError(f"unknown tree layout {layout.get('kind')!r}; known: {LAYOUTS}")
        if layout["kind"] == "morton" and codes is None:
            raise ReleaseFormatError("a Morton-layout tree release needs the leaves' Morton codes")
        self.box = box
        self.lo = np.asarray(lo, dtype=np.float64).reshape(-1, box.d)
        self.hi = np.asarray(hi, dtype=np.float64).reshape(-1, box.d)
        self.depth = np.asarray(depth, dtype=np.int32)
        self.count = np.asarray(count, dtype=np.float64)
        self.codes = None if codes is None else np.asarray(codes, dtype=np.int64)
        self.layout = dict(layout)
        self._init_common(mechanism=mechanism, epsilon=epsilon, neighbours=neighbours, params=params,
                          created=created, library_version=library_version, noise=noise, seeded=seeded)
        self._grid_cache: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    # ------------------------------------------------------------------ basics
    @property
    def columns(self) -> list[str]:
        return list(self.box.columns)

    @property
    def n_leaves(self) -> int:
        return int(self.count.size)

    @property
    def leaves(self) -> pl.DataFrame:
        """One row per leaf: ``<col>_lo``, ``<col>_hi`` per column, ``depth``, ``count``."""
        return pl.from_arrow(self._table().drop_columns(["morton"] if self.codes is not None else []))

    def metadata(self) -> dict[str, Any]:
        meta = super().metadata()
        meta.update({k: v for k, v in self.params.items() if k not in meta})
        meta.update({"columns": list(self.box.columns), "bounds": self.box.to_json(),
                     "layout": self.layout, "n_leaves": self.n_leaves})
        return meta

    # ------------------------------------------------------------------ Arrow
    def _table(self) -> pa.Table:
        cols: dict[str, Any] = {}
        for j, c in enumerate(self.box.columns):
            cols[f"{c}_lo"] = pa.array(self.lo[:, j])
            cols[f"{c}_hi"] = pa.array(self.hi[:, j])
        cols["depth"] = pa.array(self.depth)
        cols["count"] = pa.array(self.count)
        if self.codes is not None:
            cols["morton"] = pa.array(self.codes)
        return pa.table(cols)

    @classmethod
    def from_arrow(cls, table: pa.Table) -> TreeRelease:
        meta = read_metadata(table)
        try:
            box = as_box(json.loads(meta["columns"]), json.loads(meta["bounds"]))
            layout = json.loads(meta["layout"])
            common = cls._common_from_metadata(meta)
            lo = np.column_stack([table.column(f"{c}_lo").to_numpy() for c in box.columns])
            hi = np.column_stack([table.column(f"{c}_hi").to_numpy() for c in box.columns])
            depth = table.column("depth").to_numpy()
            count = table.column("count").to_numpy()
            codes = table.column("morton").to_numpy() if "morton" in table.column_names else None
        except (KeyError, ValueError, TypeError) as exc:
            raise ReleaseFormatError(f"tree release table is incomplete or corrupt: {exc}") from None
        return cls(box, lo, hi, depth, count, layout=layout, codes=codes, **common)

    # ------------------------------------------------------------------ queries
    @staticmethod
    def _as_frame(boxes: Any) -> pl.DataFrame:
        if isinstance(boxes, pl.LazyFrame):
            return boxes.collect()
        return boxes if isinstance(boxes, pl.DataFrame) else pl.DataFrame(boxes)

    def _query_arrays(self, boxes: Any, passthrough: Iterable[str] = ()) -> tuple[np.ndarray, np.ndarray]:
        frame = self._as_frame(boxes)
        known = {f"{c}_{s}" for c in self.box.columns for s in ("lo", "hi")} | set(passthrough)
        unknown = [c for c in frame.columns if c not in known]
        if unknown:
            raise QueryError(f"query column {unknown[0]!r} is not one of {sorted(known)}")
        n = frame.height
        q_lo = np.empty((n, self.box.d))
        q_hi = np.empty_like(q_lo)
        for j, c in enumerate(self.box.columns):
            for arr, side, default in ((q_lo, "lo", self.box.lo[j]), (q_hi, "hi", self.box.hi[j])):
                name = f"{c}_{side}"
                if name in frame.columns:
                    s = frame[name]
                    if not (s.dtype.is_numeric() or s.dtype == pl.Null):
                        raise QueryError(f"query column {name!r} must hold numbers, got {s.dtype}")
                    arr[:, j] = s.cast(pl.Float64).fill_null(default).to_numpy()  # null: whole range
                else:
                    arr[:, j] = default
        if np.isnan(q_lo).any() or np.isnan(q_hi).any():
            raise QueryError("query bounds contain NaN")
        bad = np.nonzero(np.any(q_lo > q_hi, axis=1))[0]
        if bad.size:
            raise QueryError(f"query {int(bad[0])} has lo > hi; every range must be (lo, hi) with lo <= hi")
        return q_lo, q_hi

    def range_counts(self, boxes: Any, std: bool = False, *,
                     passthrough: Iterable[str] = ("id",)) -> pl.DataFrame:
        """Noisy counts of many boxes at once: ``boxes`` with a ``count`` column added.

        ``boxes``: a Polars frame (or anything ``pl.DataFrame`` accepts) with ``<col>_lo`` /
        ``<col>_hi`` columns (closed ranges; a missing column or a null means the whole
        declared range, as in SQL) and optionally the ``passthrough`` columns (e.g. an
        ``id``), kept as they are.  Each leaf contributes its count times the fraction of
        its volume inside the box (the same shape of answer as
        :meth:`GridRelease.range_counts`).

        ``std=True`` adds each answer's noise standard deviation ``sqrt(2 b^2 sum_leaves w^2)``
        (``b`` the leaves' Laplace scale, ``w`` each leaf's weight in the answer) for releases
        whose leaf counts carry independent noise (PrivTree, UG).  It is the noise of the leaf
        counts only: the uniformity assumption inside a leaf adds a bias it cannot see.
        """
        frame = self._as_frame(boxes)
        if not std:
            return frame.with_columns(pl.Series("count", self.range_sums(frame, passthrough=passthrough)))
        scale = self._leaf_noise_scale()
        q_lo, q_hi = self._query_arrays(frame, passthrough)
        if self.layout["kind"] == "morton":
            layout = MortonLayout(self.box.d, int(self.layout["bits"]), int(self.layout["split_bits"]))
            counts, squares = morton_tree_sums(self.codes, self.count, layout, self.box, q_lo, q_hi,
                                               weight_squares=True)
        else:
            counts = self.range_sums(frame, passthrough=passthrough)
            squares = grid_weight_squares(int(self.layout["m"]), self.box, q_lo, q_hi)
        return frame.with_columns(pl.Series("count", counts),
                                  pl.Series("std", np.sqrt(2.0 * scale**2 * squares)))

    def _leaf_noise_scale(self) -> float:
        """Laplace scale of every leaf count, for mechanisms whose leaf noise is i.i.d."""
        if self.mechanism == "privtree":
            return float(self.params["leaf_noise_scale"])
        if self.mechanism == "uniform_grid":
            return float(self.params["noise_scale"])
        raise QueryError(
            f"std is not available for {self.mechanism!r} releases: their leaf counts are not "
            "independent (constrained inference or a wavelet); it is available for privtree and "
            "uniform_grid"
        )

    def range_std(self, **ranges: tuple[float, float]) -> float:
        """Noise standard deviation of :meth:`range_count` (see :meth:`range_counts`)."""
        query = self._single_query(ranges)
        if not query:
            query = {f"{self.box.columns[0]}_lo": [float(self.box.lo[0])]}
        return float(self.range_counts(query, std=True)["std"][0])

    def range_sums(self, boxes: Any, *, passthrough: Iterable[str] = ("id",)) -> np.ndarray:
        """The answers of :meth:`range_counts` as a float64 numpy array (one per box)."""
        q_lo, q_hi = self._query_arrays(boxes, passthrough)
        kind = self.layout["kind"]
        if kind == "morton":
            layout = MortonLayout(self.box.d, int(self.layout["bits"]), int(self.layout["split_bits"]))
            return morton_tree_sums(self.codes, self.count, layout, self.box, q_lo, q_hi)
        prefix, offsets, m2 = self._grid_structure()
        if kind == "grid":
            n = q_lo.shape[0]
            zeros = np.zeros(n, dtype=np.int64)
            return grid_sums(prefix, zeros, m2[zeros], np.broadcast_to(self.box.lo, q_lo.shape),
                             np.broadcast_to(self.box.hi, q_lo.shape), q_lo, q_hi)
        return two_level_grid_sums(prefix, offsets, m2, int(self.layout["m1"]), self.box, q_lo, q_hi)

    def _grid_structure(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Flattened prefix sums of every (sub-)grid, their offsets, and their sides."""
        if self._grid_cache is None:
            d = self.box.d
            if self.layout["kind"] == "grid":
                m = int(self.layout["m"])
                prefix = grid_prefix_sums(self.count.reshape((1,) + (m,) * d)).ravel()
                self._grid_cache = (prefix, np.zeros(1, dtype=np.int64), np.array([m]))
            else:
                m2 = np.asarray(self.layout["m2"], dtype=np.int64)
                leaf_start = np.concatenate([[0], np.cumsum(m2**d)])[:-1]
                sizes = (m2 + 1) ** d
                offsets = np.concatenate([[0], np.cumsum(sizes)])[:-1]
                prefix = np.empty(int(sizes.sum()))
                for side in np.unique(m2):  # one pass per distinct sub-grid side
                    cells = np.nonzero(m2 == side)[0]
                    idx = leaf_start[cells][:, None] + np.arange(side**d)
                    p = grid_prefix_sums(self.count[idx].reshape((cells.size,) + (int(side),) * d))
                    prefix[(offsets[cells][:, None] + np.arange((side + 1) ** d)).ravel()] = p.ravel()
                self._grid_cache = (prefix, offsets, m2)
        return self._grid_cache

    def range_count(self, **ranges: tuple[float, float]) -> float:
        """Noisy count of points with ``lo <= col <= hi`` for each ``col=(lo, hi)`` given
        (an absent column means its whole declared range)."""
        query = self._single_query(ranges)
        if not query:
            return float(self.count.sum())
        return float(self.range_sums(query)[0])

    def _single_query(self, ranges: Mapping[str, Any]) -> dict[str, list[float]]:
        query: dict[str, list[float]] = {}
        for col, pred in ranges.items():
            if col not in self.box.columns:
                raise QueryError(f"{col!r} is not a column of this release; columns: {self.columns}")
            if not (isinstance(pred, (tuple, list)) and len(pred) == 2):
                raise QueryError(f"{col}: give a (lo, hi) pair, got {pred!r}")
            query[f"{col}_lo"], query[f"{col}_hi"] = [float(pred[0])], [float(pred[1])]
        return query

    def _payload_equal(self, other: Release) -> bool:
        return isinstance(other, TreeRelease) and self._table().equals(other._table())

    def __repr__(self) -> str:
        return (f"TreeRelease(mechanism={self.mechanism!r}, epsilon={self.epsilon}, "
                f"neighbours={self.neighbours!r}, noise={self.noise!r}{self._seeded_repr()}, "
                f"columns={self.columns}, leaves={self.n_leaves:,})")


__all__ = ["TreeRelease"]
