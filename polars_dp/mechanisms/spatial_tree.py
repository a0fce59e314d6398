"""PrivTree (Zhang, Xiao, Xie, SIGMOD 2016): a private hierarchical decomposition of points.

Algorithm (paper Sec. 3, Algorithm "PrivTree")
--------------------------------------------------------
Starting from the public box (depth 0), every node ``v`` gets the biased, clamped count
``b(v) = max(c(v) - depth(v) * delta, theta - delta)`` and splits into ``beta`` children iff
``b(v) + Lap(lambda) > theta``.  There is no height parameter.  Public rule: a node at the
discretisation limit (depth ``(d*k) // log2(beta)``, see :mod:`polars_dp.kernels.morton`) stays a
leaf without a decision.

Privacy (add/remove-one neighbours, paper Sec. 3, privacy theorem)
---------------------------------------------------------------------
Adding or removing one point changes ``c`` by 1 on one root-to-leaf path only, and counts
are monotone along it.  With ``delta = gamma * lambda`` the split decisions are
``eps_tree``-DP when ``lambda >= (2 e^gamma - 1) / ((e^gamma - 1) * eps_tree)``; with
``gamma = ln(beta)``:

    lambda = (2 beta - 1) / ((beta - 1) * eps_tree),   delta = lambda * ln(beta).

The leaves partition the box, so their counts have L1 sensitivity 1 and get
``Lap(1 / eps_leaf)`` (the Laplace mechanism, paper Sec. 3).  ``eps_tree = tree_share * epsilon``,
``eps_leaf = epsilon - eps_tree``; the total is ``epsilon`` by sequential composition.

``neighbours="replace"`` (modify one point) is a remove followed by an add: by group privacy
(factor 2) the tree uses ``lambda`` computed for ``eps_tree / 2`` and the leaf counts
``Lap(2 / eps_leaf)`` (L1 sensitivity 2: the point leaves one leaf and enters another, the
partition being fixed by the first part).

Exact noise (``noise="exact"``, the default): ``eps_tree = share * epsilon`` and ``eps_leaf =
epsilon - eps_tree`` are exact rationals (they add up to ``epsilon``); the split decisions are
drawn exactly with ``lambda``/``delta``/``theta`` on the ``2^-20`` grid (rounded safely, see
:mod:`polars_dp.mechanisms.privtree_rule`), and the integer leaf counts get discrete Laplace noise of
scale ``factor / eps_leaf`` rounded up to the grid (``params["leaf_epsilon_effective"]`` is
what it spends).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from polars_dp.compiled import numpy_only
from polars_dp.counting.points import finest_cells
from polars_dp.domains.privacy_unit import Rows
from polars_dp.kernels.morton import (
    MortonLayout,
    morton_codes,
)
from polars_dp.mechanisms.options import mechanism
from polars_dp.mechanisms.privacy_unit import bounded
from polars_dp.mechanisms.privtree_levels import (
    level_counts,
    noisy_level_counts,
)
from polars_dp.mechanisms.privtree_rule import (
    check_theta,
    privtree_delta,
    privtree_lambda,
    privtree_split,
)
from polars_dp.noise import (
    Neighbours,
    NoiseKind,
    SeedLike,
    add_noise,
    noise_source,
)
from polars_dp.params import Nulls, OnOutOfDomain
from polars_dp.plans.spatial import Bounds, PrivTreePlan
from polars_dp.progress import Progress
from polars_dp.releases.spatial import SpatialRelease
from polars_dp.releases.tree_levels import TopLevels


def grow_tree(codes: np.ndarray, counts: np.ndarray | None, layout: MortonLayout, *, lam: float,
              delta: float, theta: float, rng: Any, noise: NoiseKind = "exact",
              advance: Callable[[int], None] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Run PrivTree's split decisions level by level on sorted finest-resolution Morton codes.

    ``codes``: non-decreasing int64 Morton codes at the layout's resolution (typically unique
    cells); ``counts``: int64 weight of each code (the number of points in that cell), or
    ``None`` for one point per code.  An engine that counts points per finest cell passes
    ``np.unique(codes, return_counts=True)``; raw sorted codes can be passed with ``None``.

    The codes are sorted once and reused by every level: a node is the index range of its
    prefix, and only the frontier (the nodes of the current level) is looked up: a split node
    ``[a, b)`` gets its ``beta - 1`` interior child boundaries from one ``searchsorted`` each,
    and counts are differences of the cumulative weights.  Each node of a level gets its own
    Laplace draw (:func:`privtree_split`), in code order.  Returns the leaves' first codes
    (sorted), depths and exact counts (float64).  ``advance(n)`` reports the nodes decided.
    """
    codes = np.asarray(codes, dtype=np.int64)
    cum = None if counts is None else np.r_[0, np.cumsum(np.asarray(counts, dtype=np.int64))]
    prefixes = np.zeros(1, dtype=np.int64)
    lo = np.zeros(1, dtype=np.int64)
    hi = np.full(1, codes.size, dtype=np.int64)
    interior = np.arange(1, layout.fanout, dtype=np.int64)
    children = np.arange(layout.fanout, dtype=np.int64)
    starts, depths, leaf_counts = [], [], []
    for depth in range(layout.max_depth + 1):
        shift = layout.shift(depth)
        c = hi - lo if cum is None else cum[hi] - cum[lo]
        if depth == layout.max_depth:
            split = np.zeros(prefixes.size, dtype=bool)
        else:
            split = privtree_split(c, depth, lam=lam, delta=delta, theta=theta, rng=rng, noise=noise)
        if advance is not None:
            advance(prefixes.size)
        leaf = ~split
        starts.append(prefixes[leaf] << shift)
        depths.append(np.full(int(leaf.sum()), depth, dtype=np.int32))
        leaf_counts.append(c[leaf])
        if not split.any():
            break
        parent = prefixes[split] << layout.split_bits
        lo, hi = _child_ranges(codes, parent, lo[split], hi[split], interior, layout.shift(depth + 1),
                               layout.fanout)
        prefixes = (parent[:, None] | children).ravel()
    start = np.concatenate(starts)
    order = np.argsort(start, kind="stable")
    count = np.concatenate(leaf_counts)[order].astype(np.float64)
    return start[order], np.concatenate(depths)[order], count


