"""Least squares on level-tuple measurements without matrices, and its exact error.

Setting (:mod:`polars_dp.kernels.block_levels`): each measured level tuple ``t`` gives the
counts ``y_t = A_t x + noise`` of its blocks, independent noise of variance ``1 / w_t``
(``w_t = 0``: not measured).  The generalised least-squares estimate is
``x̂ = M⁺ Σ_t w_t A_tᵀ y_t`` with the normal matrix ``M = Σ_t w_t A_tᵀ A_t``.

Per axis let ``E_l`` average over the level-``l`` blocks and broadcast (an orthogonal
projector; ``E_{-1} = 0``) and ``P_l = E_l - E_{l-1}``: mutually orthogonal projectors onto the
level-``l`` detail spaces (a block-Haar basis), summing to the identity.  Since the levels nest,
``A_tᵀ A_t = S_t ⊗_i E_{t_i} = S_t Σ_{a ≤ t} P_a`` with ``P_a = ⊗_i P_{a_i}``, so

    M = Σ_a μ_a P_a,   μ_a = Σ_{t ≥ a componentwise} w_t S_t,
    M⁺ = Σ_a ν_a P_a = Σ_b c_b E_b,   ν_a = 1/μ_a (0 where μ_a = 0),
    c_b = Σ_{δ ∈ {0,1}^d} (-1)^|δ| ν_{b+δ}   (terms past the last level dropped).

The estimate is one pyramid of block sums of ``z = Σ_t w_t A_tᵀ y_t`` at every level tuple,
one scaling by ``c_b / S_b`` and one collapse (:func:`gls`), ``O(cells · prod_i Σ_l 1/s_l)``.
The same structure is behind least squares on hierarchies (Hay et al., VLDB 2010) and HDMM's
Kronecker strategies (McKenna et al., VLDB 2018); here it is written for products of nested
equal-block partitions with one weight per level tuple.

Error before data: the noise of ``qᵀ x̂`` has variance ``qᵀ M⁺ q = Σ_a ν_a Π_i q_iᵀ P_{a_i} q_i``
for a box ``q = ⊗_i q_i`` in the identified span (``μ_a > 0`` wherever ``q`` has a component;
otherwise ``inf``), ``q_iᵀ P_l q_i = (Σ_{level-l blocks} (block sum of q_i)²) / s_l - (same at
l - 1)`` (:func:`range_variance`); a workload with per-axis Gram matrices ``G_i`` has mean
squared error ``Σ_a ν_a C_a / m`` with ``C_a = Σ_terms w Π_i tr(P_{a_i} G_i)`` (:func:`workload_costs`).
On a padded axis a query reaching the last real cell also covers the padding (known zeros, so
unbiased), which is what :func:`polars_dp.kernels.block_levels.fold` computes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from polars_dp.domains.attributes import Attribute
from polars_dp.domains.workload import AxisWorkload, Workload
from polars_dp.kernels import compiled, parallel
from polars_dp.kernels.block_levels import (
    AxisLevels,
    BlockCounter,
    block_cells,
    coarsen,
    collapse,
    fold,
    fold_owned,
    padded_blocks,
    pyramid,
    tuple_shape,
)

#: :func:`gls_from_sum` works on slabs of about this many values along the first axis.
SLAB_CELLS = 1 << 20
#: :func:`noisy_normal_sum` evaluates its sum on slabs of about this many values (larger: the
#: coarse terms are evaluated once per slab at their own resolution).
SUM_SLAB_CELLS = 1 << 23
#: Explicit boxes are costed this many at a time.
BOX_CHUNK = 1024
#: Detail traces below this fraction of the axis's total trace are rounding, taken as zero.
TRACE_TOLERANCE = 1e-11


def suffix_sums(values: np.ndarray) -> np.ndarray:
    """``out[a] = Σ_{t ≥ a componentwise} values[t]``."""
    out = values
    for i in range(values.ndim):
        out = np.flip(np.cumsum(np.flip(out, axis=i), axis=i), axis=i)
    return out


def prefix_sums(values: np.ndarray) -> np.ndarray:
    """``out[t] = Σ_{a ≤ t componentwise} values[a]``."""
    out = values
    for i in range(values.ndim):
        out = np.cumsum(out, axis=i)
    return out


def eigenvalues(weights: np.ndarray, axes: Sequence[AxisLevels]) -> np.ndarray:
    """``μ_a = Σ_{t ≥ a} w_t S_t`` (tuple-shaped)."""
    return suffix_sums(np.asarray(weights, dtype=np.float64) * block_cells(axes))


def inverse_eigenvalues(mu: np.ndarray) -> np.ndarray:
    """``ν = 1/μ`` where ``μ > 0``, else 0 (the pseudo-inverse)."""
    with np.errstate(divide="ignore", over="ignore"):
        return np.where(mu > 0, 1.0 / np.where(mu > 0, mu, 1.0), 0.0)


def projector_coefficients(nu: np.ndarray) -> np.ndarray:
    """``c_b = Σ_δ (-1)^|δ| ν_{b+δ}``: ``M⁺ = Σ_b c_b E_b``."""
    c = nu
    for i in range(nu.ndim):
        shifted = np.concatenate([np.take(c, np.arange(1, c.shape[i]), axis=i),
                                  np.zeros_like(np.take(c, [0], axis=i))], axis=i)
        c = c - shifted
    return c


def _coefficients(weights: np.ndarray, axes: Sequence[AxisLevels]) -> tuple[np.ndarray, np.ndarray]:
    """``(w, c)``: the precisions as float64, checked to be tuple-shaped, and ``c_b``."""
    weights = np.asarray(weights, dtype=np.float64)
    if weights.shape != tuple_shape(axes):
        raise ValueError(f"weights of shape {weights.shape} do not match the level tuples "
                         f"{tuple_shape(axes)}")
    return weights, projector_coefficients(inverse_eigenvalues(eigenvalues(weights, axes)))


def gls(measurements: Mapping[tuple[int, ...], np.ndarray], weights: np.ndarray,
        axes: Sequence[AxisLevels]) -> np.ndarray:
    """The least-squares estimate of the real cells from noisy block counts ``{t: y_t}``
    with precisions ``weights`` (tuple-shaped; a tuple with weight 0 is ignored)."""
    weights, c = _coefficients(weights, axes)
    parts = {t: weights[t] * np.asarray(y, dtype=np.float64)
             for t, y in measurements.items() if weights[t] > 0}
    z = collapse(parts, axes)
    cells = block_cells(axes)
    scaled = {b: (c[b] / cells[b]) * sums for b, sums in pyramid(z, axes).items() if c[b] != 0.0}
    return fold(collapse(scaled, axes), axes)


# ---------------------------------------------------------------------------- streamed
# The same estimate as :func:`gls`, bit for bit, with a small working set: every array below
# stands for the full (padded) cube by repetition, ``data.shape[i]`` blocks on axis ``i`` (its
# level's blocks; repeating a value is exact), so :func:`collapse`'s upsampling is implicit and
# an addition is made at the finer of its operands' resolutions, in place when one operand is
# already there (addition commutes bit for bit).  The additions keep :func:`collapse`'s nesting.
def _interleaved(shape: Sequence[int], blocks: Sequence[int]) -> list[int]:
    return [x for n, m in zip(blocks, shape, strict=True) for x in (n, m // n)]


def _add_into(out: np.ndarray, part: np.ndarray) -> None:
    """``out += part`` with ``part`` repeated up to ``out``'s resolution (``out`` C-contiguous)."""
    view = out.reshape(_interleaved(out.shape, part.shape))
    np.add(view, part.reshape([x for n in part.shape for x in (n, 1)]), out=view)


