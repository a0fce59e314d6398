"""Checks of public, non-privacy parameters: integers in a range and string options.

The privacy parameters (epsilon, neighbour relations, fractions of a budget) are checked in
:mod:`polars_dp.noise`.  Every check raises :class:`~polars_dp.errors.ParameterError` with the
parameter's name and what it accepts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, TypeAlias

import numpy as np

from polars_dp.errors import ParameterError

#: What to do with a null or NaN in a declared column.
Nulls: TypeAlias = Literal["raise", "drop"]
#: What to do with a value outside the declared domain (see :mod:`polars_dp.domains.attributes`).
OnOutOfDomain: TypeAlias = Literal["raise", "clamp", "drop"]
#: What the sequence mechanisms do with a symbol outside the alphabet.
OnOutOfAlphabet: TypeAlias = Literal["raise", "drop"]
NULLS: tuple[str, ...] = ("raise", "drop")
ON_OUT_OF_DOMAIN: tuple[str, ...] = ("raise", "clamp", "drop")
#: The sequence mechanisms' choices: a symbol outside the alphabet has no nearest symbol.
ON_OUT_OF_ALPHABET: tuple[str, ...] = ("raise", "drop")


def check_int(value: Any, name: str, *, lo: int | None = None, hi: int | None = None) -> int:
    """``value`` as an int if it is an integer (not a bool) within ``[lo, hi]``."""
    ok = not isinstance(value, bool) and isinstance(value, (int, np.integer))
    if ok and (lo is None or value >= lo) and (hi is None or value <= hi):
        return int(value)
    if lo is not None and hi is not None:
        want = f"an integer in [{lo}, {hi}]"
    elif lo is not None:
        want = f"an integer >= {lo}"
    elif hi is not None:
        want = f"an integer <= {hi}"
    else:
        want = "an integer"
    raise ParameterError(f"{name} must be {want}, got {value!r}")


def check_positive(value: Any, name: str) -> float:
    """``value`` as a float if it is a finite real number > 0 (not a bool or a string)."""
    ok = not isinstance(value, bool) and isinstance(value, (int, float, np.integer, np.floating))
    if ok and np.isfinite(value) and value > 0:
        return float(value)
    raise ParameterError(f"{name} must be a finite number > 0, got {value!r}")


def check_option(value: Any, name: str, options: Sequence[str]) -> str:
    """``value`` if it is one of ``options``, else a ParameterError listing them."""
    if not isinstance(value, str) or value not in options:
        raise ParameterError(f"{name} must be one of {tuple(options)}, got {value!r}")
    return value


__all__ = ["NULLS", "ON_OUT_OF_ALPHABET", "ON_OUT_OF_DOMAIN", "Nulls", "OnOutOfAlphabet", "OnOutOfDomain",
           "check_int", "check_option", "check_positive"]
