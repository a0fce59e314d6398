"""Ordinal bin alignment and the query error texts, written once for Python and SQL.

Every function takes an ops namespace (:mod:`polars_dp.domains.expressions`): with
``NUMPY`` it computes the cell ranges of a batch of queries (:mod:`polars_dp.domains.queries`),
with ``SQL`` it generates the columns of the DuckDB range-count macros
(:mod:`polars_dp.releases.sql_grid`), so the two answer every query alike.  The rule (module
docstring of :mod:`polars_dp.domains.queries`): bins are ``e_k = lo + k width``; a value ``v``
lies in bin ``floor((v - lo) / width)`` (exact integer division for integers, else within
``FLOAT_TOLERANCE`` widths of an edge); a query ``[lo, hi]`` counts the bins all of whose
values it holds.  An open side is the domain's end (aligned).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from polars_dp.domains.attributes import FLOAT_TOLERANCE, Ordinal
from polars_dp.domains.box import Box
from polars_dp.domains.expressions import Ops


class BinPositions(NamedTuple):
    """Where the bounds of ordinal ranges fall (one entry per query)."""

    lo_cell: Any       #: bin holding ``lo``
    lo_edge: Any       #: ``lo`` is that bin's lower edge
    hi_cell: Any       #: bin holding ``hi``
    hi_aligned: Any    #: ``hi`` ends a bin
    aligned_stop: Any  #: the stop cell when ``hi`` is aligned


class CellRanges(NamedTuple):
    """Half-open cell ranges ``[start, stop)`` of ordinal ranges under each alignment."""

    aligned: Any       #: both bounds on bin edges (``align='exact'`` answers, else refuses)
    exact: tuple[Any, Any]
    outer: tuple[Any, Any]
    inner: tuple[Any, Any]

    def row(self, i: int) -> CellRanges:
        """The ranges of query ``i`` (numpy)."""
        return CellRanges(self.aligned[i], *((start[i], stop[i]) for start, stop in self[1:]))


def bin_of(ops: Ops, attribute: Ordinal, values: Any) -> tuple[Any, Any]:
    """``(cell, on_edge)`` of in-domain values: the bin holding each value and whether the value
    is that bin's lower edge.  Integer domain and integer values: ``(v - lo) // width`` and
    ``(v - lo) % width == 0``; otherwise ``t = (v - lo) / width``, ``cell = floor(t + tol)``
    clipped to ``[0, n)``, ``on_edge = t - cell <= tol`` (as :meth:`Ordinal.value_to_cell`)."""
    a = attribute
    if a.integer and ops.is_integer(values):
        offset = ops.to_int(values) - a.lo
        return offset // a.width, offset % a.width == 0
    t = (ops.to_float(values) - a.lo) / a.width
    cell = ops.to_int(ops.least(ops.greatest(ops.floor(t + FLOAT_TOLERANCE), 0), a.n_cells - 1))
    return cell, (t - cell) <= FLOAT_TOLERANCE


def bin_positions(ops: Ops, attribute: Ordinal, lo: Any, hi: Any) -> BinPositions:
    """:class:`BinPositions` of inclusive ranges ``[lo, hi]`` (in the domain, ``lo <= hi``; an
    open side given as the domain's end, which is aligned).

    ``hi`` is aligned when it is the last value of its bin: in an integer domain
    ``hi = min(lo_dom + (cell + 1) width - 1, hi_dom)`` (stop ``cell + 1``); in a float domain
    when it is the domain's ``hi`` (stop ``n``) or a bin edge ``e_cell`` (stop ``cell``: of bin
    ``cell`` the range holds the single value ``e_cell``)."""
    a = attribute
    lo_cell, lo_edge = bin_of(ops, a, lo)
    hi_cell, hi_edge = bin_of(ops, a, hi)
    if a.integer:
        return BinPositions(lo_cell, lo_edge, hi_cell,
                            hi == ops.least(a.lo + (hi_cell + 1) * a.width - 1, a.hi), hi_cell + 1)
    at_top = hi >= a.hi
    return BinPositions(lo_cell, lo_edge, hi_cell, at_top | hi_edge, ops.where(at_top, a.n_cells, hi_cell))


def cell_ranges(ops: Ops, p: BinPositions) -> CellRanges:
    """The ranges of :class:`BinPositions` ``p`` per ``align``: ``exact`` ``[lo_cell,
    aligned_stop)``; ``outer`` every bin holding a value of the range (at least the bin of
    ``lo``, so a single value on a float bin edge is that bin); ``inner`` the whole bins inside
    it (``lo_cell + 1`` when ``lo`` is inside its bin, ``hi_cell`` when ``hi`` is).  An empty
    range (``start >= stop``) holds no whole bin."""
    stop = ops.where(p.hi_aligned, p.aligned_stop, p.hi_cell + 1)
    return CellRanges(
        aligned=p.lo_edge & p.hi_aligned,
        exact=(p.lo_cell, p.aligned_stop),
        outer=(p.lo_cell, ops.greatest(stop, p.lo_cell + 1)),
        inner=(p.lo_cell + ops.where(p.lo_edge, 0, 1),
               ops.where(p.hi_aligned, p.aligned_stop, p.hi_cell)),
    )


def chosen(ops: Ops, ranges: CellRanges, align: Any) -> tuple[Any, Any]:
    """``(start, stop)`` of ``ranges`` under ``align`` (an option value, or the SQL column)."""
    cases = {"exact": ranges.exact, "outer": ranges.outer, "inner": ranges.inner}
    return (ops.switch(align, {k: v[0] for k, v in cases.items()}),
            ops.switch(align, {k: v[1] for k, v in cases.items()}))


def bin_bounds(ops: Ops, attribute: Ordinal, starts: Any, stops: Any) -> tuple[Any, Any]:
    """The aligned inclusive ``(lo, hi)`` values of cell ranges ``[start, stop)``: integer
    domain ``lo + start width`` and ``min(lo + stop width - 1, hi)``; float domain the edges
    ``e_start``, ``e_stop`` (rounded as :meth:`Ordinal.cell_labels`; ``hi`` for ``stop = n``)."""
    a = attribute
    if a.integer:
        return (ops.to_int(a.lo + starts * a.width),
                ops.to_int(ops.least(a.lo + stops * a.width - 1, a.hi)))
    magnitude = max(abs(a.lo), abs(a.hi), abs(a.width))
    digits = 12 - math.floor(math.log10(magnitude))

    def edge(k: Any) -> Any:
        return ops.where(k >= a.n_cells, float(a.hi), ops.round(a.lo + k * float(a.width), digits))

    return edge(starts), edge(stops)


def is_binned(attribute: Ordinal) -> bool:
    """Whether a cell of ``attribute`` holds more than one value: a float domain (half-open
    intervals) or an integer domain with ``width > 1``.  Such a cell is labelled by the range
    :func:`bin_bounds` gives it (``<column>_lo`` / ``<column>_hi`` in a release table), never by
    one value standing for the bin."""
    return not (attribute.integer and attribute.width == 1)


# ---------------------------------------------------------------------- error texts
def range_text(ops: Ops, attribute: Ordinal, lo: Any, hi: Any) -> Any:
    """``column=(lo, hi)``; a missing side shows as ``None``."""
    return ops.concat(f"{attribute.column}=(", ops.show(lo), ", ", ops.show(hi), ")")


def unaligned_text(ops: Ops, attribute: Ordinal, lo: Any, hi: Any, ranges: CellRanges) -> Any:
    """A query ``(lo, hi)`` that does not fall on bin edges, with the nearest aligned ranges."""
    a = attribute
    inner = range_text(ops, a, *bin_bounds(ops, a, *ranges.inner))
    return ops.concat(
        range_text(ops, a, lo, hi),
        f" does not fall on bin edges of {a.domain_text()} (a release only knows whole bins); "
        "nearest aligned: ", range_text(ops, a, *bin_bounds(ops, a, *ranges.outer)),
        f" ({ops.option('align', 'outer')})",
        ops.where(ranges.inner[0] < ranges.inner[1],
                  ops.concat(" or ", inner, f" ({ops.option('align', 'inner')})"),
                  "; no whole bin lies inside it"))


def no_bin_text(ops: Ops, attribute: Ordinal, lo: Any, hi: Any, align: Any) -> Any:
    """A query ``(lo, hi)`` whose range under ``align`` is empty."""
    hint = f"; use {ops.option('align', 'outer')} for the bins it touches"
    return ops.concat(range_text(ops, attribute, lo, hi),
                      f" contains no whole bin of {attribute.domain_text()}",
                      ops.switch(align, {"exact": hint, "outer": "", "inner": hint}))


def reversed_text(ops: Ops, column: str, lo: Any, hi: Any) -> Any:
    """``lo > hi``."""
    return ops.concat(f"{column}: lo=", ops.show(lo), " > hi=", ops.show(hi), "; the range is empty")


def outside_text(ops: Ops, subject: str, value: Any, domain: str) -> Any:
    """A value outside the declared domain."""
    return ops.concat(f"{subject}: ", ops.show(value), f" is outside the declared domain {domain}")


def box_domain_text(box: Box, axis: int) -> str:
    """The declared closed range ``[lo, hi]`` of a box column, as error texts show it."""
    return f"[{float(box.lo[axis])!r}, {float(box.hi[axis])!r}]"


def outside_box(ops: Ops, box: Box, axis: int, value: Any) -> Any:
    """Whether a spatial query bound ``value`` on column ``axis`` lies outside the declared
    ``[lo, hi]`` (NaN included): the grid's rule, a query outside the declared domain is an error
    (:func:`outside_box_text`), never silently clipped; in Python and, rendered, in SQL."""
    return ~((value >= float(box.lo[axis])) & (value <= float(box.hi[axis])))


def outside_box_text(ops: Ops, box: Box, axis: int, side: str, value: Any) -> Any:
    """A spatial query bound ``<column>_<side>`` outside the declared box (:func:`outside_box`)."""
    column = f"{box.columns[axis]}_{side}"
    return ops.concat(outside_text(ops, column, value, box_domain_text(box, axis)),
                      "; a box query lies inside the release's bounds")


def not_a_label_text(ops: Ops, column: str, value: Any) -> Any:
    """A nominal predicate naming no node of the hierarchy."""
    return ops.concat(f"{column}: ", ops.show(value), " is not a label of this hierarchy")


__all__ = ["BinPositions", "CellRanges", "bin_bounds", "bin_of", "bin_positions", "box_domain_text",
           "cell_ranges", "chosen", "is_binned", "no_bin_text", "not_a_label_text", "outside_box",
           "outside_box_text", "outside_text", "range_text", "reversed_text", "unaligned_text"]