def _add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a + b`` at the finer resolution per axis, in place in ``a`` or ``b`` when one is there."""
    shape = tuple(max(x, y) for x, y in zip(a.shape, b.shape, strict=True))
    if a.shape != shape:
        a, b = (b, a) if b.shape == shape else (_expand(a, shape), b)
    _add_into(a, b)
    return a


def _add_rows(a: np.ndarray, b: np.ndarray, threads: int) -> np.ndarray:
    """:func:`_add`, the in-place addition shared among ``threads`` threads by blocks of rows of
    the first axis (each value is the same one addition)."""
    shape = tuple(max(x, y) for x, y in zip(a.shape, b.shape, strict=True))
    if threads <= 1 or not a.ndim or shape[0] < 2 or shape not in (a.shape, b.shape):
        return _add(a, b)
    out, part = (a, b) if a.shape == shape else (b, a)
    k = out.shape[0] // part.shape[0]

    def add(rows: tuple[int, int]) -> None:
        _add_into(out[rows[0] * k:rows[1] * k], part[rows[0]:rows[1]])

    parallel.each(add, parallel.column_ranges(part.shape[0], 4 * threads), threads)
    return out


def _halve_rows(a: np.ndarray, threads: int) -> np.ndarray:
    """``_halve(a, 0)`` shared among ``threads`` threads by blocks of output rows (the same
    additions)."""
    if threads <= 1 or a.shape[0] < 4:
        return _halve(a, 0)
    out = np.empty((a.shape[0] // 2,) + a.shape[1:])

    def halve(rows: tuple[int, int]) -> None:
        lo, hi = rows
        np.add(a[2 * lo:2 * hi:2], a[2 * lo + 1:2 * hi:2], out=out[lo:hi])

    parallel.each(halve, parallel.column_ranges(out.shape[0], 4 * threads), threads)
    return out


def _expand(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    if a.shape == shape:
        return a
    out = np.empty(shape)
    view = out.reshape(_interleaved(shape, a.shape))
    view[...] = a.reshape([x for n in a.shape for x in (n, 1)])
    return out


class _Sum(list):
    """``((x_0 + x_1) + x_2) + ...``: :func:`collapse`'s Horner sum along one axis, unevaluated."""


