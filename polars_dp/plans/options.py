"""Declarative option tables: each mechanism's keywords with their type, allowed values and default.

A plan validates its keywords against its table before anything else happens (no data is
read, no budget is charged): an unknown keyword is a :class:`ParameterError` listing the
accepted ones, a bad value one naming the option (``error.parameter``).  The command line
checks a domain file's ``[options]`` with the same tables.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from polars_dp.domains.privacy_unit import Rows, as_privacy_unit
from polars_dp.errors import ParameterError
from polars_dp.noise import check_epsilon, check_fraction
from polars_dp.params import check_int, check_option, check_positive

#: Marks an option without a default (it must be given).
REQUIRED: Any = type("Required", (), {"__repr__": lambda self: "<required>"})()


@dataclass(frozen=True)
class Option:
    """One keyword: ``kind`` is ``"choice"`` (one of ``choices``), ``"int"`` (in ``[lo, hi]``),
    ``"positive"`` (a finite number > 0), ``"fraction"`` (in (0, 1)), ``"nonnegative"``
    (a number >= 0), ``"str"`` or ``"any"`` (checked by ``check``, if given).  ``optional``:
    ``None`` is accepted too."""

    name: str
    kind: str = "any"
    default: Any = REQUIRED
    choices: tuple[Any, ...] = ()
    lo: int | None = None
    hi: int | None = None
    optional: bool = False
    check: Callable[[Any], Any] | None = None
    doc: str = ""

    def validate(self, value: Any) -> Any:
        """``value`` checked (and normalised, e.g. an int epsilon as a float)."""
        if value is None and (self.optional or self.default is None):
            return None
        try:
            if self.kind == "choice":
                value = check_option(value, self.name, self.choices)
            elif self.kind == "int":
                value = check_int(value, self.name, lo=self.lo, hi=self.hi)
            elif self.kind == "positive":
                value = (check_epsilon(value, self.name) if self.name.startswith("epsilon")
                         else check_positive(value, self.name))
            elif self.kind == "fraction":
                value = check_fraction(value, self.name)
            elif self.kind == "nonnegative":
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                    raise ParameterError(f"{self.name} must be a number >= 0, got {value!r}")
                value = float(value)
            elif self.kind == "str":
                if not isinstance(value, str) or not value:
                    raise ParameterError(f"{self.name} must be a non-empty string, got {value!r}")
            if self.check is not None:
                value = self.check(value)
        except ParameterError as exc:
            if exc.parameter is None:
                exc.parameter = self.name
            raise
        return value

    def describe(self) -> str:
        """``name`` with what it accepts, for error messages and docs."""
        if self.choices:
            what = " | ".join(repr(c) for c in self.choices)
        elif self.kind == "int":
            lo = "-inf" if self.lo is None else self.lo
            hi = "inf" if self.hi is None else self.hi
            what = f"int in [{lo}, {hi}]"
        else:
            what = self.kind
        default = "" if self.default is REQUIRED else f" = {self.default!r}"
        return f"{self.name}: {what}{' | None' if self.optional else ''}{default}"


#: The privacy unit option every mechanism takes (:mod:`polars_dp.domains.privacy_unit`).
PRIVACY_UNIT = Option("privacy_unit", "any", Rows(), check=as_privacy_unit,
                      doc="Rows() or Rows(max_per=k, id_column=...)")


def bind_options(mechanism: str, table: Sequence[Option], given: Mapping[str, Any]) -> dict[str, Any]:
    """Every option of ``table`` validated, defaults filled in; an unknown or missing keyword is
    a ParameterError naming it and listing the accepted options."""
    names = [o.name for o in table]
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
            out[option.name] = option.default
    return out


def option_names(table: Iterable[Option]) -> tuple[str, ...]:
    return tuple(o.name for o in table)


__all__ = ["PRIVACY_UNIT", "REQUIRED", "Option", "bind_options", "option_names"]
