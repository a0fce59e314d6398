"""PrivTree (Zhang, Xiao, Xie, SIGMOD 2016): a private hierarchical decomposition of points.

Algorithm (paper Sec. 3, Algorithm "PrivTree"; spec §2.3)
--------------------------------------------------------
Starting from the public box (depth 0), every node ``v`` gets the biased, clamped count
``b(v) = max(c(v) - depth(v) * delta, theta - delta)`` and splits into ``beta`` children iff
``b(v) + Lap(lambda) > theta``.  There is no height parameter.  Public rule: a node at the
discretisation limit (depth ``(d*k) // log2(beta)``, see :mod:`polars_dp.kernels.morton`) stays a
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
``Lap(2 / eps_leaf)`` (L1 sensitivity 2).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from polars_dp.counting.points import finest_cells
from polars_dp.domains.box import as_box
from polars_dp.kernels.morton import (
    MortonLayout,
    check_fanout,
    morton_codes,
    resolution_bits,
)
from polars_dp.mechanisms.privtree_rule import check_theta, privtree_delta, privtree_lambda, privtree_split
from polars_dp.noise import SeedLike, check_epsilon, check_fraction, histogram_sensitivity, laplace, make_rng
from polars_dp.params import check_int
from polars_dp.releases.tree import TreeRelease


def grow_tree(codes: np.ndarray, counts: np.ndarray | None, layout: MortonLayout, *, lam: float,
              delta: float, theta: float, rng: np.random.Generator
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Run PrivTree's split decisions on sorted Morton ``codes`` carrying ``counts`` points each
    (the finest cells and their counts; ``None``: one point per code), one level at a time.

    Returns the leaves' first codes (sorted), depths and exact counts.  Every node of a level
    gets its count from two ``searchsorted`` calls over the cumulative counts and its own
    Laplace draw, so unique weighted codes give the same tree as the repeated codes.
    """
    if counts is None:
        cum = np.arange(codes.size + 1, dtype=np.int64)
    else:
        cum = np.zeros(codes.size + 1, dtype=np.int64)
        np.cumsum(counts, out=cum[1:])
    prefixes = np.zeros(1, dtype=np.int64)
    children = np.arange(layout.fanout, dtype=np.int64)
    starts, depths, counts = [], [], []
    for depth in range(layout.max_depth + 1):
        shift = layout.shift(depth)
        first = prefixes << shift
        c = (cum[np.searchsorted(codes, first + (np.int64(1) << shift), side="left")]
             - cum[np.searchsorted(codes, first, side="left")])
        if depth == layout.max_depth:
            split = np.zeros(prefixes.size, dtype=bool)
        else:
            split = privtree_split(c, depth, lam=lam, delta=delta, theta=theta, rng=rng)
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
             nulls: str = "raise", resolution: int | None = None, count_column: str | None = None
             ) -> TreeRelease:
    """Release a PrivTree decomposition of the points ``columns`` inside the public ``bounds``.

    Parameters
    ----------
    frame : private points: a Polars DataFrame / LazyFrame, pyarrow Table or Arrow stream, a
        DuckDB relation or a Spark DataFrame.  The points are snapped to the public grid of
        ``2^resolution`` cells per axis in that engine, which returns only the counts per
        finest cell; the tree is grown from those weighted cells.
    columns : 1 to 8 numeric columns; ``bounds`` gives one public ``(lo, hi)`` per column
        (or a mapping column -> pair).  Never derive bounds from the data.
    epsilon : total budget; ``tree_share`` of it builds the tree, the rest the leaf counts.
    fanout : ``beta``, a power of two up to ``2^d`` (default ``2^d``: halve every dimension);
        ``2^s`` splits ``s`` dimensions per level in round-robin order.
    theta : split threshold (default 0, the paper's recommendation).
    neighbours : ``"add_remove"`` (the paper's relation) or ``"replace"`` (group privacy, see
        module docstring).
    seed : ``None`` draws OS entropy; an int makes the release reproducible (tests only).
    on_out_of_domain, nulls : ``"raise"`` by default; see :mod:`polars_dp.counting.points`.
    resolution : bits per axis of the finest grid (public; default and maximum
        ``min(31, 62 // d)``).  Lower values give a coarser grid and a smaller aggregate.
    count_column : a column of non-negative integer counts when each row stands for several
        points (pre-aggregated rows; the guarantee holds when each individual contributes to
        exactly one row with weight 1, see :mod:`polars_dp.counting.spec`).
    """
    box = as_box(columns, bounds)
    split_bits = check_fanout(fanout, box.d)
    beta = 1 << split_bits
    epsilon = check_epsilon(epsilon)
    share = check_fraction(tree_share, "tree_share")
    factor = histogram_sensitivity(neighbours)
    theta = check_theta(theta)
    eps_tree, eps_leaf = epsilon * share, epsilon * (1 - share)
    lam = privtree_lambda(eps_tree / factor, beta)
    delta = privtree_delta(lam, beta)
    rng = make_rng(seed)

    top = resolution_bits(box.d)
    bits = top if resolution is None else check_int(resolution, "resolution", lo=1, hi=top)
    layout = MortonLayout(box.d, bits, split_bits)
    codes, weights = finest_cells(frame, box, bits, functools.partial(morton_codes, bits=bits),
                                  on_out_of_domain=on_out_of_domain, nulls=nulls, count_column=count_column)
    start, depth, count = grow_tree(codes, weights, layout, lam=lam, delta=delta, theta=theta, rng=rng)
    del codes, weights
    count += laplace(rng, factor / eps_leaf, count.shape)
    lo, hi = layout.node_boxes(start, depth, box)
    params = {"lambda": lam, "delta": delta, "theta": theta, "fanout": beta, "tree_share": share,
              "epsilon_tree": eps_tree, "epsilon_leaf": eps_leaf, "leaf_noise_scale": factor / eps_leaf,
              "resolution_bits": layout.bits}
    return TreeRelease(box, lo, hi, depth, count, codes=start, mechanism="privtree", epsilon=epsilon,
                       neighbours=neighbours, params=params,
                       layout={"kind": "morton", "bits": layout.bits, "split_bits": split_bits})


__all__ = ["check_theta", "grow_tree", "privtree", "privtree_delta", "privtree_lambda"]
