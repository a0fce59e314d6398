"""Former home of the typed noise models, now :mod:`polars_dp.plans.noise_model` (kept as an alias)."""

from polars_dp.plans.noise_model import *  # noqa: F403
from polars_dp.plans.noise_model import __all__  # noqa: F401
