"""Counted top levels of a PrivTree release and the consistent counts inferred from them.

A PrivTree released with ``levels = k >= 1`` publishes, besides its noisy leaf counts, a noisy
count of every cell of the first ``k`` levels of its public decomposition (level ``l`` with
Laplace scale ``b_l``; :mod:`polars_dp.mechanisms.privtree_levels`).  Everything here is
post-processing of those published numbers:

* the weighted least-squares estimate of every node count of the combined tree given every
  noisy count and the sum constraints (:mod:`polars_dp.kernels.tree_inference`, Hay et al.,
  VLDB 2010, generalised to unobserved inner nodes and leaves shallower than ``k``);
* range counts from the coarsest PrivTree nodes inside a box (inferred counts, consistent with
  their leaves), uniformity only in the leaves crossing its boundary
  (:func:`polars_dp.kernels.tree_levels.level_tree_sums`).  The top-level cells inside a leaf
  shallower than ``k`` inform that leaf's estimate but do not split it: on sparse regions their
  noise exceeds the uniformity error they would remove;
* the exact noise variance of each answer: the estimate is linear in the noisy counts, whose
  noise is independent with the variance of the drawn distribution (discrete Laplace of scale
  ``b``: ``2 e^(-1/b) / (1 - e^(-1/b))^2``; float Laplace: ``2 b^2``).  In SQL
  (:meth:`TopLevels.variance_sql`) the same variance is plain SQL over two tables
  (:meth:`TopLevels.node_tables`), no Python function.

The observation weights are ``1 / variance``.  Storage: the noisy top-level counts and the
inferred ones are in the ``polars_dp.levels`` metadata entry, the noisy leaf counts in the
``noisy_count`` column, the inferred leaf counts in ``count``; on reading, the inference is
recomputed from the noisy counts and must reproduce the stored inferred ones.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from polars_dp.domains.box import Box
from polars_dp.errors import ReleaseFormatError
from polars_dp.kernels.morton import MortonLayout
from polars_dp.kernels.spatial_sums import child_boxes
from polars_dp.kernels.tree_inference import TreeEstimate, infer_tree
from polars_dp.kernels.tree_levels import LevelTree, level_tree, level_tree_sums, top_cells
from polars_dp.releases.base import read_only


def noise_variance(scale: float, noise: str) -> float:
    """Variance of one draw: discrete Laplace ``2 e^(-1/b) / (1 - e^(-1/b))^2`` (``noise="exact"``),
    float Laplace ``2 b^2``; at least ``VARIANCE_FLOOR`` (a scale so small that the noise is
    almost surely 0 still gets a finite inference weight)."""
    if noise == "exact":
        t = math.exp(-1.0 / scale)
        return max(2.0 * t / (1.0 - t) ** 2, VARIANCE_FLOOR)
    return max(2.0 * scale**2, VARIANCE_FLOOR)


#: Smallest variance an observation is given (see :func:`noise_variance`).
VARIANCE_FLOOR = 1e-30


def _by_depth(depth: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """``(depth, leaf positions)`` per depth present, from one stable sort."""
    order = np.argsort(depth, kind="stable")
    values, starts = np.unique(depth[order], return_index=True)
    ends = np.r_[starts[1:], order.size]
    return [(int(v), order[a:b]) for v, a, b in zip(values, starts, ends, strict=True)]


@dataclass(frozen=True)
class TopLevels:
    """The published top-level counts of a PrivTree and what is inferred from them.

    ``noisy``: the noisy counts of levels ``1..k`` concatenated (each level in code order);
    ``scales``: the Laplace scale of each level; ``leaf_scale``: the leaves'; ``noisy_leaves``:
    the leaves' noisy counts (leaf order).  Frozen, and every array (those of the inference
    too) read-only: post-processing makes new levels (:meth:`with_finest_counts`)."""

    levels: int
    noisy: np.ndarray
    scales: tuple[float, ...]
    leaf_scale: float
    noisy_leaves: np.ndarray
    noise: str
    tree: LevelTree = field(repr=False)
    estimate: TreeEstimate = field(repr=False)
    finest_starts: np.ndarray = field(repr=False)
    finest_depth: np.ndarray = field(repr=False)
    finest_counts: np.ndarray = field(repr=False)

    def __post_init__(self) -> None:
        for name in ("noisy", "noisy_leaves", "finest_starts", "finest_depth", "finest_counts"):
            object.__setattr__(self, name, read_only(getattr(self, name)))
        for part in (self.tree, self.estimate):  # their arrays, one by one (lists of levels too)
            for value in vars(part).values():
                for array in value if isinstance(value, list) else [value]:
                    if isinstance(array, np.ndarray):
                        array.flags.writeable = False

    # ------------------------------------------------------------------ building
    @classmethod
    def infer(cls, starts: np.ndarray, depth: np.ndarray, layout: MortonLayout, levels: int,
              noisy: np.ndarray, scales: Sequence[float], noisy_leaves: np.ndarray, leaf_scale: float,
              noise: str) -> TopLevels:
        """Run the inference on the published numbers (leaves sorted by first code)."""
        tree = level_tree(starts, depth, layout, levels)
        sizes = tree.sizes()
        y = [np.zeros(n) for n in sizes]
        prec = [np.zeros(n) for n in sizes]
        offset = 0
        for lev in range(1, levels + 1):
            n = sizes[lev]
            y[lev][:] = noisy[offset:offset + n]
            prec[lev][:] = 1.0 / noise_variance(scales[lev - 1], noise)
            offset += n
        p_leaf = 1.0 / noise_variance(leaf_scale, noise)
        dep = np.asarray(depth, dtype=np.int64)
        groups = _by_depth(dep)
        noisy_leaves = np.asarray(noisy_leaves, dtype=np.float64)
        for lev, sel in groups:
            idx = tree.leaf_index[sel]
            # a leaf at a counted level has two independent observations: combine them
            total = prec[lev][idx] + p_leaf
            y[lev][idx] = (prec[lev][idx] * y[lev][idx] + p_leaf * noisy_leaves[sel]) / total
            prec[lev][idx] = total
        est = infer_tree(tree.parent, y, prec)
        leaf_est = np.empty(dep.size)
        for lev, sel in groups:
            leaf_est[sel] = est.xhat[lev][tree.leaf_index[sel]]
        return cls(levels, np.asarray(noisy, dtype=np.float64), tuple(float(s) for s in scales),
                   float(leaf_scale), noisy_leaves, noise, tree, est,
                   np.asarray(starts, dtype=np.int64), dep, leaf_est)

    def with_finest_counts(self, counts: np.ndarray) -> TopLevels:
        """The same published numbers answering from other finest counts (post-processing)."""
        return TopLevels(self.levels, self.noisy, self.scales, self.leaf_scale, self.noisy_leaves,
                         self.noise, self.tree, self.estimate, self.finest_starts, self.finest_depth,
                         np.asarray(counts, dtype=np.float64))

    # ------------------------------------------------------------------ derived counts
    def leaf_counts(self) -> np.ndarray:
        """The PrivTree leaves' counts answered from (inferred, then post-processed if asked)."""
        return self.finest_counts

    def top_counts(self) -> np.ndarray:
        """Inferred counts of levels ``1..k`` (concatenated as :attr:`noisy`), before any
        post-processing (which applies to the leaves)."""
        return np.concatenate([self.estimate.xhat[lev] for lev in range(1, self.levels + 1)])

    # ------------------------------------------------------------------ queries
    def range_counts(self, box: Box, q_lo: np.ndarray, q_hi: np.ndarray, *, variance: bool
                     ) -> tuple[np.ndarray, np.ndarray | None]:
        """Answers (and their exact noise variances) of boxes ``[q_lo, q_hi]``."""
        stats = (self.estimate.V, self.estimate.ratio, self.estimate.group) if variance else None
        return level_tree_sums(self.tree, self.finest_starts, self.finest_counts, box, q_lo, q_hi,
                               node_stats=stats)

    # ------------------------------------------------------------------ SQL
    def node_tables(self, box: Box) -> tuple[pa.Table, pa.Table]:
        """The two tables :meth:`variance_sql` reads, from the public tree and the inference.

        ``nodes``: one row per node of the PrivTree (the traversal of :meth:`range_counts`: the
        root, its inner nodes, its leaves, the *finest* nodes): ``node`` (id), ``finest``, the
        box ``lo<k>`` / ``hi<k>`` and its parent's ``plo<k>`` / ``phi<k>`` (NULL at the root),
        ``v`` = ``V`` and ``g`` = ``S`` of :class:`~polars_dp.kernels.tree_inference.TreeEstimate`
        (``g = 0`` at a finest node); ``up``: per node ``u`` and each ancestor-or-self ``a``,
        ``r`` = the product of the ratios ``V_c / S_parent(c)`` from ``u`` up to ``a`` (1 at
        ``a = u``).  Boxes are halved as the Python traversal halves them
        (:func:`~polars_dp.kernels.spatial_sums.child_boxes`)."""
        tree, est, layout = self.tree, self.estimate, self.tree.layout
        starts = self.finest_starts  # sorted by first code
        children = np.arange(layout.fanout, dtype=np.int64)
        prefix = np.zeros(1, dtype=np.int64)
        lo, hi = box.lo[None, :].copy(), box.hi[None, :].copy()
        plo, phi = np.full_like(lo, np.nan), np.full_like(hi, np.nan)
        anc, ratio = np.zeros((1, 0), dtype=np.int64), np.ones((1, 0))
        nodes: list[dict[str, np.ndarray]] = []
        ups: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        next_id = 0
        for depth in range(len(tree.prefixes)):
            if not prefix.size:
                break
            shift = layout.shift(depth)
            first = np.searchsorted(starts, prefix << shift, side="left")
            stop = np.searchsorted(starts, (prefix << shift) + (np.int64(1) << shift), side="left")
            finest = (stop - first == 1) & (starts[np.minimum(first, starts.size - 1)] == prefix << shift)
            at = np.searchsorted(tree.prefixes[depth], prefix)
            ids = next_id + np.arange(prefix.size, dtype=np.int64)
            next_id += prefix.size
            r = est.ratio[depth][at]
            anc = np.concatenate([anc, ids[:, None]], axis=1)
            ratio = np.concatenate([ratio * r[:, None], np.ones((prefix.size, 1))], axis=1)
            ups.append((np.repeat(ids, depth + 1), anc.ravel(), ratio.ravel()))
            bounds = {"lo": lo, "hi": hi, "plo": plo, "phi": phi}
            nodes.append({"node": ids, "finest": finest,
                          **{f"{b}{k}": bounds[b][:, k] for b in bounds for k in range(layout.d)},
                          "v": est.V[depth][at], "g": np.where(finest, 0.0, est.group[depth][at])})
            inner = ~finest
            k = layout.fanout
            plo, phi = np.repeat(lo[inner], k, axis=0), np.repeat(hi[inner], k, axis=0)
            anc, ratio = np.repeat(anc[inner], k, axis=0), np.repeat(ratio[inner], k, axis=0)
            prefix, lo, hi = child_boxes(layout, depth, prefix[inner], lo[inner], hi[inner], children)
        node_table = pa.table({key: pa.array(np.concatenate([n[key] for n in nodes]), from_pandas=True)
                               for key in nodes[0]})
        up = pa.table({key: np.concatenate([u[i] for u in ups])
                       for i, key in enumerate(("node", "anc", "r"))})
        return node_table, up

    @staticmethod
    def variance_sql(d: int, nodes: str, up: str, box: str = "box") -> str:
        """SQL of the exact noise variance of the answer for the query box ``box.lo<k>`` /
        ``box.hi<k>`` (``d`` dimensions) over the tables of :meth:`node_tables`: the rule of
        :func:`~polars_dp.kernels.tree_inference.functional_variance` with the answer's weights
        ``a`` on the nodes :meth:`range_counts` visits (1 on a node inside the box whose parent is
        not, the overlapped fraction on a finest node crossing its boundary).  With
        ``h_v = sum_u a_u r(u -> v)`` over those nodes ``u`` below ``v``, the variance is
        ``sum_v h_v^2 V_v - sum_{v above a weighted node} h_v^2 S_v`` (the module docstring of
        :mod:`~polars_dp.kernels.tree_inference`: ``sum_c V_c h_c = S_v h_v`` when ``a_v = 0``)."""
        ks = range(d)
        inside = " AND ".join(f"n.lo{k} >= {box}.lo{k} AND n.hi{k} <= {box}.hi{k}" for k in ks)
        parent_inside = " AND ".join(f"n.plo{k} >= {box}.lo{k} AND n.phi{k} <= {box}.hi{k}" for k in ks)
        inter = [f"(least(n.hi{k}, {box}.hi{k}) - greatest(n.lo{k}, {box}.lo{k}))" for k in ks]
        overlap = " AND ".join(f"{x} > 0" for x in inter)
        frac = " * ".join(f"({x} / (n.hi{k} - n.lo{k}))" for k, x in zip(ks, inter, strict=True))
        weighted = (f"SELECT n.node, CASE WHEN {inside} THEN 1.0 ELSE {frac} END AS a FROM {nodes} AS n "
                    f"WHERE {overlap} AND CASE WHEN {inside} THEN NOT coalesce({parent_inside}, false) "
                    "ELSE n.finest END")
        h = (f"SELECT u.anc, sum(w.a * u.r) AS h, bool_or(u.anc = w.node) AS own "
             f"FROM ({weighted}) AS w JOIN {up} AS u ON u.node = w.node GROUP BY u.anc")
        terms = "h.h * h.h * CASE WHEN h.own THEN n.v ELSE n.v - n.g END"
        return (f"(SELECT greatest(coalesce(sum({terms}), 0.0), 0.0) "
                f"FROM ({h}) AS h JOIN {nodes} AS n ON n.node = h.anc)")

    # ------------------------------------------------------------------ storage
    def to_json(self) -> dict[str, Any]:
        return {"levels": self.levels, "scales": list(self.scales), "noisy": self.noisy.tolist(),
                "inferred": self.top_counts().tolist()}


