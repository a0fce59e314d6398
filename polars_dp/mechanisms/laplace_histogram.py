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

import math
from collections.abc import Callable, Iterable
from typing import Any, Literal

import numpy as np

from polars_dp.counting.frequency import frequency_matrix
from polars_dp.domains.attributes import Attribute
from polars_dp.domains.privacy_unit import Rows
from polars_dp.mechanisms.options import mechanism
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
from polars_dp.plans.grid import Workload
from polars_dp.progress import Progress
from polars_dp.releases.grid import GridRelease

#: Cells of noise drawn and added per block (the noise never takes a full extra cube).
NOISE_BLOCK = 1 << 21


def _cells(attributes: Iterable[Attribute]) -> int:
    return int(math.prod(float(a.n_cells) for a in attributes))


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


def run_basic(plan: BasicPlan, frame: Any, *, seed: SeedLike, progress: bool | None
              ) -> GridRelease:
    """Count ``frame`` over the plan's attributes and add the plan's cell noise."""
    src = noise_source(seed)
    attrs, opts = plan.attributes, plan.options
    bar = Progress("basic", progress, _cells(attrs))  # public work: the cells
    bar.step("counting")
    frame = bounded(frame, plan, src, [a.column for a in attrs])
    counts = frequency_matrix(frame, attrs, on_out_of_domain=opts["on_out_of_domain"], nulls=opts["nulls"],
                              bytes_per_cell=plan.bytes_per_cell, count_column=opts["count_column"])
    add_cell_noise(counts, plan.scale, src, plan.noise, bar.step("noise", counts.size, "cells"))
    bar.close()
    return GridRelease(counts, attrs, noise_scale=plan.noise_scale, seeded=src.seeded, plan=plan)


@mechanism(BasicPlan, run_basic)
def basic(frame: Any, attributes: Attribute | Iterable[Attribute], *, epsilon: float,
          workload: Workload = ..., strategy: Literal["workload"] | None = ...,
          neighbours: Neighbours = ..., seed: SeedLike = ..., on_out_of_domain: OnOutOfDomain = ...,
          nulls: Nulls = ..., count_column: str | None = ..., noise: NoiseKind = ...,
          progress: bool | None = ..., privacy_unit: Rows | None = ...) -> GridRelease:
    """Release the frequency matrix of ``attributes`` with Laplace noise on every cell:
    ``Lap(Delta / epsilon)`` per cell, ``Delta = 2`` under ``replace``, 1 under ``add_remove``
    (``k`` times that with a privacy unit of ``k`` rows).

    >>> import polars as pl, polars_dp as pdp
    >>> df = pl.DataFrame({"age": [23, 35, 35, 61], "sex": ["f", "m", "f", "f"]})
    >>> attrs = [pdp.Ordinal("age", 0, 99, width=10), pdp.Nominal("sex", categories=["f", "m"])]
    >>> release = pdp.basic(df, attrs, epsilon=1.0)
    >>> release.shape, release.noise_scale, release.range_std(sex="f")   # 10 cells of Lap(2)
    ((10, 2), 2.0, 8.94...)
    """


__all__ = ["add_cell_noise", "basic", "run_basic"]
