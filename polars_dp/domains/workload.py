"""Declared query workloads as objects, held implicitly by per-axis Gram statistics.

A workload is a weighted multiset of range-count queries over declared attributes.  Each
query is a box: one cell interval per attribute (a hierarchy node on a nominal attribute;
the whole axis where the query has no predicate), i.e. a Kronecker product ``q = ⊗_i q_i``
of per-axis indicator vectors.  The expected squared error of a linear estimator with noise
covariance ``Σ`` over the workload is ``tr(Σ Σ_terms w ⊗_i G_i) / (number of queries)``,
where ``G_i = Σ q_i q_iᵀ`` is an axis's Gram matrix: a workload is therefore stored as a
weighted union of Kronecker *terms*, each a per-axis family of intervals
(:class:`AxisWorkload`) with a closed form for its Gram matrix, never as a list of queries
(all ranges of a 65,536-cell axis are 2.1e9 intervals; their Gram matrix is
``G_jk = (min(j, k) + 1)(n - max(j, k))``).

Constructors (each takes one attribute declaration or a list of them):

* :func:`ranges` every interval ``[a, b]`` of each ordinal axis (every node of a nominal
  hierarchy, root included), all combinations across the axes;
* :func:`prefixes` every interval ``[0, b]`` of each ordinal axis;
* :func:`identity` every cell;
* :func:`total` the whole axis (one query);
* :func:`marginals` all ``k``-way marginals: for each set of ``k`` attributes, every cell of
  their product, summed over the other attributes (HDMM's marginal workloads, McKenna et al.
  VLDB 2018);
* :func:`queries` explicit range queries, a batch query frame as ``range_counts`` takes it
  (held as its boxes: their detail traces are computed per query, vectorised);
* :func:`random_ranges` the *exact expectation* of the library's random query generator
  (:func:`polars_dp.evaluation.workloads.random_workload`, the Privelet paper's workload):
  ``k`` predicates, ``k`` uniform in ``[1, min(max_predicates, d)]`` on ``k`` distinct
  attributes drawn uniformly; an ordinal predicate the interval between two independently
  uniform cells, a nominal one a uniformly drawn non-root node of the collapsed hierarchy.
  Its Gram matrix is ``E[q qᵀ]`` (one query in expectation), e.g. on an ordinal axis of
  ``n`` cells ``G_jk = (2 (min + 1)(n - max) - [j = k]) / n²``.

Combinations: ``a @ b`` (or :func:`kron`) the Kronecker product of workloads over disjoint
attributes (every query of ``a`` intersected with every query of ``b``); ``a + b`` (or
:func:`union`) the multiset union; ``w * a`` every query of ``a`` counted ``w`` times (so
``union(a, b, weights=[1 / a.queries, 1 / b.queries])`` weighs the two workloads' mean errors
equally).  The error of a workload is the mean over its queries, counted with their weights.

A workload is a public input: it names attributes and intervals, never data.  A workload
naming an attribute that a strategy does not declare, or one with no query, is refused with
:class:`~polars_dp.errors.ParameterError`.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from polars_dp.domains.attributes import Attribute, Nominal, as_attributes
from polars_dp.domains.queries import PASSTHROUGH, as_query_frame, query_ranges
from polars_dp.domains.size import check_domain_size, size_text
from polars_dp.errors import ParameterError

#: Axis workload kinds with a semiseparable Gram matrix ``G_jk = c a_min(j,k) b_max(j,k) + d [j = k]``.
INTERVAL_KINDS = ("ranges", "prefixes", "random", "identity", "total")
#: A workload listing its intervals (``intervals()``) refuses more than this many.
MAX_INTERVALS = 1 << 26
#: Peak working memory of the Gram statistics per cell of the axis (a few float64 arrays of
#: its length: :meth:`AxisWorkload.block_sums`, :meth:`AxisWorkload.half_sums`), or per
#: (block, interval) pair of a listed family.
GRAM_BYTES_PER_CELL = 48


@dataclass(frozen=True, eq=False)
class AxisWorkload:
    """One axis's family of intervals in one Kronecker term.

    ``kind`` is one of :data:`INTERVAL_KINDS` or ``"nodes"`` (explicit weighted intervals:
    hierarchy nodes); ``n`` the axis's cells; ``count`` the number of queries (their total
    weight: 1 for the random generator's expectation)."""

    kind: str
    n: int
    starts: np.ndarray | None = None  # "nodes" only: half-open [start, stop) and weights
    stops: np.ndarray | None = None
    weights: np.ndarray | None = None

    @property
    def count(self) -> float:
        n = self.n
        if self.kind == "ranges":
            return n * (n + 1) / 2
        if self.kind in ("prefixes", "identity"):
            return float(n)
        if self.kind in ("total", "random"):
            return 1.0
        assert self.weights is not None
        return float(self.weights.sum())

    def _semiseparable(self, length: int) -> tuple[np.ndarray, np.ndarray, float, float]:
        """``(a, b, c, d)`` with ``G_jk = c a_min b_max + d [j = k]`` on cells ``0..length-1``,
        cells past ``n`` folded onto cell ``n - 1`` (``a``, ``b`` extended by their last value)."""
        j = np.minimum(np.arange(length, dtype=np.float64), self.n - 1)
        one = np.ones(length)
        n = float(self.n)
        if self.kind == "ranges":
            return j + 1, n - j, 1.0, 0.0
        if self.kind == "prefixes":
            return one, n - j, 1.0, 0.0
        if self.kind == "random":
            return j + 1, n - j, 2.0 / (n * n), -1.0 / (n * n)
        if self.kind == "identity":
            return one, one, 0.0, 1.0
        return one, one, 1.0, 0.0  # total

    def block_sums(self, size: int, length: int, *, fold: bool = True) -> np.ndarray:
        """``Σ_{j,k in B} G_jk`` for every block ``B`` of ``size`` consecutive cells of an axis
        of ``length >= n`` cells (``size`` divides ``length``), the cells past ``n`` folded
        onto cell ``n - 1`` (a query reaching the last cell also covers the padding: known
        zeros), or with ``fold=False`` left out of every query (zero rows and columns of ``G``:
        a padded transform).  Equals ``Σ_queries weight · |q ∩ B|²``.  O(length) memory, refused
        with DomainTooLargeError when that exceeds the machine's (:data:`GRAM_BYTES_PER_CELL`)."""
        if length % size or length < self.n:
            raise ParameterError(f"block size {size} must divide the axis length {length} >= {self.n}")
        blocks = length // size
        self._check_size(size, length)
        if self.kind == "nodes":
            overlaps, weights = self._overlaps(size, length, fold)
            return (overlaps ** 2) @ weights
        a, b, c, d = self._semiseparable(length)
        if not fold:
            b = np.where(np.arange(length) < self.n, b, 0.0)  # G_jk = 0 once max(j, k) >= n
        out = np.zeros(blocks)
        if c:
            A = a.reshape(blocks, size)
            before = np.cumsum(A, axis=1) - A
            out += c * (b.reshape(blocks, size) * (A + 2.0 * before)).sum(axis=1)
        if d and not fold:
            out += d * (np.arange(length) < self.n).reshape(blocks, size).sum(axis=1)
        elif d:
            # the diagonal term of the folded matrix: d |f^-1(u) ∩ B|^2 summed over cells u
            out += d * np.ones(length).reshape(blocks, size).sum(axis=1)
            if length > self.n:
                tail = np.zeros(length)
                tail[self.n - 1:] = 1.0
                k = tail.reshape(blocks, size).sum(axis=1)  # |f^-1(n-1) ∩ B|
                out += d * (k * k - k)
        return out

    def half_sums(self, size: int, length: int) -> np.ndarray:
        """``Σ_{j in L, k in R} G_jk`` for every block of ``size`` (even) consecutive cells of an
        axis of ``length >= n`` cells, ``L`` its first half and ``R`` its second, the cells past
        ``n`` left out of every query (as ``block_sums(..., fold=False)``).  Equals
        ``Σ_queries weight · |q ∩ L| |q ∩ R|``; every ``j in L`` lies before every ``k in R``, so
        on a semiseparable Gram matrix it is ``c (Σ_L a)(Σ_R b)``.  O(length)."""
        if size % 2 or length % size or length < self.n:
            raise ParameterError(f"block size {size} must be even and divide the axis length "
                                 f"{length} >= {self.n}")
        self._check_size(size // 2, length)
        if self.kind == "nodes":
            left, weights = self._overlaps(size // 2, length, False)
            return (left[0::2] * left[1::2]) @ weights
        a, b, c, _ = self._semiseparable(length)
        b = np.where(np.arange(length) < self.n, b, 0.0)
        blocks = length // size
        half = size // 2
        A = a.reshape(blocks, 2, half)[:, 0].sum(axis=1)
        B = b.reshape(blocks, 2, half)[:, 1].sum(axis=1)
        return c * A * B

    def _check_size(self, size: int, length: int) -> None:
        """DomainTooLargeError before the Gram statistics of an axis of ``length`` cells (blocks
        of ``size`` for a listed family) would allocate more than memory holds
        (:func:`~polars_dp.domains.size.check_domain_size`, public inputs only)."""
        if self.kind == "nodes":
            assert self.starts is not None
            shape: tuple[int, ...] = (length // size, self.starts.size)
            dims = f"{size_text(shape[0])} blocks x {size_text(shape[1])} listed intervals"
        else:
            shape = (length,)
            dims = f"{self.kind!r} queries on {size_text(self.n)} cells" + (
                f", {size_text(length)} with padding" if length > self.n else "")
        what = "an axis of the workload"
        check_domain_size(shape, bytes_per_cell=GRAM_BYTES_PER_CELL, dims=dims, what=what,
                          fix="use coarser bins (a larger width) on that attribute, or drop workload= (a "
                              "workload's error is computed from arrays as long as its axes)")

    def _overlaps(self, size: int, length: int, fold: bool) -> tuple[np.ndarray, np.ndarray]:
        """``|q ∩ B|`` per block of ``size`` cells (rows) and listed interval (columns), and the
        intervals' weights."""
        assert self.starts is not None and self.stops is not None and self.weights is not None
        lo = np.arange(length // size, dtype=np.int64)[:, None] * size
        stops = np.where(self.stops >= self.n, length, self.stops) if fold else self.stops
        overlap = np.maximum(0, np.minimum(stops[None, :], lo + size) - np.maximum(self.starts[None, :], lo))
        return overlap.astype(np.float64), self.weights

    def intervals(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every interval ``[start, stop)`` with its weight (weights sum to :attr:`count`)."""
        n = self.n
        if self.kind == "nodes":
            assert self.starts is not None and self.stops is not None and self.weights is not None
            return self.starts, self.stops, self.weights
        if self.kind in ("ranges", "random"):
            if n * (n + 1) // 2 > MAX_INTERVALS:
                raise ParameterError(f"{n * (n + 1) // 2} intervals exceed the listing cap {MAX_INTERVALS}; "
                                     "use the Gram statistics (block_sums) instead")
            lo, hi = np.triu_indices(n)
            w = np.ones(lo.size) if self.kind == "ranges" else np.where(lo == hi, 1.0, 2.0) / (n * n)
            return lo.astype(np.int64), hi.astype(np.int64) + 1, w
        cells = np.arange(n, dtype=np.int64)
        if self.kind == "prefixes":
            return np.zeros(n, dtype=np.int64), cells + 1, np.ones(n)
        if self.kind == "identity":
            return cells, cells + 1, np.ones(n)
        return np.zeros(1, dtype=np.int64), np.full(1, n, dtype=np.int64), np.ones(1)


Term = tuple[float, Mapping[str, AxisWorkload]]
#: Explicit boxes: ``(weight, columns, starts, stops)``, ``starts`` / ``stops`` of shape (queries, columns).
Boxes = tuple[float, tuple[str, ...], np.ndarray, np.ndarray]


class Workload:
    """A weighted union of Kronecker terms over declared attributes (module docstring).

    ``terms``: ``(weight, {column: AxisWorkload})``; an attribute a term does not name is the
    whole axis there.  ``attributes``: the declarations the workload names."""

    def __init__(self, attributes: Sequence[Attribute], terms: Iterable[Term], boxes: Iterable[Boxes] = ()):
        self.attributes: tuple[Attribute, ...] = tuple(attributes)
        weight = functools.partial(_check_weight, parameter="workload")
        self.terms: tuple[Term, ...] = tuple((weight(w), dict(axes)) for w, axes in terms)
        self.boxes: tuple[Boxes, ...] = tuple((weight(w), c, lo, hi) for w, c, lo, hi in boxes)
        if not self.terms and not self.boxes:
            raise ParameterError("the workload has no query; build it from at least one attribute "
                                 "(e.g. pdp.workload.ranges(attrs))", parameter="workload")

    # ------------------------------------------------------------------ facts
    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(a.column for a in self.attributes)

    @property
    def queries(self) -> float:
        """Number of queries counted with their weights (the random generator's expectation: 1)."""
        return float(sum(w * math.prod(ax.count for ax in axes.values()) for w, axes in self.terms)
                     + sum(w * starts.shape[0] for w, _, starts, _ in self.boxes))

    def __repr__(self) -> str:
        return f"Workload({len(self.terms)} terms over {list(self.columns)}, {self.queries:.6g} queries)"

    # ------------------------------------------------------------------ combinations
    def __add__(self, other: Workload) -> Workload:
        return union(self, other)

    def __mul__(self, weight: float) -> Workload:
        weight = _check_weight(weight)
        return Workload(self.attributes, [(w * weight, axes) for w, axes in self.terms],
                        [(w * weight, c, lo, hi) for w, c, lo, hi in self.boxes])

    __rmul__ = __mul__

    def __matmul__(self, other: Workload) -> Workload:
        return kron(self, other)

    # ------------------------------------------------------------------ against a domain
    def axis_terms(self, attributes: Sequence[Attribute]) -> list[tuple[float, list[AxisWorkload]]]:
        """Per term, one :class:`AxisWorkload` per declared attribute (in the order given; the
        whole axis where the term has no predicate).  Every attribute the workload names must
        be declared, with the same declaration."""
        attrs = as_attributes(attributes)
        declared = {a.column: a for a in attrs}
        for a in self.attributes:
            if a.column not in declared:
                raise ParameterError(f"the workload names {a.column!r}, which is not a declared attribute; "
                                     f"declared: {list(declared)}", parameter="workload")
            if declared[a.column] != a:
                raise ParameterError(f"the workload declares {a.column!r} as {a!r} but the domain declares "
                                     f"{declared[a.column]!r}; build the workload from the same declarations",
                                     parameter="workload")
        return [(w, [axes.get(a.column, AxisWorkload("total", a.n_cells)) for a in attrs])
                for w, axes in self.terms]

    def axis_boxes(self, attributes: Sequence[Attribute]) -> list[tuple[float, np.ndarray, np.ndarray]]:
        """The explicit boxes as ``(weight, starts, stops)`` of shape (queries, declared
        attributes), the whole axis where a box has no predicate (checks as :meth:`axis_terms`)."""
        attrs = as_attributes(attributes)
        self.axis_terms(attrs)
        out = []
        for w, columns, starts, stops in self.boxes:
            lo = np.zeros((starts.shape[0], len(attrs)), dtype=np.int64)
            hi = np.tile(np.array([a.n_cells for a in attrs], dtype=np.int64), (starts.shape[0], 1))
            for j, column in enumerate(columns):
                i = [a.column for a in attrs].index(column)
                lo[:, i], hi[:, i] = starts[:, j], stops[:, j]
            out.append((w, lo, hi))
        return out


# ---------------------------------------------------------------------------- helpers
def _check_weight(weight: object, parameter: str = "weights") -> float:
    """``weight`` as a float: a finite number > 0 (not a bool), else a ParameterError naming
    ``parameter``."""
    if isinstance(weight, bool) or not isinstance(weight, (int, float, np.integer, np.floating)) \
            or not (float(weight) > 0 and math.isfinite(float(weight))):
        raise ParameterError(f"a workload weight must be a finite number > 0, got {weight!r}",
                             parameter=parameter)
    return float(weight)


def _nodes(attribute: Nominal, random: bool = False) -> AxisWorkload:
    """Every node of the collapsed hierarchy, root included, weight 1 each; ``random``: the random
    generator's nominal predicate, every non-root node with weight ``1 / nodes`` (one in expectation)."""
    h = attribute.hierarchy
    starts, stops = h.node_start[int(random):], h.node_stop[int(random):]
    if starts.size == 0:  # a one-leaf hierarchy: the whole axis
        return AxisWorkload("total", attribute.n_cells)
    weights = np.ones(starts.size)
    return AxisWorkload("nodes", attribute.n_cells, np.asarray(starts, dtype=np.int64),
                        np.asarray(stops, dtype=np.int64), weights / weights.size if random else weights)


def _product(attributes: Attribute | Iterable[Attribute], make: object) -> Workload:
    attrs = _attrs(attributes)
    return Workload(attrs, [(1.0, {a.column: make(a) for a in attrs})])  # type: ignore[operator]


def _attrs(attributes: Attribute | Iterable[Attribute]) -> tuple[Attribute, ...]:
    if not isinstance(attributes, Attribute) and isinstance(attributes, Iterable) \
            and not isinstance(attributes, (str, bytes)):
        attributes = list(attributes)
        if not attributes:
            raise ParameterError("the workload names no attribute; give at least one declaration",
                                 parameter="workload")
    return as_attributes(attributes)


# ---------------------------------------------------------------------------- constructors
def ranges(attributes: Attribute | Iterable[Attribute]) -> Workload:
    """All ranges: every interval of each ordinal axis, every node (root included) of each
    nominal hierarchy, all combinations."""
    return _product(attributes, lambda a: _nodes(a) if isinstance(a, Nominal)
                    else AxisWorkload("ranges", a.n_cells))


def prefixes(attributes: Attribute | Iterable[Attribute]) -> Workload:
    """All prefixes ``[0, b]`` of each ordinal axis, all combinations (nominal axes refused)."""
    def make(a: Attribute) -> AxisWorkload:
        if isinstance(a, Nominal):
            raise ParameterError(f"{a.column!r} is nominal and has no prefixes; use ranges() or identity() "
                                 "for it", parameter="workload")
        return AxisWorkload("prefixes", a.n_cells)
    return _product(attributes, make)


def identity(attributes: Attribute | Iterable[Attribute]) -> Workload:
    """Every cell of the attributes' product (the histogram itself)."""
    return _product(attributes, lambda a: AxisWorkload("identity", a.n_cells))


def total(attributes: Attribute | Iterable[Attribute]) -> Workload:
    """The single query counting every row (whole axes)."""
    return _product(attributes, lambda a: AxisWorkload("total", a.n_cells))


def marginals(attributes: Attribute | Iterable[Attribute], k: int) -> Workload:
    """All ``k``-way marginals over ``attributes``: one term per set of ``k`` attributes, every
    cell of their product summed over the others (each cell of each marginal one query)."""
    attrs = _attrs(attributes)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= len(attrs):
        raise ParameterError(f"k must be an integer in [1, {len(attrs)}] (the marginals' order), got {k!r}",
                             parameter="k")
    return Workload(attrs, [(1.0, {a.column: AxisWorkload("identity", a.n_cells) for a in subset})
                            for subset in itertools.combinations(attrs, int(k))])


def random_ranges(attributes: Attribute | Iterable[Attribute], *, max_predicates: int = 4) -> Workload:
    """The exact expectation of :func:`polars_dp.evaluation.workloads.random_workload`'s
    queries (module docstring): one query in expectation, so its error is the mean squared
    error of one random query."""
    attrs = _attrs(attributes)
    if isinstance(max_predicates, bool) or not isinstance(max_predicates, (int, np.integer)) \
            or max_predicates < 1:
        raise ParameterError(f"max_predicates must be an integer >= 1, got {max_predicates!r}",
                             parameter="max_predicates")
    d = len(attrs)
    top = min(int(max_predicates), d)
    axes = {a.column: (_nodes(a, True) if isinstance(a, Nominal) else AxisWorkload("random", a.n_cells))
            for a in attrs}
    terms: list[Term] = []
    for k in range(1, top + 1):
        weight = 1.0 / top / math.comb(d, k)  # P(k predicates) x P(this set | k)
        terms.extend((weight, {a.column: axes[a.column] for a in subset})
                     for subset in itertools.combinations(attrs, k))
    return Workload(attrs, terms)


def queries(attributes: Attribute | Iterable[Attribute], frame: object, *, align: str = "exact") -> Workload:
    """Explicit range queries: a batch query frame as :meth:`polars_dp.GridRelease.range_counts`
    takes it (one row per query), each query counted once."""
    attrs = _attrs(attributes)
    table = as_query_frame(frame)
    if table.height == 0:
        raise ParameterError("the workload has no query; give at least one query row", parameter="workload")
    starts, stops = query_ranges(attrs, table, passthrough=PASSTHROUGH, align=align)
    return Workload(attrs, [], [(1.0, tuple(a.column for a in attrs), starts.astype(np.int64),
                                 stops.astype(np.int64))])


def kron(*workloads: Workload) -> Workload:
    """The Kronecker product of workloads over disjoint attributes: every combination of one
    query from each (weights multiply)."""
    if not workloads:
        raise ParameterError("kron needs at least one workload", parameter="workload")
    attrs: list[Attribute] = []
    for w in workloads:
        if not isinstance(w, Workload):
            raise ParameterError(f"kron takes workloads, got {w!r}", parameter="workload")
        if w.boxes:
            raise ParameterError("explicit queries do not form Kronecker products; list the combined "
                                 "queries in one frame instead", parameter="workload")
        for a in w.attributes:
            if any(b.column == a.column for b in attrs):
                raise ParameterError(f"{a.column!r} appears in two factors of a Kronecker product; "
                                     "use union (+) to combine workloads over the same attribute",
                                     parameter="workload")
            attrs.append(a)
    terms: list[Term] = []
    for combo in itertools.product(*(w.terms for w in workloads)):
        weight = math.prod(t[0] for t in combo)
        terms.append((weight, {c: ax for _, axes in combo for c, ax in axes.items()}))
    return Workload(attrs, terms)


def union(*workloads: Workload, weights: Sequence[float] | None = None) -> Workload:
    """The multiset union of workloads, each query of ``workloads[i]`` counted ``weights[i]``
    times (default 1)."""
    if not workloads:
        raise ParameterError("the workload has no query; give union at least one workload",
                             parameter="workload")
    if weights is None:
        weights = [1.0] * len(workloads)
    if len(weights) != len(workloads):
        raise ParameterError(f"union got {len(workloads)} workloads and {len(weights)} weights; give one "
                             "weight per workload", parameter="weights")
    attrs: list[Attribute] = []
    terms: list[Term] = []
    boxes: list[Boxes] = []
    for w, weight in zip(workloads, weights, strict=True):
        if not isinstance(w, Workload):
            raise ParameterError(f"union takes workloads, got {w!r}", parameter="workload")
        weight = _check_weight(weight)
        for a in w.attributes:
            same = [b for b in attrs if b.column == a.column]
            if same and same[0] != a:
                raise ParameterError(f"{a.column!r} is declared differently in two workloads of a union; "
                                     "build them from the same declarations", parameter="workload")
            if not same:
                attrs.append(a)
        terms.extend((t * weight, axes) for t, axes in w.terms)
        boxes.extend((t * weight, c, lo, hi) for t, c, lo, hi in w.boxes)
    return Workload(attrs, terms, boxes)


__all__ = ["GRAM_BYTES_PER_CELL", "INTERVAL_KINDS", "MAX_INTERVALS", "AxisWorkload", "Workload", "identity",
           "kron", "marginals", "prefixes", "queries", "random_ranges", "ranges", "total", "union"]
