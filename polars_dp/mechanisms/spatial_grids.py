"""Grid baselines of the PrivTree paper: UG and AG (Qardaji, Yang, Li, ICDE 2013; PrivTree paper Sec. 6.1).

All return a :class:`~polars_dp.SpatialRelease` whose leaves are grid cells; Privelet* (Privelet
on a fixed grid) is :func:`privelet_grid`.

UG (uniform grid)
    ``m^d`` equal cells, ``m = ceil((N * eps / c)^(2 / (d + 2)))`` with ``c = 10``; for
    ``d = 2`` this is the paper's ``sqrt(N eps / 10)`` (the ``d``-dimensional rule is the
    natural extension of Qardaji's error analysis; not stated in PrivTree paper Sec. 6.1).  The cells
    partition the box, so the count vector has L1 sensitivity 1 under add/remove (2 under
    replace) and every cell gets ``Lap(sensitivity / eps)``.

AG (adaptive grid)
    Level 1: ``m1 = max(10, ceil((N eps / c)^(2/(d+2)) / 4))`` cells per side, counts ``v``
    with ``Lap(s / (alpha eps))``.  Level 2: cell ``i`` is cut into ``m2_i^d`` cells,
    ``m2_i = ceil((max(v_i, 0) (1 - alpha) eps / c2)^(2/(d+2)))`` (at least 1; post-processing
    of ``v``), counts ``u`` with ``Lap(s / ((1 - alpha) eps))``.  Constrained inference (the
    inverse-variance mean of ``v_i`` and ``sum u``, then the difference spread evenly):
    ``v'_i = (alpha^2 M v_i + (1 - alpha)^2 sum u) / (alpha^2 M + (1 - alpha)^2)`` with
    ``M = m2_i^d``, ``u' = u + (v'_i - sum u) / M``.  Defaults ``alpha = 0.5, c = 10, c2 = 5``.
    Each level partitions the box: ``alpha eps + (1 - alpha) eps = eps``.

The number of points ``N``
    Under ``replace`` neighbours the table size is public, so ``N`` is the exact row count at
    no cost.  Under ``add_remove``, give a public ``n=`` or let the mechanism estimate it as
    ``N + Lap(1 / (n_share eps))`` (default ``n_share = 0.05``; the grids then use the
    remaining ``(1 - n_share) eps``).  ``n=`` must be public knowledge (a published total, a
    number fixed by the study design), never computed from the private data: it is released
    as is, in the grid size and in ``params["n_used"]``.

Exact noise (``noise="exact"``, the default)
    The budget shares are exact rationals (``eps_n + eps_grid = eps``, ``eps1 + eps2 =
    eps_grid``), the integer counts (and ``N``) get discrete Laplace noise of scale
    ``sensitivity / share`` rounded up to the ``2^-20`` grid (:func:`polars_dp.noise.exact_scale`),
    and everything after the noisy counts (grid sizes from noisy ``N`` or ``v``, constrained
    inference) is post-processing.  ``params`` records the exact scales and the epsilon each
    spends.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from polars_dp.counting.aggregate import cell_sums
from polars_dp.counting.engines import rereadable
from polars_dp.counting.frequency import check_domain_size
from polars_dp.counting.points import collect_weighted_points, grid_counts
from polars_dp.domains.box import Box
from polars_dp.domains.privacy_unit import Rows
from polars_dp.kernels.grid import flat_cells, grid_boxes, grid_cells
from polars_dp.mechanisms.options import mechanism
from polars_dp.mechanisms.privacy_unit import bounded
from polars_dp.mechanisms.wavelet import privelet_counts
from polars_dp.noise import (
    Neighbours,
    NoiseKind,
    NoiseSource,
    SeedLike,
    noise_source,
    sample_noise,
)
from polars_dp.params import Nulls, OnOutOfDomain
from polars_dp.plans.spatial import (
    AdaptiveGridPlan,
    Bounds,
    PointsPlan,
    PriveletGridPlan,
    UniformGridPlan,
    grid_side,
)
from polars_dp.progress import Progress
from polars_dp.releases.spatial import SpatialRelease


def _n_used(plan: UniformGridPlan | AdaptiveGridPlan, count_points: Callable[[], float], rng: NoiseSource
            ) -> float:
    """N for the grid size, as the plan budgets it (:class:`polars_dp.plans.spatial.UniformGridPlan`):
    the public ``n``, the exact count when it is public, or the count plus ``Lap(1 / eps_n)``."""
    if plan.options["n"] is not None:
        return float(plan.options["n"])
    if plan.n_public:
        return float(count_points())
    assert plan.n_scale is not None  # N is noisy: the plan gave it a scale
    if plan.noise == "exact":
        exact = int(count_points()) + int(sample_noise(rng, plan.n_scale, 1, plan.noise)[0])
        return float(max(exact, 0))
    noisy = float(count_points()) + float(sample_noise(rng, plan.n_scale, (), plan.noise))
    return max(noisy, 0.0)


def _row_rules(plan: PointsPlan) -> dict[str, Any]:
    """The plan's ``on_out_of_domain``, ``nulls`` and ``count_column``, as the counters take them."""
    return {k: plan.options[k] for k in ("on_out_of_domain", "nulls", "count_column")}


