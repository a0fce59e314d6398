"""Reading a sequence release back: the tree's structure checked against its plan.

What :meth:`SequenceRelease.from_arrow` verifies beyond the common metadata and the parameters
(checked by re-planning, :meth:`polars_dp.releases.base.Release._replan`; the checksum, required
unless ``unverified=True``, is checked by the caller):

* the tree: children contiguous in BFS order, ``beta = |I| + 1`` per split node with
  prepended codes ``0..beta-1``; no node below the start marker ``#``; depth at most the
  plan's (``l_top`` for PrivTree, ``height - 1`` for n-grams); at most ``max_nodes`` nodes; for
  PrivTree every internal histogram the sum of its children's (both post-processings publish
  sums; not checked on files that predate checksums, whose 0.1.0 writer clipped level by level);
* what the data decided and the tree must agree with (the plan's ``check_tree``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from polars_dp.errors import ReleaseFormatError

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from polars_dp.plans.spatial import SequencesPlan


def check_sequence_structure(parent: np.ndarray, prepended: np.ndarray, hist: np.ndarray,
                             first_child: np.ndarray, height: int, params: Mapping[str, Any],
                             plan: SequencesPlan, *, sums: bool = True) -> None:
    """The shape of the tree of ``parent`` / ``prepended`` codes (BFS order), its ``height`` and
    (if ``sums``) PrivTree's internal sums of the histograms ``hist``, against the ``plan`` and
    the record ``params``: see the module docstring."""
    n, beta = parent.size, hist.shape[1]
    is_leaf = first_child < 0
    if (n - 1) % beta:
        raise ReleaseFormatError(f"sequence model has {n} nodes, not 1 + a multiple of beta = {beta}: "
                                 "nodes were removed or added")
    split = parent[1::beta]  # the parent of each group of children
    if (not np.array_equal(parent[1:], np.repeat(split, beta))
            or not np.array_equal(prepended[1:], np.tile(np.arange(beta), split.size))
            or np.any(np.diff(split) <= 0)):
        raise ReleaseFormatError("sequence model nodes do not form a tree of full, ordered child groups "
                                 "in BFS order: the table was edited")
    if np.any(prepended[split] == beta - 1):
        raise ReleaseFormatError("sequence model has children below a start marker '#': the table was edited")
    if height > plan.max_depth:
        raise ReleaseFormatError(f"sequence model is {height} levels deep; its parameters allow "
                                 f"{plan.max_depth}")
    if plan.max_nodes is not None and n > plan.max_nodes:
        raise ReleaseFormatError(f"sequence model has {n} nodes, above its max_nodes = {plan.max_nodes!r}")
    if sums and plan.internal_sums and split.size:
        totals = np.zeros_like(hist)
        np.add.at(totals, parent[1:], hist[1:])
        internal = ~is_leaf
        if not np.allclose(hist[internal], totals[internal], rtol=1e-9, atol=1e-6):
            raise ReleaseFormatError("sequence model's internal histograms are not the sums of their "
                                     "children's: the counts were edited")
    leaves = hist[is_leaf]
    plan.check_tree(params, n, float(leaves.min()) if leaves.size else 0.0)


__all__ = ["check_sequence_structure"]
