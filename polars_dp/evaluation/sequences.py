"""Exact, NON-PRIVATE references for evaluating sequence releases.

Nothing in this module is differentially private: it reads the data and returns exact
counts.  It exists to measure the utility of the private mechanisms (e.g. the precision of
their top-k strings against the exact top-k) and must never be published as a release.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from polars_dp.counting.frequency import as_lazy
from polars_dp.counting.sequences import encode_sequences, symbol_lists
from polars_dp.domains.alphabet import check_alphabet
from polars_dp.errors import ParameterError
from polars_dp.kernels.topk import best_k, frontier
from polars_dp.params import check_int
from polars_dp.releases.sequence import strings_frame


def exact_top_k_strings(frame: Any, column: str, *, alphabet: Sequence[Any], k: int,
                        max_length: int | None = None, max_len: int | None = None) -> pl.DataFrame:
    """NOT PRIVATE.  The ``k`` most frequent substrings (occurrence counts) of the sequences.

    ``max_length`` truncates every sequence first (the "Truncate" reference of the PrivTree
    paper's experiments); ``None`` uses the whole sequences (the ground truth).  Substrings
    are counted level by level (length 1, 2, ...): a string can only be in the top ``k`` if
    its prefix is, so only extensions of the current top ``k`` are counted (np.unique over
    all their occurrences at once).  Returns columns ``string`` (List of symbols) and
    ``count``, most frequent first.
    """
    k = check_int(k, "k", lo=1)
    symbols = check_alphabet(alphabet)
    lf = as_lazy(frame)
    if max_length is None:
        longest = lf.select(symbol_lists(lf, column).list.len().max()).collect().item()
        max_length = max(int(longest or 0), 1)
    enc = encode_sequences(lf, column, alphabet=symbols, max_length=max_length)
    a = enc.alphabet_size
    sym = enc.next_symbol.astype(np.int64)
    is_end = sym == a
    seq_len = np.repeat(enc.n_before[is_end].astype(np.int64), enc.n_before[is_end].astype(np.int64) + 1)
    remaining = seq_len - enc.n_before  # symbols from this position to the end of its sequence
    starts = np.flatnonzero(remaining >= 1)
    ids, counts = np.unique(sym[starts], return_counts=True)
    strings = ids[:, None]
    occ_id = np.searchsorted(ids, sym[starts])
    found_s, found_c = [], []
    for length in range(1, int(max_len or max_length) + 1):
        found_s.append(strings)
        found_c.append(counts)
        keep = frontier(found_c, counts, k)
        rank = np.full(strings.shape[0], -1)
        rank[keep] = np.arange(keep.size)
        live = (rank[occ_id] >= 0) & (remaining[starts] >= length + 1)
        if not live.any() or (max_len is not None and length == max_len):
            break
        starts, occ_id = starts[live], rank[occ_id[live]]
        key = occ_id * a + sym[starts + length]
        uniq, occ_id, counts = np.unique(key, return_inverse=True, return_counts=True)
        strings = np.concatenate([strings[keep][uniq // a], (uniq % a)[:, None]], axis=1)
    strings, counts = best_k(found_s, found_c, k)
    return strings_frame(symbols, strings, counts.astype(np.float64))


def top_k_precision(found: pl.DataFrame, truth: pl.DataFrame) -> float:
    """``|found ∩ truth| / |truth|`` over the ``string`` columns (order ignored)."""
    truth_set = {tuple(s) for s in truth["string"].to_list()}
    if not truth_set:
        raise ParameterError("the reference top-k is empty")
    found_set = {tuple(s) for s in found["string"].to_list()}
    return len(found_set & truth_set) / len(truth_set)


__all__ = ["exact_top_k_strings", "top_k_precision"]