#: A level finds its child boundaries by scanning the codes of the split nodes when they hold
#: fewer than this many codes per boundary, else by binary search over all codes.
SCAN_PER_BOUNDARY = 16


def _child_ranges(codes: np.ndarray, parent: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                  interior: np.ndarray, child_shift: int, fanout: int) -> tuple[np.ndarray, np.ndarray]:
    """Index ranges ``[lo, hi)`` (flat, children in code order) of the children of the split
    nodes with first child prefixes ``parent`` and index ranges ``[lo, hi)``.

    Small nodes: one pass over their codes (child digit, then a bincount per node); large
    ones: ``searchsorted`` of the ``beta - 1`` interior boundaries.  Both give the same ranges.
    """
    sizes = hi - lo
    total = int(sizes.sum())
    if total <= SCAN_PER_BOUNDARY * parent.size * interior.size:
        owner = np.repeat(np.arange(parent.size, dtype=np.int64), sizes)
        pos = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(sizes) - sizes - lo, sizes)
        digit = (codes[pos] >> child_shift) & (fanout - 1)
        per_child = np.bincount(owner * fanout + digit, minlength=parent.size * fanout)
        ends = np.cumsum(per_child.reshape(parent.size, fanout), axis=1) + lo[:, None]
        return (ends - per_child.reshape(parent.size, fanout)).ravel(), ends.ravel()
    inner = np.searchsorted(codes, ((parent[:, None] | interior) << child_shift).ravel(), side="left")
    bounds = np.concatenate([lo[:, None], inner.reshape(parent.size, -1), hi[:, None]], axis=1)
    return bounds[:, :-1].ravel(), bounds[:, 1:].ravel()


