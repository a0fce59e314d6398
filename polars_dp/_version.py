"""The installed version of polars-dp (recorded in every release's metadata)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("polars-dp")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0.1.0"

__all__ = ["__version__"]
