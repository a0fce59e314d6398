"""The quadtree of a PrivTree with counted top levels (pure numpy).

A PrivTree's leaves (first Morton codes and depths, :mod:`polars_dp.kernels.morton`) and the
complete top ``k`` levels of the same public ``2^s``-ary decomposition are nodes of one tree:
level ``l <= k`` holds all ``2^(s l)`` cells (a PrivTree leaf shallower than ``k`` becomes an
inner node whose descendants down to level ``k`` are cells), level ``l > k`` the PrivTree nodes
of depth ``l``.  Its leaves are the PrivTree leaves of depth ``>= k`` and the level-``k`` cells
inside shallower PrivTree leaves.  Range counts are answered on the PrivTree's own nodes (its
leaves are the *finest nodes*).  Nodes are kept per level in code order
(a node is its prefix, the first ``l s`` code bits); every inner node has all ``2^s`` children.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from polars_dp.domains.box import Box
from polars_dp.kernels.morton import MortonLayout
from polars_dp.kernels.spatial_sums import visit_tree
from polars_dp.kernels.tree_inference import functional_variance


@dataclass(frozen=True)
class LevelTree:
    """Per level ``l``: node prefixes (sorted) and parent indices; where the PrivTree leaves are."""

    layout: MortonLayout
    levels: int
    prefixes: list[np.ndarray]
    parent: list[np.ndarray]
    leaf_index: np.ndarray  # position of each PrivTree leaf in its level

    def sizes(self) -> list[int]:
        return [p.size for p in self.prefixes]


def top_cells(levels: int, split_bits: int) -> int:
    """Number of counted top-level cells, ``sum_{l=1..k} 2^(s l)``."""
    return sum(1 << (split_bits * lev) for lev in range(1, levels + 1))


def level_tree(starts: np.ndarray, depth: np.ndarray, layout: MortonLayout, levels: int) -> LevelTree:
    """The tree of the module docstring for leaves sorted by first code."""
    starts = np.asarray(starts, dtype=np.int64)
    depth = np.asarray(depth, dtype=np.int64)
    s = layout.split_bits
    top = int(depth.max(initial=0))
    n_levels = max(top, levels) + 1
    order = np.argsort(depth, kind="stable")  # leaves grouped by depth, code order inside a group
    bounds = np.searchsorted(depth[order], np.arange(n_levels + 1))
    here = [order[bounds[lev]:bounds[lev + 1]] for lev in range(n_levels)]
    prefixes: list[np.ndarray] = [np.empty(0, dtype=np.int64)] * n_levels
    for lev in range(n_levels - 1, -1, -1):  # bottom-up: a level = its leaves + its children's parents
        if lev <= levels:
            prefixes[lev] = np.arange(1 << (s * lev), dtype=np.int64)
            continue
        own = starts[here[lev]] >> layout.shift(lev)
        if lev + 1 < n_levels and prefixes[lev + 1].size:
            up = prefixes[lev + 1] >> s
            up = up[np.r_[True, up[1:] != up[:-1]]]
            own = np.sort(np.concatenate([up, own]), kind="stable")  # two sorted runs: a merge
        prefixes[lev] = own
    parent = [np.zeros(1, dtype=np.int64)] + [np.searchsorted(prefixes[lev - 1], prefixes[lev] >> s)
                                              for lev in range(1, n_levels)]
    leaf_index = np.zeros(starts.size, dtype=np.int64)
    for lev in range(n_levels):
        leaf_index[here[lev]] = np.searchsorted(prefixes[lev], starts[here[lev]] >> layout.shift(lev))
    return LevelTree(layout, levels, prefixes, parent, leaf_index)


def level_tree_sums(tree: LevelTree, finest_starts: np.ndarray, finest_counts: np.ndarray, box: Box,
                    q_lo: np.ndarray, q_hi: np.ndarray, *, node_stats: tuple[list, list, list] | None = None
                    ) -> tuple[np.ndarray, np.ndarray | None]:
    """Answers of boxes ``[q_lo, q_hi]`` from the coarsest nodes inside each box (their subtree
    sums of the finest counts), pro rata only in the finest nodes crossing its boundary.

    With ``node_stats = (V, ratio, group)`` per level (:class:`~polars_dp.kernels.tree_inference.
    TreeEstimate`), also each answer's exact noise variance (:func:`functional_variance`)."""
    n_q = q_lo.shape[0]
    cum = np.r_[0.0, np.cumsum(finest_counts, dtype=np.float64)]
    answers = np.zeros(n_q)
    rec_w: list[np.ndarray] = []
    rec_q: list[np.ndarray] = []
    rec_up: list[np.ndarray] = []
    rec_node: list[np.ndarray] = []
    depths = len(tree.prefixes)
    for v in visit_tree(finest_starts, tree.layout, box, q_lo, q_hi, depths, starts_are_nodes=True):
        answers += np.bincount(v.qi, weights=v.contribution(cum, finest_counts), minlength=n_q)
        if node_stats is not None:
            rec_w.append(np.where(v.inside, 1.0, np.where(v.is_leaf, v.frac, 0.0)))
            rec_q.append(v.qi)
            rec_up.append(v.parent)
            rec_node.append(np.searchsorted(tree.prefixes[v.depth], v.prefix))
    if node_stats is None:
        return answers, None
    V, ratio, group = node_stats
    lv = range(len(rec_w))
    var = functional_variance(rec_w, rec_q, rec_up, [V[i][rec_node[i]] for i in lv],
                              [ratio[i][rec_node[i]] for i in lv], [group[i][rec_node[i]] for i in lv], n_q)
    return answers, var


__all__ = ["LevelTree", "level_tree", "level_tree_sums", "top_cells"]