def run_privtree(plan: PrivTreePlan, frame: Any, *, seed: SeedLike, progress: bool | None
                 ) -> SpatialRelease:
    """Count ``frame``'s points per finest cell, grow the tree and add the plan's noise."""
    opts = plan.options
    on_out_of_domain, nulls, count_column = opts["on_out_of_domain"], opts["nulls"], opts["count_column"]
    box, layout, k, noise = plan.box, plan.layout, plan.levels, plan.noise
    split_bits, bits, theta = layout.split_bits, layout.bits, plan.theta
    lam = plan.lam  # the plan's lambda: one calibration
    delta = plan.delta  # checked by the plan: delta >= lambda ln(beta)
    leaf_scale = plan.leaf_scale
    src = noise_source(seed)

    with numpy_only(not plan.compiled_kernels):  # PrivTree: the numpy kernels, at every size
        bar = Progress("privtree", progress, None)
        bar.step("counting (finest cells)")
        frame = bounded(frame, plan, src, box.columns)
        codes, weights = finest_cells(frame, box, bits, functools.partial(morton_codes, bits=bits),
                                      on_out_of_domain=on_out_of_domain, nulls=nulls,
                                      count_column=count_column)
        start, depth, count = grow_tree(codes, weights, layout, lam=lam, delta=delta, theta=theta, rng=src,
                                        noise=noise, advance=bar.step("tree", unit="nodes"))
        exact_levels = level_counts(codes, weights, layout, k) if k else []
        del codes, weights
        bar.step("noise")
        add_noise(count, leaf_scale, src, noise)
        top_levels = None
        if k:
            scales = plan.level_scales
            noisy_top = noisy_level_counts(exact_levels, scales, src, noise)
            del exact_levels
            bar.step("inference")
            top_levels = TopLevels.infer(start, depth, layout, k, noisy_top, [float(b) for b in scales],
                                         count, float(leaf_scale), noise)
            count = top_levels.leaf_counts()
        bar.close()
        lo, hi = layout.node_boxes(start, depth, box)
        return SpatialRelease(box, lo, hi, depth, count, codes=start, seeded=src.seeded, plan=plan,
                              levels=top_levels,
                              layout={"kind": "morton", "bits": layout.bits, "split_bits": split_bits})


@mechanism(PrivTreePlan, run_privtree)
def privtree(frame: Any, columns: str | Sequence[str], *, bounds: Bounds, epsilon: float,
             fanout: int | None = ..., theta: float = ..., tree_share: float = ...,
             neighbours: Neighbours = ..., seed: SeedLike = ..., on_out_of_domain: OnOutOfDomain = ...,
             nulls: Nulls = ..., resolution: int | None = ..., count_column: str | None = ...,
             noise: NoiseKind = ..., progress: bool | None = ..., levels: int | None = ...,
             privacy_unit: Rows | None = ...) -> SpatialRelease:
    """Release a PrivTree decomposition of the points ``columns`` inside the public ``bounds``.

    ``tree_share`` of ``epsilon`` builds the tree (split decisions with ``lambda = (2 beta - 1) /
    ((beta - 1) eps_tree)``, ``delta = lambda ln(beta)``), the rest adds ``Lap(1 / eps_leaf)`` to
    each leaf count under ``add_remove``; under ``replace`` group privacy doubles both (module
    docstring).  The points are snapped to the public grid of ``2^resolution`` cells per axis in
    the engine holding them, which returns only the counts per finest cell.  A privacy unit of
    ``k`` rows multiplies every count's sensitivity and the decisions' group factor by ``k``.

    ``levels`` stays 0 by default because on GeoNames and the flights the counted levels did not
    lower the error of any box size (``docs/results/spatial.md``,
    ``docs/results/privtree_levels_ablation.md``).

    >>> import polars as pl, polars_dp as pdp
    >>> points = pl.DataFrame({"x": [0.1, 0.2, 0.8, 0.9], "y": [0.1, 0.3, 0.7, 0.9]})
    >>> tree = pdp.privtree(points, ["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=1.0)
    >>> tree.columns, tree.neighbours, len(tree.count) == tree.n_leaves
    (['x', 'y'], 'add_remove', True)
    """


__all__ = ["check_theta", "grow_tree", "privtree", "privtree_delta", "privtree_lambda", "run_privtree"]
