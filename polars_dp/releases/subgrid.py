"""The sub-grids of a ``privtree_subgrid`` release: PrivTree leaves cut into noisy sub-cells.

A :class:`~polars_dp.SpatialRelease` of ``privtree_subgrid`` has one row per **sub-cell**: a node
of the bit layout (:func:`polars_dp.kernels.subgrid.subcell_layout`: the release's ``layout`` is
``{"kind": "morton", "bits": k, "split_bits": 1}``) given by its first Morton code (``morton``)
and its bit depth (``depth``), so the range counts, SQL macros and GeoParquet polygons of every
Morton release apply to it unchanged.  Its ``count`` is the consistent count ``x_i``
(:func:`polars_dp.kernels.subgrid.consistent_counts`); three more columns record the
measurements it was inferred from:

* ``subgrid_bits``: ``k_L`` of the sub-cell's PrivTree leaf (the leaf is the node of bit depth
  ``depth - subgrid_bits``, a multiple of the tree's ``log2(fanout)``, and has ``2^k_L``
  sub-cells);
* ``leaf_noisy_count``: the leaf's noisy count ``v_L`` (the same on all its sub-cells);
* ``noisy_count``: the sub-cell's noisy count ``u_i``.

On reading (:meth:`Subgrid.from_columns`) the leaves are rebuilt from the sub-cells, every
``k_L`` must be the plan's rule of ``v_L`` (sizes from the noisy leaf counts only), the sub-cells
must be exactly the leaves' ``2^k_L`` sub-cells, and the consistent counts are recomputed from
``v`` and ``u`` (recorded post-processing reapplied) and must equal ``count``.

Error bars (uniform density): an answer is linear in the noisy counts, so its noise variance
is exact: per leaf :func:`~polars_dp.kernels.subgrid.subgrid_answer_variance` with ``(F, Q)``
from :func:`~polars_dp.kernels.subgrid.subgrid_fraction_sums`, summed over the leaves the box
meets (leaves are independent).  The answer is ``sum_j a_j Z_j`` with independent (discrete)
Laplace ``Z_j`` of scales ``b_leaf`` / ``b_sub`` and ``|a_j| <= 1`` (``a = f_i - c`` on a
sub-cell, ``c = F w / M`` on a leaf, both in ``[0, 1]``), so the Chernoff half-width of the
spatial releases applies with ``V = sum a_j^2 b_j^2`` and every magnitude at most
``max(b_leaf, b_sub)``.  As for every spatial release, the uniformity error inside partly
covered sub-cells is not in the bar.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from polars_dp.domains.box import Box
from polars_dp.errors import ReleaseFormatError
from polars_dp.kernels.morton import MortonLayout
from polars_dp.kernels.spatial_sums import visit_tree
from polars_dp.kernels.subgrid import (
    consistent_counts,
    leaf_weight,
    subcell_halvings,
    subcells,
    subgrid_fraction_sums,
)
from polars_dp.kernels.subgrid_sums import SubgridPrefix, subgrid_prefix, subgrid_tree_sums
from polars_dp.releases.base import read_only
from polars_dp.releases.tree_levels import noise_variance

#: The columns a sub-grid release adds to a Morton release's table (after ``morton``).
SUBGRID_COLUMNS = ("subgrid_bits", "leaf_noisy_count", "noisy_count")


@dataclass(frozen=True)
class Subgrid:
    """PrivTree leaves (``starts``, tree ``depth`` in ``tree_layout``), their sub-cell bits
    ``k``, the noisy leaf counts ``noisy_leaf`` (``v``), the noisy sub-cell counts ``noisy_sub``
    (``u``, leaf by leaf in Morton order) and the scales they were drawn at."""

    tree_layout: MortonLayout
    starts: np.ndarray
    depth: np.ndarray
    k: np.ndarray
    noisy_leaf: np.ndarray
    noisy_sub: np.ndarray
    leaf_scale: float
    sub_scale: float
    noise: str

    def __post_init__(self) -> None:
        for name in ("starts", "depth", "k", "noisy_leaf", "noisy_sub"):
            object.__setattr__(self, name, read_only(np.asarray(getattr(self, name))))

    # ------------------------------------------------------------------ structure
    @property
    def var_leaf(self) -> float:
        """Variance of a noisy leaf count (the exact discrete-Laplace variance for exact noise)."""
        return noise_variance(self.leaf_scale, self.noise)

    @property
    def var_sub(self) -> float:
        """Variance of a noisy sub-cell count."""
        return noise_variance(self.sub_scale, self.noise)

    @property
    def sizes(self) -> np.ndarray:
        """``M_L = 2^k_L``, the sub-cells of each leaf."""
        return np.left_shift(np.int64(1), self.k)

    def consistent(self) -> np.ndarray:
        """The consistent sub-cell counts ``x`` (:func:`~polars_dp.kernels.subgrid.consistent_counts`)."""
        offsets = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)
        return consistent_counts(self.noisy_leaf, self.noisy_sub, offsets, self.var_leaf, self.var_sub)[1]

    def columns(self) -> dict[str, np.ndarray]:
        """The table columns of :data:`SUBGRID_COLUMNS`, one row per sub-cell."""
        leaf = np.repeat(np.arange(self.k.size), self.sizes)
        return {
            "subgrid_bits": self.k.astype(np.int32)[leaf],
            "leaf_noisy_count": self.noisy_leaf[leaf],
            "noisy_count": self.noisy_sub,
        }

    @classmethod
    def from_columns(
        cls,
        codes: np.ndarray,
        bit_depth: np.ndarray,
        sub_bits: np.ndarray,
        leaf_noisy: np.ndarray,
        noisy_sub: np.ndarray,
        tree_layout: MortonLayout,
        *,
        plan: Any,
        noise: str,
    ) -> Subgrid:
        """The sub-grids of a table (rows in code order, already checked to tile the box): the
        leaves rebuilt from the sub-cells and verified as the module docstring says."""
        codes = np.asarray(codes, dtype=np.int64)
        bit_depth = np.asarray(bit_depth, dtype=np.int64)
        k = np.asarray(sub_bits, dtype=np.int64)
        s = tree_layout.split_bits
        leaf_bits = bit_depth - k
        if np.any(k < 0) or np.any(leaf_bits < 0) or np.any(leaf_bits % s):
            raise ReleaseFormatError(
                "tree release column 'subgrid_bits' does not place every sub-cell in a "
                "PrivTree leaf: the table was edited"
            )
        shift = tree_layout.total_bits - leaf_bits
        leaf_start = np.right_shift(codes, shift) << shift
        new = np.ones(codes.size, dtype=bool)
        new[1:] = (leaf_start[1:] != leaf_start[:-1]) | (leaf_bits[1:] != leaf_bits[:-1])
        first = np.flatnonzero(new)
        starts, depth, kk, v = leaf_start[first], leaf_bits[first] // s, k[first], leaf_noisy[first]
        u = np.asarray(noisy_sub, dtype=np.float64)
        if noise == "exact" and not (np.array_equal(v, np.round(v)) and np.array_equal(u, np.round(u))):
            raise ReleaseFormatError(
                "tree release noisy counts must be integers for exact noise: the table was edited"
            )
        want_k = plan.subcell_bits(v, depth)
        if not np.array_equal(kk, want_k):
            raise ReleaseFormatError(
                "tree release column 'subgrid_bits' disagrees with the sub-grid sizes "
                "the plan gives the noisy leaf counts: the table was edited"
            )
        sub = cls(
            tree_layout,
            starts,
            depth,
            kk,
            np.asarray(v, dtype=np.float64),
            u,
            float(plan.leaf_scale),
            float(plan.sub_scale),
            noise,
        )
        want = subcells(sub.starts, sub.depth, sub.k, tree_layout)  # the release's codes and depths
        per_leaf = np.repeat(np.arange(kk.size), sub.sizes) if want.starts.size == codes.size else None
        if (
            per_leaf is None
            or not np.array_equal(want.starts, codes)
            or not np.array_equal(want.bit_depth, bit_depth)
            or not np.array_equal(leaf_noisy, v[per_leaf])
            or not np.array_equal(k, kk[per_leaf])
        ):
            raise ReleaseFormatError(
                "tree release sub-cells are not their leaves' sub-grids (a sub-cell "
                "moved, or a leaf's count or size differs between its sub-cells): the "
                "table was edited"
            )
        return sub

    # ------------------------------------------------------------------ answers
    def prefix(self, counts: np.ndarray, slopes: np.ndarray | None = None) -> SubgridPrefix:
        """Summed-area arrays of the sub-grids of ``counts`` (and ``counts * slopes_j``)."""
        rows = [np.asarray(counts, dtype=np.float64)]
        if slopes is not None:
            rows += [rows[0] * slopes[:, j] for j in range(slopes.shape[1])]
        return subgrid_prefix(self.depth, self.k, np.stack(rows), self.tree_layout)

    def leaf_boxes(self, box: Box) -> tuple[np.ndarray, np.ndarray]:
        return self.tree_layout.node_boxes(self.starts, self.depth, box)

    def answers(
        self,
        box: Box,
        counts: np.ndarray,
        prefix: SubgridPrefix,
        q_lo: np.ndarray,
        q_hi: np.ndarray,
        *,
        linear: bool = False,
    ) -> np.ndarray:
        """Range counts over the sub-cells (:func:`~polars_dp.kernels.subgrid_sums.subgrid_tree_sums`):
        whole leaves from prefix sums of their totals, crossing leaves from their sub-grids."""
        totals = np.bincount(
            np.repeat(np.arange(self.k.size), self.sizes), weights=counts, minlength=self.k.size
        )
        lo, hi = self.leaf_boxes(box)
        return subgrid_tree_sums(
            self.starts, totals, lo, hi, prefix, self.tree_layout, box, q_lo, q_hi, linear=linear
        )

    def variance(self, box: Box, q_lo: np.ndarray, q_hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(variance, V)`` of each uniform answer: its exact noise variance and ``V = sum a_j^2
        b_j^2`` (the Chernoff bound's input; module docstring)."""
        m = self.sizes.astype(np.float64)
        var_l, var_s = self.var_leaf, self.var_sub
        w = leaf_weight(m, var_l, var_s)
        b2_l, b2_s = self.leaf_scale**2, self.sub_scale**2

        def terms(f: np.ndarray, q: np.ndarray, leaf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            mm = m[leaf]
            c = f * w[leaf] / mm
            sub_part = q - 2.0 * c * f + mm * c**2
            return var_s * sub_part + var_l * c**2, b2_s * sub_part + b2_l * c**2

        full_var, full_units = terms(m, m, np.arange(m.size))
        cum_var = np.concatenate([[0.0], np.cumsum(full_var)])
        cum_units = np.concatenate([[0.0], np.cumsum(full_units)])
        lo, hi = self.leaf_boxes(box)
        halvings = subcell_halvings(self.depth, self.k, self.tree_layout)
        n_q = q_lo.shape[0]
        var, units = np.zeros(n_q), np.zeros(n_q)
        layout = self.tree_layout
        for v in visit_tree(self.starts, layout, box, q_lo, q_hi, layout.max_depth + 1):
            part_var = np.where(v.inside, cum_var[v.stop] - cum_var[v.first], 0.0)
            part_units = np.where(v.inside, cum_units[v.stop] - cum_units[v.first], 0.0)
            edge = np.nonzero(v.is_leaf & ~v.inside & (v.frac > 0))[0]
            if edge.size:
                leaf, qi = v.first[edge], v.qi[edge]
                f, q = subgrid_fraction_sums(q_lo[qi], q_hi[qi], lo[leaf], hi[leaf], halvings[leaf])
                part_var[edge], part_units[edge] = terms(f, q, leaf)
            var += np.bincount(v.qi, weights=part_var, minlength=n_q)
            units += np.bincount(v.qi, weights=part_units, minlength=n_q)
        return var, units

    @property
    def bound(self) -> float:
        """The largest magnitude of a term of an answer's noise: ``max(b_leaf, b_sub)``."""
        return max(self.leaf_scale, self.sub_scale)


__all__ = ["SUBGRID_COLUMNS", "Subgrid"]
