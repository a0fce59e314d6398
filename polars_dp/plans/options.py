"""Declarative option tables: each mechanism's keywords with their type, constraint, default and doc.

A plan's table is the one home of its options: the mechanism function's signature (names,
order, defaults, annotations) and the parameter part of its docstring are generated from it
(:func:`signature`, :func:`parameters_doc`; :mod:`polars_dp.mechanisms.options`), and so are
``df.dp.*``, the ``Session`` methods and the command line's option checks.  :data:`SEED` and
:data:`PROGRESS` mark where ``plan.run``'s keywords sit in the function's signature.

A plan validates its keywords against its table before anything else happens (no data is
read, no budget is charged): an unknown keyword is a :class:`ParameterError` listing the
accepted ones, a value of the wrong type or out of range one naming the option
(``error.parameter``).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import textwrap
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import NoneType, UnionType
from typing import Any, Literal

import numpy as np

from polars_dp.domains.privacy_unit import Rows, as_privacy_unit
from polars_dp.errors import ParameterError
from polars_dp.noise import NoiseKind, SeedLike, check_epsilon, check_fraction, check_noise
from polars_dp.params import Nulls, OnOutOfDomain, check_int, check_option, check_positive

#: Marks an option without a default (it must be given).
REQUIRED: Any = type("Required", (), {"__repr__": lambda self: "<required>"})()

#: Constraints on top of the type: a number in (0, inf), in (0, 1), or >= 0; a non-empty string.
KINDS = ("", "positive", "fraction", "nonnegative", "nonempty")


def _members(annotation: Any) -> tuple[Any, ...]:
    """The members of a union (``X | None``: ``X`` and ``NoneType``), else the annotation itself."""
    if typing.get_origin(annotation) in (typing.Union, UnionType):
        return typing.get_args(annotation)
    return (annotation,)


def _is_instance(value: Any, annotation: Any) -> bool:
    """Whether ``value`` has the type ``annotation``, looked at shallowly: ``int`` an integer
    (numpy's too, not a bool), ``float`` a real number, a generic container by its container (a
    ``Sequence`` or ``Iterable`` anything iterable, a numpy array included)."""
    for member in _members(annotation):
        origin = typing.get_origin(member)
        if member is NoneType:
            ok = value is None
        elif member is int:
            ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
        elif member is float:
            ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
        elif origin in (Sequence, Iterable) or member in (Sequence, Iterable):
            ok = isinstance(value, Iterable)
        else:
            ok = isinstance(value, origin or member)
        if ok:
            return True
    return False


def immutable(value: Any) -> bool:
    """Whether ``value`` cannot change: None, a string, a number, a bool, or a tuple or frozen
    dataclass of such values."""
    if value is None or type(value) in (str, int, float, bool):
        return True
    if type(value) is tuple:
        return all(immutable(v) for v in value)
    params = getattr(type(value), "__dataclass_params__", None)
    return bool(params is not None and params.frozen
                and all(immutable(getattr(value, f.name)) for f in dataclasses.fields(value)))


def type_text(annotation: Any) -> str:
    """An annotation as written (``int | None``)."""
    return inspect.formatannotation(annotation).replace("collections.abc.", "").replace("typing.", "")


@dataclass(frozen=True)
class Option:
    """One keyword: its ``type`` (the annotation the signature shows, enforced shallowly: a
    ``Literal`` by its values, ``X | None`` also accepts ``None``), its constraint ``kind``
    (``"positive"``: a finite number > 0, ``"fraction"``: in (0, 1), ``"nonnegative"``: >= 0,
    ``"nonempty"``: a non-empty string; ``lo`` / ``hi`` bound an ``int``), a ``check`` run on
    the value after them (it may normalise it), its ``default`` and its ``doc``.  ``run``:
    a keyword of ``plan.run`` (seed, progress), shown in the function's signature only."""

    name: str
    type: Any
    default: Any = REQUIRED
    kind: str = ""
    lo: int | None = None
    hi: int | None = None
    check: Callable[[Any], Any] | None = None
    doc: str = ""
    run: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"option {self.name}: unknown kind {self.kind!r}")

    @functools.cached_property
    def choices(self) -> tuple[Any, ...]:
        """The values a ``Literal`` type allows (empty otherwise)."""
        return tuple(c for m in _members(self.type) if typing.get_origin(m) is Literal
                     for c in typing.get_args(m))

    @functools.cached_property
    def optional(self) -> bool:
        """Whether ``None`` is accepted (the type is ``X | None``)."""
        return NoneType in _members(self.type)

    @functools.cached_property
    def checked_default(self) -> tuple[bool, Any]:
        """``(kept, value)``: the default as :meth:`validate` returns it, and whether that value
        is immutable (:func:`immutable`), so that every plan may share it instead of checking the
        default again (the default and its check are constants of the table)."""
        value = self.validate(self.default)
        return immutable(value), value

    def validate(self, value: Any) -> Any:
        """``value`` checked (and normalised, e.g. an int epsilon as a float)."""
        if value is None and self.optional and self.check is None:
            return None
        try:
            if self.check is None or self.kind or self.lo is not None or self.hi is not None:
                value = self._constrained(value)
            if self.check is not None:
                value = self.check(value)
        except ParameterError as exc:
            if exc.parameter is None:
                exc.parameter = self.name
            raise
        return value

    def _constrained(self, value: Any) -> Any:
        if self.choices:
            return check_option(value, self.name, self.choices)
        if self.kind == "positive":
            return check_epsilon(value, self.name) if self.name.startswith("epsilon") else \
                check_positive(value, self.name)
        if self.kind == "fraction":
            return check_fraction(value, self.name)
        if self.kind == "nonnegative":
            if not _is_instance(value, float) or not value >= 0:
                raise ParameterError(f"{self.name} must be a number >= 0, got {value!r}")
            return float(value)
        if self.kind == "nonempty" and not (isinstance(value, str) and value):
            raise ParameterError(f"{self.name} must be a non-empty string, got {value!r}")
        if int in _members(self.type) and (self.lo is not None or self.hi is not None
                                           or _is_instance(value, int)):
            return check_int(value, self.name, lo=self.lo, hi=self.hi)
        if not _is_instance(value, self.type):
            raise ParameterError(f"{self.name} must be {type_text(self.type)}, got {value!r}")
        return value

    def describe(self) -> str:
        """``name: type = default``, for error messages."""
        default = "" if self.default is REQUIRED else f" = {self.default!r}"
        return f"{self.name}: {type_text(self.type)}{' ' + self.kind if self.kind else ''}{default}"


