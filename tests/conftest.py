from __future__ import annotations

from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture
def shared_data() -> Path:
    """Folder of the real evaluation datasets; tests using it skip where it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real datasets not available ({SHARED_DATA} is absent)")
    return SHARED_DATA
