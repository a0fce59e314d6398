"""PrivTree leaves with noisy sub-grids and consistent counts (pure numpy; issue 41).

The release built from these kernels measures the points of a public box in three steps and
then post-processes the three sets of numbers:

1. **Tree** on ``eps_t = tree_share * epsilon`` (default ``0.2 epsilon``, ``0.3 epsilon`` from 4
   dimensions: :func:`default_tree_share`): PrivTree's split
   decisions exactly as :mod:`polars_dp.mechanisms.spatial_tree` draws them (``fanout = 4``,
   depth-independent noise).  Under ``replace`` the decisions use ``lambda`` computed with group
   factor 2 (PrivTree's ``eps_t / 2``).
2. **Leaf counts** on ``eps_l = leaf_share * (epsilon - eps_t)`` (default ``0.4 epsilon``): one
   noisy count ``v_L`` per leaf.  The leaves partition the box, so the vector of leaf counts has
   L1 sensitivity 1 under add/remove-one and 2 under replace-one (the point leaves one leaf and
   enters another; the partition is fixed by step 1).
3. **Sub-cell counts** on ``eps_s = epsilon - eps_t - eps_l`` (default ``0.4 epsilon``): every
   leaf ``L`` is cut into ``2^k_L`` congruent sub-cells, ``k_L`` a public rule of the *released*
   ``v_L`` (:func:`subcell_bits`), and every sub-cell gets one noisy count ``u_i``.  The sub-cells
   partition the box too: sensitivity 1 (add/remove) / 2 (replace).  A leaf with ``k_L = 0`` is
   its own single sub-cell and is measured a second time.

All scales are ``sensitivity / eps`` (:func:`subgrid_budget` states the split once); the total is
``eps_t + eps_l + eps_s = epsilon`` by sequential composition (exactly, in rationals).

Post-processing (no budget): :func:`consistent_counts` replaces both measurements by their
weighted least-squares estimate under the constraint ``v_L = sum_i x_i``;
:func:`subgrid_answer_variance` and :func:`subgrid_fraction_sums` give the exact noise variance of
a range count over consistent sub-cells under uniformity.

Representation of the sub-cells
--------------------------------
A leaf is a Morton node of the tree's layout (first code, depth; :mod:`polars_dp.kernels.morton`).
Its sub-cells continue the Morton order bit by bit: a sub-cell with ``k`` more bits is the code
range sharing the leaf's ``depth * s`` bits and ``k`` more, so code bit ``p`` halves dimension
``p mod d`` exactly as the tree's own levels do (two axes per level at fanout 4, round-robin).
Sub-cells are therefore nodes of the *bit layout* ``MortonLayout(d, bits, 1)``
(:func:`subcell_layout`), given by their first code and their **bit depth** ``depth * s + k``:
``subcell_layout(layout).node_boxes(starts, bit_depth, box)`` gives their boxes,
and :func:`polars_dp.kernels.spatial_sums.morton_tree_sums` with that layout answers range counts
over them.  The sub-cells of all leaves, concatenated in leaf order, are sorted by first code.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import NamedTuple

import numpy as np

from polars_dp.errors import ParameterError
from polars_dp.kernels.morton import MortonLayout, fraction_squares
from polars_dp.noise import check_epsilon, check_fraction, check_neighbours, histogram_sensitivity
from polars_dp.params import check_int, check_positive

#: Public defaults of the release (issue 41): share of epsilon for the tree (up to 3 dimensions;
#: :data:`TREE_SHARE_WIDE` from :data:`WIDE_FROM`), share of the count budget for the leaf counts,
#: AG's constant ``c2``, the fanout, and the most sub-cell bits a leaf gets.
TREE_SHARE = 0.2
TREE_SHARE_WIDE = 0.3
WIDE_FROM = 4
LEAF_SHARE = 0.5
C2 = 3.0
FANOUT = 4
MAX_SUBCELL_BITS = 8


def default_tree_share(d: int) -> float:
    """The tree's default share of epsilon in ``d`` dimensions (public): :data:`TREE_SHARE` (0.2)
    up to 3 dimensions, :data:`TREE_SHARE_WIDE` (0.3) from :data:`WIDE_FROM`.  At fanout 4 a 4-D
    tree halves each axis once per two levels, so it takes more split decisions than a 2-D one
    to isolate a cluster.  Measured (``docs/results/subgrid_tree_share.md``): on GeoNames (2-D)
    0.2 had the lowest error of 0.2 / 0.3 / 0.35 in 17 of 18 (epsilon, box size) cells and was
    within 0.2 % of it in the other; on the 4-D
    flights neither 0.2 nor 0.3 is lower everywhere: 0.3 lowers the large boxes' error at epsilon
    <= 0.2 (where 4-D errors are largest, 0.1 to 0.7) by 9-13 % and raises small and medium
    boxes' at epsilon >= 0.8 by 12-28 %; its worst ratio to PrivTree is the lower one (1.15
    against 1.25), and it keeps the release below the paper's PrivTree at epsilon 0.05."""
    return TREE_SHARE_WIDE if d >= WIDE_FROM else TREE_SHARE


