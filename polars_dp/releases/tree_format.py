"""Former home of the spatial release reader, now :mod:`polars_dp.releases.spatial_format` (an alias)."""

from polars_dp.releases.spatial_format import *  # noqa: F403
from polars_dp.releases.spatial_format import __all__  # noqa: F401
