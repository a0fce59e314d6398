"""Symbol-context counts of sequences: the only place the private sequences are read.

Conventions (PrivTree paper, Sec. 4)
-------------------------------------------------
A sequence ``s1 … sn`` over the public alphabet ``I`` is written ``# s1 … sn &``.  After the
public truncation rule (keep the first ``max_length`` symbols) it has ``n + 1 <= l_top =
max_length + 1`` *positions*: position ``j`` predicts ``s_j`` (``s_{n+1} = &``) from its
context ``# s1 … s_{j-1}``.

Codes: alphabet symbol ``i`` -> ``i`` (0 <= i < |I|); ``#`` (context only) and ``&``
(predicted only) both get code ``|I|``: they never share a role.  A context suffix of exact
length ``k`` is the integer ``sum_i digit_i * beta**i`` with ``beta = |I| + 1``, where digit
``i`` is the symbol ``i + 1`` places before the position (``#`` where the sequence starts).
A position has a context suffix of length ``k`` iff at least ``k - 1`` symbols precede it
(the ``k``-th digit is then ``#`` or a symbol), so ``beta`` digits suffice and prepending a
symbol ``x`` to a suffix of length ``k`` is ``code + x * beta**k``.

Everything is vectorized over all positions at once (numpy gathers and ``bincount``); the
Python loops run over context lengths only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from polars_dp.arrow_arrays import array_values
from polars_dp.counting.frequency import as_lazy
from polars_dp.domains.alphabet import alphabet_text, check_alphabet
from polars_dp.errors import ColumnNotFoundError, DomainError, ParameterError
from polars_dp.params import NULLS, ON_OUT_OF_ALPHABET, check_int, check_option


def _check_symbol_type(column: str, dtype: pl.DataType, symbols: tuple) -> None:
    """DomainError when the column's symbols cannot be alphabet symbols (text vs integers)."""
    inner = pl.String if dtype == pl.String else getattr(dtype, "inner", dtype)
    if isinstance(inner, (pl.Categorical, pl.Enum)):
        inner = pl.String
    text = isinstance(symbols[0], str)
    if text and inner != pl.String:
        raise DomainError(f"column {column!r} has type {dtype}, whose symbols are not text, but the alphabet "
                          f"{alphabet_text(symbols)} holds strings; declare the alphabet in the column's "
                          "type or cast the column to strings")
    if not text and not (inner.is_numeric() or inner == pl.Null):
        raise DomainError(f"column {column!r} has type {dtype}, whose symbols are not integers, but the "
                          f"alphabet {alphabet_text(symbols)} holds integers; declare the alphabet in the "
                          "column's type or cast the column to integers")


def check_max_length(max_length: int) -> int:
    """``max_length`` must be an int >= 1 (a public truncation length)."""
    return check_int(max_length, "max_length (a public bound)", lo=1)


@dataclass(frozen=True)
class EncodedSequences:
    """All positions of the truncated sequences, flattened (private; never released).

    ``next_symbol[p]`` is the code predicted at position ``p`` (``|I|`` for ``&``);
    ``n_before[p]`` the number of symbols preceding it in its sequence.  The positions of a
    sequence are contiguous, so the symbol ``i`` places before ``p`` is ``next_symbol[p - i]``
    when ``n_before[p] >= i``.
    """

    next_symbol: np.ndarray
    n_before: np.ndarray
    n_sequences: int
    alphabet_size: int
    max_length: int

    @property
    def beta(self) -> int:
        """Fanout ``|I| + 1`` (symbols plus ``#``); also the number of histogram bins."""
        return self.alphabet_size + 1

    @property
    def n_positions(self) -> int:
        return int(self.next_symbol.size)

    def context_digit(self, positions: np.ndarray, offset: int) -> np.ndarray:
        """Code of the symbol ``offset`` places before each position (``|I|`` for ``#``).

        Every position must have at least ``offset - 1`` preceding symbols.
        """
        before = self.n_before[positions]
        if np.any(before < offset - 1):
            raise ValueError("context_digit: some positions have a shorter context")
        hit = before >= offset
        out = np.full(positions.shape, self.alphabet_size, dtype=np.int64)
        out[hit] = self.next_symbol[positions[hit] - offset]
        return out


def encoded_from_lists(codes: np.ndarray, lengths: np.ndarray, alphabet_size: int,
                       max_length: int) -> EncodedSequences:
    """Positions of sequences given as flat symbol codes and (truncated) lengths."""
    lengths = np.asarray(lengths, dtype=np.int64)
    n_seq = lengths.size
    total = int(lengths.sum()) + n_seq
    starts = np.zeros(n_seq, dtype=np.int64)
    np.cumsum(lengths[:-1] + 1, out=starts[1:])
    n_before = np.arange(total, dtype=np.int64) - np.repeat(starts, lengths + 1)
    next_symbol = np.full(total, alphabet_size, dtype=np.int32)
    is_symbol = np.ones(total, dtype=bool)
    is_symbol[starts + lengths] = False  # the '&' of each sequence
    next_symbol[is_symbol] = codes
    small = np.int16 if max_length < 2**15 else np.int32
    return EncodedSequences(next_symbol=next_symbol, n_before=n_before.astype(small), n_sequences=n_seq,
                            alphabet_size=alphabet_size, max_length=max_length)


