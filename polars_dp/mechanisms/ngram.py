"""Fixed-height n-gram model: the baseline PrivTree's sequence model improves on (PrivTree paper Sec. 6.2).

Noisy counts of every context of length ``0 .. height - 1`` followed by every symbol, i.e.
all n-grams up to ``n = height`` (Chen, Ács, Castelluccia, CCS 2012, without their pruning),
stored as a complete PST of depth ``height - 1`` so it answers the same queries as
:func:`~polars_dp.privtree_sequences`.

Privacy (neighbours: add or remove one sequence)
------------------------------------------------
After truncation to ``max_length`` symbols a sequence has at most ``l_top = max_length + 1``
positions.  At each level (context length ``k``) every position with a context of that
length increments exactly one cell, so each level's counts have L1 sensitivity ``l_top``.
The budget is split evenly over the ``height`` levels: ``Lap(height * l_top / epsilon)`` per
cell, empty cells included; ``epsilon``-DP by sequential composition.  The release keeps the
unclipped noisy counts (so every bin's noise variance is that of one draw); queries clip them
at 0 (post-processing).  The noise grows with the height: the dilemma of a fixed height that
PrivTree removes.  Exact noise (``noise="exact"``, the default): the integer cells get discrete
Laplace noise of scale ``height * l_top / epsilon`` rounded up to the ``2^-20`` grid
(``params["epsilon_effective"]`` is what it spends).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from polars_dp.counting.sequences import encode_sequences
from polars_dp.domains.privacy_unit import Rows
from polars_dp.kernels.pst import grow_context_tree
from polars_dp.mechanisms.options import mechanism
from polars_dp.mechanisms.privacy_unit import bounded
from polars_dp.noise import (
    NoiseKind,
    SeedLike,
    noise_source,
    sample_noise,
)
from polars_dp.params import Nulls, OnOutOfAlphabet
from polars_dp.plans import NgramPlan
from polars_dp.progress import Progress
from polars_dp.releases.sequence import SequenceRelease


def run_ngram(plan: NgramPlan, frame: Any, *, seed: SeedLike, progress: bool | None
              ) -> SequenceRelease:
    """Count the n-grams of ``frame`` and add the plan's noise (its scale ``height * l_top /
    epsilon``, computed by :class:`polars_dp.plans.NgramPlan`)."""
    opts = plan.options
    height, alphabet = opts["height"], opts["alphabet"]
    bar = Progress("ngram_sequences", progress, None)
    bar.step("counting (encoding sequences)")
    plan.check_size()  # the n-gram tree, before any row is read
    src = noise_source(seed)
    frame = bounded(frame, plan, src, [opts["column"]])
    enc = encode_sequences(frame, opts["column"], alphabet=alphabet, max_length=opts["max_length"],
                           nulls=opts["nulls"], on_out_of_domain=opts["on_out_of_domain"])
    bar.step("n-gram tree")
    tree = grow_context_tree(enc, lambda hist, depth, starts_with_start: np.ones(hist.shape[0], dtype=bool),
                             max_depth=height - 1, max_nodes=plan.n_nodes)
    scale = plan.scale
    bar.step("noise")
    hist = tree.hist + sample_noise(src, scale, tree.hist.shape, plan.noise)  # unclipped: queries clip at 0
    bar.close()
    return SequenceRelease(alphabet=alphabet, max_length=enc.max_length, parent=tree.parent,
                           prepended=tree.prepended, hist=hist, seeded=src.seeded, plan=plan)


@mechanism(NgramPlan, run_ngram)
def ngram_sequences(frame: Any, column: str, *, alphabet: Sequence[int] | Sequence[str], max_length: int,
                    epsilon: float, height: int = ..., nulls: Nulls = ...,
                    on_out_of_domain: OnOutOfAlphabet = ..., neighbours: Literal["add_remove"] = ...,
                    seed: SeedLike = ..., noise: NoiseKind = ..., progress: bool | None = ...,
                    privacy_unit: Rows | None = ...) -> SequenceRelease:
    """Release noisy n-gram counts up to ``n = height`` (public) as a complete-tree SequenceRelease:
    ``Lap(height l_top / epsilon)`` per count (``height k l_top`` with a privacy unit of ``k``
    sequences per user)."""


__all__ = ["ngram_sequences", "run_ngram"]