def run_uniform_grid(plan: UniformGridPlan, frame: Any, *, seed: SeedLike,
                     progress: bool | None) -> SpatialRelease:
    """Count ``frame`` on the plan's grid (and the points, when N is not public) and add its noise."""
    opts = _row_rules(plan)
    box, noise = plan.box, plan.noise
    src = noise_source(seed)
    bar = Progress("uniform_grid", progress, None)  # no public work: the same on every input
    bar.step("counting")
    frame = bounded(frame, plan, src, box.columns)
    if plan.options["n"] is None:  # two passes (N, then the grid): a one-shot stream keeps the points only
        count_column = opts["count_column"]
        frame = rereadable(frame, [*box.columns, *([count_column] if count_column else [])])
    n_used = _n_used(plan, lambda: grid_counts(frame, box, 1, **opts).sum(), src)
    m = plan.side(n_used)
    cells = check_domain_size((m,) * box.d, bytes_per_cell=64)
    count = grid_counts(frame, box, m, **opts)
    bar.step("noise")
    scale = plan.cell_scale
    count += sample_noise(src, scale, count.shape, noise)
    bar.close()
    lo, hi = grid_boxes(box, m)
    return SpatialRelease(box, lo, hi, np.ones(cells, dtype=np.int32), count, layout={"kind": "grid", "m": m},
                          params={"n_used": n_used}, seeded=src.seeded, plan=plan)


def run_adaptive_grid(plan: AdaptiveGridPlan, frame: Any, *, seed: SeedLike,
                      progress: bool | None) -> SpatialRelease:
    """Read ``frame``'s points, count and noise both grid levels, then constrained inference."""
    box = plan.box
    d = box.d
    alpha = plan.options["alpha"]
    noise = plan.noise
    src = noise_source(seed)
    bar = Progress("adaptive_grid", progress, None)
    bar.step("counting")
    frame = bounded(frame, plan, src, box.columns)
    points, weights = collect_weighted_points(frame, box, **_row_rules(plan))
    n_points = points[0].size if weights is None else int(weights.sum())
    n_used = _n_used(plan, lambda: n_points, src)
    scale1, scale2 = plan.level1_scale, plan.level2_scale
    m1 = plan.first_side(n_used)
    n_cells = check_domain_size((m1,) * d, bytes_per_cell=64)

    per_dim = grid_cells(points, box, m1)
    cell = flat_cells(per_dim, m1)
    v = cell_sums(cell, weights, n_cells) + sample_noise(src, scale1, n_cells, noise)
    m2 = plan.second_sides(v, n_cells)
    sub_cells = m2**d
    check_domain_size((int(sub_cells.sum()),), bytes_per_cell=64)
    leaf_start = np.concatenate([[0], np.cumsum(sub_cells)])
    n_leaves = int(leaf_start[-1])

    pm2 = m2[cell]
    leaf = leaf_start[cell]
    for j, x in enumerate(points):
        pos = (x - box.lo[j]) * (m1 / box.width[j]) - per_dim[j]
        leaf = leaf + np.clip(np.floor(pos * pm2), 0, pm2 - 1).astype(np.int64) * pm2 ** (d - 1 - j)
    u = cell_sums(leaf, weights, n_leaves) + sample_noise(src, scale2, n_leaves, noise)

    bar.step("noise and constrained inference")
    owner = np.repeat(np.arange(n_cells), sub_cells)
    u = constrained_inference(v, u, owner, alpha)
    bar.close()

    lo, hi = _two_level_boxes(box, m1, m2, owner, leaf_start)
    depth = np.where(sub_cells[owner] > 1, 2, 1).astype(np.int32)
    return SpatialRelease(box, lo, hi, depth, u.astype(np.float64),
                          layout={"kind": "two_level_grid", "m1": m1, "m2": m2.tolist()},
                          params={"n_used": n_used}, seeded=src.seeded, plan=plan)


def run_privelet_grid(plan: PriveletGridPlan, frame: Any, *, seed: SeedLike,
                      progress: bool | None) -> SpatialRelease:
    """Count ``frame`` on the plan's ``2^bits`` grid and add Privelet's noise to it."""
    box, m, grid_plan = plan.box, plan.m, plan.privelet
    check_domain_size((m,) * box.d, bytes_per_cell=64)
    src = noise_source(seed)
    bar = Progress("privelet_grid", progress, grid_plan.coefficients)
    bar.step("counting")
    frame = bounded(frame, plan, src, box.columns)
    counts = grid_counts(frame, box, m, **_row_rules(plan)).reshape((m,) * box.d)
    grid = privelet_counts(grid_plan, counts, src,
                           advance=bar.step("noise + inverse transform", grid_plan.coefficients, "coef"))
    bar.close()
    lo, hi = grid_boxes(box, m)
    return SpatialRelease(box, lo, hi, np.ones(m**box.d, dtype=np.int32), grid.counts.reshape(-1),
                          layout={"kind": "grid", "m": m}, seeded=src.seeded, plan=plan)


