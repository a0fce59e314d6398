"""Brute-force references for the sequence tests (plain Python; tests only)."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np

from polars_dp.counting.sequences import EncodedSequences

START, END = "#", "&"


def random_sequences(rng: np.random.Generator, n: int, alphabet: list, max_len: int) -> list[list]:
    lengths = rng.integers(0, max_len + 1, size=n)
    return [list(rng.choice(alphabet, size=int(k))) for k in lengths]


def pairs_of(seq: list, max_length: int) -> list[tuple[tuple, object]]:
    """(context, next symbol) pairs of one sequence after truncation; context oldest first."""
    s = list(seq)[:max_length]
    out = []
    for j in range(len(s) + 1):
        out.append(((START, *s[:j]), s[j] if j < len(s) else END))
    return out


def histogram(pairs: list, node: tuple, bins: list) -> np.ndarray:
    """h(node)[y]: pairs whose context ends with ``node`` and whose symbol is y."""
    counts = Counter(y for ctx, y in pairs
                     if len(ctx) >= len(node) and tuple(ctx[len(ctx) - len(node):]) == node)
    return np.array([counts[b] for b in bins], dtype=float)


def all_nodes(alphabet: list, depth: int) -> list[tuple]:
    """Every predictor string of length <= depth with '#' only in front."""
    out = []
    for k in range(depth + 1):
        out.extend(itertools.product(alphabet, repeat=k))
        if k >= 1:
            out.extend((START, *t) for t in itertools.product(alphabet, repeat=k - 1))
    return out


def substring_counts(seqs: list[list], max_len: int) -> Counter:
    c = Counter()
    for s in seqs:
        for i in range(len(s)):
            for j in range(i + 1, min(len(s), i + max_len) + 1):
                c[tuple(s[i:j])] += 1
    return c


# Dense context histograms, the brute-force reference of the context tree's counts.
def context_codes(enc: EncodedSequences, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions having a context suffix of exact length ``k`` and its code (base ``beta``)."""
    positions = np.flatnonzero(enc.n_before >= k - 1) if k > 0 else np.arange(enc.n_positions)
    code = np.zeros(positions.size, dtype=np.int64)
    for offset in range(1, k + 1):
        code += enc.context_digit(positions, offset) * enc.beta ** (offset - 1)
    return positions, code


def context_histograms(enc: EncodedSequences, k: int) -> np.ndarray:
    """Dense counts ``H[c, y]``: positions whose length-``k`` context code is ``c`` and which
    predict ``y`` (``y = |I|`` is ``&``); shape ``(beta**k, beta)``.

    One sequence contributes at most ``l_top = max_length + 1`` to ``H`` (each of its
    positions increments one cell), so ``H`` has L1 sensitivity ``l_top`` under add/remove-one
    sequence.
    """
    beta = enc.beta
    positions, code = context_codes(enc, k)
    flat = code * beta + enc.next_symbol[positions]
    return np.bincount(flat, minlength=beta ** (k + 1)).astype(np.float64).reshape(beta**k, beta)


def decode_context(code: int, k: int, alphabet_size: int) -> list[int]:
    """Symbol codes of a length-``k`` context code, oldest first (``alphabet_size`` is ``#``)."""
    beta = alphabet_size + 1
    digits = [(code // beta**i) % beta for i in range(k)]
    return digits[::-1]
