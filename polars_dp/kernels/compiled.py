"""Optional compiled twins of the wavelet kernels (numba, the ``fast`` extra): one pass per row.

Each performs the integer and IEEE-754 operations of the numpy kernel it replaces, in the same
order per value, so both give the same bits (the tests compare them on every path).  Whether
they run is :func:`polars_dp.compiled.enabled` (numba installed, ``POLARS_DP_COMPILED`` not
``0``, not inside ``numpy_only``, which a plan asks for from its public size): never a function
of the data.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from polars_dp.compiled import enabled, kernel_set

#: Columns per chunk of the nominal kernels: a chunk of every node's row stays in cache (L2).
COLUMNS = 256


def _build(numba: Any) -> dict[str, Any]:
    """The compiled kernels (compiled on first call, cached on disk)."""

    @numba.njit(cache=True, nogil=True)
    def min_max(z: np.ndarray) -> tuple[int, int]:  # pragma: no cover - compiled
        lo = hi = z.flat[0]
        for v in z.flat:
            lo = min(lo, v)
            hi = max(hi, v)
        return lo, hi

    @numba.njit(cache=True, nogil=True)
    def noise_first_rows(z: np.ndarray, which: np.ndarray, y: np.ndarray, row_den: np.ndarray,
                         out: np.ndarray, low: np.int64, scale: float) -> None:  # pragma: no cover - compiled
        rows, m = out.shape
        p = z.shape[1]
        high = ~low
        w = np.empty(p, np.int64)
        for r in range(rows):
            zr = z[which[r]]
            w[0] = zr[0]
            k = 1
            while k < p:  # W = P H^-1(z) in place, right to left: 2i, 2i+1 overwrite sums already read
                for i in range(k - 1, -1, -1):
                    d = zr[k + i] * k
                    s = w[i]
                    w[2 * i] = s + d
                    w[2 * i + 1] = s - d
                k *= 2
            den, yr, orow = row_den[r], y[r], out[r]
            for i in range(m):  # fl(N / P) / D, N = P y + W (scaled_to_float)
                yi = yr[i]
                orow[i] = (float(yi & high) + (float(yi & low) + float(w[i]) * scale)) / den

    @numba.njit(cache=True, nogil=True)
    def nominal_rows(c: np.ndarray, group_start: np.ndarray, group_size: np.ndarray,
                     group_parent_pos: np.ndarray, parent_fan: np.ndarray, group_k: np.ndarray,
                     node_pos: np.ndarray, leaf_nodes: np.ndarray, leaf_group: np.ndarray,
                     leaf_k: np.ndarray, n_internal: int, out: np.ndarray) -> None:  # pragma: no cover
        pre, _, post = c.shape
        n_groups = group_start.size
        width = min(post, COLUMNS)
        mean = np.empty((n_groups, width))
        offset = np.empty((n_groups, width))
        ils = np.empty((n_internal, width))
        for a in range(pre):
            for c0 in range(0, post, width):  # a column chunk at a time: every row of it in cache
                c1 = min(post, c0 + width)
                w = c1 - c0
                for g in range(n_groups):  # sibling sums left to right (as reduceat), then / size
                    first = 1 + group_start[g]
                    acc = mean[g, :w]
                    acc[:] = c[a, first, c0:c1]
                    for j in range(first + 1, first + group_size[g]):
                        row = c[a, j, c0:c1]
                        for col in range(w):
                            acc[col] = acc[col] + row[col]
                    size = float(group_size[g])
                    for col in range(w):
                        acc[col] = acc[col] / size
                ils[0, :w] = c[a, 0, c0:c1]
                for g in range(n_groups):  # parents before children (BFS order of the groups)
                    pf, k = parent_fan[g], group_k[g]
                    off, up, acc = offset[g, :w], ils[group_parent_pos[g], :w], mean[g, :w]
                    for col in range(w):
                        off[col] = up[col] / pf - k * acc[col]
                    first = 1 + group_start[g]
                    for node in range(first, first + group_size[g]):
                        q = node_pos[node]
                        if q >= 0:
                            row, dst = c[a, node, c0:c1], ils[q, :w]
                            for col in range(w):
                                dst[col] = k * row[col] + off[col]
                for j in range(leaf_nodes.size):
                    k, off = leaf_k[j], offset[leaf_group[j], :w]
                    row, dst = c[a, leaf_nodes[j], c0:c1], out[a, j, c0:c1]
                    for col in range(w):
                        dst[col] = row[col] * k + off[col]

    @numba.njit(cache=True, nogil=True)
    def nominal_numerator_rows(v: np.ndarray, leaf_nodes: np.ndarray, parent: np.ndarray,
                               parent_fanout: np.ndarray, internal: np.ndarray,
                               out: np.ndarray) -> None:  # pragma: no cover - compiled
        pre, _, post = v.shape
        n_nodes = parent.size
        width = min(post, COLUMNS)
        for a in range(pre):
            for c0 in range(0, post, width):  # a column chunk at a time: every row of it in cache
                c1 = min(post, c0 + width)
                for node in internal:
                    out[a, node, c0:c1] = 0
                for j in range(leaf_nodes.size):
                    out[a, leaf_nodes[j], c0:c1] = v[a, j, c0:c1]
                for node in range(n_nodes - 1, 0, -1):  # leaf sums: children before parents (BFS)
                    src, dst = out[a, node, c0:c1], out[a, parent[node], c0:c1]
                    for col in range(c1 - c0):
                        dst[col] += src[col]
                for node in range(n_nodes - 1, 0, -1):  # f leafsum(N) - leafsum(p): parents still sums
                    f = parent_fanout[node]
                    src, dst = out[a, parent[node], c0:c1], out[a, node, c0:c1]
                    for col in range(c1 - c0):
                        dst[col] = f * dst[col] - src[col]

    @numba.njit(cache=True, nogil=True)
    def haar_columns_forward(x: np.ndarray, head: np.ndarray, tail: np.ndarray,
                             p: int) -> None:  # pragma: no cover - compiled
        m, cols = x.shape
        h = head.shape[0]
        width = min(cols, COLUMNS)
        cur = np.empty((m, width), np.int64)  # the sums of a level, compacted in place
        res = np.empty((p, width), np.int64)
        for c0 in range(0, cols, width):  # a column chunk at a time, copied in first
            w = min(width, cols - c0)
            for r in range(m):
                cur[r, :w] = x[r, c0:c0 + w]
            n, half = m, p
            while half > 1:  # finest level first: details even - odd, sums even + odd passed up
                half //= 2
                full = n // 2
                for i in range(full):
                    e, o, d, s = cur[2 * i, :w], cur[2 * i + 1, :w], res[half + i, :w], cur[i, :w]
                    for col in range(w):
                        d[col] = e[col] - o[col]
                    for col in range(w):
                        s[col] = e[col] + o[col]  # row i <= 2i: read before it is written
                if n % 2:  # a last sum without a partner: its pair is padding
                    res[half + full, :w] = cur[n - 1, :w]
                    cur[full, :w] = cur[n - 1, :w]
                n = (n + 1) // 2
                for r in range(half + n, 2 * half):  # nodes over padding only
                    res[r, :w] = 0
            res[0, :w] = cur[0, :w]
            for r in range(p):
                if r < h:
                    head[r, c0:c0 + w] = res[r, :w]
                else:
                    tail[r - h, c0:c0 + w] = res[r, :w]

    @numba.njit(cache=True, nogil=True)
    def haar_columns_inverse(head: np.ndarray, tail: np.ndarray, levels: np.ndarray, out: np.ndarray,
                             add: bool) -> None:  # pragma: no cover - compiled
        m, cols = out.shape
        h = head.shape[0]
        p = h + tail.shape[0]
        width = min(cols, COLUMNS)
        c = np.empty((p, width))
        bufs = np.empty((2, max(p // 2, 1), width))
        out_chunk = np.empty((m, width))
        for c0 in range(0, cols, width):  # a column chunk at a time, copied in first
            w = min(width, cols - c0)
            for r in range(p):
                c[r, :w] = head[r, c0:c0 + w] if r < h else tail[r - h, c0:c0 + w]
            s = bufs[1]
            for col in range(w):
                s[0, col] = c[0, col] * (1.0 / p)  # base: W = P
            which = 0
            for lv in range(levels.shape[0]):  # k nodes (sums s, details d) -> children
                k, n_even, n_odd = levels[lv, 0], levels[lv, 1], levels[lv, 2]
                nxt = out_chunk if 2 * k == p else bufs[which]
                f = k / p  # level of k nodes: W = P / k
                for i in range(n_even):
                    ci, si, ev = c[k + i], s[i], nxt[2 * i]
                    for col in range(w):
                        ev[col] = si[col] + ci[col] * f
                    if i < n_odd:
                        od = nxt[2 * i + 1]
                        for col in range(w):
                            od[col] = si[col] - ci[col] * f
                s, which = nxt, 1 - which
            if p == 1:
                for col in range(w):
                    out_chunk[0, col] = s[0, col]
            for r in range(m):
                dst, src = out[r, c0:c0 + w], out_chunk[r, :w]
                if add:
                    for col in range(w):
                        dst[col] = dst[col] + src[col]
                else:
                    dst[:] = src

    @numba.njit(cache=True, nogil=True)
    def binary_level_rows(x: np.ndarray, out: np.ndarray, drops: np.ndarray, scales: np.ndarray,
                          scratch: np.ndarray) -> None:  # pragma: no cover - compiled
        rows, n = x.shape
        deepest = drops[0]
        for r in range(rows):
            row = x[r]
            # the halving chain: level top - k (k = 1..deepest) at scratch[n - 2 n_{k-1} : n - n_k]
            src, start, m = row, 0, n
            for _ in range(deepest):
                h = m // 2
                dst = scratch[start:start + h]
                for j in range(h):
                    dst[j] = src[2 * j] + src[2 * j + 1]
                src, start, m = dst, start + h, h
            # the wanted levels, coarsest first: scaled, plus the previous one repeated
            prev = scratch[0:0]
            shift = 0
            for k in range(drops.size):
                drop = drops[k]
                m = n >> drop
                if drop == 0:
                    level = row
                else:
                    first = n - (n >> (drop - 1))
                    level = scratch[first:first + m]
                s = scales[k]
                if k == 0:
                    for j in range(m):
                        level[j] = level[j] * s
                else:
                    shift = drops[k - 1] - drop
                    for j in range(m):
                        v = level[j] * s
                        level[j] = v + prev[j >> shift]
                prev = level
            if drops[drops.size - 1] != 0:
                dst = out[r]
                for j in range(dst.size):
                    dst[j] = prev[j]

    @numba.njit(cache=True, nogil=True)
    def int_block_sums_rows(x: np.ndarray, factor: int, out: np.ndarray) -> None:  # pragma: no cover
        rows, m = x.shape
        full = m // factor
        for r in range(rows):
            src, dst = x[r], out[r]
            for b in range(full):
                acc = np.int64(0)
                base = b * factor
                for k in range(factor):
                    acc += src[base + k]
                dst[b] = acc
            if full < dst.size:
                acc = np.int64(0)
                for j in range(full * factor, m):
                    acc += src[j]
                dst[full] = acc

    @numba.njit(cache=True, nogil=True)
    def add_counts_rows(y: np.ndarray, real: np.ndarray, row_map: np.ndarray, weight: float,
                        scale: bool) -> None:  # pragma: no cover - compiled
        rows, p = y.shape
        m = real.shape[1]
        for r in range(rows):
            dst = y[r]
            q = row_map[r]
            if q >= 0:
                src = real[q]
                for j in range(m):
                    v = dst[j] + np.float64(src[j])
                    dst[j] = v * weight if scale else v
                start = m
            else:
                start = 0
            if scale:
                for j in range(start, p):
                    dst[j] = dst[j] * weight

    return {"min_max": min_max, "noise_first_rows": noise_first_rows, "nominal_rows": nominal_rows,
            "nominal_numerator_rows": nominal_numerator_rows,
            "haar_columns_forward": haar_columns_forward, "haar_columns_inverse": haar_columns_inverse,
            "binary_level_rows": binary_level_rows, "int_block_sums_rows": int_block_sums_rows,
            "add_counts_rows": add_counts_rows}


_active = kernel_set(_build)


def _run(name: str, *args: Any) -> bool:
    """The compiled kernel ``name`` on ``args``; False (nothing run) when compiled kernels are off."""
    ks = _active()
    if ks is not None:
        ks[name](*args)
    return ks is not None


def noise_first_rows(z: np.ndarray, which: np.ndarray, y: np.ndarray, row_den: np.ndarray, out: np.ndarray,
                     limit: int) -> bool:
    """``out[r] = fl(N / P) / D`` per row ``r``, ``N = P y[r] + W``, ``W = P H^-1(z[which[r]])``:
    the numpy :func:`~polars_dp.kernels.wavelet_exact.haar_inverse_scaled` (int64 ``W``, cells
    ``[0, m)``), :func:`~polars_dp.kernels.wavelet_exact.scaled_to_float` and the division by
    each row's ``D`` (``row_den``, float64; ``x / 1.0 = x``), the same operations value by
    value, one row at a time (``W`` never leaves the cache).  ``z``: int64 (any rows, ``P``);
    ``which``: int64 row of ``z`` per output row; ``y``: int64 (rows, ``m``), ``|y| < 2^62``;
    ``out``: float64 (rows, ``m``); all C-contiguous.  False (``out`` untouched) when compiled
    kernels are off or ``P max|z| >= limit``
    (:data:`~polars_dp.kernels.wavelet_exact.SCALED_LIMIT`: the numpy kernels then take the
    exact Python-int path), a property of ``z`` alone."""
    ks = _active()
    if ks is None:
        return False
    p = z.shape[1]
    if z.size:
        lo, hi = ks["min_max"](z)
        if max(-int(lo), int(hi)) * p >= limit:
            return False
    low = np.int64((1 << (52 - (p.bit_length() - 1))) - 1)
    ks["noise_first_rows"](z, which, y, row_den, out, low, 1.0 / p)
    return True


def nominal_numerators(v: np.ndarray, tree: Any, out: np.ndarray) -> bool:
    """``out[:, N] = f_p leafsum(N) - leafsum(p)`` (the root: its leaf sum) for int64 leaves
    ``v`` (pre, leaves, post), as :func:`~polars_dp.kernels.wavelet_exact.nominal_forward_int`:
    leaf sums bottom-up in reverse BFS order, then every node from its parent's sum, in place.
    Integer arithmetic modulo ``2^64``, so the same integers as numpy in any order.  False
    (``out`` untouched) when compiled kernels are off."""
    if _active() is None:  # the kernel's arrays are prepared only for the kernel
        return False
    return _run("nominal_numerator_rows", v, tree.leaf_nodes.astype(np.int64), tree.parent.astype(np.int64),
                np.r_[0, tree.parent_fanout].astype(np.int64),
                np.flatnonzero(tree.fanout > 0).astype(np.int64), out)


def nominal_inverse(c: np.ndarray, tree: Any, out: np.ndarray) -> bool:
    """:func:`~polars_dp.kernels.wavelets.nominal_inverse` of float64 ``c`` (pre, nodes, post)
    into ``out`` (pre, leaves, post), its operations in its order: each sibling group's sum
    left to right (as ``np.add.reduceat``), divided by its size; group by group, parents first,
    ``offset = leafsum(p) / f_p - k mean`` and ``leafsum = k u + offset`` for the internal
    children; every leaf ``u k + offset``.  False (``out`` untouched) when compiled kernels
    are off.  ``tree`` is the hierarchy's :class:`~polars_dp.kernels.wavelets.NominalTree`."""
    if _active() is None:  # the kernel's arrays are prepared only for the kernel
        return False
    t = tree
    internal = np.flatnonzero(t.fanout > 0)
    node_pos = np.full(t.n_nodes, -1, dtype=np.int64)
    node_pos[internal] = np.arange(internal.size)
    parent = t.group_parent.astype(np.int64)
    return _run("nominal_rows", c, t.group_start.astype(np.int64), t.group_size.astype(np.int64),
                node_pos[parent], t.fanout[parent].astype(np.float64),
                np.ascontiguousarray(t.group_k, dtype=np.float64), node_pos, t.leaf_nodes.astype(np.int64),
                t.leaf_group.astype(np.int64), np.ascontiguousarray(t.leaf_k, dtype=np.float64),
                int(internal.size), out)


