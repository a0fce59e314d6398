"""Random range-count workloads: the Privelet paper's query generator (Xiao et al. 2010, Sec. VI).

Each query has ``k`` predicates, ``k`` uniform in ``[1, min(max_predicates, d)]``, on ``k``
distinct attributes drawn uniformly without replacement.  An ordinal predicate is a random
interval: two cells drawn uniformly and sorted, given in value space as the lower values of
those cells (inclusive).  A nominal predicate is a uniformly drawn *non-root* node of the
(collapsed) hierarchy, given by its label.  The output is a batch query frame
(:mod:`polars_dp.domains.queries`) with an ``id`` column.

Workloads depend only on the public domain and the seed, never on data.  Coverage (the
fraction of cells a query covers) is computed here; true answers and selectivity need the
data (:mod:`polars_dp.evaluation.references`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import polars as pl

from polars_dp.domains.attributes import Attribute, Nominal, as_attributes
from polars_dp.domains.queries import cell_bounds, label_text, query_ranges
from polars_dp.noise import SeedLike, make_rng
from polars_dp.params import check_int


def _node_labels(attribute: Nominal) -> list:
    """One label per non-root node of the collapsed hierarchy (BFS order)."""
    h = attribute.hierarchy
    by_range: dict[tuple[int, int], object] = {}
    for label in h.labels:
        by_range.setdefault(attribute.leaf_range(label), label)
    return [by_range[(int(s), int(t))] for s, t in zip(h.node_start[1:], h.node_stop[1:], strict=True)]


def _label_series(name: str, labels: list, picks: np.ndarray, used: np.ndarray) -> pl.Series:
    """Labels ``labels[picks]`` where ``used`` else null; one dtype (text if labels mix types)."""
    values = labels if len({type(x) for x in labels}) == 1 else [label_text(x) for x in labels]
    dtype = {str: pl.String, bool: pl.Boolean}.get(type(values[0]), pl.Int64)  # mixed: text
    codes = pl.Series(np.where(used, picks, -1)).cast(pl.Int64)
    lookup = pl.Series(values, dtype=dtype)
    return lookup.gather(codes.replace(-1, None)).alias(name)


def random_workload(attributes: Attribute | Iterable[Attribute], n: int, *, seed: SeedLike = None,
                    max_predicates: int = 4) -> pl.DataFrame:
    """``n`` random range-count queries over the declared ``attributes`` (see module doc)."""
    attrs = as_attributes(attributes)
    n = check_int(n, "n (the number of queries)", lo=0)
    max_predicates = check_int(max_predicates, "max_predicates", lo=1)
    rng = make_rng(seed)
    d = len(attrs)
    n_predicates = rng.integers(1, min(max_predicates, d) + 1, size=n)
    # distinct attributes: rank a uniform random permutation per query, keep the first k
    rank = np.argsort(rng.random((n, d)), axis=1).argsort(axis=1)
    used = rank < n_predicates[:, None]
    columns = [pl.Series("id", np.arange(n, dtype=np.int64))]
    for axis, a in enumerate(attrs):
        if isinstance(a, Nominal):
            labels = _node_labels(a)
            if not labels:  # a single-leaf hierarchy has no non-root node: predicate = whole axis
                columns.append(pl.Series(a.column, [None] * n, dtype=pl.String))
                continue
            picks = rng.integers(0, len(labels), size=n)
            columns.append(_label_series(a.column, labels, picks, used[:, axis]))
        else:
            ends = np.sort(rng.integers(0, a.n_cells, size=(n, 2)), axis=1)
            values = cell_bounds(a, ends[:, 0], ends[:, 1] + 1)  # whole bins: aligned bounds
            for side, k in (("lo", 0), ("hi", 1)):
                series = pl.Series(f"{a.column}_{side}", values[k])
                columns.append(series.set(pl.Series(~used[:, axis]), None))
    return pl.DataFrame(columns)


def coverage(attributes: Sequence[Attribute], queries: pl.DataFrame) -> np.ndarray:
    """Fraction of the frequency matrix's cells each query covers."""
    attrs = as_attributes(attributes)
    starts, stops = query_ranges(attrs, queries)
    sizes = np.array([a.n_cells for a in attrs], dtype=np.float64)
    return np.prod((stops - starts) / sizes, axis=1)


__all__ = ["coverage", "random_workload"]
