"""Former home of :class:`SpatialRelease`, now :mod:`polars_dp.releases.spatial` (kept as an alias)."""

from polars_dp.releases.spatial import *  # noqa: F403
from polars_dp.releases.spatial import __all__  # noqa: F401
