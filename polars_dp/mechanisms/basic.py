"""Basic: the Laplace histogram (Dwork et al. 2006; the Privelet paper's baseline, Sec. III).

Privacy
-------
The frequency matrix ``M`` has L1 sensitivity ``Delta = 2`` under ``replace`` neighbours
(modifying a row moves one unit between two cells) and ``Delta = 1`` under ``add_remove``.
Adding i.i.d. ``Lap(Delta / epsilon)`` to every cell (empty cells included, each with its own
draw) is epsilon-DP by the Laplace mechanism.  Each cell's noise variance is
``2 (Delta / epsilon)^2``; a range covering ``k`` cells has variance ``2 k (Delta/epsilon)^2``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from polars_dp.counting.frequency import frequency_matrix
from polars_dp.domains.attributes import Attribute, as_attributes
from polars_dp.noise import SeedLike, check_epsilon, histogram_sensitivity, laplace, make_rng
from polars_dp.progress import Progress, rows_hint
from polars_dp.releases.grid import GridRelease

#: Cells of noise drawn and added per block (the noise never takes a full extra cube).
NOISE_BLOCK = 1 << 21


def _cells(attributes) -> int:
    return int(np.prod([a.n_cells for a in attributes], dtype=np.float64))


def add_laplace(counts: np.ndarray, rng: np.random.Generator, scale: float,
                advance: Callable[[int], None] | None = None) -> None:
    """``counts += Lap(scale)`` i.i.d. per cell, in place, drawn block by block in C order (the
    same draws as one call of the sampler for the whole array)."""
    flat = counts.reshape(-1)
    for i in range(0, flat.size, NOISE_BLOCK):
        block = flat[i:i + NOISE_BLOCK]
        block += laplace(rng, scale, block.size)
        if advance is not None:
            advance(block.size)


def basic_scale(epsilon: float, neighbours: str) -> float:
    """Laplace magnitude of Basic: ``Delta / epsilon`` with Delta = 2 (replace) or 1 (add/remove)."""
    return histogram_sensitivity(neighbours) / check_epsilon(epsilon)


def basic(frame: Any, attributes: Attribute | Iterable[Attribute], *, epsilon: float,
          neighbours: str = "replace", seed: SeedLike = None, on_out_of_domain: str = "raise",
          nulls: str = "raise", count_column: str | None = None,
          progress: bool | None = None) -> GridRelease:
    """Release the frequency matrix of ``attributes`` with Laplace noise on every cell.

    Parameters
    ----------
    frame : private rows: a Polars DataFrame / LazyFrame, pyarrow Table or Arrow stream
        (``__arrow_c_stream__``), a DuckDB relation or a Spark DataFrame; counted in that
        engine, read once.
    attributes : public declarations (:class:`~polars_dp.Ordinal`, :class:`~polars_dp.Nominal`).
    epsilon : privacy budget, > 0.
    neighbours : ``"replace"`` (Lap(2/epsilon) per cell) or ``"add_remove"`` (Lap(1/epsilon)).
    seed : ``None`` draws OS entropy; an int makes the release reproducible (tests only,
        never for production).
    on_out_of_domain, nulls : see :mod:`polars_dp.domains.attributes`.
    count_column : a column of non-negative integer counts when each row is a group of
        individuals already counted (pre-aggregated input); the guarantee holds when each
        individual contributes to exactly one row with weight 1 (see
        :mod:`polars_dp.counting.spec`).
    progress : stage bars on stderr (counting, noise); ``None``: on a terminal for large domains.
    """
    scale = basic_scale(epsilon, neighbours)
    rng = make_rng(seed)
    attrs = as_attributes(attributes)
    bar = Progress("basic", progress, max(_cells(attrs), rows_hint(frame) or 0))
    bar.step("counting")
    counts = frequency_matrix(frame, attributes, on_out_of_domain=on_out_of_domain, nulls=nulls,
                              bytes_per_cell=16, count_column=count_column)
    add_laplace(counts, rng, scale, bar.step("noise", counts.size, "cells"))
    bar.close()
    return GridRelease(counts, attrs, mechanism="basic", epsilon=epsilon, neighbours=neighbours,
                       noise_scale=scale, params={"sensitivity": histogram_sensitivity(neighbours)})