#: The privacy unit option every mechanism takes (:mod:`polars_dp.domains.privacy_unit`).
PRIVACY_UNIT = Option(
    "privacy_unit", Rows | None, None, check=as_privacy_unit,
    doc="``pdp.Rows()`` (one row is one individual; ``None`` means the same) or "
        "``pdp.Rows(max_per=k, id_column=\"person\")``: each identifier keeps at most ``k`` rows (a "
        "keyed-hash rule, :mod:`polars_dp.domains.privacy_unit`) and every sensitivity is ``k`` "
        "times the one-row sensitivity.")
#: The row rules and pre-aggregated counts of the grid and spatial mechanisms (:data:`ROW_OPTIONS`).
ON_OUT_OF_DOMAIN = Option("on_out_of_domain", OnOutOfDomain, "raise",
                          doc="``\"raise\"`` (default), ``\"clamp\"`` or ``\"drop\"`` a row with a value "
                              "outside its declared domain or the box (:mod:`polars_dp.domains.attributes`).")
NULLS = Option("nulls", Nulls, "raise",
               doc="``\"raise\"`` (default) or ``\"drop\"`` a row with a null value.")
COUNT_COLUMN = Option(
    "count_column", str | None, None, kind="nonempty",
    doc="a column of non-negative integer counts when each row stands for several individuals "
        "(pre-aggregated rows; the guarantee holds when each individual contributes to exactly one "
        "row with weight 1, :mod:`polars_dp.counting.spec`).")
ROW_OPTIONS = (ON_OUT_OF_DOMAIN, NULLS, COUNT_COLUMN)
#: The noise kind every mechanism takes.
NOISE = Option("noise", NoiseKind, "exact", check=check_noise,
               doc="``\"exact\"`` (integer counts and discrete Laplace noise, exact decisions; the "
                   "default) or ``\"float\"`` (numpy's float Laplace, for experiments).")
#: ``plan.run``'s keywords, in the function's signature where the table places them.
SEED = Option("seed", SeedLike, None, run=True,
              doc="``None`` draws cryptographic randomness; an int makes the release reproducible "
                  "(tests only, never for production; the release is marked ``seeded``).")