def _refine(x: np.ndarray, k_from: int, k_to: int, a: int, b: int) -> np.ndarray:
    """Blocks of size ``k_from`` covering rows ``a:b`` of the first axis, repeated to blocks of
    size ``k_to`` (which divides it) covering the same rows; unchanged when the blocks are
    whole (``a`` and ``b`` multiples of ``k_from``), where :func:`_add` and :func:`_expand`
    repeat them themselves."""
    if k_from == k_to or (a % k_from == 0 and b % k_from == 0):
        return x
    first = np.arange(a // k_to, -(-b // k_to)) * k_to
    return x[first // k_from - a // k_from]


class _Chain:
    """``((base + parts[0]) + parts[1]) + ...`` with ``base`` at the slab's full resolution and
    every part coarser or equal on each axis, unevaluated: :func:`_settle` makes every addition
    a cache-sized tile at a time (the same additions, value by value, in the same order), so the
    slab is read and written once instead of once per part."""

    def __init__(self, base: np.ndarray, parts: list[np.ndarray]) -> None:
        self.base, self.parts = base, parts


def _divides(part: np.ndarray, out_shape: tuple[int, ...]) -> bool:
    return all(m % n == 0 for n, m in zip(part.shape, out_shape, strict=True))


def _chain_add(a: np.ndarray | _Chain, b: np.ndarray | _Chain, full: tuple[int, ...]
               ) -> np.ndarray | _Chain:
    """:func:`_add` within :func:`_rows`: an addition into an operand at the slab's ``full``
    shape is kept pending (:class:`_Chain`; ``a + b`` is ``b + a`` bit for bit); others are made."""
    if isinstance(b, _Chain) and not isinstance(a, _Chain):
        a, b = b, a
    if isinstance(a, _Chain):
        if isinstance(b, _Chain):
            b = _settle(b)
        if _divides(b, a.base.shape):
            a.parts.append(b)
            return a
        return _add(_settle(a), b)
    assert not isinstance(b, _Chain)
    for x, y in ((a, b), (b, a)):
        if x.shape == full and x.flags.c_contiguous and _divides(y, full):
            return _Chain(x, [y])
    return _add(a, b)


#: :func:`_settle` adds its parts on tiles of at most this many values (in cache).
TILE_CELLS = 1 << 16


def _tiles(shape: tuple[int, ...], parts: Sequence[np.ndarray]) -> tuple[int, int]:
    """``(j, t)``: tiles fix every axis before ``j``, take ``t`` values of axis ``j`` (a divisor of
    its length that every part's blocks on it divide or are divided by) and all of the later
    axes: the largest such tiles of at most :data:`TILE_CELLS` values (at least one value of
    axis ``j``)."""
    j = 0
    while j < len(shape) - 1 and math.prod(shape[j + 1:]) > TILE_CELLS:
        j += 1
    inner = math.prod(shape[j + 1:])
    blocks = [shape[j] // p.shape[j] for p in parts]
    return j, next(t for t in range(max(1, min(shape[j], TILE_CELLS // max(1, inner))), 0, -1)
                   if shape[j] % t == 0 and all(t % k == 0 or k % t == 0 for k in blocks))  # t = 1 at worst


def _settle(value: np.ndarray | _Chain, out: np.ndarray | None = None) -> np.ndarray:
    """The chain's value in ``out`` (default: its base, in place), its additions made a tile at
    a time (:func:`_tiles`), each tile's in the chain's order: the same bits as one whole-slab
    addition after another."""
    if not isinstance(value, _Chain):
        return value if out is None else _assign(out, value)
    base, parts = value.base, value.parts
    if out is not None and not _same_view(out, base):
        if parts and _same_view(out, parts[0]):
            # ``base + parts[0]`` is ``parts[0] + base`` bit for bit: the part already in ``out``
            # (the cells tuple's rows) becomes the base, so it is read before it is written
            base, parts = parts[0], [base, *parts[1:]]
        elif np.shares_memory(out, base) or any(np.shares_memory(out, p) for p in parts):
            # an operand is read from ``out``'s memory: the sum in a buffer of its own first
            return _assign(out, _settle(_Chain(base.copy(), list(parts))))
        else:
            out[...] = base
    if out is None:
        out = base
    shape = out.shape
    j, t = _tiles(shape, parts)
    ks = [[m // n for n, m in zip(p.shape, shape, strict=True)] for p in parts]
    for lead in np.ndindex(*shape[:j]):
        for s in range(0, shape[j], t):
            tile = out[lead + (slice(s, s + t),)]
            for p, k in zip(parts, ks, strict=True):
                where = tuple(x // kx for x, kx in zip(lead, k, strict=False))
                kj = k[j]
                piece = p[where + (slice(s // kj, -(-(s + t) // kj)),)]
                _add_into(tile, piece)
    return out


def _assign(out: np.ndarray, value: np.ndarray) -> np.ndarray:
    if not _same_view(out, value):
        out[...] = _expand(value, out.shape)
    return out


def _same_view(x: np.ndarray, y: np.ndarray) -> bool:
    """Whether ``x`` and ``y`` are the same values in memory (first byte, shape and strides)."""
    return x.shape == y.shape and x.strides == y.strides and x.ctypes.data == y.ctypes.data


def _rows(node: np.ndarray | _Sum, a: int, b: int, length: int,
          full: tuple[int, ...] | None = None) -> tuple[np.ndarray | _Chain, int]:
    """``(values, k)``: the blocks of size ``k`` (the node's finest along the first axis)
    covering rows ``a:b`` of the first axis (the other axes at the node's resolution), evaluated
    with :func:`collapse`'s nesting.  A leaf with every row of the first axis gives a view (each
    leaf appears once and each row is evaluated once, so it may be overwritten); other leaves a
    copy (their blocks may straddle two slabs).  With ``full`` (the slab's full shape), the
    additions into an operand of that shape are left pending (:class:`_Chain`, :func:`_settle`)."""
    if isinstance(node, np.ndarray):
        k = length // node.shape[0]
        return (node[a:b], 1) if k == 1 else (node[a // k:-(-b // k)].copy(), k)
    out, k = _rows(node[0], a, b, length, full)
    for child in node[1:]:
        value, kv = _rows(child, a, b, length, full)
        fine = min(k, kv)
        x, y = _refine_any(out, k, fine, a, b), _refine_any(value, kv, fine, a, b)
        # pending only at the full resolution (blocks of one row: a slab of a few rows may
        # hold as many blocks of a coarser level)
        out = _add(_settle(x), _settle(y)) if full is None or fine > 1 else _chain_add(x, y, full)
        k = fine
    return out, k


def _refine_any(x: np.ndarray | _Chain, k_from: int, k_to: int, a: int, b: int) -> np.ndarray | _Chain:
    return x if isinstance(x, _Chain) else _refine(x, k_from, k_to, a, b)


def _halve(a: np.ndarray, axis: int) -> np.ndarray:
    """``coarsen(a, axis, 2)`` as one strided add: numpy's sum of two values is their one
    addition (0 + x = x for every x but -0.0, and no sum of the normal sum's values is -0.0:
    they are weighted integers), so the bits are the same, without the reduction's per-block
    inner loop along the last axis."""
    head = (slice(None),) * axis
    return np.add(a[head + (slice(0, None, 2),)], a[head + (slice(1, None, 2),)], order="C")


def _quarter_into(out: np.ndarray, a: np.ndarray) -> None:
    """``out[...] = _halve(_halve(a, 0), 0)``: ``out[r] = (a[4r] + a[4r+1]) + (a[4r+2] + a[4r+3])``,
    the same three additions per value, a tile of :data:`TILE_CELLS` values at a time with one
    buffer for the second pair (no half-size array made and faulted in)."""
    rows = out.reshape(out.shape[0], -1)
    src = a.reshape(a.shape[0], -1)
    width = rows.shape[1]
    tile = max(1, min(width, TILE_CELLS))
    pair = np.empty(tile)
    for r in range(rows.shape[0]):
        for c in range(0, width, tile):
            e = min(width, c + tile)
            buf = pair[:e - c]
            np.add(src[4 * r, c:e], src[4 * r + 1, c:e], out=rows[r, c:e])
            np.add(src[4 * r + 2, c:e], src[4 * r + 3, c:e], out=buf)
            np.add(rows[r, c:e], buf, out=rows[r, c:e])


#: ``add_block(part, start, fresh)``: adds to ``part`` (a block of rows of one tuple's padded
#: counts, C order, whose first value is the tuple's flat value ``start``) draws that depend on
#: ``start`` and ``part.size`` alone, whichever thread calls it and when; with ``fresh``, ``part``
#: holds no values yet (whatever bytes) and takes ``0.0 + draw`` per value, as if zeros were
#: there, without reading it.
BlockNoise = Callable[[np.ndarray, int, bool], None]


def _room_of(counts: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
    """The buffer whose last bytes ``counts`` are (int64, C order), as a float64 array of the
    padded ``shape``, when it has that size exactly and may be written; else None."""
    owner = counts
    while isinstance(owner.base, np.ndarray):
        owner = owner.base
    nbytes = 8 * math.prod(shape)
    if (counts.dtype != np.int64 or not counts.flags.c_contiguous or not owner.flags.c_contiguous
            or not owner.flags.writeable or owner.nbytes != nbytes
            or counts.ctypes.data + counts.nbytes != owner.ctypes.data + nbytes):
        return None
    return owner.reshape(-1).view(np.uint8).view(np.float64).reshape(shape)


def _waves(room: np.ndarray | None, real: np.ndarray, shape: tuple[int, ...], step: int, threads: int
           ) -> list[range] | None:
    """Blocks of rows (first rows ``a``, ``step`` apart) in waves of at least ``threads`` blocks
    (the most that fit) that can be written over ``room``, whose last bytes are ``real``
    (:func:`_room_of`): every row a wave writes lies before the first counts row it or a later
    wave reads (the wave's rows end at or before counts row ``w``, the wave's first), so no
    count is overwritten before it is read, whichever thread takes which block of the wave
    first.  None when waves of ``threads`` blocks would not fit (the shapes decide: enough
    padding on the axes after the first)."""
    if (room is None or room.shape != shape or real.ndim != len(shape) or not real.flags.c_contiguous
            or real.ctypes.data + real.nbytes != room.ctypes.data + room.nbytes):
        return None
    y_row, c_row = 8 * math.prod(shape[1:]), 8 * math.prod(real.shape[1:])
    head = room.nbytes - real.nbytes  # the bytes before the counts
    for k in range(-(-shape[0] // step), max(1, threads) - 1, -1):  # the widest waves first
        width = k * step
        waves = [range(w, min(shape[0], w + width), step) for w in range(0, shape[0], width)]
        if all(min(shape[0], w.start + width) * y_row <= head + min(w.start, real.shape[0]) * c_row
               for w in waves):
            return waves
    return None


def _measure(real: np.ndarray, t: tuple[int, ...], axes: Sequence[AxisLevels], weight: float,
             add_noise: Callable[[tuple[int, ...], np.ndarray], None], noise_chunk: int | None,
             add_block: BlockNoise | None = None, threads: int = 1, room: np.ndarray | None = None
             ) -> np.ndarray:
    """Tuple ``t``'s padded float block counts from its real ones, noised, times ``weight``
    when positive (:func:`noisy_normal_sum`); with ``add_block``, the blocks of rows noised by it
    instead of ``add_noise`` and shared among ``threads`` threads (each writes its own rows).
    ``room``: a buffer of the result's size whose last bytes are ``real``, written over in
    waves of blocks (:func:`_waves`) when it can be; else a new array."""
    shape = tuple(ax.length // ax.sizes[level] for ax, level in zip(axes, t, strict=True))
    row = math.prod(shape[1:])
    if noise_chunk is None or math.prod(shape) <= 4 * noise_chunk or row == 0:
        y = padded_blocks(real, t, axes)
        if add_block is None:
            add_noise(t, y)
        else:
            add_block(y, 0, False)
        if weight > 0:
            np.multiply(y, weight, out=y)
        return y
    step = noise_chunk // math.gcd(row, noise_chunk)  # rows per block: a multiple of the chunk
    step *= max(1, noise_chunk // (step * row))
    n_threads = 1 if add_block is None else threads
    waves = _waves(room, real, shape, step, n_threads)
    y = np.zeros(shape) if waves is None or room is None else room
    inner = tuple(slice(0, m) for m in real.shape[1:])

    def noise(block: np.ndarray, a: int, fresh: bool = False) -> None:
        if add_block is None:
            if fresh and waves is not None:  # over the room: zeros first, as np.zeros gives
                block.fill(0.0)
            add_noise(t, block)
        else:
            add_block(block, a * row, fresh)

    def measure(a: int) -> None:
        block = y[a:a + step]
        rows = real[a:a + step]
        if rows.size and compiled.enabled() and rows.dtype == np.int64:
            # the noise first (0 + n = n but for n = -0.0, whose sum with a count is the count's
            # either way), written as ``0.0 + n`` over the block (no zeros filled first: the
            # same values as adding to np.zeros'), then the counts and the weight in one
            # compiled pass: the same bits
            noise(block, a, fresh=True)
            if not compiled.add_counts(block, rows, weight):  # refused: numpy's two steps
                block[(slice(0, rows.shape[0]),) + inner] += rows
                if weight > 0:
                    np.multiply(block, weight, out=block)
            return
        if waves is not None:  # over the room: zeros first, as np.zeros gives
            block.fill(0.0)
        block[(slice(0, rows.shape[0]),) + inner] = rows
        noise(block, a)
        if weight > 0:
            np.multiply(block, weight, out=block)

    # add_noise's draws follow the calls' order: one thread, in order; add_block's do not
    for wave in [range(0, shape[0], step)] if waves is None else waves:
        parallel.each(measure, wave, n_threads)
    return y


def noisy_normal_sum(counts: np.ndarray | list[np.ndarray], axes: Sequence[AxisLevels],
                     measured: Sequence[tuple[int, ...]],
                     weights: np.ndarray, add_noise: Callable[[tuple[int, ...], np.ndarray], None],
                     slab_cells: int = SUM_SLAB_CELLS, noise_chunk: int | None = None,
                     threads: int | None = None,
                     block_noise: Callable[[tuple[int, ...]], BlockNoise | None] | None = None,
                     quarter: list[np.ndarray] | None = None) -> np.ndarray:
    """``z = Σ_t w_t A_tᵀ y_t`` on the padded cells, streamed: for each tuple of ``measured`` in
    turn (C order), its exact block counts (:class:`~polars_dp.kernels.block_levels.BlockCounter`,
    from the counts or a coarser level already computed) as float64 on the padded blocks,
    ``add_noise(t, y)`` adding its noise in place, ``y *= w_t``.  The sum keeps :func:`gls`'s
    nesting (Horner along each axis, the last axis innermost) unevaluated over the tuples' own
    arrays, then is evaluated in slabs of about ``slab_cells`` values along the first axis into
    the memory of a tuple at full resolution when there is one: no coarse partial sum is ever
    spread over the cube; the slabs on ``threads`` threads (default
    :func:`~polars_dp.threads.thread_count`: the environment's, never the data's), each writing
    its own rows only.  The same bits as the ``z`` of :func:`gls` on the same noisy counts.

    With ``noise_chunk``, a tuple of more than four chunks is filled, noised and weighted a
    block of rows of the first axis at a time: ``add_noise(t, part)`` is then called on
    consecutive parts (C order) whose sizes are multiples of ``noise_chunk`` but the last, and
    must add the next ``part.size`` draws of ``t``'s noise (a sampler drawing ``noise_chunk``
    values at a time reads the same words either way); without it, once per tuple.

    ``block_noise(t)``, called once per tuple at its turn (C order), may instead give ``t`` an
    ``add_block(part, start)`` (:data:`BlockNoise`) whose draws depend on the block's first flat
    value ``start`` and size alone (a stream of its own per block): ``add_noise`` is then not
    called for ``t``, and its blocks of rows (which depend on ``t``'s shape and ``noise_chunk``
    only) are filled, noised and weighted on ``threads`` threads at once.

    ``counts`` in a one-element list is consumed (the list emptied): the counts are then freed
    as soon as no tuple left needs them, before the largest tuple is noised; and when they are
    the last cells of a buffer of the padded cube's size (``frequency_matrix(room=...)``), the
    cells' tuple, measured last, is built over them in that buffer instead of a new cube, a
    wave of blocks of rows at a time, each wave's rows before the counts it and later waves
    read (:func:`_waves`; the same values).

    ``quarter``, a list, is given ``z`` halved twice along the first axis
    (``(z[4r] + z[4r+1]) + (z[4r+2] + z[4r+3])``, :func:`_quarter_into`) when the first axis's
    two levels above the cells are halvings: each slab's rows summed as soon as they are made,
    from cache (:func:`gls_from_sum` takes it instead of reading the cube again)."""
    d = len(axes)
    n_threads = parallel.thread_count() if threads is None else threads
    weights = np.asarray(weights, dtype=np.float64)
    consumed = isinstance(counts, list)
    source = np.asarray(counts.pop() if isinstance(counts, list) else counts)
    del counts
    shape = tuple(ax.length for ax in axes)
    room = _room_of(source, shape) if consumed else None
    counter = BlockCounter(source, axes, threads=n_threads)
    del source
    acc: list[list[np.ndarray | _Sum]] = [[] for _ in range(d)]
    full: np.ndarray | None = None

    def close(down_to: int) -> None:
        for j in range(d - 1, down_to - 1, -1):
            done, acc[j] = acc[j], []
            if done:
                node = done[0] if len(done) == 1 else _Sum(done)
                if j:
                    acc[j - 1].append(node)
                else:
                    acc[0] = [node]

    todo = [tuple(int(x) for x in t) for t in measured]
    big = max(1, math.prod(shape) // 4)
    for k, t in enumerate(todo):
        if k:
            close(next(i for i in range(d) if t[i] != todo[k - 1][i]) + 1)
        real = counter.real(t, todo[k + 1:])
        if math.prod(ax.length // ax.sizes[level] for ax, level in zip(axes, t, strict=True)) > big:
            counter.keep_for(todo[k + 1:])  # before a large tuple: the arrays no later one needs go
        y = _measure(real, t, axes, weights[t], add_noise, noise_chunk,
                     None if block_noise is None else block_noise(t), n_threads,
                     room if k == len(todo) - 1 else None)
        del real
        if weights[t] > 0:
            acc[d - 1].append(y)
            if y.shape == shape:
                full = y
        del y
    counter.cache.clear()
    close(0)
    if not acc[0]:
        return np.zeros(shape)
    root = acc[0][0]
    if isinstance(root, np.ndarray):
        return _expand(root, shape)
    out = np.empty(shape) if full is None else full
    step = max(1, slab_cells // max(1, math.prod(shape[1:])))
    ax0 = axes[0]
    quartered = None
    if quarter is not None and ax0.count >= 3 and all(
            ax0.sizes[ax0.count - 1 - j] == 2 * ax0.sizes[ax0.count - j] for j in (1, 2)) \
            and shape[0] % 4 == 0:
        quartered = np.empty((shape[0] // 4,) + shape[1:])
        step = max(4, step // 4 * 4)  # whole groups of four rows per slab

    def evaluate(a: int) -> None:
        # rows a:b of every leaf at full first-axis resolution, copies of the coarser ones: the
        # slabs touch disjoint memory, so they run on several threads with the same bits
        b = min(shape[0], a + step)
        rows, k = _rows(root, a, b, shape[0], (b - a,) + shape[1:])
        _settle(_refine_any(rows, k, 1, a, b), out[a:b])
        if quartered is not None:  # the slab's rows still in cache
            _quarter_into(quartered[a // 4:b // 4], out[a:b])

    parallel.each(evaluate, range(0, shape[0], step), n_threads)
    if quarter is not None and quartered is not None:
        quarter.append(quartered)
    return out


def _placed(result: np.ndarray, slab: np.ndarray, a: np.ndarray, start: int, out: np.ndarray | None
            ) -> np.ndarray:
    """The output of a walk of ``a`` by slabs once ``result``, the walk of ``slab`` (``a``'s rows
    from ``start``), is in place: ``a`` when ``result`` has the slab's shape (the slab is spent:
    its memory takes the result), else ``out`` (made on first use) holding it in those rows."""
    if result.shape == slab.shape:
        if not (result is slab or np.shares_memory(result, slab)):
            slab[...] = result
        return a
    if out is None:
        out = np.empty((a.shape[0],) + result.shape[1:])
    out[start:start + slab.shape[0]] = result
    return out


def _binary_last_axis(a: np.ndarray, ax: AxisLevels, wanted: Sequence[int], scales: Sequence[float]
                      ) -> np.ndarray | None:
    """:func:`gls_from_sum`'s walk along the last axis in one compiled pass per row
    (:func:`~polars_dp.kernels.compiled.binary_level_rows`: the same operations, in cache),
    when every level it reaches halves the one above; None: the numpy walk runs."""
    top = ax.count - 1
    if not a.flags.c_contiguous or any(ax.sizes[level] != 2 * ax.sizes[level + 1]
                                       for level in range(wanted[0], top)):
        return None
    return compiled.binary_level_rows(a, [top - level for level in wanted], scales)


def gls_from_sum(z: np.ndarray, weights: np.ndarray, axes: Sequence[AxisLevels],
                 slab_cells: int = SLAB_CELLS, threads: int | None = None,
                 quarter: list[np.ndarray] | None = None) -> np.ndarray:
    """:func:`gls`'s estimate from its ``z`` (which this consumes: its memory is reused), bit for
    bit: the pyramid of block sums of ``z`` walked depth first (per axis, the chain of coarser
    levels, then each level's sub-pyramid from the coarsest), only towards tuples with
    ``c_b != 0``; each such ``P_b`` scaled by ``c_b / S_b`` in place and summed into the
    collapse at once, so only one chain per axis is held; below the first axis, slabs of about
    ``slab_cells`` values along it at a time (the operations act on each of its blocks alone),
    the slabs after the first on ``threads`` threads (default
    :func:`~polars_dp.threads.thread_count`), which change no bit.  On the first axis the level
    above the cells, when a halving, is never made whole: the level above it is the cells halved
    twice a slab at a time, and when that level is wanted it is walked with the cells a slab at
    a time (the same additions, value by value).  ``quarter``: :func:`noisy_normal_sum`'s list
    holding ``z`` halved twice along the first axis (taken, once, instead of halving again)."""
    c = _coefficients(weights, axes)[1]
    d = len(axes)
    n_threads = parallel.thread_count() if threads is None else threads
    cells = block_cells(axes)
    nonzero = c != 0.0

    def walk(a: np.ndarray, key: tuple[int, ...]) -> np.ndarray | None:
        i = len(key)
        if i == d:
            if not nonzero[key]:
                return None
            np.multiply(a, c[key] / cells[key], out=a)
            return a
        ax = axes[i]
        wanted = [level for level in range(ax.count) if nonzero[key + (level,)].any()]
        if not wanted:
            return None
        top = ax.count - 1
        if i == d - 1 and i:
            scales = [c[key + (level,)] / cells[key + (level,)] for level in wanted]
            done = _binary_last_axis(a, ax, wanted, scales)
            if done is not None:
                return done
        chain: dict[int, np.ndarray | None] = {top: a}
        halves = [top >= j and ax.sizes[top - j] == 2 * ax.sizes[top - j + 1] for j in (1, 2)]
        fuse = i == 0 and d > 1 and halves[0] and top - 1 in wanted and top in wanted
        twice = i == 0 and all(halves) and wanted[0] <= top - 2
        skip_half = fuse or (twice and top - 1 not in wanted)

        def coarser(level: int) -> np.ndarray:
            finer = chain[level + 1]
            if twice and level == top - 2 and finer is None:  # halved twice, a slab at a time
                return twice_halved(chain[top])
            if finer is None:  # dropped: recomputed from the finest kept level (the same sums)
                finer = coarser(level + 1)
            if ax.sizes[level] != 2 * ax.sizes[level + 1]:
                return coarsen(finer, i, ax.sizes[level] // ax.sizes[level + 1])
            return _halve(finer, i) if i else _halve_rows(finer, n_threads)

        for level in range(top - 1, wanted[0] - 1, -1):
            if skip_half and level == top - 1:
                chain[level] = None  # never made whole
                continue
            chain[level] = coarser(level)
            held = chain[level + 1]
            if i == 0 and level + 1 < top and held is not None and held.size * 4 > a.size:
                chain[level + 1] = None  # more than a quarter of the cube: made again when its turn comes
        del a
        out: np.ndarray | None = None
        for level in range(wanted[0], ax.count):
            if fuse and level == top - 1:
                return fused(chain[top], out)
            held = chain.pop(level)
            if level not in wanted:
                continue
            part = coarser(level) if held is None else held
            del held
            result = walk(part, key + (level,)) if i or d == 1 else slabs(part, (level,))
            del part
            if result is not None:
                out = result if out is None else _add(out, result) if i else _add_rows(out, result, n_threads)
        return out

    def twice_halved(a: np.ndarray | None) -> np.ndarray:
        """``_halve(_halve(a, 0), 0)``, four rows of ``a`` at a time per output row, by slabs."""
        assert a is not None
        rows = a.shape[0]
        if quarter and quarter[0].shape == (rows // 4,) + a.shape[1:]:
            return quarter.pop()  # made with the normal sum, the same additions
        out = np.empty((rows // 4,) + a.shape[1:])
        step = max(4, slab_cells // max(1, a.size // rows) // 4 * 4)

        def one(start: int) -> None:
            _quarter_into(out[start // 4:(start + step) // 4], a[start:start + step])

        parallel.each(one, range(0, rows, step), n_threads)
        return out

    def fused(a: np.ndarray | None, prev: np.ndarray | None) -> np.ndarray:
        """The walk's last two levels along the first axis and their sums with ``prev`` (the
        coarser levels' sum): per slab of rows of ``a`` (the finest level), the level above from
        its halving, walked, added to ``prev``'s blocks over those rows, then the finest level
        walked (in place) and added, as the level loop does on whole arrays: the same additions
        value by value (each acts on its rows alone), without the half cube."""
        assert a is not None
        rows = a.shape[0]
        step = max(2, slab_cells // max(1, a.size // rows) // 2 * 2)
        k_prev = 0 if prev is None else rows // prev.shape[0]
        keys = ((top_0 - 1,), (top_0,))
        out: np.ndarray | None = None

        def one(start: int) -> None:
            nonlocal out
            stop = min(rows, start + step)
            slab = a[start:stop]
            upper = walk(_halve(slab, 0), keys[0])
            assert upper is not None
            if prev is not None:
                upper = _add(_refine(prev[start // k_prev:-(-stop // k_prev)], k_prev, 2, start, stop), upper)
            finest = walk(slab, keys[1])
            assert finest is not None
            out = _placed(_add(upper, finest), slab, a, start, out)

        one(0)  # alone: the result's shape, the same for every slab (from the plan only)
        parallel.each(one, range(step, rows, step), n_threads)
        assert out is not None
        return out

    top_0 = axes[0].count - 1

    def slabs(a: np.ndarray, key: tuple[int, ...]) -> np.ndarray | None:
        rows = a.shape[0]
        step = max(1, slab_cells // max(1, a.size // rows))
        out: np.ndarray | None = None

        def one(start: int) -> bool:
            nonlocal out
            slab = a[start:start + step]
            result = walk(slab, key)
            if result is None:
                return False
            out = _placed(result, slab, a, start, out)
            return True

        # the first slab alone (which tuples it reaches, the result's shape: the same for every
        # slab, from the plan only), then the others on several threads: each slab's operations
        # act on its own rows, so the bits do not depend on the threads
        if not one(0):
            return None
        parallel.each(one, range(step, rows, step), n_threads)
        return out

    estimate = walk(z, ())
    del z
    shape = tuple(ax.length for ax in axes)
    return fold_owned(np.zeros(shape) if estimate is None else _expand(estimate, shape), axes)


# ---------------------------------------------------------------------------- error
def _clean(detail: np.ndarray, total: np.ndarray) -> np.ndarray:
    """Detail traces with rounding (``< TRACE_TOLERANCE`` of the total trace) set to zero."""
    return np.where(np.abs(detail) <= TRACE_TOLERANCE * np.abs(total)[..., None], 0.0, detail)


def axis_detail_traces(workload: AxisWorkload, levels: AxisLevels) -> np.ndarray:
    """``tr(P_l G)`` per level of the axis's (folded) Gram matrix ``G``."""
    traces = np.array([workload.block_sums(s, levels.length).sum() / s for s in levels.sizes])
    return _clean(np.diff(traces, prepend=0.0), np.asarray(traces[-1]))


def interval_detail_traces(starts: np.ndarray, stops: np.ndarray, levels: AxisLevels) -> np.ndarray:
    """``q_iᵀ P_l q_i`` per interval ``[start, stop)`` (rows) and level (columns); an interval
    reaching the last real cell covers the padding."""
    s = np.asarray(starts, dtype=np.int64)
    t = np.asarray(stops, dtype=np.int64)
    t = np.where(t >= levels.n, levels.length, t)
    traces = np.empty((s.size, levels.count))
    for j, size in enumerate(levels.sizes):
        first, last = s // size, (t - 1) // size
        head = (first + 1) * size - s
        tail = t - last * size
        sq = np.where(first == last, (t - s).astype(np.float64) ** 2,
                      head.astype(np.float64) ** 2 + tail.astype(np.float64) ** 2
                      + (last - first - 1).astype(np.float64) * float(size) ** 2)
        traces[:, j] = sq / size
    return _clean(np.diff(traces, axis=1, prepend=0.0), traces[:, -1])


def contract(nu: np.ndarray, factors: Sequence[np.ndarray]) -> np.ndarray:
    """``out[q] = Σ_a ν_a Π_i factors[i][q, a_i]`` (rows ``q`` shared by every factor)."""
    out = np.einsum("...l,ql->q...", nu, factors[-1])
    for f in reversed(factors[:-1]):
        out = np.einsum("q...l,ql->q...", out, f)
    return out


def range_variance(nu: np.ndarray, axes: Sequence[AxisLevels], starts: np.ndarray,
                   stops: np.ndarray) -> np.ndarray:
    """Noise variance of the box counts ``[starts, stops)`` (shape (queries, d)) of :func:`gls`'s
    estimate; ``inf`` for a box outside the identified span."""
    starts = np.atleast_2d(np.asarray(starts, dtype=np.int64))
    stops = np.atleast_2d(np.asarray(stops, dtype=np.int64))
    factors = [interval_detail_traces(starts[:, i], stops[:, i], ax) for i, ax in enumerate(axes)]
    values = contract(nu, factors)
    missing = (nu == 0).astype(np.float64)  # inf where a box has a component on a detail space with μ = 0
    if not missing.any():
        return values
    hit = contract(missing, [(f != 0).astype(np.float64) for f in factors])
    return np.where(hit > 0, np.inf, values)


def workload_costs(workload: Workload, attributes: Sequence[Attribute], axes: Sequence[AxisLevels]
                   ) -> tuple[np.ndarray, float]:
    """``(C, m)``: ``C_a = Σ_terms w Π_i tr(P_{a_i} G_i)`` (tuple-shaped) and the workload's
    number of queries ``m``, so that its mean squared error is ``Σ_a ν_a C_a / m``."""
    costs = np.zeros(tuple_shape(axes))
    cache: dict[tuple[int, int], np.ndarray] = {}
    for weight, per_axis in workload.axis_terms(attributes):
        term = np.full((), weight)
        for i, (ax_w, ax) in enumerate(zip(per_axis, axes, strict=True)):
            key = (id(ax_w), i)
            if key not in cache:
                cache[key] = axis_detail_traces(ax_w, ax)
            term = np.multiply.outer(term, cache[key])
        costs += term
    for weight, starts, stops in workload.axis_boxes(attributes):
        for a in range(0, starts.shape[0], BOX_CHUNK):
            factors = [interval_detail_traces(starts[a:a + BOX_CHUNK, i], stops[a:a + BOX_CHUNK, i], ax)
                       for i, ax in enumerate(axes)]
            outer = factors[0]
            for f in factors[1:]:
                outer = outer[..., None] * f.reshape(f.shape[0], *([1] * (outer.ndim - 1)), f.shape[1])
            costs += weight * outer.sum(axis=0)
    return costs, workload.queries


def mean_squared_error(nu: np.ndarray, costs: np.ndarray, queries: float) -> float:
    """``Σ_a ν_a C_a / m``; ``inf`` when the workload reaches a detail space with ``μ = 0``."""
    if np.any((nu == 0) & (costs > 0)):
        return float("inf")
    return float((nu * costs).sum() / queries)


__all__ = ["BOX_CHUNK", "SLAB_CELLS", "SUM_SLAB_CELLS", "TRACE_TOLERANCE", "BlockNoise", "axis_detail_traces",
           "contract", "eigenvalues", "gls", "gls_from_sum", "interval_detail_traces", "inverse_eigenvalues",
           "mean_squared_error", "noisy_normal_sum", "prefix_sums",
           "projector_coefficients", "range_variance", "suffix_sums", "workload_costs"]
