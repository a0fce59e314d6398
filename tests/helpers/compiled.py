"""Skip marker for the tests that compare the compiled twins with the numpy kernels, and the
checks shared by the releases that load their kernels in the background."""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
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


def assert_warm_up_changes_nothing(monkeypatch, module: ModuleType, starter: str,
                                   release: Callable[[], np.ndarray], off: tuple[str, Any]) -> None:
    """``release()`` (its counts) with ``module.starter`` spied on: it runs once and its thread is
    joined before the release returns; then with ``module.<off[0]>`` set to ``off[1]`` (no
    warm-up): the same bits."""
    started = []
    real = getattr(module, starter)
    monkeypatch.setattr(module, starter, lambda: started.append(1) or real())
    with_warm_up = release()
    assert started == [1]
    assert not [t for t in threading.enumerate() if t.name == "polars-dp-warm-up"]  # joined
    monkeypatch.setattr(module, *off)
    assert np.array_equal(with_warm_up.view(np.int64), release().view(np.int64))
