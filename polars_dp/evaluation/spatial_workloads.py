"""Range-query workloads and error metrics for evaluating spatial releases.

The PrivTree paper's spatial experiments (Sec. 6.1) use sets of 10,000 random
range-count queries per size class, by volume as a fraction of the domain: small
``[0.01%, 0.1%)``, medium ``[0.1%, 1%)``, large ``[1%, 10%)``; and the relative error
``|est - true| / max(true, rho)`` with smoothing ``rho = 0.1%`` of the number of points.
The query shape is not recovered; here queries are squares (cubes) in coordinates scaled to
the unit box, i.e. every side covers the same fraction ``volume^(1/d)`` of its range.
The generator depends on the public box and the seed only; the exact answers it is compared
with come from :mod:`polars_dp.evaluation.references` (not private).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from polars_dp.domains.box import as_box
from polars_dp.errors import ParameterError
from polars_dp.noise import SeedLike, make_rng
from polars_dp.params import check_int
from polars_dp.releases.sampling import check_rows_fit

SIZE_CLASSES: dict[str, tuple[float, float]] = {
    "small": (1e-4, 1e-3),
    "medium": (1e-3, 1e-2),
    "large": (1e-2, 1e-1),
}


def random_boxes(columns: str | Sequence[str], bounds: Any, n_queries: int, *,
                 volume: tuple[float, float] | str = "medium", seed: SeedLike = None) -> pl.DataFrame:
    """``n_queries`` random square boxes inside ``bounds`` as a frame of ``<col>_lo``/``<col>_hi``.

    ``volume`` is a size class name (:data:`SIZE_CLASSES`) or a ``(min, max)`` fraction of the
    box volume; each query's fraction is uniform in it and its position uniform in the box.
    """
    box = as_box(columns, bounds)
    # an unknown class name gets (0, 0), refused below with the list of classes
    lo_f, hi_f = SIZE_CLASSES.get(volume, (0.0, 0.0)) if isinstance(volume, str) else volume
    if not 0 < lo_f <= hi_f <= 1:
        raise ParameterError(f"volume must be a size class {list(SIZE_CLASSES)} or 0 < min <= max <= 1, "
                             f"got {volume!r}")
    check_rows_fit(check_int(n_queries, "n_queries", lo=0), 8 * (2 + 4 * box.d), "random boxes")
    rng = make_rng(seed)
    side = rng.uniform(lo_f, hi_f, n_queries) ** (1.0 / box.d)
    out = {}
    for j, c in enumerate(box.columns):
        start = box.lo[j] + rng.uniform(0.0, 1.0, n_queries) * (1.0 - side) * box.width[j]
        out[f"{c}_lo"] = start
        out[f"{c}_hi"] = np.minimum(start + side * box.width[j], box.hi[j])
    return pl.DataFrame(out)


def relative_errors(estimates: np.ndarray, truth: np.ndarray, n_points: int, *,
                    smoothing: float = 0.001) -> np.ndarray:
    """``|estimate - truth| / max(truth, smoothing * n_points)`` per query (PrivTree paper, Sec. 6.1)."""
    truth = np.asarray(truth, dtype=np.float64)
    rho = max(smoothing * n_points, 1e-12)
    return np.abs(np.asarray(estimates, dtype=np.float64) - truth) / np.maximum(truth, rho)


__all__ = ["SIZE_CLASSES", "random_boxes", "relative_errors"]
