"""Releases: the public outputs of the mechanisms (post-processing only from here on).

Importing this package imports every module of it, so every release type in it is registered with
:func:`read_release`.
"""

from polars_dp.plans.base import discover
from polars_dp.releases.base import Release
from polars_dp.releases.grid import GridRelease
from polars_dp.releases.io import write_table_atomic
from polars_dp.releases.reading import read_release
from polars_dp.releases.scan import scan_release
from polars_dp.releases.sequence import SequenceRelease
from polars_dp.releases.spatial import SpatialRelease
from polars_dp.releases.sql_script import sql_script

discover(__name__, __path__)

__all__ = ["GridRelease", "Release", "SequenceRelease", "SpatialRelease", "read_release",
           "scan_release", "sql_script", "write_table_atomic"]
