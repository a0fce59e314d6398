"""Hierarchical: nested block levels per axis, exact noise per level tuple, least squares.

Qardaji, Yang, Li, Understanding Hierarchical Methods for Differentially Private Histograms,
VLDB 2013 (equal fan-out hierarchies, least-squares consistency); McKenna, Miklau, Hay,
Machanavajjhala, Optimizing Error of High-Dimensional Statistical Queries under Differential
Privacy, VLDB 2018 (Kronecker strategies optimised for a declared workload).

Privacy
-------
A *level tuple* ``t`` picks one nested block level per axis
(:mod:`polars_dp.kernels.block_levels`); its blocks partition the (padded) domain, so every row
lies in exactly one block of every tuple.  Hence the integer block counts ``y_t`` of one tuple
have L1 sensitivity

* ``neighbours="add_remove"`` (one row added or removed): ``Delta = 1`` (one count moves by one);
* ``neighbours="replace"`` (one row modified): ``Delta = 2`` (one count down, one up; zero when
  both rows fall in the same block),

times ``k`` with a privacy unit of ``k`` rows per individual.  Tuple ``t`` is measured with
discrete Laplace noise of scale ``b_t = Delta / epsilon_t`` rounded up to the ``2^-20`` grid,
``epsilon_t`` exact rationals with ``sum_t epsilon_t = epsilon`` (the plan,
:class:`polars_dp.plans.HierarchicalPlan`, from public inputs only); each is
``Delta / b_t <= epsilon_t``-DP and by sequential composition the release is
``sum_t Delta / b_t <= epsilon``-DP.  Everything after the noisy counts is post-processing: the
generalised least-squares estimate of the cells from all measured tuples
(:func:`polars_dp.kernels.level_inference.gls`), whose noise law is known before the data (the
plan's :class:`~polars_dp.plans.noise_model.LevelLaplace` error bars).  ``noise="float"`` draws
float Laplace of scale ``Delta / epsilon_t`` instead (experiments).

Every padded block count of every tuple gets one draw, independent of all others.  A tuple of
more than :data:`STREAM_VALUES` padded blocks (a public size) draws by blocks of rows, each
from a source of its own (:meth:`~polars_dp.noise.NoiseSource.block_streams`: freshly keyed
ChaCha20, or with a seed PCG64 children of a root drawn from the release's stream at the
tuple's turn), so its blocks run on every core; the others draw from the release's stream in
order.  Which source feeds which value changes, the law does not: each value still gets one
exact discrete Laplace draw of its tuple's scale, independent of every other.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from polars_dp.compiled import in_background
from polars_dp.counting.frequency import frequency_matrix
from polars_dp.counting.scatter import add_counts
from polars_dp.domains.attributes import Attribute
from polars_dp.domains.privacy_unit import Rows
from polars_dp.kernels import compiled
from polars_dp.kernels.block_levels import bary_levels, chain_from_factors, tuple_shape
from polars_dp.kernels.level_inference import BlockNoise, gls_from_sum, noisy_normal_sum
from polars_dp.mechanisms.options import mechanism
from polars_dp.mechanisms.privacy_unit import bounded
from polars_dp.noise import Neighbours, NoiseKind, SeedLike, noise_source, sample_noise
from polars_dp.noise.discrete import CHUNK as NOISE_CHUNK
from polars_dp.noise.discrete import warm_up_lookups
from polars_dp.params import Nulls, OnOutOfDomain
from polars_dp.plans import HierarchicalPlan
from polars_dp.plans.hierarchical import LevelWorkload
from polars_dp.progress import Progress
from polars_dp.releases.grid import GridRelease

#: A level tuple of more padded block counts than this draws its noise by blocks of rows, each
#: block from a stream of its own (:meth:`~polars_dp.noise.NoiseSource.block_streams`, keyed by
#: the block's first value), the blocks on every core; smaller tuples draw from the release's
#: stream in order.  A public size: the plan's shapes decide, never the data.
STREAM_VALUES = 1 << 24


def run_hierarchical(
    plan: HierarchicalPlan, frame: Any, *, seed: SeedLike, progress: bool | None
) -> GridRelease:
    """Count ``frame`` over the plan's attributes, measure every budgeted level tuple's block
    counts with its noise (C order of the tuples), estimate the cells by least squares.

    Streamed: one tuple's exact block counts at a time (from the counts or a coarser level
    already computed), its noise added in place and folded into the normal equations' right
    side before the next (:func:`~polars_dp.kernels.level_inference.noisy_normal_sum`); the
    counts freed; then the least-squares pass over a single pyramid chain per axis
    (:func:`~polars_dp.kernels.level_inference.gls_from_sum`).  The same draws, and the same
    estimate bit for bit, as measuring every tuple first (a tuple of more than
    :data:`STREAM_VALUES` blocks from its blocks' own streams, the others from the release's in
    C order) and calling :func:`~polars_dp.kernels.level_inference.gls`; the same for any
    number of threads."""
    src = noise_source(seed)
    attrs, opts = plan.attributes, plan.options
    bar = Progress("hierarchical", progress, plan.noisy_values)  # public work: the noisy block counts
    bar.step("counting")
    frame = bounded(frame, plan, src, [a.column for a in attrs])
    # the cells' tuple, measured last, is built over the counts when they leave it the room
    # (noisy_normal_sum): the padded cube's cells beyond the counts' (public sizes)
    cells = plan.measured[-1] == tuple(ax.count - 1 for ax in plan.axes)
    room = math.prod(ax.length for ax in plan.axes) - math.prod(ax.n for ax in plan.axes) if cells else 0
    warming = in_background(warm_up)  # the kernels load while the engine counts
    try:
        counts = frequency_matrix(
            frame,
            attrs,
            on_out_of_domain=opts["on_out_of_domain"],
            nulls=opts["nulls"],
            bytes_per_cell=plan.bytes_per_cell,
            count_column=opts["count_column"],
            integer=True,
            room=room,
        )
    finally:
        if warming is not None:
            warming.join()
    bar.step("block counts + noise")

    def add_noise(t: tuple[int, ...], y: np.ndarray) -> None:
        # the draws of one sample_noise(scale_t, y.shape) call, chunk by chunk (the samplers'
        # blocks divide NOISE_CHUNK, so the same words are read in the same order)
        flat, scale = y.reshape(-1), plan.tuple_scale(t)
        for a in range(0, flat.size, NOISE_CHUNK):
            chunk = flat[a:a + NOISE_CHUNK]
            chunk += sample_noise(src, scale, chunk.size, plan.noise)

    def block_noise(t: tuple[int, ...]) -> BlockNoise | None:
        # a public decision: the tuple's number of padded blocks (the plan's shape)
        if math.prod(ax.length // ax.sizes[level] for ax, level in zip(plan.axes, t, strict=True)) \
                <= STREAM_VALUES:
            return None
        streams, scale = src.block_streams(), plan.tuple_scale(t)

        def add_block(part: np.ndarray, start: int, fresh: bool) -> None:
            own, flat = streams(start), part.reshape(-1)
            for a in range(0, flat.size, NOISE_CHUNK):
                chunk = flat[a:a + NOISE_CHUNK]
                draws = sample_noise(own, scale, chunk.size, plan.noise)
                if fresh:  # 0.0 + draw, as added to zeros, without reading the chunk
                    np.add(0.0, draws, out=chunk)
                else:
                    chunk += draws

        return add_block

    weights = plan.weights
    held = [counts]  # consumed: the counts go as soon as no tuple left needs them
    del counts
    quarter: list[np.ndarray] = []  # the normal sum halved twice along the first axis
    z = noisy_normal_sum(held, plan.axes, plan.measured, weights, add_noise, noise_chunk=NOISE_CHUNK,
                         block_noise=block_noise, quarter=quarter)
    bar.step("least squares")
    estimate = gls_from_sum(z, weights, plan.axes, quarter=quarter)
    del z, quarter
    bar.close()
    return GridRelease(estimate, attrs, noise_scale=plan.noise_scale, seeded=src.seeded, plan=plan)


def warm_up() -> None:
    """Load the release's compiled kernels (numba's import and its disk cache, about a second
    in a fresh process) by calling them on tiny arrays of zeros with a release's argument
    types: the count scatter, both sampler look-ups (on fixed words: nothing is drawn), the
    block sums, the counts' addition and the least squares' binary rows (a tiny normal sum and
    solve without noise).  Public constants only; nothing of it reaches a release."""
    if not compiled.enabled():
        return
    add_counts(np.empty(4, dtype=np.int64), np.zeros(1, dtype=np.int64), zero=True)
    warm_up_lookups()
    axes = (bary_levels(5), chain_from_factors(2, [2]), bary_levels(9))
    weights = np.zeros(tuple_shape(axes))
    weights[0, 0, 0] = weights[1, 1, 2] = weights[-1, -1, -1] = 1.0
    measured = [t for t in np.ndindex(*weights.shape) if weights[t] > 0]
    z = noisy_normal_sum(np.zeros((5, 2, 9), dtype=np.int64), axes, measured, weights, lambda t, y: None,
                         noise_chunk=4, threads=1)
    gls_from_sum(z, weights, axes, threads=1)


@mechanism(HierarchicalPlan, run_hierarchical)
def hierarchical(
    frame: Any,
    attributes: Attribute | Iterable[Attribute],
    *,
    epsilon: float,
    neighbours: Neighbours = ...,
    levels: Mapping[str, int | Sequence[int]] | None = ...,
    workload: LevelWorkload = ...,
    seed: SeedLike = ...,
    on_out_of_domain: OnOutOfDomain = ...,
    nulls: Nulls = ...,
    count_column: str | None = ...,
    noise: NoiseKind = ...,
    progress: bool | None = ...,
    privacy_unit: Rows | None = ...,
) -> GridRelease:
    """Release the frequency matrix of ``attributes`` from noisy block counts at nested levels:
    every level tuple's counts get discrete Laplace ``Delta / epsilon_t`` (``Delta = 1`` under
    ``add_remove``, 2 under ``replace``, ``k`` times that with a privacy unit of ``k`` rows;
    ``sum_t epsilon_t = epsilon``, uniform or optimised for ``workload``), then least squares.

    >>> import polars as pl, polars_dp as pdp
    >>> df = pl.DataFrame({"age": [23, 35, 35, 61]})
    >>> attrs = [pdp.Ordinal("age", 0, 63)]
    >>> release = pdp.hierarchical(df, attrs, epsilon=1.0, levels={"age": [64, 8, 1]})
    >>> release.shape, release.params["levels"]
    ((64,), {'age': [64, 8, 1]})
    >>> plan = pdp.plan("hierarchical", attrs, epsilon=1.0, workload=pdp.workload.ranges(attrs))
    >>> plan.budget_choice
    'workload'
    """


__all__ = ["STREAM_VALUES", "hierarchical", "run_hierarchical", "warm_up"]
