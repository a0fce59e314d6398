"""Arithmetic written once, evaluated on numpy arrays or rendered as DuckDB SQL.

A rule that both the Python answers and the SQL macros apply (the bin alignment of
:mod:`polars_dp.domains.ranges`, the Haar range variance of
:mod:`polars_dp.kernels.wavelet_variance`) is a function of an *ops* namespace ``ops`` and
of operands that support ``+ - * / // %``, comparisons and ``& | ~``.  :data:`NUMPY` runs it
on arrays (or scalars); :data:`SQL` on :class:`Sql` operands, whose operators return the SQL
text of the operation instead of a value, so the same function *generates* the SQL::

    >>> def stop_cell(ops, hi, width):
    ...     return ops.where(hi % width == 0, hi // width, hi // width + 1)
    >>> stop_cell(NUMPY, np.array([6, 7]), 3)
    array([2, 3])
    >>> print(stop_cell(SQL, Sql("q.hi"), 3))
    CASE WHEN ((q.hi % 3) = 0) THEN (q.hi // 3) ELSE ((q.hi // 3) + 1) END

Both spellings compute the same IEEE-754 doubles and 64-bit integers step by step (DuckDB's
``/`` is true division and ``//`` integer division, numpy's likewise), so Python and SQL
answers agree exactly.  ``//`` and ``%`` are used on non-negative integers only (numpy
floors, DuckDB truncates).  Text operations (``concat``, ``show``) build the error messages
from one template: a Python string, or a SQL string expression.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from polars_dp.domains.sql import double_sql


def sql_text(value: Any) -> str:
    """SQL text of an operand: a :class:`Sql` as is; a Python bool, int, float or str as a literal
    (a float as the exact DOUBLE it is, see :func:`polars_dp.domains.sql.double_sql`)."""
    if isinstance(value, Sql):
        return value.text
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return double_sql(float(value))
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    raise TypeError(f"no SQL literal for {value!r}")


def _infix(op: str, *, reflected: bool = False) -> Callable[[Sql, Any], Sql]:
    """The :class:`Sql` operator method rendering ``(self op other)``, or ``(other op self)`` when
    ``reflected`` (the right-hand operand's method)."""
    def method(self: Sql, other: Any) -> Sql:
        left, right = (sql_text(other), self.text) if reflected else (self.text, sql_text(other))
        return Sql(f"({left} {op} {right})")

    return method


class Sql:
    """A SQL expression; its operators return the SQL of the operation (``Sql("a") + 1`` is
    ``(a + 1)``).  ``==`` renders ``=``, so a ``Sql`` is not hashable."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"Sql({self.text!r})"

    __add__ = _infix("+")
    __radd__ = _infix("+", reflected=True)
    __sub__ = _infix("-")
    __rsub__ = _infix("-", reflected=True)
    __mul__ = _infix("*")
    __rmul__ = _infix("*", reflected=True)
    __truediv__ = _infix("/")
    __rtruediv__ = _infix("/", reflected=True)
    __floordiv__ = _infix("//")
    __rfloordiv__ = _infix("//", reflected=True)
    __mod__ = _infix("%")
    __rmod__ = _infix("%", reflected=True)
    __lt__ = _infix("<")
    __le__ = _infix("<=")
    __gt__ = _infix(">")
    __ge__ = _infix(">=")
    __eq__ = _infix("=")  # type: ignore[assignment]  # renders SQL, as numpy's does
    __ne__ = _infix("<>")  # type: ignore[assignment]
    __and__ = _infix("AND")
    __rand__ = _infix("AND", reflected=True)
    __or__ = _infix("OR")
    __ror__ = _infix("OR", reflected=True)

    def __invert__(self) -> Sql:
        return Sql(f"(NOT {self.text})")

    __hash__ = None  # type: ignore[assignment]


class NumpyOps:
    """The ops on numpy arrays and scalars (the Python answers)."""

    @staticmethod
    def where(cond: Any, a: Any, b: Any) -> Any:
        if isinstance(a, str) or isinstance(b, str):  # text: one query's message
            return a if bool(cond) else b
        return np.where(cond, a, b)

    @staticmethod
    def least(*xs: Any) -> Any:
        """The elementwise minimum of all ``xs`` (SQL ``least``)."""
        return functools.reduce(np.minimum, xs)

    @staticmethod
    def greatest(*xs: Any) -> Any:
        """The elementwise maximum of all ``xs`` (SQL ``greatest``)."""
        return functools.reduce(np.maximum, xs)

    smallest, largest = least, greatest
    floor: Callable[[Any], Any] = staticmethod(np.floor)
    abs: Callable[[Any], Any] = staticmethod(np.abs)
    ln: Callable[[Any], Any] = staticmethod(np.log)
    exp: Callable[[Any], Any] = staticmethod(np.exp)
    ceil: Callable[[Any], Any] = staticmethod(np.ceil)
    power: Callable[[Any, Any], Any] = staticmethod(np.power)
    round: Callable[[Any, int], Any] = staticmethod(np.round)

    #: No value (SQL ``NULL``): the answer states none.
    null = np.nan

    inf = np.inf

    # ---------------------------------------------------------------- lists (one per query)
    # A list per query is an array ``(queries, terms)``; its functions reduce the last axis.
    @staticmethod
    def each(x: Any) -> Any:
        """A per-query value inside :meth:`lmap` (broadcast over the terms)."""
        return np.asarray(x)[..., None]

    @staticmethod
    def lst(*items: Any) -> Any:
        """The list ``[items...]`` per query."""
        return np.stack(np.broadcast_arrays(*items), axis=-1)

    @staticmethod
    def lmap(fn: Callable[..., Any], *lists: Any) -> Any:
        """``fn`` on the terms of ``lists`` side by side (``fn`` written with ops); a per-query
        value (:meth:`each`) is repeated over the terms."""
        out = fn(*lists)
        shape = np.shape(lists[0])
        return out if np.shape(out) == shape else np.broadcast_to(out, shape)

    lsum: Callable[[Any], Any] = staticmethod(functools.partial(np.sum, axis=-1))
    lmax: Callable[[Any], Any] = staticmethod(functools.partial(np.max, axis=-1))

    @staticmethod
    def ldot(a: Any, b: Any) -> Any:
        """``sum_i a_i b_i`` per query (SQL ``list_inner_product``)."""
        return np.sum(a * b, axis=-1)

    @staticmethod
    def lsecond(x: Any, top: Any) -> Any:
        """The second largest term of a list of at least two, counting repeats (the largest
        where it occurs twice); ``top`` its largest (:meth:`lmax`)."""
        return np.partition(x, -2, axis=-1)[..., -2]

    @staticmethod
    def item(x: Any, i: Any) -> Any:
        """Term ``i`` (from 0; an int or one per query) of a list per query, or of a list of
        public constants (:meth:`constants`)."""
        x = np.asarray(x)
        if x.ndim == 1:
            return x[i]
        return np.take_along_axis(x, np.asarray(i)[..., None], axis=-1)[..., 0] if np.ndim(i) else x[..., i]

    @staticmethod
    def constants(values: Any) -> Any:
        """Public constants as a list (indexed with :meth:`item`)."""
        return np.asarray(values, dtype=np.float64)

    @staticmethod
    def cross(a: Any, b: Any) -> Any:
        """The products ``a_i b_j`` of two lists, ``i``-major."""
        return (a[..., :, None] * b[..., None, :]).reshape(*a.shape[:-1], -1)

    @staticmethod
    def minus_first(values: Any, flags: Any) -> Any:
        """``values`` less 1 at the first term where ``flags`` holds."""
        flags = np.asarray(flags, dtype=bool)
        return values - (flags & (np.cumsum(flags, axis=-1) == 1))

    @staticmethod
    def let(x: Any) -> Any:
        """A value computed once and reused (numpy: the value itself)."""
        return x

    def grid_min(self, grid: Any, fn: Callable[[Any], Any]) -> Any:
        """:func:`grid_min` on numpy."""
        return grid_min(self, grid, fn)

    @staticmethod
    def to_int(x: Any) -> Any:
        """An integral value as int64."""
        return np.asarray(x).astype(np.int64)

    @staticmethod
    def to_float(x: Any) -> Any:
        return np.asarray(x).astype(np.float64)

    @staticmethod
    def is_integer(x: Any) -> bool:
        """Whether ``x`` is known to hold integers (decides the exact integer path)."""
        return bool(np.issubdtype(np.asarray(x).dtype, np.integer))

    @staticmethod
    def switch(key: Any, cases: Mapping[str, Any]) -> Any:
        """``cases[key]`` (``key`` an option, e.g. ``align``)."""
        return cases[key]

    @staticmethod
    def show(x: Any) -> str:
        """``repr`` of a value (``'None'`` for a missing one)."""
        return repr(x.item() if isinstance(x, (np.ndarray, np.generic)) else x)

    @staticmethod
    def concat(*parts: Any) -> str:
        return "".join(parts)

    @staticmethod
    def option(name: str, value: str) -> str:
        """An option as a message names it."""
        return f"{name}={value!r}"


def _function(name: str) -> Callable[..., Sql]:
    """The SQL call ``name(args...)``."""
    def call(*args: Any) -> Sql:
        return Sql(f"{name}({', '.join(sql_text(x) for x in args)})")
    return call


class SqlOps:
    """The ops on :class:`Sql` operands (DuckDB; Python numbers become literals)."""

    @staticmethod
    def where(cond: Any, a: Any, b: Any) -> Sql:
        return Sql(f"CASE WHEN {sql_text(cond)} THEN {sql_text(a)} ELSE {sql_text(b)} END")

    least = staticmethod(_function("least"))
    greatest = staticmethod(_function("greatest"))
    floor = staticmethod(_function("floor"))
    abs = staticmethod(_function("abs"))
    ln = staticmethod(_function("ln"))
    exp = staticmethod(_function("exp"))
    smallest, largest = least, greatest
    ceil = staticmethod(_function("ceil"))
    power = staticmethod(_function("pow"))
    lsum = staticmethod(_function("list_sum"))
    lmax = staticmethod(_function("list_max"))
    ldot = staticmethod(_function("list_inner_product"))
    inf = Sql("CAST('inf' AS DOUBLE)")
    null = Sql("NULL::DOUBLE")

    def __init__(self) -> None:
        self._depth = 0  # nesting of the lambdas being rendered: their parameter names
        self.stages: list[tuple[str, str]] | None = None

    def let(self, x: Any) -> Sql:
        """A value computed once per row: a column ``__let<i>`` of a projection of its own
        (:meth:`staged`), or the expression itself outside :meth:`staged`.  The same expression
        let twice (e.g. a variance factor the variance and the half-width both read) is one
        column."""
        text = sql_text(x)
        if self.stages is None:
            return Sql(text)
        if _PLAIN.fullmatch(text):  # a column or a literal already
            return Sql(text)
        for name, seen in self.stages:
            if seen == text:
                return Sql(name)
        name = f"__let{len(self.stages)}"
        self.stages.append((name, text))
        return Sql(name)

    def staged(self, build: Callable[[], Any], source: str) -> tuple[str, Sql]:
        """``(relation, expression)``: ``build()`` rendered with every :meth:`let` a column of a
        projection over ``source``: each value in the first projection after those of the values
        it reads, so there are as many projections as the longest chain of values reading each
        other (each projection costs a pass over the rows)."""
        self.stages = []
        try:
            expression = Sql(sql_text(build()))
            depth: dict[str, int] = {}
            runs: list[list[tuple[str, str]]] = []
            for name, text in self.stages:
                depth[name] = 1 + max((depth[n] for n in _LET.findall(text)), default=-1)
                if depth[name] == len(runs):
                    runs.append([])
                runs[depth[name]].append((name, text))
            relation = source
            for run in runs:
                columns = ", ".join(f"{text} AS {name}" for name, text in run)
                relation = f"(SELECT *, {columns} FROM {relation} AS {source})"
        finally:
            self.stages = None
        return relation, expression

    def _lambda(self, fn: Callable[..., Any], arity: int) -> tuple[list[Sql], str]:
        names = [Sql(f"__x{self._depth}_{i}") for i in range(arity)]
        self._depth += 1
        try:
            body = sql_text(fn(*names))
        finally:
            self._depth -= 1
        return names, body

    @staticmethod
    def each(x: Any) -> Any:
        return x

    @staticmethod
    def lst(*items: Any) -> Sql:
        return Sql("[" + ", ".join(f"CAST({sql_text(x)} AS DOUBLE)" for x in items) + "]")

    def lmap(self, fn: Callable[..., Any], *lists: Any) -> Sql:
        index = Sql(f"__i{self._depth}")
        names, body = self._lambda(
            lambda first, *_: fn(first, *(Sql(f"({sql_text(x)})[{index}]") for x in lists[1:])), 1)
        return Sql(f"list_transform({sql_text(lists[0])}, lambda {names[0]}, {index}: {body})")

    def cross(self, a: Any, b: Any) -> Sql:
        inner = lambda x: self.lmap(lambda y: x * y, b)  # noqa: E731
        names, body = self._lambda(inner, 1)
        return Sql(f"flatten(list_transform({sql_text(a)}, lambda {names[0]}: {body}))")

    def minus_first(self, values: Any, flags: Any) -> Sql:
        first = Sql(f"coalesce(list_position({sql_text(flags)}, true), 0)")
        index = Sql(f"__i{self._depth}")
        names, body = self._lambda(lambda v: v - SqlOps.where(index == first, 1.0, 0.0), 1)
        return Sql(f"list_transform({sql_text(values)}, lambda {names[0]}, {index}: {body})")

    def grid_min(self, grid: Any, fn: Callable[[Any], Any]) -> Sql:
        """:func:`grid_min` in SQL."""
        return Sql(sql_text(grid_min(self, grid, fn)))

    @staticmethod
    def lsecond(x: Any, top: Any) -> Sql:
        """The largest term on either side of the first ``top`` (slices: no sort, no lambda)."""
        x = sql_text(x)
        at = f"list_position({x}, {sql_text(top)})"
        return Sql(f"greatest(list_max(({x})[:{at} - 1]), list_max(({x})[{at} + 1:]))")

    @staticmethod
    def item(x: Any, i: Any) -> Sql:
        return Sql(f"({sql_text(x)})[{sql_text(i + 1)}]")

    @staticmethod
    def constants(values: Any) -> Sql:
        """A DOUBLE list literal (each value exact: its shortest repr, read as a DOUBLE)."""
        return Sql("CAST([" + ", ".join(f"'{float(v)!r}'" for v in values) + "] AS DOUBLE[])")

    @staticmethod
    def round(x: Any, digits: int) -> Sql:
        return Sql(f"round({sql_text(x)}, {int(digits)})")

    @staticmethod
    def to_int(x: Any) -> Sql:
        return Sql(f"CAST({sql_text(x)} AS BIGINT)")

    @staticmethod
    def to_float(x: Any) -> Sql:
        """As is: the bounds are DOUBLE, and ``/`` divides as doubles anyway."""
        return Sql(sql_text(x))

    @staticmethod
    def is_integer(x: Any) -> bool:
        """False: the macros read ordinal bounds as DOUBLE."""
        return False

    @staticmethod
    def switch(key: Any, cases: Mapping[str, Any]) -> Sql:
        texts = {k: sql_text(v) for k, v in cases.items()}
        if len(set(texts.values())) == 1:
            return Sql(next(iter(texts.values())))
        whens = " ".join(f"WHEN {sql_text(k)} THEN {v}" for k, v in texts.items())
        return Sql(f"CASE {sql_text(key)} {whens} END")

    @staticmethod
    def show(x: Any) -> Sql:
        return Sql(f"coalesce(CAST({sql_text(x)} AS VARCHAR), 'None')")

    @staticmethod
    def concat(*parts: Any) -> Sql:
        return Sql("(" + " || ".join(sql_text(p) for p in parts) + ")")

    @staticmethod
    def option(name: str, value: str) -> str:
        return f"{name}={value}"


_LET = re.compile(r"__let\d+")
_PLAIN = re.compile(r"(?:[A-Za-z_]\w*\.)?[A-Za-z_]\w*|\d+|CAST\('[^']*' AS DOUBLE\)")


def top_two(ops: Any, values: Any) -> tuple[Any, Any]:
    """``(largest, second largest)`` per query of the values ``values`` (a Python sequence of
    per-query operands, each ``>= 0``), the second counting repeats (the largest where it occurs
    twice; 0 for a single value): the :meth:`~NumpyOps.lmax` and :meth:`~NumpyOps.lsecond` of
    their list, without building the list, with ``greatest`` / ``least`` only (no ``CASE``).

    The second is a knockout tournament's: halve the values recursively; at each split, the
    smaller of the two halves' largest values.  Each such value is the smaller of two values at
    different positions (so at most the second largest), and at the split that separates the
    positions of the two largest it is the second largest.  Both are values of ``values``, so
    every way of finding them gives the same doubles."""
    values = [ops.let(v) for v in values]
    if len(values) == 1:
        return values[0], 0.0 * values[0]

    def largest(part: list[Any]) -> Any:
        return part[0] if len(part) == 1 else ops.largest(*part)

    def splits(part: list[Any]) -> list[Any]:
        if len(part) == 1:
            return []
        left, right = part[:(len(part) + 1) // 2], part[(len(part) + 1) // 2:]
        return [ops.least(largest(left), largest(right)), *splits(left), *splits(right)]

    return largest(values), ops.largest(*splits(values))


def grid_min(ops: Any, grid: Any, fn: Callable[[Any], Any]) -> Any:
    """``min over g in grid of fn(g)`` per query, for ``fn`` *quasi-convex along the grid* (per
    query non-increasing, then non-decreasing; ``inf`` allowed), ``grid`` public constants in
    increasing order; written once over ``ops`` (numpy or SQL).

    A search on the sign of the step instead of every point: while the candidate indices
    ``[lo, hi]`` hold more than one point, evaluate ``fn`` at ``mid = (lo + hi) // 2`` and
    ``mid + 1``; ``fn(mid) <= fn(mid + 1)`` leaves the minimum in ``[lo, mid]`` (quasi-convexity),
    else in ``[mid + 1, hi]``.  ``ceil(log2 n)`` steps of two evaluations, then the last
    candidate: ``2 ceil(log2 n) + 1`` evaluations (15 for 106 points), and the smallest value
    seen is returned.  For a quasi-convex ``fn`` that is the grid minimum; for any ``fn`` it is
    one of the grid's values (so a bound valid at every grid point stays valid).  Each step is a
    :meth:`let`, so SQL evaluates the points as plain per-row arithmetic in a few projections."""
    values = [float(g) for g in grid]
    n = len(values)
    points = ops.let(ops.constants(values))
    lo: Any = 0
    hi: Any = n - 1
    best: Any = None
    for _ in range(max(n - 1, 0).bit_length()):
        # one projection: the two points of this step, its bounds and the best value so far
        # (each reads the previous projection only), then one evaluating fn at both points
        mid = (lo + hi) // 2
        at_mid = ops.let(ops.item(points, mid))
        at_next = ops.let(ops.item(points, ops.least(mid + 1, n - 1)))
        lo, hi = ops.let(lo), ops.let(hi)
        best = best if best is None else ops.let(best)
        left, right = ops.let(fn(at_mid)), ops.let(fn(at_next))
        best = ops.least(left, right) if best is None else ops.least(ops.least(best, left), right)
        mid = (lo + hi) // 2
        lo, hi = ops.where(left <= right, lo, mid + 1), ops.where(left <= right, mid, hi)
    last = fn(ops.let(ops.item(points, lo)))
    return last if best is None else ops.least(best, last)


#: Evaluate on numpy arrays.
NUMPY = NumpyOps()
#: Render DuckDB SQL.
SQL = SqlOps()
#: Either namespace (the type of an ``ops`` argument).
Ops = NumpyOps | SqlOps

__all__ = ["NUMPY", "SQL", "NumpyOps", "Ops", "Sql", "SqlOps", "grid_min", "sql_text", "top_two"]
