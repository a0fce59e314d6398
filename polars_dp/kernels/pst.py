"""Pure numpy kernels of prediction suffix trees (PST): scores, growth, look-up (no noise here).

Tree layout (public once built): nodes in BFS order, level by level.  Node ``v`` has
``depth[v]``, ``parent[v]`` (``-1`` at the root) and ``prepended[v]``, the code of the symbol
prepended to its parent's predictor string (``|I|`` is the start marker ``#``).  A split node's
``beta = |I| + 1`` children are contiguous: child ``x`` of ``v`` is ``first_child[v] + x``;
``first_child[v] = -1`` marks a leaf.  See :mod:`polars_dp.counting.sequences` for the codes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from polars_dp.counting.sequences import EncodedSequences
from polars_dp.params import check_int


def pst_scores(hist: np.ndarray, starts_with_start: np.ndarray) -> np.ndarray:
    """Split score ``s(v) = |h(v)|_1 - max_y h(v)[y]``, and ``0`` when ``str(v)`` starts with ``#``.

    PrivTree paper Sec. 4 (score reconstructed).  Monotone (``s(child) <= s(parent)``,
    since ``h(child) <= h(parent)`` entrywise) and adding one (context, symbol) pair adds 0 or 1 to
    the scores of the nodes whose predictor is a suffix of the context (one root-to-leaf path),
    and nothing elsewhere.
    """
    hist = np.asarray(hist, dtype=np.float64)
    score = hist.sum(axis=1) - hist.max(axis=1, initial=0.0)
    return np.where(starts_with_start, 0.0, score)


#: Histogram cells (nodes times ``beta``) of the default node cap: 2**25 float64, 256 MB.
DEFAULT_MAX_CELLS = 2**25


def default_max_nodes(beta: int) -> int:
    """Default public node cap: ``max(2**25 // beta, 1 + beta)`` (the root can always split)."""
    return max(DEFAULT_MAX_CELLS // beta, 1 + beta)


def check_max_nodes(max_nodes: int | None, beta: int) -> int:
    """``max_nodes`` (``None``: :func:`default_max_nodes`): an integer >= 1."""
    if max_nodes is None:
        return default_max_nodes(beta)
    return check_int(max_nodes, "max_nodes (a public cap on tree nodes)", lo=1)


@dataclass
class ContextTree:
    """Structure and exact (private) histograms of a grown PST."""

    parent: np.ndarray
    prepended: np.ndarray
    depth: np.ndarray
    first_child: np.ndarray
    hist: np.ndarray
    capped: bool = False

    @property
    def n_nodes(self) -> int:
        return int(self.parent.size)

    @property
    def starts_with_start(self) -> np.ndarray:
        return self.prepended == self.hist.shape[1] - 1

    @property
    def is_leaf(self) -> np.ndarray:
        return self.first_child < 0


SplitRule = Callable[[np.ndarray, int, np.ndarray], np.ndarray]


def grow_context_tree(enc: EncodedSequences, decide: SplitRule, *, max_depth: int,
                      max_nodes: int | None = None) -> ContextTree:
    """Grow a PST level by level; ``decide(hist, depth, starts_with_start) -> split mask``.

    ``max_nodes`` (public; default :func:`default_max_nodes`) caps the tree: when the split
    nodes of a level would add more children than fit, only the first ones in BFS order
    split (as many as fit) and growth stops; ``ContextTree.capped`` records it.  Memory is
    therefore bounded by ``max_nodes * beta`` histogram cells whatever the data or epsilon.

    Each level is one ``bincount`` over the positions still inside split nodes (a position
    lies in exactly one node per level: the node whose predictor is the suffix of its context
    of that length).  Nodes starting with ``#`` and nodes at ``max_depth`` (a public cap) never
    split, whatever ``decide`` says.
    """
    beta = enc.beta
    positions = np.arange(enc.n_positions, dtype=np.int64)
    local = np.zeros(enc.n_positions, dtype=np.int64)
    parents, prepended, depths, first_children, hists = [], [], [], [], []
    level_parent = np.array([-1], dtype=np.int64)
    level_prepended = np.array([-1], dtype=np.int64)
    offset = 0
    capped = False
    max_nodes = check_max_nodes(max_nodes, beta)
    for depth in range(max_depth + 1):
        n_level = level_parent.size
        hist = np.bincount(local * beta + enc.next_symbol[positions], minlength=n_level * beta)
        hist = hist.reshape(n_level, beta).astype(np.float64)
        starts_with_start = level_prepended == beta - 1
        split = np.asarray(decide(hist, depth, starts_with_start), dtype=bool) & ~starts_with_start
        if depth == max_depth:
            split[:] = False
        room = (max_nodes - offset - n_level) // beta
        if split.sum() > room:
            split[np.flatnonzero(split)[max(room, 0):]] = False
            capped = True
        rank = np.cumsum(split) - 1
        first_child = np.where(split, offset + n_level + rank * beta, -1)
        parents.append(level_parent)
        prepended.append(level_prepended)
        depths.append(np.full(n_level, depth, dtype=np.int64))
        first_children.append(first_child)
        hists.append(hist)
        if not split.any():
            break
        keep = split[local]
        positions, local = positions[keep], local[keep]
        local = rank[local] * beta + enc.context_digit(positions, depth + 1)
        split_ids = offset + np.flatnonzero(split)
        level_parent = np.repeat(split_ids, beta)
        level_prepended = np.tile(np.arange(beta, dtype=np.int64), split_ids.size)
        offset += n_level
    return ContextTree(parent=np.concatenate(parents), prepended=np.concatenate(prepended),
                       depth=np.concatenate(depths), first_child=np.concatenate(first_children),
                       hist=np.concatenate(hists), capped=capped)


def deepest_nodes(first_child: np.ndarray, contexts: np.ndarray,
                  usable: np.ndarray | None = None) -> np.ndarray:
    """Deepest node whose predictor string is a suffix of each context.

    ``contexts[i, j]`` is the code of the symbol ``j + 1`` places back (``|I|`` for ``#``,
    ``-1`` past the context's start).  Walks down all rows at once, one level per step.  With
    ``usable`` (a node mask), a walk also stops before the first node that is not usable.
    """
    contexts = np.asarray(contexts, dtype=np.int64)
    node = np.zeros(contexts.shape[0], dtype=np.int64)
    live = np.ones(contexts.shape[0], dtype=bool)
    for j in range(contexts.shape[1]):
        child = first_child[node]
        digit = contexts[:, j]
        move = live & (child >= 0) & (digit >= 0)
        if usable is not None:
            move &= usable[np.where(move, child + digit, 0)]
        if not move.any():
            break
        node[move] = child[move] + digit[move]
        live = move
    return node


def sums_of_children(parent: np.ndarray, depth: np.ndarray, leaf_hist: np.ndarray,
                     is_leaf: np.ndarray) -> np.ndarray:
    """Histograms with every internal node set to the sum of its children (bottom-up)."""
    hist = np.where(is_leaf[:, None], leaf_hist, 0.0)
    for d in range(int(depth.max()), 0, -1):
        nodes = np.flatnonzero(depth == d)
        np.add.at(hist, parent[nodes], hist[nodes])
    return hist


__all__ = ["DEFAULT_MAX_CELLS", "ContextTree", "check_max_nodes", "default_max_nodes", "deepest_nodes",
           "grow_context_tree", "pst_scores", "sums_of_children"]
