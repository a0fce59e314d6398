"""Bin alignment from its definition, for the Python and SQL range tests (tests only).

Independent of the library's floor arithmetic: the domain is sampled on a grid of step
:data:`STEP` (every edge and test value lies on it), each point is given the bin whose edge
``e_k = lo + k width`` is the last one at or below it (integer domain: a whole number ``v``
stands for the reals ``[v, v + 1)``), a query holds the points in ``[lo, hi]`` (an integral
``hi`` of an integer domain: up to ``hi + 1``, exclusive), and

* ``inner``: the bins all of whose points the query holds;
* ``outer``: the bins holding a point of the query, except, in a float domain, the bin of
  which the query holds only its lower edge ``e_k = hi < hi_dom`` when ``lo < hi`` (a ``hi`` on a
  bin edge ends the range there);
* ``exact``: ``inner``, when ``lo`` is open or an edge and ``hi`` is open, the domain's ``hi``,
  a bin's last value (integer) or an edge (float); otherwise "unaligned".

An empty ``inner`` / ``exact`` range is "no bin".
"""

from __future__ import annotations

import numpy as np
import polars as pl

import polars_dp as pdp

#: Grid of the sampled domain (exact in binary; every edge and test value is a multiple).
STEP = 1 / 64
UNALIGNED = "does not fall on bin edges"
NO_BIN = "contains no whole bin"

#: Two domains: partial last bins, fractional bounds of an integer domain, a hierarchy; and
#: unit-width integers, exact float bins, a two-level nominal.
DOMAINS = {
    "partial": [
        pdp.Ordinal("n", 5, 27, width=4),
        pdp.Ordinal("t", -2.0, 3.0, width=0.75),
        pdp.Nominal("job", pdp.Hierarchy.from_dict(
            {"Sales": {"Retail": ["cashier", "clerk"], "Agents": ["agent"]},
             "Tech": ["civil", "software", "data"], "Other": ["farmer"]}, level_names=["sector", "family"])),
    ],
    "exact": [
        pdp.Ordinal("k", 0, 9),
        pdp.Ordinal("u", 0.0, 4.0, width=0.5),
        pdp.Nominal("zone", {"north": [1, 2], "south": [3, 4, 5]}),
    ],
}
#: Axes whose values include non-integers although the domain is integral.
FRACTIONAL = {"n"}


def _edges(a: pdp.Ordinal) -> list:
    return [a.lo + k * a.width for k in range(a.n_cells)]


def expected_range(a: pdp.Ordinal, lo, hi, align: str) -> tuple[int, int] | str:
    """``(start, stop)`` of ``[lo, hi]`` (``None``: open side) under ``align``, or the error
    (:data:`UNALIGNED`, :data:`NO_BIN`)."""
    edges = _edges(a)
    low = a.lo if lo is None else lo
    high = a.hi if hi is None else hi
    end = a.hi + 1 if a.integer else a.hi
    points = np.arange(a.lo, end + STEP / 2, STEP)
    points = points[points < end] if a.integer else points
    cell = np.searchsorted(edges, points, side="right") - 1
    whole = a.integer and float(high).is_integer()  # an integral hi holds [hi, hi + 1)
    held = (points >= low) & ((points < high + 1) if whole else (points <= high))
    inner = [k for k in range(a.n_cells) if held[cell == k].all()]
    outer = [k for k in range(a.n_cells) if held[cell == k].any()
             and not (not a.integer and low < high < a.hi and high == edges[k])]
    if align == "outer":
        return outer[0], outer[-1] + 1
    if align == "exact":
        lo_aligned = lo is None or lo in edges
        hi_aligned = hi is None or hi == a.hi or (
            float(hi).is_integer() and hi + 1 in edges if a.integer else hi in edges)
        if not (lo_aligned and hi_aligned):
            return UNALIGNED
    return (inner[0], inner[-1] + 1) if inner else NO_BIN


def expected_ranges(attributes, query: dict, align: str) -> tuple[np.ndarray, np.ndarray] | str:
    """Per-axis ``(starts, stops)`` of a query ``{column: (lo, hi) | label | None}``, or the
    first axis's error."""
    starts, stops = [], []
    for a in attributes:
        predicate = query.get(a.column)
        if predicate is None:
            got: tuple[int, int] | str = (0, a.n_cells)
        elif isinstance(a, pdp.Nominal):
            got = a.leaf_range(predicate)
        else:
            got = expected_range(a, *predicate, align)
        if isinstance(got, str):
            return got
        starts.append(got[0])
        stops.append(got[1])
    return np.array(starts), np.array(stops)


def _values(a: pdp.Ordinal) -> list:
    """Candidate bounds: edges, last values, points inside bins, the domain's ends."""
    edges = _edges(a)
    if a.integer:
        values = list(range(a.lo, a.hi + 1))
        if a.column in FRACTIONAL:
            values += [e + a.width / 2 for e in edges[:-1]] + [e - 0.5 for e in edges[1:]]
        return values
    ends = [*edges[1:], a.hi]
    return edges + [a.hi] + [x + (y - x) * f for x, y in zip(edges, ends, strict=True) for f in (0.25, 0.5)]


def random_queries(attributes, n: int, seed: int) -> list[dict]:
    """``n`` queries: each axis unrestricted, or a random pair of candidate bounds (each side
    open with probability 1/5), or a random hierarchy label."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        query = {}
        for a in attributes:
            if rng.random() < 0.2:
                continue
            if isinstance(a, pdp.Nominal):
                labels = a.hierarchy.labels
                query[a.column] = labels[int(rng.integers(len(labels)))]
                continue
            values = _values(a)
            lo, hi = sorted(values[int(i)] for i in rng.integers(len(values), size=2))
            query[a.column] = (None if rng.random() < 0.2 else lo, None if rng.random() < 0.2 else hi)
        out.append(query)
    return out


def query_frame(attributes, queries: list[dict], ids=None) -> pl.DataFrame:
    """The batch form of ``queries`` (``id`` plus ``<col>_lo`` / ``<col>_hi`` / ``<col>``)."""
    columns: dict[str, pl.Series] = {"id": pl.Series("id", ids if ids is not None else range(len(queries)))}
    for a in attributes:
        if isinstance(a, pdp.Nominal):
            labels = [q.get(a.column) for q in queries]
            texts = [None if x is None else str(x) for x in labels]
            columns[a.column] = pl.Series(a.column, texts, pl.String)
            continue
        for side, name in enumerate((f"{a.column}_lo", f"{a.column}_hi")):
            values = [q[a.column][side] if a.column in q else None for q in queries]
            integral = a.integer and a.column not in FRACTIONAL
            columns[name] = pl.Series(name, values, pl.Int64 if integral else pl.Float64)
    return pl.DataFrame(columns)