PROGRESS = Option("progress", bool | None, None, run=True,
                  doc="stage bars on stderr; ``None``: on a terminal for large inputs.")


def plan_options(table: Iterable[Option]) -> tuple[Option, ...]:
    """The options a plan takes (``plan.run``'s keywords left out)."""
    return tuple(o for o in table if not o.run)


#: ``id(table) -> (table, its plan options, their names, the run keywords)`` of the tables
#: :func:`bind_options` has seen (each held, so that its id is not reused while it is here).
_SPLIT: dict[int, tuple[Sequence[Option], tuple[Option, ...], dict[str, None], tuple[str, ...]]] = {}


def _split(table: Sequence[Option]) -> tuple[tuple[Option, ...], dict[str, None], tuple[str, ...]]:
    """``table``'s plan options, their names (in order) and its run keywords, worked out once per
    table (a plan class's table is fixed when the class is defined)."""
    held = _SPLIT.get(id(table))
    if held is None or held[0] is not table:
        options = plan_options(table)
        held = (table, options, dict.fromkeys(o.name for o in options), tuple(o.name for o in table if o.run))
        if len(_SPLIT) < 1024 and isinstance(table, tuple):  # tables are class constants
            _SPLIT[id(table)] = held
    return held[1], held[2], held[3]


def bind_options(mechanism: str, table: Sequence[Option], given: Mapping[str, Any]) -> dict[str, Any]:
    """Every option of ``table`` validated, defaults filled in (and checked like a given value);
    an unknown or missing keyword is a ParameterError naming it and listing the accepted options."""
    table, names, run = _split(table)
    for hidden in (k for k in run if k in given):
        raise ParameterError(f"{hidden}= belongs to plan.run(frame, {hidden}=...), not to the plan: a plan "
                             "is decided from public inputs only", parameter=hidden)
    unknown = [k for k in given if k not in names]
    if unknown:
        raise ParameterError(
            f"{mechanism} has no option {unknown[0]!r}; its options are {', '.join(names)}",
            parameter=unknown[0])
    out: dict[str, Any] = {}
    for option in table:
        if option.name in given:
            out[option.name] = option.validate(given[option.name])
        elif option.default is REQUIRED:
            raise ParameterError(f"{mechanism} needs {option.name}= ({option.describe()})",
                                 parameter=option.name)
        else:
            kept, value = option.checked_default
            out[option.name] = value if kept else option.validate(option.default)
    return out


#: The data argument every mechanism function takes first.
FRAME = inspect.Parameter("frame", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Any)
FRAME_DOC = ("the private rows: a Polars DataFrame / LazyFrame, a pyarrow Table or Arrow stream "
             "(``__arrow_c_stream__``), a DuckDB relation or a Spark DataFrame, counted in that engine "
             "and read once (:mod:`polars_dp.counting.engines`).")


def signature(table: Sequence[Option], positional: Sequence[str], returns: Any = inspect.Signature.empty
              ) -> inspect.Signature:
    """The mechanism function's signature from its table: ``frame``, the ``positional``
    options, then the others keyword-only, in table order, with their types and defaults."""
    params = [FRAME]
    for option in table:
        kind = (inspect.Parameter.POSITIONAL_OR_KEYWORD if option.name in positional
                else inspect.Parameter.KEYWORD_ONLY)
        default = inspect.Parameter.empty if option.default is REQUIRED else option.default
        params.append(inspect.Parameter(option.name, kind, default=default, annotation=option.type))
    return inspect.Signature(params, return_annotation=returns)


def parameters_doc(table: Sequence[Option]) -> str:
    """The numpydoc ``Parameters`` section of the mechanism function, from the table's docs."""
    lines = ["Parameters", "----------", *_entry("frame", FRAME_DOC)]
    for option in table:
        lines.extend(_entry(option.name, option.doc))
    return "\n".join(lines)


def _entry(name: str, doc: str) -> list[str]:
    return textwrap.wrap(f"{name} : {doc}", width=96, subsequent_indent="    ", break_long_words=False,
                         break_on_hyphens=False)


__all__ = ["COUNT_COLUMN", "FRAME", "NOISE", "NULLS", "ON_OUT_OF_DOMAIN", "PRIVACY_UNIT", "PROGRESS",
           "REQUIRED", "ROW_OPTIONS", "SEED", "Option", "bind_options", "immutable", "parameters_doc",
           "plan_options", "signature", "type_text"]
