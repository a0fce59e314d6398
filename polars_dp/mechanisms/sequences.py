"""PrivTree for sequences: a private prediction suffix tree (PrivTree paper Sec. 4; spec §2.10).

Privacy (neighbours: add or remove one sequence)
------------------------------------------------
Sequences are truncated to their first ``max_length`` symbols (a public rule), so one
sequence has at most ``l_top = max_length + 1`` positions (its end marker ``&`` included), and
its insertion is a chain of at most ``l_top`` additions of one (context, symbol) pair.

* Tree (``eps_tree = tree_share * epsilon``): the score ``s(v) = |h(v)|_1 - max_y h(v)[y]``
  (0 when ``str(v)`` starts with ``#``) is monotone along every root-to-leaf path and one
  added pair changes it by 0 or 1 on one root-to-leaf path only (the nodes whose predictor
  is a suffix of the pair's context).  PrivTree with ``beta = |I| + 1``, ``theta = 0``,
  ``delta = lambda ln(beta)`` and ``lambda = (2 beta - 1)/(beta - 1) / eps`` is eps-DP per pair
  (spec §2.4, §2.9); group privacy over ``l_top`` pairs gives
  ``lambda = (2 beta - 1)/(beta - 1) * l_top / eps_tree`` (Theorem 4.1 as reconstructed).
* Leaf histograms (``eps_leaf = epsilon - eps_tree``): the leaves partition the positions,
  each position increments one leaf bin, so the leaf histograms have L1 sensitivity ``l_top``
  and ``Lap(l_top / eps_leaf)`` per bin is eps_leaf-DP (Theorem 4.2).
* Total: ``epsilon``-DP by sequential composition.  What follows is post-processing.
* Exact noise (``noise="exact"``, the default): ``eps_tree`` and ``eps_leaf`` are exact
  rationals adding up to ``epsilon``; the split decisions are drawn exactly (integer scores,
  ``lambda``/``delta``/``theta`` on the ``2^-20`` grid, :mod:`polars_dp.privtree_rule`) and the
  integer leaf bins get discrete Laplace noise of scale ``l_top / eps_leaf`` rounded up to the
  grid (``params["leaf_epsilon_effective"]``).

Post-processing (``postprocess``)
---------------------------------
``"sum_then_clip"`` (default): every internal histogram is the sum of the *unclipped* noisy
leaf histograms below it, then all bins are clipped at 0.  Sums stay unbiased before the
clip, so the conditional distributions near the root stay sharp.
``"clip_then_sum"`` (the spec's reconstruction): clip the leaf bins, then set each internal
histogram to the exact sum of its children.  Each clipped empty bin adds a positive bias of
about ``leaf_scale / 2``, which accumulates over large subtrees and flattens the conditionals
(on msnbc it cost 0.1 to 0.45 top-k precision).

Public rules that shape the tree: nodes starting with ``#`` never split, and no node deeper
than ``l_top`` splits (no context is longer than ``l_top``).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from polars_dp.errors import ParameterError
from polars_dp.noise import (
    NoiseSource,
    SeedLike,
    check_epsilon,
    check_fraction,
    check_noise,
    laplace_scale,
    noise_params,
    noise_source,
    sample_noise,
)
from polars_dp.privtree_rule import check_theta, grid_theta
from polars_dp.pst import (
    grow_context_tree,
    privtree_sequence_params,
    privtree_split,
    pst_scores,
    sums_of_children,
)
from polars_dp.sequence_counts import EncodedSequences, encode_sequences
from polars_dp.sequence_model import SequenceModel

POSTPROCESS = ("sum_then_clip", "clip_then_sum")


def privtree_sequences(frame: Any, column: str, *, alphabet: Sequence[Any], max_length: int,
                       epsilon: float, tree_share: float = 0.5, theta: float = 0.0,
                       postprocess: str = "sum_then_clip", seed: SeedLike = None,
                       noise: str = "exact") -> SequenceModel:
    """Release a PST of the sequences in ``column`` with PrivTree's depth-independent noise.

    Parameters
    ----------
    frame : Polars DataFrame / LazyFrame or pyarrow Table (private; read once).
    column : a List column of symbols (ints or strings) or a String column (one symbol per
        character).
    alphabet : the public symbols, e.g. ``range(1, 18)``; anything else raises DomainError.
    max_length : public truncation length: only the first ``max_length`` symbols of each
        sequence are used; ``l_top = max_length + 1``.
    epsilon : total budget under add/remove-one-sequence neighbours.
    tree_share : fraction of ``epsilon`` spent on the tree (the rest on leaf histograms).
    theta : PrivTree threshold (0, spec §2.6).
    postprocess : ``"sum_then_clip"`` or ``"clip_then_sum"`` (see the module docstring).
    seed : ``None`` draws cryptographic randomness; an int is for tests and experiments only
        (the model is marked ``seeded``).
    noise : ``"exact"`` (exact decisions and discrete Laplace bins, default) or ``"float"``.
    """
    epsilon = check_epsilon(epsilon)
    tree_share = check_fraction(tree_share, "tree_share")
    theta = check_theta(theta)
    if postprocess not in POSTPROCESS:
        raise ParameterError(f"postprocess={postprocess!r}; use one of {POSTPROCESS}")
    noise = check_noise(noise)
    enc = encode_sequences(frame, column, alphabet=alphabet, max_length=max_length)
    return privtree_from_encoded(enc, alphabet=alphabet, epsilon=epsilon, tree_share=tree_share,
                                 theta=theta, postprocess=postprocess, rng=noise_source(seed), noise=noise)


def privtree_from_encoded(enc: EncodedSequences, *, alphabet: Sequence[Any], epsilon: float,
                          tree_share: float, theta: float, rng: NoiseSource | np.random.Generator,
                          postprocess: str = "sum_then_clip", noise: str = "exact") -> SequenceModel:
    """The mechanism on already encoded positions (see :func:`privtree_sequences`)."""
    src = noise_source(rng)
    l_top = enc.max_length + 1
    if check_noise(noise) == "exact":
        eps_tree = Fraction(tree_share) * Fraction(epsilon)
        eps_leaf = Fraction(epsilon) - eps_tree
        theta = grid_theta(theta)
    else:
        eps_tree, eps_leaf = tree_share * epsilon, (1.0 - tree_share) * epsilon
    lam, delta = privtree_sequence_params(enc.alphabet_size, enc.max_length, eps_tree, noise=noise)
    leaf_scale = laplace_scale(l_top, eps_leaf, noise)

    def decide(hist: np.ndarray, depth: int, hashed: np.ndarray) -> np.ndarray:
        return privtree_split(pst_scores(hist, hashed), depth, lam=lam, delta=delta, theta=float(theta),
                              rng=src, noise=noise)

    tree = grow_context_tree(enc, decide, max_depth=l_top)
    leaves = tree.is_leaf
    noisy = tree.hist.copy()
    noisy[leaves] += sample_noise(src, leaf_scale, (int(leaves.sum()), enc.beta), noise)
    if postprocess == "clip_then_sum":
        hist = sums_of_children(tree.parent, tree.depth, np.maximum(noisy, 0.0), leaves)
    else:
        hist = np.maximum(sums_of_children(tree.parent, tree.depth, noisy, leaves), 0.0)
    params = {"lambda": lam, "delta": delta, "tree_share": tree_share, "theta": float(theta),
              "eps_tree": float(eps_tree), "eps_leaf": float(eps_leaf), "leaf_noise_scale": float(leaf_scale),
              "l_top": l_top, "beta": enc.beta, "postprocess": postprocess,
              **noise_params(l_top, leaf_scale, noise, prefix="leaf_")}
    return SequenceModel(alphabet=alphabet, max_length=enc.max_length, parent=tree.parent,
                         prepended=tree.prepended, hist=hist, mechanism="privtree_sequences",
                         epsilon=epsilon, neighbours="add_remove", params=params, noise=noise,
                         seeded=src.seeded)


__all__ = ["privtree_from_encoded", "privtree_sequences"]
