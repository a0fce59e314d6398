"""PrivTree for sequences: a private prediction suffix tree (PrivTree paper Sec. 4).

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
  (PrivTree paper Sec. 3 and Theorem 4.1); group privacy over ``l_top`` pairs gives
  ``lambda = (2 beta - 1)/(beta - 1) * l_top / eps_tree`` (Theorem 4.1 as reconstructed).
* Leaf histograms (``eps_leaf = epsilon - eps_tree - eps_length``): the leaves partition the
  positions, each position increments one leaf bin, so the leaf histograms have L1
  sensitivity ``l_top`` and ``Lap(l_top / eps_leaf)`` per bin is eps_leaf-DP (Theorem 4.2).
* Length law (``eps_length = length_share * epsilon``, not in the paper): the counts of the
  truncated lengths ``0 .. max_length``; one sequence adds 1 to one bin, so L1 sensitivity 1
  and ``Lap(1 / eps_length)`` per bin.  ``length_share=0`` releases none.  The sampler uses it
  to calibrate its stop probabilities (see :meth:`SequenceRelease.sample`): a suffix tree knows
  the position since the start only where its contexts reach ``#``, which they rarely do for
  long sequences over a large alphabet (words: mean sampled length 10.2 against 9.3).
* Total: ``epsilon``-DP by sequential composition.  What follows is post-processing.
* Exact noise (``noise="exact"``, the default): ``eps_tree``, ``eps_length`` and ``eps_leaf`` are
  exact rationals adding up to ``epsilon``; the split decisions are drawn exactly (integer scores,
  ``lambda``/``delta``/``theta`` on the ``2^-20`` grid, :mod:`polars_dp.mechanisms.privtree_rule`) and the
  integer leaf bins get discrete Laplace noise of scale ``l_top / eps_leaf`` rounded up to the
  grid (``params["leaf_epsilon_effective"]``).

Memory guard (public cap)
-------------------------
The tree never has more than ``max_nodes`` nodes (default :func:`~polars_dp.kernels.pst.default_max_nodes`:
``2**25 // beta`` histograms of ``beta`` cells, about 256 MB of float64 counts).  The bound is
public and data-independent; when the nodes PrivTree decides to split at one level would push
the tree past it, only the first of them in BFS order are split (as many as fit) and growth
stops (``params["capped"] = True``).  That choice is a function of the private split decisions
and the public order only, so it is post-processing: the privacy argument above is unchanged.

Post-processing (``postprocess``)
---------------------------------
``"sum_then_clip"`` (default): the release stores, for every node, the *unclipped* sum of the
noisy leaf histograms below it (unbiased and linear in the leaf noise, so the noise variance
of every bin is ``2 b^2 L(v)`` for ``L(v)`` leaves below ``v``, which
:meth:`SequenceRelease.frequencies` reports); every query clips bins at 0 when it uses them.
``"clip_then_sum"`` (the spec's reconstruction): clip the leaf bins, then sum.  Each clipped
empty bin adds about ``b / 2``, which accumulates over large subtrees and flattens the
conditionals (on msnbc it cost 0.1 to 0.45 top-k precision); its error bars are not exact.

Budget split: ``tree_share = 0.25`` and ``length_share = 0.05`` by default, the leaves get the
rest.  Every internal histogram is a sum of leaf noise, so the leaves' budget matters more than
a finer tree (on msnbc at epsilon 0.1, 0.25 instead of 0.5 raised top-100 precision from 0.79 to
0.845 with the direct estimator, from 0.67 to 0.81 with the paper's chain formula; little at
epsilon >= 0.4; see docs/sequences.md).

Public rules that shape the tree: nodes starting with ``#`` never split, no node deeper
than ``l_top`` splits (no context is longer than ``l_top``), and the ``max_nodes`` cap.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from polars_dp.counting.sequences import EncodedSequences, encode_sequences
from polars_dp.domains.privacy_unit import Rows
from polars_dp.kernels.pst import grow_context_tree, pst_scores, sums_of_children
from polars_dp.mechanisms.options import mechanism
from polars_dp.mechanisms.privacy_unit import bounded
from polars_dp.mechanisms.privtree_rule import privtree_split
from polars_dp.noise import (
    NoiseKind,
    NoiseSource,
    SeedLike,
    noise_source,
    sample_noise,
)
from polars_dp.params import Nulls, OnOutOfAlphabet
from polars_dp.plans.spatial import Postprocess, PrivTreeSequencesPlan, check_length_share
from polars_dp.progress import Progress
from polars_dp.releases.sequence import SequenceRelease


def run_privtree_sequences(plan: PrivTreeSequencesPlan, frame: Any, *, seed: SeedLike,
                           progress: bool | None) -> SequenceRelease:
    """Encode ``frame`` and release under ``plan`` (the data is read here, once)."""
    opts = plan.options
    bar = Progress("privtree_sequences", progress, None)
    bar.step("counting (encoding sequences)")
    src = noise_source(seed)
    frame = bounded(frame, plan, src, [opts["column"]])
    enc = encode_sequences(frame, opts["column"], alphabet=opts["alphabet"], max_length=plan.max_length,
                           nulls=opts["nulls"], on_out_of_domain=opts["on_out_of_domain"])
    bar.step("tree and noise")
    model = release_encoded(plan, enc, src)
    bar.close()
    return model


@mechanism(PrivTreeSequencesPlan, run_privtree_sequences)
def privtree_sequences(frame: Any, column: str, *, alphabet: Sequence[int] | Sequence[str], max_length: int,
                       epsilon: float, tree_share: float = ..., theta: float = ...,
                       postprocess: Postprocess = ..., max_nodes: int | None = ..., length_share: float = ...,
                       nulls: Nulls = ..., on_out_of_domain: OnOutOfAlphabet = ...,
                       neighbours: Literal["add_remove"] = ...,
                       seed: SeedLike = ..., noise: NoiseKind = ..., progress: bool | None = ...,
                       privacy_unit: Rows | None = ...) -> SequenceRelease:
    """Release a PST of the sequences in ``column`` with PrivTree's depth-independent noise (under
    add/remove-one-sequence neighbours; module docstring): ``tree_share`` of ``epsilon`` grows the
    tree, ``length_share`` the length law, the rest the leaf histograms (``Lap(l_top /
    eps_leaf)`` per bin).  A privacy unit of ``k`` sequences per user makes every scale's group
    ``k l_top`` (length law: ``k``)."""


def privtree_from_encoded(enc: EncodedSequences, *, rng: NoiseSource | np.random.Generator,
                          **options: Any) -> SequenceRelease:
    """The mechanism on already encoded positions: ``options`` as :func:`privtree_sequences`
    takes them (``alphabet``, ``epsilon``, ...; ``max_length`` is the encoding's), except that
    no length law is released unless ``length_share`` is given."""
    plan = PrivTreeSequencesPlan("", max_length=enc.max_length, **{"length_share": 0, **options})
    return release_encoded(plan, enc, noise_source(rng))


def release_encoded(plan: PrivTreeSequencesPlan, enc: EncodedSequences, src: NoiseSource) -> SequenceRelease:
    """Grow the tree and add the plan's noise to the encoded positions ``enc``."""
    noise, l_top, theta = plan.noise, plan.l_top, plan.theta
    lam, delta, leaf_scale = plan.lam, plan.delta, plan.leaf_scale
    postprocess = plan.options["postprocess"]

    def decide(hist: np.ndarray, depth: int, starts_with_start: np.ndarray) -> np.ndarray:
        scores = pst_scores(hist, starts_with_start)
        return privtree_split(scores, depth, lam=lam, delta=delta, theta=float(theta), rng=src, noise=noise)

    tree = grow_context_tree(enc, decide, max_depth=l_top, max_nodes=plan.max_nodes)
    leaves = tree.is_leaf
    noisy = tree.hist.copy()
    noisy[leaves] += sample_noise(src, leaf_scale, (int(leaves.sum()), enc.beta), noise)
    if postprocess == "clip_then_sum":
        hist = sums_of_children(tree.parent, tree.depth, np.maximum(noisy, 0.0), leaves)
    else:  # unclipped sums: unbiased, linear in the noisy leaves; queries clip at 0
        hist = sums_of_children(tree.parent, tree.depth, noisy, leaves)
    hist.flags.writeable = False  # the release keeps it as it is (read-only) instead of a copy
    data: dict[str, Any] = {"capped": tree.capped}
    if plan.length_scale is not None:  # the length law: one bin per truncated length, sensitivity 1
        ends = enc.n_before[enc.next_symbol == enc.alphabet_size].astype(np.int64)
        exact = np.bincount(ends, minlength=enc.max_length + 1).astype(np.float64)
        length_counts = exact + sample_noise(src, plan.length_scale, exact.shape, noise)
        data["length_counts"] = [float(x) for x in length_counts]
    return SequenceRelease(alphabet=plan.options["alphabet"], max_length=enc.max_length, parent=tree.parent,
                           prepended=tree.prepended, hist=hist, params=data, seeded=src.seeded, plan=plan)


__all__ = ["check_length_share", "privtree_from_encoded", "privtree_sequences", "release_encoded",
           "run_privtree_sequences"]
