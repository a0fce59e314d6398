"""Query releases with SQL in DuckDB.

``release.to_duckdb(con, name)`` registers a release as native DuckDB tables with range-count
table macros: grid releases (Basic, Privelet) as described in
:mod:`polars_dp.releases.sql_grid`, spatial tree releases (PrivTree, UG, AG) in
:mod:`polars_dp.releases.sql_tree`.  This module is the public entry point::

    import polars_dp.duckdb as pdd
    pdd.register(con, "cube", release)       # same as release.to_duckdb(con, "cube")
    pdd.read_release(con, "cube")            # the release back, metadata and all
    pdd.attach(con, "cube")                  # after reopening a database file (see attach)
"""

from __future__ import annotations

from typing import Any

from polars_dp.errors import ParameterError
from polars_dp.releases import Release
from polars_dp.releases.sql import ident, literal, read_release, render, sql_dir, to_arrow
from polars_dp.releases.sql_grid import BATCH_CELLS
from polars_dp.releases.sql_tree import register_tree


def register(con: Any, name: str, release: Release, *, replace: bool = False) -> Any:
    """Register ``release`` in ``con`` as ``name`` (tables and macros); returns the table's relation.

    Refuses when a table, view or macro it would create exists; ``replace=True`` overwrites."""
    if not isinstance(release, Release):
        raise ParameterError(f"register expects a polars-dp release (GridRelease, SpatialRelease or "
                             f"SequenceRelease), got {type(release).__name__}")
    return release.to_duckdb(con, name, replace=replace)


def attach(con: Any, name: str, *, unverified: bool = False) -> Release:
    """Make release ``name`` of a reopened database file answer again; returns the release.

    DuckDB stores a release's tables, views and macros in the database file, and every macro is
    plain SQL (``count``, ``std``, ``lo`` / ``hi``, ``noise_*``, frequencies): a reopened file
    answers in any DuckDB client without ``attach``.  ``attach`` re-verifies: it reads the release
    back from its stored table (verified, as :func:`read_release`: metadata, parameters and
    checksum) and registers it again with ``replace=True``: every table, view and macro
    of ``name`` is dropped and re-created from the verified release, so nothing stored
    besides the release itself (a macro's text, the prefix sums, a label table) is trusted.
    ``unverified=True`` accepts a release registered from an unverified one
    (:func:`polars_dp.read_release`).
    """
    release = read_release(con, name, unverified=unverified)
    register(con, name, release, replace=True)
    return release


__all__ = ["BATCH_CELLS", "attach", "ident", "literal", "read_release", "register",
           "register_tree", "render", "sql_dir", "to_arrow"]
