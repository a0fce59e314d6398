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

from collections.abc import Mapping, Sequence

import numpy as np

from polars_dp.domains.attributes import Attribute
from polars_dp.domains.workload import AxisWorkload, Workload
from polars_dp.kernels.block_levels import AxisLevels, block_cells, collapse, fold, pyramid, tuple_shape

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


def gls(measurements: Mapping[tuple[int, ...], np.ndarray], weights: np.ndarray,
        axes: Sequence[AxisLevels]) -> np.ndarray:
    """The least-squares estimate of the real cells from noisy block counts ``{t: y_t}``
    with precisions ``weights`` (tuple-shaped; a tuple with weight 0 is ignored)."""
    weights = np.asarray(weights, dtype=np.float64)
    if weights.shape != tuple_shape(axes):
        raise ValueError(f"weights of shape {weights.shape} do not match the level tuples "
                         f"{tuple_shape(axes)}")
    parts = {t: weights[t] * np.asarray(y, dtype=np.float64)
             for t, y in measurements.items() if weights[t] > 0}
    z = collapse(parts, axes)
    c = projector_coefficients(inverse_eigenvalues(eigenvalues(weights, axes)))
    cells = block_cells(axes)
    scaled = {b: (c[b] / cells[b]) * sums for b, sums in pyramid(z, axes).items() if c[b] != 0.0}
    return fold(collapse(scaled, axes), axes)


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
    detail = np.diff(traces, axis=1, prepend=0.0)
    return _clean(detail, traces[:, -1])


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
    return _with_unidentified(nu, factors, contract(nu, factors))


def _with_unidentified(nu: np.ndarray, factors: Sequence[np.ndarray], values: np.ndarray) -> np.ndarray:
    """``inf`` where a query has a component on a detail space with ``μ = 0``."""
    missing = (nu == 0).astype(np.float64)
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


__all__ = ["BOX_CHUNK", "TRACE_TOLERANCE", "axis_detail_traces", "contract", "eigenvalues", "gls",
           "interval_detail_traces", "inverse_eigenvalues", "mean_squared_error", "prefix_sums",
           "projector_coefficients", "range_variance", "suffix_sums", "workload_costs"]