def constrained_inference(v: np.ndarray, u: np.ndarray, owner: np.ndarray, alpha: float) -> np.ndarray:
    """AG's consistency step: first-level counts ``v`` (budget ``alpha eps``) and second-level
    counts ``u`` (budget ``(1 - alpha) eps``; ``owner[i]`` is the cell of ``u[i]``) ->
    adjusted ``u`` whose per-cell sums are the inverse-variance means
    ``(alpha^2 M v + (1 - alpha)^2 sum u) / (alpha^2 M + (1 - alpha)^2)``, ``M`` = sub-cells."""
    big_m = np.bincount(owner, minlength=v.size).astype(np.float64)
    sum_u = np.bincount(owner, weights=u, minlength=v.size)
    v_star = (alpha**2 * big_m * v + (1 - alpha) ** 2 * sum_u) / (alpha**2 * big_m + (1 - alpha) ** 2)
    return u + ((v_star - sum_u) / big_m)[owner]


def _two_level_boxes(box: Box, m1: int, m2: np.ndarray, owner: np.ndarray, leaf_start: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Boxes of AG's leaves: sub-cell ``s`` of first-level cell ``owner``."""
    d = box.d
    cell_lo, cell_hi = grid_boxes(box, m1)
    side = m2[owner]
    local = np.arange(owner.size) - leaf_start[:-1][owner]
    lo = np.empty((owner.size, d))
    hi = np.empty_like(lo)
    for j in reversed(range(d)):
        s = local % side
        local = local // side
        w = (cell_hi[owner, j] - cell_lo[owner, j]) / side
        lo[:, j] = cell_lo[owner, j] + s * w
        hi[:, j] = np.where(s == side - 1, cell_hi[owner, j], cell_lo[owner, j] + (s + 1) * w)
    return lo, hi


@mechanism(UniformGridPlan, run_uniform_grid)
def uniform_grid(frame: Any, columns: str | Sequence[str], *, bounds: Bounds, epsilon: float,
                 n: int | None = ..., n_share: float = ..., c: float = ..., neighbours: Neighbours = ...,
                 seed: SeedLike = ..., on_out_of_domain: OnOutOfDomain = ..., nulls: Nulls = ...,
                 count_column: str | None = ..., noise: NoiseKind = ..., progress: bool | None = ...,
                 privacy_unit: Rows | None = ...) -> SpatialRelease:
    """UG: noisy counts of an ``m^d`` grid over the public ``bounds`` (see module docstring); the
    grid counts (and, when needed, the number of points) are computed in the engine holding the
    rows."""


@mechanism(AdaptiveGridPlan, run_adaptive_grid)
def adaptive_grid(frame: Any, columns: str | Sequence[str], *, bounds: Bounds, epsilon: float,
                  n: int | None = ..., n_share: float = ..., alpha: float = ..., c: float = ...,
                  c2: float = ..., neighbours: Neighbours = ..., seed: SeedLike = ...,
                  on_out_of_domain: OnOutOfDomain = ..., nulls: Nulls = ..., count_column: str | None = ...,
                  noise: NoiseKind = ..., progress: bool | None = ...,
                  privacy_unit: Rows | None = ...) -> SpatialRelease:
    """AG: a two-level adaptive grid with constrained inference (see module docstring); the second
    level's cells depend on the noisy first level, so AG reads the point columns themselves (only
    those, from DuckDB or Spark)."""


@mechanism(PriveletGridPlan, run_privelet_grid)
def privelet_grid(frame: Any, columns: str | Sequence[str], *, bounds: Bounds, epsilon: float,
                  bits: int | None = ..., neighbours: Neighbours = ..., seed: SeedLike = ...,
                  on_out_of_domain: OnOutOfDomain = ..., nulls: Nulls = ..., count_column: str | None = ...,
                  noise: NoiseKind = ..., progress: bool | None = ...,
                  privacy_unit: Rows | None = ...) -> SpatialRelease:
    """Privelet* (the PrivTree paper's baseline): Privelet over a fixed ``2^bits``-per-dimension
    grid of the public box, each axis an ordinal attribute with the Haar transform; the paper's
    resolution is not recovered (PrivTree paper Sec. 6.1).  Privacy is Privelet's: Laplace ``rho /
    epsilon`` per wavelet coefficient with ``rho = prod_j (1 + bits)`` under add/remove (``2 rho /
    epsilon`` under replace), see :func:`polars_dp.privelet`."""


__all__ = ["adaptive_grid", "constrained_inference", "grid_side", "privelet_grid", "run_adaptive_grid",
           "run_privelet_grid", "run_uniform_grid", "uniform_grid"]