def haar_columns_forward(x: np.ndarray, head: np.ndarray, tail: np.ndarray) -> bool:
    """The unnormalised Haar coefficients of int64 ``x`` (``m`` cells, columns) down its rows,
    as :func:`~polars_dp.kernels.wavelets.haar_sums_and_differences` along axis 0: coefficient
    rows ``[0, h)`` into ``head``, the rest into ``tail`` (``P`` rows in all).  Integers modulo
    ``2^64``, so the same values as numpy.  Each column chunk of ``x`` is copied in before its
    coefficients are written, so ``head`` may be ``x``'s own memory.  False (nothing written)
    when compiled kernels are off."""
    return _run("haar_columns_forward", x, head, tail, head.shape[0] + tail.shape[0])


def haar_columns_inverse(head: np.ndarray, tail: np.ndarray, levels: np.ndarray, out: np.ndarray,
                         add: bool) -> bool:
    """``out (+)= haar_inverse(c, m, axis=0)`` of float64 coefficient rows ``c`` (rows ``[0, h)``
    in ``head``, the rest in ``tail``; ``m = out.shape[0]`` cells), the numpy kernel's operations
    in its order: the base times ``1/P``, then per level ``s + c (k/P)`` and ``s - c (k/P)``
    (``levels``: int64 rows ``(k, n_even, n_odd)`` of
    :func:`~polars_dp.kernels.wavelets.haar_inverse_levels`).  Each column chunk is
    copied in before ``out`` is written, so ``head`` may be ``out``'s own memory.  False
    (nothing written) when compiled kernels are off."""
    return _run("haar_columns_inverse", head, tail, levels, out, add)


