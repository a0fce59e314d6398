"""The public alphabet of sequence data: its one check and how messages show it.

An alphabet is a public input (declared, never read from the data): a list of distinct ints or
distinct strings, at most :data:`MAX_ALPHABET` of them.  The plans, the encoder of
:mod:`polars_dp.counting.sequences` and the sequence releases all check it here.
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


def alphabet_text(alphabet: Sequence[Any], shown: int = 12) -> str:
    """The alphabet for a message: ``['a', 'b', ..., 'z'] (26 symbols)`` when it is long."""
    symbols = list(alphabet)
    if len(symbols) <= shown:
        return repr(symbols)
    head = ", ".join(map(repr, symbols[:shown - 2]))
    return f"[{head}, ..., {symbols[-1]!r}] ({len(symbols):,} symbols)"


__all__ = ["MAX_ALPHABET", "alphabet_text", "check_alphabet"]
