"""Reading a spatial release table back: columns, layout and leaf order.

A table is restored to the release's leaf order from the leaves' geometry (never from row
order); anything else is a :class:`~polars_dp.ReleaseFormatError`.  Its parameters are checked
by re-planning (:meth:`polars_dp.releases.base.Release._replan`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from polars_dp.domains.box import Box
from polars_dp.errors import ReleaseFormatError
from polars_dp.kernels.grid import grid_boxes
from polars_dp.kernels.morton import MortonLayout

LAYOUTS = ("morton", "grid", "two_level_grid")


def float_column(table: pa.Table, name: str) -> np.ndarray:
    """Column ``name`` of a spatial release table as float64 (numbers only, else ReleaseFormatError)."""
    values = table.column(name).to_numpy()
    if not np.issubdtype(values.dtype, np.number):
        raise ReleaseFormatError(f"tree release column {name!r} has type {values.dtype}, not numbers")
    return values.astype(np.float64)


def check_layout(layout: Any) -> dict[str, Any]:
    """The decoded ``layout`` entry, if it is an object naming one of :data:`LAYOUTS`."""
    if not isinstance(layout, dict) or layout.get("kind") not in LAYOUTS:
        raise ReleaseFormatError(f"release metadata field 'layout' must be one of the layouts {LAYOUTS}, "
                                 f"got {layout!r}")
    return layout


def leaf_order(box: Box, layout: Mapping[str, Any], lo: np.ndarray, hi: np.ndarray, depth: np.ndarray,
                codes: np.ndarray | None) -> np.ndarray:
    """Permutation putting the rows in the release's leaf order, after checking that the
    leaves tile ``box`` as ``layout`` says (a missing, repeated or moved leaf is refused).

    Morton: sorted by first code, consecutive code ranges, boxes recomputed from the codes.
    Grid: the ``m^d`` cells in C order, boxes recomputed.  Two-level grid: first-level cells in
    C order, each holding exactly its ``m2^d`` sub-cells (on its sub-grid, each once) in C order.
    """
    n, d = lo.shape
    if n == 0:
        raise ReleaseFormatError("tree release has no leaves")
    kind = layout["kind"]
    if kind == "morton":
        if codes is None:
            raise ReleaseFormatError("a Morton-layout tree release needs its 'morton' column")
        order = np.argsort(codes, kind="stable")
        layout_ = MortonLayout(box.d, int(layout["bits"]), int(layout["split_bits"]))
        c, dep = codes[order].astype(np.int64), depth[order].astype(np.int64)
        if np.any(dep < 0) or np.any(dep > layout_.max_depth):
            raise ReleaseFormatError("tree release has a leaf depth outside its layout")
        span = np.left_shift(np.int64(1), box.d * layout_.bits - dep * layout_.split_bits)
        ends = c + span
        if c[0] != 0 or np.any(c[1:] != ends[:-1]) or ends[-1] != np.int64(1) << (box.d * layout_.bits):
            raise ReleaseFormatError("tree release leaves do not tile the box (a leaf is missing, repeated "
                                     "or moved): the table was edited")
        want_lo, want_hi = layout_.node_boxes(c, dep, box)
    elif kind == "grid":
        m = int(layout["m"])
        if n != m**d:
            raise ReleaseFormatError(f"tree release has {n} leaves but its grid layout has {m**d} cells: "
                                     "rows were removed or added")
        order = np.lexsort(lo.T[::-1])  # C order: first column slowest
        want_lo, want_hi = grid_boxes(box, m)
    else:
        m1 = int(layout["m1"])
        m2 = np.asarray(layout["m2"], dtype=np.int64)
        if m2.size != m1**d or np.any(m2 < 1) or n != int((m2**d).sum()):
            raise ReleaseFormatError("tree release leaves do not match its two-level grid layout: rows were "
                                     "removed or added")
        centre = (lo + hi) / 2
        first = np.clip(np.floor((centre - box.lo) / box.width * m1), 0, m1 - 1).astype(np.int64)
        cell = np.ravel_multi_index(tuple(first.T), (m1,) * d)
        side = m2[cell]
        sub = (box.width / m1) / side[:, None]
        pos = (lo - (box.lo + first * (box.width / m1))) / sub
        k = np.rint(pos).astype(np.int64)
        sub_flat = np.zeros(n, dtype=np.int64)
        for j in range(d):
            sub_flat = sub_flat * side + k[:, j]
        order = np.lexsort((sub_flat, cell))
        expected_cells = np.repeat(np.arange(m1**d), m2**d)
        expected_sub = np.arange(n) - np.repeat(np.cumsum(m2**d) - m2**d, m2**d)
        ok = (np.array_equal(cell[order], expected_cells) and np.array_equal(sub_flat[order], expected_sub)
              and np.all((k >= 0) & (k < side[:, None])) and np.allclose(pos, k, atol=1e-6)
              and np.allclose(hi - lo, sub, rtol=1e-9))
        if not ok:
            raise ReleaseFormatError("tree release leaves do not tile the box as its two-level grid layout "
                                     "says: the table was edited")
        return order
    if not (np.allclose(lo[order], want_lo, rtol=0, atol=1e-12 * float(box.width.max()))
            and np.allclose(hi[order], want_hi, rtol=0, atol=1e-12 * float(box.width.max()))):
        raise ReleaseFormatError("tree release leaf boxes disagree with their layout: the table was edited")
    return order


__all__ = ["LAYOUTS", "check_layout", "float_column", "leaf_order"]
