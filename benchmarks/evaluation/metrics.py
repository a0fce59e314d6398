"""Error measures of the papers' experiments (pure numpy, no library code).

* Square error ``(x - act)^2`` and relative error ``|x - act| / max(act, s)`` with a sanity
  bound ``s`` (Privelet paper Sec. VI: s = 0.1% of n; PrivTree paper Sec. 6: the same
  smoothing 0.1% of |D|).
* Coverage of a range-count query: the fraction of the frequency matrix's cells it covers
  (Privelet paper Sec. VI); queries are grouped into five coverage quintiles.
* Top-k precision ``|returned ∩ true top-k| / k`` and the total variation distance
  ``(1/2) sum |p - q|`` between two distributions (PrivTree paper Sec. 6, sequences).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np


def square_error(estimate: np.ndarray, actual: np.ndarray) -> np.ndarray:
    """``(estimate - actual)^2`` per query."""
    diff = np.asarray(estimate, dtype=np.float64) - np.asarray(actual, dtype=np.float64)
    return diff * diff


def relative_error(estimate: np.ndarray, actual: np.ndarray, sanity_bound: float) -> np.ndarray:
    """``|estimate - actual| / max(actual, sanity_bound)`` per query (``sanity_bound > 0``)."""
    if not sanity_bound > 0:
        raise ValueError(f"sanity_bound must be > 0, got {sanity_bound!r}")
    actual = np.asarray(actual, dtype=np.float64)
    return np.abs(np.asarray(estimate, dtype=np.float64) - actual) / np.maximum(actual, sanity_bound)


def sanity_bound(n: int, fraction: float = 0.001) -> float:
    """The papers' sanity bound / smoothing: ``fraction`` (0.1%) of the number of tuples."""
    return max(fraction * n, 1e-12)


