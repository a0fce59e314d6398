"""Basic: the Laplace histogram (Dwork et al. 2006; the Privelet paper's baseline, Sec. III).

Privacy
-------
The frequency matrix ``M`` has L1 sensitivity ``Delta = 2`` under ``replace`` neighbours
(modifying a row moves one unit between two cells) and ``Delta = 1`` under ``add_remove``.
Adding i.i.d. ``Lap(Delta / epsilon)`` to every cell (empty cells included, each with its own
draw) is epsilon-DP by the Laplace mechanism.  Each cell's noise variance is
``2 (Delta / epsilon)^2``; a range covering ``k`` cells has variance ``2 k (Delta/epsilon)^2``.

Exact noise (``noise="exact"``, the default): the counts are integers and every cell gets
discrete Laplace noise of scale ``lambda' = t/s``, ``Delta / epsilon`` rounded up to the
``2^-20`` grid (:func:`polars_dp.noise.exact_scale`).  The pmf ratio of two neighbouring
outputs is at most ``exp(||M - M'||_1 / lambda') <= exp(Delta / lambda')``, so the release is
``epsilon_effective = Delta / lambda' <= epsilon``-DP; the noisy counts are integers (stored as
float64, exact below 2^53).  Its variance is ``2 q / (1 - q)^2 < 2 lambda'^2``,
``q = exp(-1/lambda')``.  ``noise="float"`` adds numpy's float Laplace instead (experiments).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from polars_dp.counting.frequency import frequency_matrix
from polars_dp.domains.attributes import Attribute
from polars_dp.domains.privacy_unit import Rows
from polars_dp.mechanisms.options import checked_options
from polars_dp.mechanisms.privacy_unit import bounded
from polars_dp.noise import (
    Neighbours,
    NoiseKind,
    NoiseSource,
    SeedLike,
    add_noise,
    noise_source,
)
from polars_dp.params import Nulls, OnOutOfDomain
from polars_dp.plans import BasicPlan
from polars_dp.plans.base import register_runner
from polars_dp.progress import Progress
from polars_dp.releases.grid import GridRelease

#: Cells of noise drawn and added per block (the noise never takes a full extra cube).
NOISE_BLOCK = 1 << 21


def _cells(attributes: Iterable[Attribute]) -> int:
    return int(np.prod([a.n_cells for a in attributes], dtype=np.float64))


def add_cell_noise(counts: np.ndarray, scale: Any, src: NoiseSource, noise: str,
                   advance: Callable[[int], None] | None = None) -> None:
    """``counts += noise(scale)`` i.i.d. per cell, in place, block by block in C order (the same
    draws as one call of the sampler for the whole array)."""
    flat = counts.reshape(-1)
    for i in range(0, flat.size, NOISE_BLOCK):
        block = flat[i:i + NOISE_BLOCK]
        add_noise(block, scale, src, noise)
        if advance is not None:
            advance(block.size)


def run_basic(plan: BasicPlan, frame: Any, *, seed: SeedLike = None, progress: bool | None = None
              ) -> GridRelease:
    """Count ``frame`` over the plan's attributes and add the plan's cell noise."""
    src = noise_source(seed)
    attrs, opts = plan.attributes, plan.options
    bar = Progress("basic", progress, _cells(attrs))  # public work: the cells
    bar.step("counting")
    frame = bounded(frame, plan, src, [a.column for a in attrs])
    counts = frequency_matrix(frame, attrs, on_out_of_domain=opts["on_out_of_domain"], nulls=opts["nulls"],
                              bytes_per_cell=16, count_column=opts["count_column"])
    add_cell_noise(counts, plan.scale, src, plan.noise, bar.step("noise", counts.size, "cells"))
    bar.close()
    return GridRelease(counts, attrs, mechanism="basic", epsilon=plan.epsilon, neighbours=plan.neighbours,
                       noise_scale=plan.noise_scale, params=plan.record(), noise=plan.noise,
                       seeded=src.seeded, plan=plan)


@checked_options("basic")
def basic(frame: Any, attributes: Attribute | Iterable[Attribute], *, epsilon: float,
          neighbours: Neighbours = "replace", seed: SeedLike = None,
          on_out_of_domain: OnOutOfDomain = "raise",
          nulls: Nulls = "raise", count_column: str | None = None, noise: NoiseKind = "exact",
          progress: bool | None = None, privacy_unit: Rows | None = None) -> GridRelease:
    """Release the frequency matrix of ``attributes`` with Laplace noise on every cell.

    Exactly ``pdp.plan("basic", attributes, epsilon=..., ...).run(frame, seed=seed,
    progress=progress)`` (:class:`polars_dp.plans.BasicPlan`).

    Parameters
    ----------
    frame : the private rows, any input of :mod:`polars_dp.counting.engines` (read once).
    attributes : public declarations (:class:`~polars_dp.Ordinal`, :class:`~polars_dp.Nominal`).
    epsilon : privacy budget, > 0.
    neighbours : ``"replace"`` (Lap(2/epsilon) per cell) or ``"add_remove"`` (Lap(1/epsilon)).
    seed : ``None`` draws cryptographic randomness; an int makes the release reproducible
        (tests only, never for production; the release is marked ``seeded``).
    on_out_of_domain, nulls : see :mod:`polars_dp.domains.attributes`.
    count_column : a column of non-negative integer counts when each row is a group of
        individuals already counted (pre-aggregated input); the guarantee holds when each
        individual contributes to exactly one row with weight 1 (see
        :mod:`polars_dp.counting.spec`).
    noise : ``"exact"`` (discrete Laplace on the integer counts, default) or ``"float"``.
    progress : stage bars on stderr (counting, noise); ``None``: on a terminal for large domains.
    privacy_unit : ``pdp.Rows()`` (one row is one individual, the default) or
        ``pdp.Rows(max_per=k, id_column="person")``: each identifier keeps at most ``k`` rows
        (a keyed-hash rule, :mod:`polars_dp.domains.privacy_unit`) and the sensitivity is ``k``
        times the one-row sensitivity.

    >>> import polars as pl, polars_dp as pdp
    >>> df = pl.DataFrame({"age": [23, 35, 35, 61], "sex": ["f", "m", "f", "f"]})
    >>> attrs = [pdp.Ordinal("age", 0, 99, width=10), pdp.Nominal("sex", categories=["f", "m"])]
    >>> release = pdp.basic(df, attrs, epsilon=1.0)
    >>> release.shape, release.noise_scale, release.range_std(sex="f")   # 10 cells of Lap(2)
    ((10, 2), 2.0, 8.94...)
    """
    plan = BasicPlan(attributes, epsilon=epsilon, neighbours=neighbours, on_out_of_domain=on_out_of_domain,
                     nulls=nulls, count_column=count_column, noise=noise, privacy_unit=privacy_unit)
    return plan.run(frame, seed=seed, progress=progress)


register_runner("basic", run_basic, basic)

__all__ = ["add_cell_noise", "basic", "run_basic"]
