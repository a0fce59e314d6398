"""The public alphabet of sequence data: its one check, what a query symbol is, and how messages show it.

An alphabet is a public input (declared, never read from the data): a list of distinct ints or
distinct strings, at most :data:`MAX_ALPHABET` of them.  The plans, the encoder of
:mod:`polars_dp.counting.sequences` and the sequence releases all check it here.

A query's symbols follow one rule (:func:`query_symbol`), in Python and in the SQL macros
(:mod:`polars_dp.releases.sql_sequence` renders it): a symbol is a value of the alphabet's own
kind, never a value converted to it, and anything else is refused with one sentence
(:func:`outside_alphabet_text`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from polars_dp.errors import ParameterError

MAX_ALPHABET = 2**15 - 2


def check_alphabet(alphabet: Sequence[Any]) -> tuple:
    """Return the public alphabet as a tuple of distinct ints or distinct strings (else a
    ParameterError naming the option ``alphabet``)."""
    def refused(message: str) -> ParameterError:
        return ParameterError(message, parameter="alphabet")

    if isinstance(alphabet, str):
        alphabet = list(alphabet)
    try:
        symbols = tuple(alphabet)
    except TypeError:
        raise refused(f"alphabet must be a list of symbols (ints or strings), got {alphabet!r}") from None
    if not symbols:
        raise refused("alphabet is empty; declare the public list of symbols, e.g. alphabet=range(1, 18)")
    if len(symbols) > MAX_ALPHABET:
        raise refused(f"alphabet has {len(symbols):,} symbols; at most {MAX_ALPHABET:,} are supported")
    if all(isinstance(s, str) for s in symbols):
        pass
    elif all(isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in symbols):
        symbols = tuple(int(s) for s in symbols)
    else:
        raise refused("alphabet symbols must be all ints or all strings (no None, floats or mixtures)")
    if len(set(symbols)) != len(symbols):
        dup = sorted({s for s in symbols if symbols.count(s) > 1})
        raise refused(f"alphabet has duplicate symbols {dup[:10]}; list each symbol once")
    return symbols


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python value it holds (anything else as it is)."""
    return value.item() if isinstance(value, np.generic) else value


def query_symbol(value: Any, text: bool) -> Any:
    """The alphabet symbol a query's ``value`` is, or None when it is none (then refused, never
    rounded or converted).

    A text alphabet (``text``) takes a str; an integer alphabet an int (numpy's too, but not a
    bool) or a float equal to an int: ``2.0`` is ``2``, as the data's ``2.0`` in a float list
    column is (the encoder of :mod:`polars_dp.counting.sequences`, whose ``1.5`` is outside the
    alphabet).  ``1.5``, NaN, ``True``, ``'2'`` for an integer alphabet, ``2`` for a text one, None
    and lists are no symbol.  The caller then looks the symbol up in the alphabet.
    """
    value = _plain(value)
    if text:
        return value if isinstance(value, str) else None
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def shown_symbol(value: Any) -> str:
    """A query value as the refusal shows it: its ``repr`` (a float as the double it is, ``2.0``)."""
    return repr(_plain(value))


def _shown_order(value: Any) -> tuple:
    """Sort key of refused values: numbers by value, then bools, strings, the rest; None last."""
    value = _plain(value)
    if isinstance(value, bool):
        return (1, value, "")
    if isinstance(value, (int, float)):
        return (0, value, "")
    if isinstance(value, str):
        return (2, 0, value)
    return (4 if value is None else 3, 0, repr(value))


def refused_examples(values: Sequence[Any], shown: int = 5) -> str:
    """The first ``shown`` distinct ``values`` in order (numbers by value, then bools, strings and
    the rest, None last), as :func:`outside_alphabet_text` lists them."""
    distinct = {_shown_order(v): v for v in reversed(values)}
    return ", ".join(shown_symbol(distinct[k]) for k in sorted(distinct)[:shown])


def outside_alphabet_text(ops: Any, alphabet: Sequence[Any], examples: Any) -> Any:
    """The refusal of query symbols that are not symbols of ``alphabet`` (:func:`query_symbol`),
    ``examples`` their list (:func:`refused_examples`): a Python str with ``ops`` NUMPY, the SQL
    text expression of the macros with ``ops`` SQL (:mod:`polars_dp.domains.expressions`)."""
    kind = "strings" if isinstance(alphabet[0], str) else "integers"
    return ops.concat(f"query strings contain symbols outside the alphabet {alphabet_text(alphabet)}, e.g. ",
                      examples, f"; query only symbols of the alphabet (its {kind})")


def alphabet_text(alphabet: Sequence[Any], shown: int = 12) -> str:
    """The alphabet for a message: ``['a', 'b', ..., 'z'] (26 symbols)`` when it is long."""
    symbols = list(alphabet)
    if len(symbols) <= shown:
        return repr(symbols)
    head = ", ".join(map(repr, symbols[:shown - 2]))
    return f"[{head}, ..., {symbols[-1]!r}] ({len(symbols):,} symbols)"


__all__ = ["MAX_ALPHABET", "alphabet_text", "check_alphabet", "outside_alphabet_text", "query_symbol",
           "refused_examples", "shown_symbol"]
