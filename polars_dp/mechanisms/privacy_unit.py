"""The privacy unit at release time: the key of the truncation rule drawn, the rows bounded.

One 64-bit key per release from the release's source (cryptographic; the seeded stream under
``seed=``, drawn before any noise), then :func:`polars_dp.counting.truncation.truncate` in the
engine holding the rows (the rule and its proof: :mod:`polars_dp.domains.privacy_unit`).
Nothing is drawn for ``Rows()``: a release without an identifier draws what it always drew.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from polars_dp.counting.truncation import truncate
from polars_dp.noise import NoiseSource
from polars_dp.plans.base import Plan


def bounded(frame: Any, plan: Plan, src: NoiseSource, columns: Sequence[str]) -> Any:
    """``frame`` with at most ``max_per`` rows per identifier of ``plan.privacy_unit`` (``frame``
    itself for ``Rows()``); ``columns`` are those the release reads (hashed with the identifier)."""
    unit = plan.privacy_unit
    if not unit.truncates:
        return frame
    key = int(src.words(1)[0])
    return truncate(frame, unit, key, columns, nulls=plan.options["nulls"])


__all__ = ["bounded"]
