"""Summed-area (prefix-sum) arrays and box sums by inclusion-exclusion (pure numpy).

``P[j_1, ..., j_d] = sum_{i_k < j_k} M[i_1, ..., i_d]`` (a zero border in front of every
axis), so the sum of ``M`` over the box ``[s, t)`` is

    sum_{b in {0,1}^d} (-1)^(d - |b|) P[c(b)],   c(b)_k = t_k if b_k else s_k

(``2^d`` look-ups per box).  Used by grid releases (cells) and spatial grids (leaves).
"""

from __future__ import annotations

import numpy as np


def prefix_sums(counts: np.ndarray, *, batch_axes: int = 0) -> np.ndarray:
    """Summed-area array of ``counts`` with a zero border on every axis after the first
    ``batch_axes`` (a stack of independent grids keeps its leading axes as they are).

    Shape ``(n_1 + 1, ..., n_d + 1)`` for ``batch_axes=0``; one in-place cumulative sum per axis.
    """
    counts = np.asarray(counts, dtype=np.float64)
    lead = counts.shape[:batch_axes]
    prefix = np.zeros(lead + tuple(n + 1 for n in counts.shape[batch_axes:]), dtype=np.float64)
    prefix[(slice(None),) * batch_axes + (slice(1, None),) * (counts.ndim - batch_axes)] = counts
    for axis in range(batch_axes, counts.ndim):
        np.cumsum(prefix, axis=axis, out=prefix)
    return prefix


def box_sums(prefix: np.ndarray, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """Sums of the boxes ``[starts, stops)`` (shape (queries, d)) from a summed-area array:
    ``2^d`` vectorised gathers from the flat prefix array."""
    starts = np.atleast_2d(np.asarray(starts, dtype=np.int64))
    stops = np.atleast_2d(np.asarray(stops, dtype=np.int64))
    d = prefix.ndim
    element_strides = np.asarray(prefix.strides, dtype=np.int64) // prefix.itemsize
    low = starts * element_strides
    high = stops * element_strides
    flat = prefix.reshape(-1)
    total = np.zeros(starts.shape[0], dtype=np.float64)
    for corner in range(1 << d):
        index = np.zeros(starts.shape[0], dtype=np.int64)
        n_low = 0
        for k in range(d):
            if corner >> k & 1:
                index += high[:, k]
            else:
                index += low[:, k]
                n_low += 1
        values = flat.take(index)
        if n_low % 2:
            total -= values
        else:
            total += values
    return total


__all__ = ["box_sums", "prefix_sums"]