def coverage(starts: np.ndarray, stops: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """Fraction of the cells of a ``shape`` grid covered by each box ``[starts, stops)``."""
    widths = np.asarray(stops, dtype=np.float64) - np.asarray(starts, dtype=np.float64)
    return np.prod(widths / np.asarray(shape, dtype=np.float64), axis=1)


def quintile_index(values: np.ndarray, groups: int = 5) -> np.ndarray:
    """Group ``0..groups-1`` of every value by rank: equal-size groups of increasing value
    (ties broken by position, so the groups have sizes differing by at most one)."""
    values = np.asarray(values)
    rank = np.empty(values.size, dtype=np.int64)
    rank[np.argsort(values, kind="stable")] = np.arange(values.size)
    return rank * groups // max(values.size, 1)


def group_means(groups: np.ndarray, values: np.ndarray, n_groups: int) -> np.ndarray:
    """Mean of ``values`` within each group ``0..n_groups-1`` (NaN for an empty group)."""
    sums = np.bincount(groups, weights=np.asarray(values, dtype=np.float64), minlength=n_groups)
    sizes = np.bincount(groups, minlength=n_groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        return sums / sizes


def exact_box_counts(points: np.ndarray, lo: np.ndarray, hi: np.ndarray, *,
                     weights: np.ndarray | None = None, chunk_cells: int = 20_000_000) -> np.ndarray:
    """Exact number of ``points`` (shape (n, d)) inside each box ``lo <= x <= hi`` (shape (q, d)).

    Chunked over queries so that at most ``chunk_cells`` point-query pairs are compared at a
    time; ``weights`` counts a point several times (used for repeated points).
    """
    points = np.asarray(points, dtype=np.float64)
    lo = np.atleast_2d(np.asarray(lo, dtype=np.float64))
    hi = np.atleast_2d(np.asarray(hi, dtype=np.float64))
    w = np.ones(points.shape[0]) if weights is None else np.asarray(weights, dtype=np.float64)
    step = max(1, chunk_cells // max(points.shape[0], 1))
    out = np.empty(lo.shape[0], dtype=np.float64)
    for start in range(0, lo.shape[0], step):
        stop = min(start + step, lo.shape[0])
        inside = np.ones((stop - start, points.shape[0]), dtype=bool)
        for k in range(points.shape[1]):
            x = points[:, k]
            inside &= (x >= lo[start:stop, k, None]) & (x <= hi[start:stop, k, None])
        out[start:stop] = inside @ w
    return out


def top_k_precision(returned: Iterable, truth: Iterable, k: int) -> float:
    """``|set(returned[:k]) ∩ set(truth[:k])| / k`` for hashable items (e.g. tuples)."""
    got = set(list(returned)[:k])
    want = set(list(truth)[:k])
    return len(got & want) / k


def total_variation(p: np.ndarray, q: np.ndarray) -> float:
    """``(1/2) sum |p/|p| - q/|q||`` of two non-negative weight vectors over the same support.

    Negative estimates are clipped to 0 first; an all-zero vector is the uniform
    distribution (the only distribution a model without information can claim).
    """
    def normalise(x: np.ndarray) -> np.ndarray:
        x = np.clip(np.asarray(x, dtype=np.float64), 0, None)
        total = x.sum()
        return x / total if total > 0 else np.full(x.size, 1.0 / x.size)

    return 0.5 * float(np.abs(normalise(p) - normalise(q)).sum())


def ngram_counts(symbols: np.ndarray, offsets: np.ndarray, n: int, base: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Occurrences of every length-``n`` substring of a set of sequences.

    ``symbols`` holds all sequences back to back (integer codes ``1..base-1``), ``offsets``
    their start positions plus the total length (Arrow list layout).  Each substring is
    encoded as ``sum_j s_j * base^(n-1-j)``; returns ``(codes, counts)`` sorted by code.
    One vectorized pass per position within the substring (``n`` passes).
    """
    symbols = np.asarray(symbols, dtype=np.int64)
    offsets = np.asarray(offsets, dtype=np.int64)
    lengths = np.diff(offsets)
    seq_end = np.repeat(offsets[1:], lengths)  # end of the sequence each position belongs to
    starts = np.flatnonzero(np.arange(symbols.size) + n <= seq_end)
    code = np.zeros(starts.size, dtype=np.int64)
    for j in range(n):
        code = code * base + symbols[starts + j]
    return np.unique(code, return_counts=True)


def decode_ngrams(codes: np.ndarray, n: int, base: int) -> list[tuple[int, ...]]:
    """Inverse of the encoding of :func:`ngram_counts`: one tuple of symbols per code."""
    codes = np.asarray(codes, dtype=np.int64)
    digits = np.empty((codes.size, n), dtype=np.int64)
    rest = codes.copy()
    for j in range(n - 1, -1, -1):
        digits[:, j] = rest % base
        rest //= base
    return [tuple(int(x) for x in row) for row in digits]


def exact_top_k(symbols: np.ndarray, offsets: np.ndarray, k: int, base: int
                ) -> tuple[list[tuple[int, ...]], np.ndarray]:
    """The ``k`` most frequent substrings (by occurrences) and their counts, exactly.

    Substring frequency is anti-monotone (a string occurs at least as often as any
    extension), so lengths are enumerated until every string of the next length is rarer
    than the current k-th best.  Ties are broken by length, then by code.
    """
    strings: list[tuple[int, ...]] = []
    counts = np.empty(0, dtype=np.int64)
    n = 1
    codes, cnt = ngram_counts(symbols, offsets, n, base)
    while cnt.size:
        top = np.argsort(-cnt, kind="stable")[:k]
        strings.extend(decode_ngrams(codes[top], n, base))
        counts = np.concatenate([counts, cnt[top]])
        kth = np.sort(counts)[-k] if counts.size >= k else -1
        codes, cnt = ngram_counts(symbols, offsets, n + 1, base)
        if cnt.size == 0 or cnt.max() < kth:
            break
        n += 1
    order = np.argsort(-counts, kind="stable")[:k]
    return [strings[i] for i in order], counts[order]


def summarise_by_group(groups: np.ndarray, columns: Mapping[str, np.ndarray], n_groups: int
                       ) -> dict[str, np.ndarray]:
    """:func:`group_means` of several named columns."""
    return {name: group_means(groups, values, n_groups) for name, values in columns.items()}
