"""``compiled.sized``: a direct request picks the kernels from its size (public), below
``SIZED_FROM`` the numpy ones unless numba is already imported; an enclosing choice holds."""

from __future__ import annotations

import pytest

from polars_dp import compiled


@pytest.mark.parametrize("imported", [False, True])
def test_a_direct_request_picks_by_its_size(monkeypatch, imported):
    monkeypatch.setattr(compiled, "numba_imported", lambda: imported)
    monkeypatch.setenv("POLARS_DP_COMPILED", "1")
    with compiled.sized(compiled.SIZED_FROM - 1):
        assert compiled.requested() == imported
    with compiled.sized(compiled.SIZED_FROM):
        assert compiled.requested()
    assert compiled.requested()


@pytest.mark.parametrize("chosen_numpy", [True, False])
def test_an_enclosing_choice_holds_whatever_the_size(monkeypatch, chosen_numpy):
    monkeypatch.setattr(compiled, "numba_imported", lambda: False)
    monkeypatch.setenv("POLARS_DP_COMPILED", "1")
    with compiled.numpy_only(chosen_numpy):
        for values in (1, compiled.SIZED_FROM, 1 << 40):
            with compiled.sized(values):
                assert compiled.requested() == (not chosen_numpy)


def test_the_switch_still_turns_them_off(monkeypatch):
    monkeypatch.setenv("POLARS_DP_COMPILED", "0")
    with compiled.sized(1 << 40):
        assert not compiled.requested()