@dataclass(frozen=True)
class SubgridBudget:
    """The budget split of a sub-grid release, exact rationals (``float()`` them for float noise).

    ``epsilon_tree``: PrivTree's split decisions, whose ``lambda`` is computed with group factor
    ``tree_group`` (:func:`polars_dp.plans.privtree_scales.privtree_lambda`); ``epsilon_leaf`` and
    ``epsilon_sub``: the leaf and sub-cell counts, each a partition of the box with L1 sensitivity
    ``sensitivity``, so their (discrete) Laplace scales are ``sensitivity / epsilon_leaf`` and
    ``sensitivity / epsilon_sub``.  ``epsilon_tree + epsilon_leaf + epsilon_sub == epsilon``.
    """

    epsilon: Fraction
    epsilon_tree: Fraction
    epsilon_leaf: Fraction
    epsilon_sub: Fraction
    sensitivity: int
    tree_group: int

    @property
    def leaf_scale(self) -> Fraction:
        """Nominal Laplace scale of a leaf count, ``sensitivity / epsilon_leaf`` (before rounding
        up to the exact-noise grid)."""
        return Fraction(self.sensitivity) / self.epsilon_leaf

    @property
    def sub_scale(self) -> Fraction:
        """Nominal Laplace scale of a sub-cell count, ``sensitivity / epsilon_sub``."""
        return Fraction(self.sensitivity) / self.epsilon_sub


def subgrid_budget(epsilon: float | Fraction, neighbours: str, *, tree_share: float,
                   leaf_share: float = LEAF_SHARE, unit_factor: int = 1) -> SubgridBudget:
    """Split ``epsilon`` between the tree, the leaf counts and the sub-cell counts.

    ``epsilon_tree = tree_share * epsilon``; the rest, the count budget, goes ``leaf_share`` to the
    leaf counts and the remainder to the sub-cell counts (with the 2-D default share,
    :func:`default_tree_share`: 0.2 / 0.4 / 0.4 epsilon).  The share has no default here: the
    plan passes the one it resolved for its dimension.
    Sensitivity of each count vector (a partition of the box): ``Delta = Delta_row * unit_factor``,
    ``Delta_row`` 1 under ``"add_remove"`` and 2 under ``"replace"`` (one point leaves a cell and
    enters another), ``unit_factor`` the privacy unit's rows per individual.  The split decisions
    take the same factor as PrivTree's group factor (``replace``: ``lambda`` of ``epsilon_tree /
    2``).  Shares must lie strictly between 0 and 1 (then the three parts are positive and sum to
    ``epsilon`` exactly), else :class:`~polars_dp.errors.ParameterError`.
    """
    eps = epsilon if isinstance(epsilon, Fraction) else Fraction(check_epsilon(epsilon))
    if eps <= 0:
        raise ParameterError(f"epsilon must be a finite number > 0, got {epsilon!r}", parameter="epsilon")
    tree = eps * Fraction(check_fraction(tree_share, "tree_share"))
    leaf = (eps - tree) * Fraction(check_fraction(leaf_share, "leaf_share"))
    factor = check_int(unit_factor, "unit_factor", lo=1)
    sensitivity = histogram_sensitivity(check_neighbours(neighbours)) * factor
    return SubgridBudget(eps, tree, leaf, eps - tree - leaf, sensitivity, sensitivity)


def check_subgrid_options(c2: float, max_subcell_bits: int, layout: MortonLayout) -> tuple[float, int]:
    """``(c2, max_subcell_bits)`` checked: ``c2 > 0`` and ``0 <= max_subcell_bits <= d * bits``
    (the resolution), else a ParameterError naming the option and the accepted range."""
    c2 = check_positive(c2, "c2")
    bits = check_int(max_subcell_bits, "max_subcell_bits", lo=0, hi=layout.total_bits)
    return c2, bits


def subcell_layout(layout: MortonLayout) -> MortonLayout:
    """The bit layout of the sub-cells: the same codes, one code bit (one halving) per depth."""
    return MortonLayout(layout.d, layout.bits, 1)


