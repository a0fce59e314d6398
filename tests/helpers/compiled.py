"""Skip marker for the tests that compare the compiled twins with the numpy kernels."""

from __future__ import annotations

import pytest

from polars_dp import compiled
from polars_dp.compiled import enabled
from polars_dp.noise import lookups

needs_compiled = pytest.mark.skipif(
    not enabled(), reason="compiled kernels off: no numba (the fast extra), or POLARS_DP_COMPILED=0")


def lookup_choices(monkeypatch) -> list[bool]:
    """Spy on the samplers' look-ups: the kernel choice in force at each (``requested``, which
    needs no numba), appended to the list returned."""
    seen: list[bool] = []
    for name in ("guide", "two_tables"):
        real = getattr(lookups, name)

        def spy(*args, real=real):
            seen.append(compiled.requested())
            return real(*args)
        monkeypatch.setattr(lookups, name, spy)
    return seen
