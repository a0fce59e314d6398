from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _matplotlib_style_restored():
    """The evaluation report sets matplotlib's global style (``savefig.bbox = "tight"``, dpi):
    each test here gets it undone, so tests that run later (the CLI's PNG sizes) see the defaults."""
    try:
        import matplotlib
    except ImportError:
        yield
        return
    with matplotlib.rc_context():
        yield