def binary_level_rows(x: np.ndarray, drops: Sequence[int], scales: Sequence[float]) -> np.ndarray | None:
    """The least-squares pass of :func:`~polars_dp.kernels.level_inference.gls_from_sum` along the
    last axis of float64 ``x`` (C-contiguous, ``n`` a multiple of ``2^drops[0]`` values per
    row), where every level it reaches halves the one above: the block sums by pairs
    (``a + b``), level by level down to ``drops[0]`` halvings below the row; then the wanted
    levels (``drops``, strictly decreasing halvings below the row, ``0``: the row itself)
    coarsest first, each times its ``scales[k]`` plus the previous one repeated
    (``fl(fl(b s) + p)``): the numpy walk's operations value by value, one row at a time in
    cache.  Returns the finest wanted level (``x`` itself, overwritten, when ``drops[-1] = 0``),
    or None (nothing written) when compiled kernels are off."""
    ks = _active()
    if ks is None:
        return None
    rows = x.reshape(-1, x.shape[-1]) if x.size else x.reshape(0, max(1, x.shape[-1]))
    n = rows.shape[1]
    last = int(drops[-1])
    out = rows if last == 0 else np.empty((rows.shape[0], n >> last))
    if rows.shape[0]:
        ks["binary_level_rows"](rows, out, np.asarray(drops, dtype=np.int64),
                                np.asarray(scales, dtype=np.float64), np.empty(max(1, n)))
    return x if last == 0 else out.reshape(x.shape[:-1] + (n >> last,))


