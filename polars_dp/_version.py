"""The version of polars-dp, recorded in every release's metadata (``polars_dp.version``).

Written here, not read from the installed package's metadata: an editable install keeps the
version it was installed with, and a release must never claim an older writer than the one
that wrote it (files written before checksums claim 0.1.0).  ``pyproject.toml`` states the
same number (a test checks that they agree).
"""

__version__ = "0.4.0"

__all__ = ["__version__"]