def parse_levels(obj: Any, layout: MortonLayout) -> tuple[int, list[float], np.ndarray, np.ndarray]:
    """``(k, scales, noisy, inferred)`` of a ``polars_dp.levels`` entry, shapes checked; a
    malformed entry is a ReleaseFormatError."""
    try:
        if not isinstance(obj, Mapping):
            raise TypeError("not an object")
        k = obj["levels"]
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= layout.max_depth:
            raise ValueError(f"levels={k!r} is not an integer in [1, {layout.max_depth}]")
        scales = [float(s) for s in obj["scales"]]
        noisy = np.asarray(obj["noisy"], dtype=np.float64)
        inferred = np.asarray(obj["inferred"], dtype=np.float64)
    except (KeyError, TypeError, ValueError) as exc:
        raise ReleaseFormatError(f"release metadata field 'levels' is malformed: {exc!r}") from None
    n = top_cells(k, layout.split_bits)
    if len(scales) != k or noisy.shape != (n,) or inferred.shape != (n,) or not all(s > 0 for s in scales):
        raise ReleaseFormatError(f"release metadata field 'levels' must hold {k} positive scales and {n} "
                                 f"noisy and inferred counts for {k} level(s): the file was edited")
    if not (np.all(np.isfinite(noisy)) and np.all(np.isfinite(inferred))):
        raise ReleaseFormatError("release metadata field 'levels' holds a count that is not a finite number")
    return k, scales, noisy, inferred


def check_same(name: str, stored: np.ndarray, recomputed: np.ndarray) -> None:
    """Stored inferred counts must be the recomputed ones (up to float rounding)."""
    scale = max(1.0, float(np.max(np.abs(recomputed), initial=0.0)))
    if stored.shape != recomputed.shape or not np.allclose(stored, recomputed, rtol=1e-9, atol=1e-9 * scale):
        raise ReleaseFormatError(f"the stored {name} are not the least-squares inference of the published "
                                 "noisy counts: the file was edited")


__all__ = ["TopLevels", "check_same", "noise_variance", "parse_levels"]