def int_block_sums_last(x: np.ndarray, factor: int) -> np.ndarray | None:
    """Sums of ``factor`` consecutive int64 values along the last axis of C-contiguous ``x`` (the
    last block partial when ``factor`` does not divide it): ``ceil(m / factor)`` per row, int64,
    one pass (integers modulo ``2^64``: numpy's values in any order).  None when compiled kernels
    are off."""
    ks = _active()
    if ks is None:
        return None
    m = x.shape[-1]
    blocks = -(-m // factor)
    out = np.empty(x.shape[:-1] + (blocks,), dtype=np.int64)
    if out.size:
        ks["int_block_sums_rows"](x.reshape(-1, m), factor, out.reshape(-1, blocks))
    return out


def add_counts(y: np.ndarray, real: np.ndarray, weight: float) -> bool:
    """``y[:real's shape] += real`` (int64 counts, as float64), then ``y *= weight`` when
    ``weight > 0``, in one pass over float64 ``y`` (C-contiguous; ``real`` no larger on any axis):
    ``fl(fl(y + r) w)`` per value as numpy's two steps.  False (nothing written) when compiled
    kernels are off or ``real`` is not int64."""
    ks = _active()
    if ks is None or real.dtype != np.int64 or not y.flags.c_contiguous:
        return False
    if y.ndim == 1:
        y2, r2, row_map = y.reshape(1, -1), real.reshape(1, -1), np.zeros(1, dtype=np.int64)
    else:
        row_map = np.full(y.shape[:-1], -1, dtype=np.int64)
        row_map[tuple(slice(0, n) for n in real.shape[:-1])] = np.arange(
            int(np.prod(real.shape[:-1], dtype=np.int64))).reshape(real.shape[:-1])
        y2, r2 = y.reshape(-1, y.shape[-1]), np.ascontiguousarray(real).reshape(-1, real.shape[-1])
    ks["add_counts_rows"](y2, r2, row_map.reshape(-1), float(weight), bool(weight > 0))
    return True


__all__ = ["add_counts", "binary_level_rows", "enabled", "haar_columns_forward", "haar_columns_inverse",
           "int_block_sums_last", "noise_first_rows", "nominal_inverse", "nominal_numerators"]
