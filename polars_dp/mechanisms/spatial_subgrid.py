"""PrivTree leaves with noisy sub-grids and consistent counts (issue 41).

Combines PrivTree (Zhang, Xiao, Xie, SIGMOD 2016) with the second level of AG (Qardaji, Yang,
Li, ICDE 2013): PrivTree's adaptive leaves, each cut into a sub-grid sized as AG sizes its
second level, and AG's constrained inference between the two measurements.

Algorithm (:mod:`polars_dp.kernels.subgrid` for the formulas)
------------------------------------------------------------
1. **Tree**: PrivTree's split decisions exactly as :func:`polars_dp.privtree` draws them
   (:func:`polars_dp.mechanisms.spatial_tree.grow_tree`) on ``eps_tree = tree_share epsilon``,
   fanout 4 by default.
2. **Leaf counts**: ``v_L = c(L) + Lap(Delta / eps_leaf)``, ``eps_leaf = leaf_share (epsilon -
   eps_tree)``.
3. **Sub-grid sizes** from the noisy ``v_L`` only (post-processing): ``2^k_L`` sub-cells,
   ``k_L = round(log2 M_L)``, ``M_L = (max(v_L, 0) eps_sub / c2)^(2d/(d+2))``, capped by
   ``max_subcell_bits`` and the resolution; the sub-cells continue the leaf's Morton order.
4. **Sub-cell counts**: ``u_i = c(i) + Lap(Delta / eps_sub)``, ``eps_sub = epsilon - eps_tree -
   eps_leaf`` (a leaf with ``k_L = 0`` is measured a second time).
5. **Consistency** (post-processing): the weighted least-squares estimate of ``v`` and ``u``
   with the exact variances of the noise drawn.

Privacy
-------
Add/remove-one: one point changes the counts on one root-to-leaf path by 1, so the decisions are
``eps_tree``-DP (PrivTree's theorem, ``lambda = (2 beta - 1) / ((beta - 1) eps_tree)``, ``delta =
lambda ln beta``).  Given the tree, the leaves partition the box: the leaf count vector has L1
sensitivity ``Delta = 1``; given the tree and ``v`` (which fix the sub-cells), the sub-cells
partition the box too: L1 sensitivity 1.  Sequential composition (adaptive, each step on the
public output of the ones before): ``eps_tree + eps_leaf + eps_sub = epsilon``.
Replace-one: a remove followed by an add.  The decisions take group factor 2 (``lambda`` of
``eps_tree / 2``, as PrivTree) and the counts sensitivity ``Delta = 2`` (the point leaves one
cell and enters another).  A privacy unit of ``k`` rows multiplies ``Delta`` and the group factor
by ``k``.

Exact noise (``noise="exact"``, the default): the shares are exact rationals, the decisions are
drawn exactly on the ``2^-20`` grid (:mod:`polars_dp.mechanisms.privtree_rule`), the integer
counts get discrete Laplace noise at scales rounded up to the grid, from the cryptographic source
unless seeded; ``epsilon_spent`` is the exact sum of the three parts.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from polars_dp.compiled import numpy_only
from polars_dp.counting.points import finest_cells
from polars_dp.domains.privacy_unit import Rows
from polars_dp.kernels.morton import morton_codes
from polars_dp.kernels.subgrid import subcells
from polars_dp.mechanisms.options import mechanism
from polars_dp.mechanisms.privacy_unit import bounded
from polars_dp.mechanisms.spatial_tree import grow_tree
from polars_dp.noise import Neighbours, NoiseKind, SeedLike, add_noise, noise_source
from polars_dp.params import Nulls, OnOutOfDomain
from polars_dp.plans.spatial import Bounds, PrivTreeSubgridPlan
from polars_dp.progress import Progress
from polars_dp.releases.spatial import SpatialRelease
from polars_dp.releases.subgrid import Subgrid


def code_range_counts(
    codes: np.ndarray, weights: np.ndarray | None, starts: np.ndarray, total_bits: int
) -> np.ndarray:
    """Exact counts (int64) of the consecutive code ranges ``[starts[i], starts[i + 1])`` (the last
    up to ``2^total_bits``) over sorted finest codes with their ``weights`` (``None``: one each)."""
    cum = np.r_[
        0,
        np.cumsum(
            np.ones(codes.size, dtype=np.int64) if weights is None else np.asarray(weights, dtype=np.int64)
        ),
    ]
    ends = np.r_[starts[1:], np.int64(1) << np.int64(total_bits)] if total_bits < 63 else None
    assert ends is not None  # resolution_bits keeps d * bits <= 62
    return cum[np.searchsorted(codes, ends, side="left")] - cum[np.searchsorted(codes, starts, side="left")]


def run_privtree_subgrid(
    plan: PrivTreeSubgridPlan, frame: Any, *, seed: SeedLike, progress: bool | None
) -> SpatialRelease:
    """Count ``frame``'s points per finest cell, grow the tree, draw the leaf counts, size the
    sub-grids from them, draw the sub-cell counts, then make the counts consistent."""
    opts = plan.options
    box, tree, noise = plan.box, plan.tree_layout, plan.noise
    bits = tree.bits
    src = noise_source(seed)
    with numpy_only(not plan.compiled_kernels):
        bar = Progress("privtree_subgrid", progress, None)
        bar.step("counting (finest cells)")
        frame = bounded(frame, plan, src, box.columns)
        codes, weights = finest_cells(
            frame,
            box,
            bits,
            functools.partial(morton_codes, bits=bits),
            on_out_of_domain=opts["on_out_of_domain"],
            nulls=opts["nulls"],
            count_column=opts["count_column"],
        )
        start, depth, leaf_count = grow_tree(
            codes,
            weights,
            tree,
            lam=plan.lam,
            delta=plan.delta,
            theta=plan.theta,
            rng=src,
            noise=noise,
            advance=bar.step("tree", unit="nodes"),
        )
        bar.step("noise")
        add_noise(leaf_count, plan.leaf_scale, src, noise)  # v: the released leaf counts
        k = plan.subcell_bits(leaf_count, depth)  # post-processing of v
        sub_starts, bit_depth = subcells(start, depth, k, tree)[:2]
        u = code_range_counts(codes, weights, sub_starts, tree.total_bits).astype(np.float64)
        del codes, weights
        add_noise(u, plan.sub_scale, src, noise)
        sub = Subgrid(
            tree, start, depth, k, leaf_count, u, float(plan.leaf_scale), float(plan.sub_scale), noise
        )
        bar.step("consistent counts")
        x = sub.consistent()
        bar.close()
        lo, hi = plan.layout.node_boxes(sub_starts, bit_depth, box)
        return SpatialRelease(
            box,
            lo,
            hi,
            bit_depth,
            x,
            codes=sub_starts,
            seeded=src.seeded,
            plan=plan,
            layout=plan.layout_entries({}),
            subgrid=sub,
        )


@mechanism(PrivTreeSubgridPlan, run_privtree_subgrid)
def privtree_subgrid(
    frame: Any,
    columns: str | Sequence[str],
    *,
    bounds: Bounds,
    epsilon: float,
    fanout: int | None = ...,
    theta: float = ...,
    tree_share: float | None = ...,
    leaf_share: float = ...,
    c2: float = ...,
    max_subcell_bits: int | None = ...,
    neighbours: Neighbours = ...,
    seed: SeedLike = ...,
    on_out_of_domain: OnOutOfDomain = ...,
    nulls: Nulls = ...,
    resolution: int | None = ...,
    count_column: str | None = ...,
    noise: NoiseKind = ...,
    progress: bool | None = ...,
    privacy_unit: Rows | None = ...,
) -> SpatialRelease:
    """Release PrivTree leaves cut into noisy sub-grids, with consistent counts (module docstring).

    ``tree_share`` of ``epsilon`` grows PrivTree's tree, ``leaf_share`` of the rest adds
    ``Lap(Delta / eps_leaf)`` to each leaf count and the remainder ``Lap(Delta / eps_sub)`` to each
    sub-cell count; ``Delta`` is 1 under ``add_remove`` and 2 under ``replace`` (whose tree uses
    ``eps_tree / 2``).  The release's rows are the sub-cells (consistent counts in ``count``);
    range counts answer with the uniform density inside a sub-cell by default, with an exact
    ``noise_std``, or with ``density="linear"``.

    >>> import polars as pl, polars_dp as pdp
    >>> points = pl.DataFrame({"x": [0.1, 0.2, 0.8, 0.9], "y": [0.1, 0.3, 0.7, 0.9]})
    >>> rel = pdp.privtree_subgrid(points, ["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=1.0)
    >>> rel.mechanism, rel.layout["split_bits"], len(rel.count) == rel.n_leaves
    ('privtree_subgrid', 1, True)
    """


__all__ = ["code_range_counts", "privtree_subgrid", "run_privtree_subgrid"]