def symbol_lists(lf: pl.LazyFrame, column: str) -> pl.Expr:
    schema = lf.collect_schema()
    if column not in schema:
        raise ColumnNotFoundError(f"column {column!r} not found; columns: {list(schema.names())}")
    dtype = schema[column]
    if dtype == pl.String:
        return pl.col(column).str.extract_all("(?s).")  # one symbol per character
    if isinstance(dtype, (pl.List, pl.Array)) and dtype.inner.is_nested():
        raise ParameterError(f"column {column!r} has type {dtype}; each element must be one symbol, "
                             "not a nested list (flatten it first)")
    if isinstance(dtype, (pl.List, pl.Array)):
        return pl.col(column).cast(pl.List(dtype.inner)) if isinstance(dtype, pl.Array) else pl.col(column)
    raise ParameterError(
        f"column {column!r} has type {dtype}; give a List column of symbols or a String column "
        "(each character a symbol)"
    )


def encode_sequences(frame: Any, column: str, *, alphabet: Sequence[Any], max_length: int,
                     nulls: str = "raise", on_out_of_domain: str = "raise") -> EncodedSequences:
    """Read ``column`` once, truncate each sequence to ``max_length`` and encode its positions.

    Truncation keeps the first ``max_length`` symbols (a public rule); symbols past the cut
    are discarded unread.  A null sequence, a null symbol or a symbol outside ``alphabet``
    in the kept part raises :class:`DomainError` naming the column, unless a row rule drops
    the sequence: ``nulls="drop"`` a null sequence or one with a null symbol in its kept part,
    ``on_out_of_domain="drop"`` one with a symbol outside the alphabet in its kept part (a
    symbol has no nearest symbol: there is no ``"clamp"``).  Each rule looks at one sequence
    alone, so a neighbour (one sequence added or removed) still changes at most one kept
    sequence: every sensitivity bound, hence the guarantee, is unchanged.
    """
    check_option(nulls, "nulls", NULLS)
    check_option(on_out_of_domain, "on_out_of_domain", ON_OUT_OF_ALPHABET)
    symbols = check_alphabet(alphabet)
    max_length = check_max_length(max_length)
    lf = as_lazy(frame)
    lists = symbol_lists(lf, column).list.head(max_length)
    _check_symbol_type(column, lf.collect_schema()[column], symbols)
    codes = lists.list.eval(pl.element().replace_strict(list(symbols), list(range(len(symbols))),
                                                        default=None, return_dtype=pl.Int32))
    n_null_symbols = lists.list.eval(pl.element().is_null().sum()).list.first()
    keep = []
    if nulls == "drop":
        keep.append(lists.is_not_null() & (n_null_symbols == 0))
    if on_out_of_domain == "drop":  # symbols without a code that are not null
        n_outside = codes.list.eval(pl.element().is_null().sum()).list.first() - n_null_symbols
        keep.append((n_outside == 0).fill_null(True))
    if keep:
        lf = lf.filter(pl.all_horizontal(keep))
    out = lf.select(codes=codes, n_null_symbols=n_null_symbols).collect(engine="streaming")
    series = out["codes"]
    if series.null_count():
        raise DomainError(f"column {column!r} has {series.null_count():,} null sequence(s); drop them first "
                          "(an empty sequence is fine) or pass nulls='drop' (drops those sequences)")
    arr = series.to_arrow()
    arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    offsets = array_values(arr.offsets)
    flat = arr.flatten()
    if flat.null_count:
        n_null = int(out["n_null_symbols"].fill_null(0).sum())
        if n_null:
            raise DomainError(f"column {column!r} has {n_null:,} null symbol(s) inside sequences; "
                              "remove or recode them, or pass nulls='drop' (drops those sequences)")
        bad = (lf.select(lists.alias("s"), codes.alias("c")).explode(["s", "c"])
               .filter(pl.col("c").is_null()).select("s").unique().sort("s").head(5).collect()["s"].to_list())
        raise DomainError(
            f"column {column!r} has symbols outside the declared alphabet {alphabet_text(symbols)}, "
            f"e.g. {', '.join(map(repr, bad))}; add them to the public alphabet, recode the data, or pass "
            "on_out_of_domain='drop' (drops those sequences)"
        )
    return encoded_from_lists(array_values(flat), np.diff(offsets), len(symbols),
                              max_length)


__all__ = ["EncodedSequences", "check_max_length", "encode_sequences", "encoded_from_lists", "symbol_lists"]
