"""Brute-force references for the sequence tests (plain Python; tests only)."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np

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
