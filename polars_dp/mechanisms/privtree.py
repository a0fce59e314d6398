"""PrivTree (Zhang, Xiao, Xie, SIGMOD 2016): a private hierarchical decomposition of points.

Algorithm (paper Sec. 3, Algorithm "PrivTree"; spec §2.3)
--------------------------------------------------------
Starting from the public box (depth 0), every node ``v`` gets the biased, clamped count
``b(v) = max(c(v) - depth(v) * delta, theta - delta)`` and splits into ``beta`` children iff
``b(v) + Lap(lambda) > theta``.  There is no height parameter.  Public rule: a node at the
discretisation limit (depth ``(d*k) // log2(beta)``, see :mod:`polars_dp.spatial`) stays a
leaf without a decision.

Privacy (add/remove-one neighbours, paper Sec. 3.2 Theorem; spec §2.4)
---------------------------------------------------------------------
Adding or removing one point changes ``c`` by 1 on one root-to-leaf path only, and counts
are monotone along it.  With ``delta = gamma * lambda`` the split decisions are
``eps_tree``-DP when ``lambda >= (2 e^gamma - 1) / ((e^gamma - 1) * eps_tree)``; with
``gamma = ln(beta)``:

    lambda = (2 beta - 1) / ((beta - 1) * eps_tree),   delta = lambda * ln(beta).

The leaves partition the box, so their counts have L1 sensitivity 1 and get
``Lap(1 / eps_leaf)`` (spec §2.5).  ``eps_tree = tree_share * epsilon``,
``eps_leaf = epsilon - eps_tree``; the total is ``epsilon`` by sequential composition.

``neighbours="replace"`` (modify one point) is a remove followed by an add: by group privacy
(factor 2) the tree uses ``lambda`` computed for ``eps_tree / 2`` and the leaf counts
``Lap(2 / eps_leaf)`` (L1 sensitivity 2: the point leaves one leaf and enters another, the
partition being fixed by the first part).

Exact noise (``noise="exact"``, the default): ``eps_tree = share * epsilon`` and ``eps_leaf =
epsilon - eps_tree`` are exact rationals (they add up to ``epsilon``); the split decisions are
drawn exactly with ``lambda``/``delta``/``theta`` on the ``2^-20`` grid (rounded safely, see
:mod:`polars_dp.privtree_rule`), and the integer leaf counts get discrete Laplace noise of
scale ``factor / eps_leaf`` rounded up to the grid (``params["leaf_epsilon_effective"]`` is
what it spends).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from polars_dp.noise import (
    SeedLike,
    add_noise,
    check_epsilon,
    check_fraction,
    check_noise,
    histogram_sensitivity,
    laplace_scale,
    noise_params,
    noise_source,
)
from polars_dp.points import collect_points
from polars_dp.privtree_rule import check_theta, grid_theta, privtree_delta, privtree_lambda, privtree_split
from polars_dp.spatial import (
    MortonLayout,
    as_box,
    check_fanout,
    grid_coordinates,
    morton_codes,
    resolution_bits,
)
from polars_dp.tree_release import TreeRelease


def grow_tree(codes: np.ndarray, layout: MortonLayout, *, lam: float, delta: float, theta: float,
              rng, noise: str = "exact") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Run PrivTree's split decisions on sorted Morton ``codes``, one level at a time.

    Returns the leaves' first codes (sorted), depths and exact counts.  Every node of a level
    gets its count from two ``searchsorted`` calls and its own Laplace draw.
    """
    prefixes = np.zeros(1, dtype=np.int64)
    children = np.arange(layout.fanout, dtype=np.int64)
    starts, depths, counts = [], [], []
    for depth in range(layout.max_depth + 1):
        shift = layout.shift(depth)
        first = prefixes << shift
        c = (np.searchsorted(codes, first + (np.int64(1) << shift), side="left")
             - np.searchsorted(codes, first, side="left"))
        if depth == layout.max_depth:
            split = np.zeros(prefixes.size, dtype=bool)
        else:
            split = privtree_split(c, depth, lam=lam, delta=delta, theta=theta, rng=rng, noise=noise)
        leaf = ~split
        starts.append(first[leaf])
        depths.append(np.full(int(leaf.sum()), depth, dtype=np.int32))
        counts.append(c[leaf])
        if not split.any():
            break
        prefixes = ((prefixes[split] << layout.split_bits)[:, None] | children).ravel()
    start = np.concatenate(starts)
    order = np.argsort(start, kind="stable")
    return start[order], np.concatenate(depths)[order], np.concatenate(counts)[order].astype(np.float64)


