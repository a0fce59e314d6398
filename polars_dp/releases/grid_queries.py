"""Former home of the query semantics, now :mod:`polars_dp.domains.queries` (kept as an alias)."""

from polars_dp.domains.queries import *  # noqa: F403
from polars_dp.domains.queries import __all__  # noqa: F401