def subcell_bits(noisy: np.ndarray, depth: np.ndarray, layout: MortonLayout, *, epsilon_sub: float,
                 c2: float = C2, max_subcell_bits: int = MAX_SUBCELL_BITS) -> np.ndarray:
    """Sub-cell bits ``k_L`` of every leaf from its released count ``v_L`` (post-processing).

    ``M_L = (max(v_L, 0) * epsilon_sub / c2)^(2d / (d + 2))`` is AG's number of second-level
    cells (``m^2 = N eps / c2`` in 2-D: each sub-cell's count about ``c2 / eps`` points);
    ``k_L = round(log2 M_L)`` (nearest, halves to even) if ``M_L > 1`` else 0, capped by
    ``max_subcell_bits`` and by the code bits left below the leaf (``layout.shift(depth)``).
    A public rule of public numbers: ``epsilon_sub``, ``c2``, the layout and the noisy counts.
    """
    c2, cap = check_subgrid_options(c2, max_subcell_bits, layout)
    eps = check_epsilon(float(epsilon_sub), "epsilon_sub")
    d = layout.d
    v = np.maximum(np.asarray(noisy, dtype=np.float64), 0.0)
    with np.errstate(over="ignore", divide="ignore"):
        m = (v * (eps / c2)) ** (2.0 * d / (d + 2))
        k = np.where(m > 1.0, np.rint(np.log2(np.where(m > 1.0, m, 1.0))), 0.0)
    left = layout.total_bits - np.asarray(depth, dtype=np.int64) * layout.split_bits
    return np.minimum(np.minimum(k, cap), left).astype(np.int64)


class Subcells(NamedTuple):
    """The sub-cells of a set of leaves in the bit layout (:func:`subcell_layout`): first codes
    ``starts`` (sorted), ``bit_depth`` (leaf depth * s + k), the ``leaf`` each belongs to, and
    ``offsets`` (``n_leaves + 1``): leaf ``L``'s sub-cells are ``offsets[L]:offsets[L + 1]``."""

    starts: np.ndarray
    bit_depth: np.ndarray
    leaf: np.ndarray
    offsets: np.ndarray


def subcells(starts: np.ndarray, depth: np.ndarray, k: np.ndarray, layout: MortonLayout) -> Subcells:
    """Cut every leaf (first code ``starts``, sorted, and ``depth`` in ``layout``) into ``2^k``
    congruent sub-cells continuing its Morton order: sub-cell ``j`` of a leaf spans the codes
    ``start + j * 2^(shift - k)`` onwards, ``shift = layout.shift(depth)``.  Vectorised: one
    ``repeat`` and shifts, no loop over leaves."""
    starts = np.asarray(starts, dtype=np.int64)
    depth = np.asarray(depth, dtype=np.int64)
    k = np.asarray(k, dtype=np.int64)
    shift = layout.total_bits - depth * layout.split_bits
    if np.any((k < 0) | (k > shift)):
        raise ParameterError("sub-cell bits must lie between 0 and the code bits left below each leaf; "
                             "compute them with subcell_bits")
    per_leaf = np.left_shift(np.int64(1), k)
    offsets = np.concatenate([[0], np.cumsum(per_leaf)]).astype(np.int64)
    leaf = np.repeat(np.arange(starts.size, dtype=np.int64), per_leaf)
    local = np.arange(offsets[-1], dtype=np.int64) - offsets[:-1][leaf]
    sub_starts = starts[leaf] + (local << (shift - k)[leaf])
    return Subcells(sub_starts, (depth * layout.split_bits + k)[leaf], leaf, offsets)


def subcell_halvings(depth: np.ndarray, k: np.ndarray, layout: MortonLayout) -> np.ndarray:
    """Times each dimension is halved inside a leaf by its ``k`` sub-cell bits, shape ``(n, d)``:
    the sub-grid of a leaf has ``2^h_j`` cells along dimension ``j`` (``sum_j h_j = k``)."""
    bit = subcell_layout(layout)
    depth = np.asarray(depth, dtype=np.int64)
    return bit.halvings(depth * layout.split_bits + np.asarray(k, dtype=np.int64)) - layout.halvings(depth)