def privtree(frame: Any, columns: str | Sequence[str], *, bounds: Any, epsilon: float,
             fanout: int | None = None, theta: float = 0.0, tree_share: float = 0.5,
             neighbours: str = "add_remove", seed: SeedLike = None, on_out_of_domain: str = "raise",
             nulls: str = "raise", noise: str = "exact") -> TreeRelease:
    """Release a PrivTree decomposition of the points ``columns`` inside the public ``bounds``.

    Parameters
    ----------
    frame : Polars DataFrame / LazyFrame or pyarrow Table (private; only ``columns`` are read).
    columns : 1 to 8 numeric columns; ``bounds`` gives one public ``(lo, hi)`` per column
        (or a mapping column -> pair).  Never derive bounds from the data.
    epsilon : total budget; ``tree_share`` of it builds the tree, the rest the leaf counts.
    fanout : ``beta``, a power of two up to ``2^d`` (default ``2^d``: halve every dimension);
        ``2^s`` splits ``s`` dimensions per level in round-robin order.
    theta : split threshold (default 0, the paper's recommendation).
    neighbours : ``"add_remove"`` (the paper's relation) or ``"replace"`` (group privacy, see
        module docstring).
    seed : ``None`` draws cryptographic randomness; an int makes the release reproducible (tests
        only; the release is marked ``seeded``).
    on_out_of_domain, nulls : ``"raise"`` by default; see :mod:`polars_dp.points`.
    noise : ``"exact"`` (exact decisions and discrete Laplace leaf counts, default) or ``"float"``.
    """
    box = as_box(columns, bounds)
    split_bits = check_fanout(fanout, box.d)
    beta = 1 << split_bits
    epsilon = check_epsilon(epsilon)
    share = check_fraction(tree_share, "tree_share")
    factor = histogram_sensitivity(neighbours)
    theta = check_theta(theta)
    noise = check_noise(noise)
    if noise == "exact":
        eps_tree = Fraction(epsilon) * Fraction(share)
        eps_leaf = Fraction(epsilon) - eps_tree
        theta = grid_theta(theta)
    else:
        eps_tree, eps_leaf = epsilon * share, epsilon * (1 - share)
    lam = privtree_lambda(eps_tree, beta, group=factor, noise=noise)
    delta = privtree_delta(lam, beta, noise=noise)
    leaf_scale = laplace_scale(factor, eps_leaf, noise)
    src = noise_source(seed)

    points = collect_points(frame, box, on_out_of_domain=on_out_of_domain, nulls=nulls)
    layout = MortonLayout(box.d, resolution_bits(box.d), split_bits)
    codes = np.sort(morton_codes(grid_coordinates(points, box, layout.bits), layout.bits))
    del points
    start, depth, count = grow_tree(codes, layout, lam=lam, delta=delta, theta=theta, rng=src, noise=noise)
    del codes
    add_noise(count, leaf_scale, src, noise)
    lo, hi = layout.node_boxes(start, depth, box)
    params = {"lambda": lam, "delta": delta, "theta": theta, "fanout": beta, "tree_share": share,
              "epsilon_tree": float(eps_tree), "epsilon_leaf": float(eps_leaf),
              "leaf_noise_scale": float(leaf_scale), "resolution_bits": layout.bits,
              **noise_params(factor, leaf_scale, noise, prefix="leaf_")}
    return TreeRelease(box, lo, hi, depth, count, codes=start, mechanism="privtree", epsilon=epsilon,
                       neighbours=neighbours, params=params, noise=noise, seeded=src.seeded,
                       layout={"kind": "morton", "bits": layout.bits, "split_bits": split_bits})


__all__ = ["check_theta", "grow_tree", "privtree", "privtree_delta", "privtree_lambda"]