def consistent_counts(noisy_leaf: np.ndarray, noisy_sub: np.ndarray, offsets: np.ndarray,
                      var_leaf: float | np.ndarray, var_sub: float | np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Weighted least-squares estimate of leaf and sub-cell counts (post-processing).

    Per leaf ``L`` with noisy count ``v`` (noise variance ``var_leaf``) and ``M`` sub-cells with
    noisy counts ``u_i`` (each of variance ``var_sub``), the estimate minimising
    ``(v - sum x)^2 / var_leaf + sum_i (u_i - x_i)^2 / var_sub`` (AG's constrained inference,
    Qardaji et al. 2013, with general variances) is

        w = (1 / var_leaf) / (1 / var_leaf + 1 / (M var_sub)),   S = sum_i u_i,
        v* = w v + (1 - w) S,   x_i = u_i + (v* - S) / M,

    so ``sum_i x_i = v*``.  The variances are those of the noise as drawn: for the library's
    discrete Laplace of scale ``b``, ``2 e^(-1/b) / (1 - e^(-1/b))^2``
    (:func:`polars_dp.releases.tree_levels.noise_variance`, computed by the caller since kernels
    sit below releases).  ``offsets``: leaf ``L``'s sub-cells are ``noisy_sub[offsets[L]:offsets[L +
    1]]`` (every leaf has at least one).  ``var_leaf`` / ``var_sub``: scalars or one per leaf.
    Returns ``(v*, x)``.
    """
    v = np.asarray(noisy_leaf, dtype=np.float64)
    u = np.asarray(noisy_sub, dtype=np.float64)
    offsets = np.asarray(offsets, dtype=np.int64)
    m = np.diff(offsets)
    if m.size != v.size or offsets[-1] != u.size or np.any(m < 1):
        raise ParameterError("offsets must give every leaf at least one sub-cell and cover the sub-cell "
                             "counts")
    leaf = np.repeat(np.arange(v.size), m)
    s = np.bincount(leaf, weights=u, minlength=v.size)
    w = leaf_weight(m, var_leaf, var_sub)
    v_star = w * v + (1.0 - w) * s
    x = u + ((v_star - s) / m)[leaf]
    return v_star, x


def leaf_weight(m: np.ndarray, var_leaf: float | np.ndarray, var_sub: float | np.ndarray) -> np.ndarray:
    """``w = (1 / var_leaf) / (1 / var_leaf + 1 / (M var_sub)) = M var_sub / (M var_sub + var_leaf)``:
    the weight of the leaf's own count in its consistent count (:func:`consistent_counts`)."""
    mv = np.asarray(m, dtype=np.float64) * np.asarray(var_sub, dtype=np.float64)
    return mv / (mv + np.asarray(var_leaf, dtype=np.float64))


def subgrid_answer_variance(frac_sum: np.ndarray, frac_squares: np.ndarray, m: np.ndarray,
                            var_leaf: float | np.ndarray, var_sub: float | np.ndarray) -> np.ndarray:
    """Noise variance of one leaf's share ``sum_i f_i x_i`` of a range count (uniformity inside
    sub-cells), ``f_i`` the fraction of sub-cell ``i`` inside the query box.

    The share is ``sum_i (f_i - c) u_i + c v`` with ``c = F w / M``, ``F = sum f_i``,
    ``Q = sum f_i^2`` (``frac_sum``, ``frac_squares``), so with independent noise its variance is
    ``var_sub (Q - 2 c F + M c^2) + var_leaf c^2``; a fully covered leaf (``F = Q = M``) gives
    ``1 / (1 / var_leaf + 1 / (M var_sub))``.  Leaves' shares are independent: a query's variance
    is the sum over the leaves it meets.
    """
    f = np.asarray(frac_sum, dtype=np.float64)
    q = np.asarray(frac_squares, dtype=np.float64)
    mf = np.asarray(m, dtype=np.float64)
    c = f * leaf_weight(mf, var_leaf, var_sub) / mf
    return np.asarray(var_sub) * (q - 2.0 * c * f + mf * c**2) + np.asarray(var_leaf) * c**2


def subgrid_fraction_sums(q_lo: np.ndarray, q_hi: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                          halvings: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(F, Q) = (sum_i f_i, sum_i f_i^2)`` over the sub-cells of (query, leaf) pairs.

    Pair ``p`` asks box ``[q_lo[p], q_hi[p]]`` of a leaf ``[lo[p], hi[p]]`` cut into a
    ``2^halvings[p, j]`` grid along each dimension ``j`` (:func:`subcell_halvings`); ``f_i`` is the
    overlapped fraction of sub-cell ``i``.  The fractions factorise over dimensions, so both sums
    are products of closed-form 1-D sums: ``F_j`` the covered length in cell units, ``Q_j`` the
    full cells plus the squares of the two partial ends (``O(d)`` per pair).
    """
    mf = np.ldexp(1.0, np.asarray(halvings, dtype=np.int64))
    width = hi - lo
    a = np.clip((q_lo - lo) / width * mf, 0.0, mf)
    b = np.maximum(a, np.clip((q_hi - lo) / width * mf, 0.0, mf))
    return np.prod(b - a, axis=-1), fraction_squares(a, b, mf)


__all__ = ["C2", "FANOUT", "LEAF_SHARE", "MAX_SUBCELL_BITS", "TREE_SHARE", "TREE_SHARE_WIDE", "WIDE_FROM",
           "SubgridBudget", "Subcells",
           "check_subgrid_options", "consistent_counts", "leaf_weight", "subcell_bits",
           "subcell_halvings", "subcell_layout", "subcells", "subgrid_answer_variance", "subgrid_budget",
           "subgrid_fraction_sums"]
