"""DuckDB glue shared by every release type: SQL templates, identifiers, one transaction.

The SQL lives in ``sql/*.sql`` templates (shipped in the wheel as ``polars_dp/sql``), rendered
per release by :func:`render`.  Registration runs in one transaction (:func:`in_transaction`):
a failure leaves nothing half-made in the connection.  :func:`to_arrow` / :func:`read_release`
read a registered release back, with its ``polars_dp.*`` metadata re-attached from
``<name>_meta``.
"""

from __future__ import annotations

import contextlib
import re
from importlib.resources import files
from pathlib import Path
from typing import Any

import pyarrow as pa

from polars_dp.errors import ParameterError, ReleaseFormatError
from polars_dp.releases.base import Release
from polars_dp.releases.io import read_release as read_arrow_release
from polars_dp.releases.metadata import attach_metadata, read_metadata

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")

#: Appended to error messages of the batch macros: which query failed.
BATCH_WHERE = "' (query id=' || coalesce(CAST(q.id AS VARCHAR), 'NULL') || ')'"


def sql_dir() -> Path:
    """Folder of the SQL templates: ``polars_dp/sql`` when installed, the repo's ``sql/`` in a
    source checkout."""
    installed = files("polars_dp") / "sql"
    if installed.is_dir():
        return Path(str(installed))
    return Path(__file__).resolve().parent.parent.parent / "sql"


def render(template: str, **values: Any) -> str:
    """The text of ``sql/<template>`` with every ``{{key}}`` replaced by ``values[key]``."""
    text = (sql_dir() / template).read_text()

    def substitute(match: re.Match) -> str:
        key = match.group(1)
        if key not in values:
            raise KeyError(f"template {template} needs a value for {{{{{key}}}}}")
        return str(values[key])

    return _PLACEHOLDER.sub(substitute, text)


def ident(name: str) -> str:
    """A quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def literal(text: str) -> str:
    """A quoted SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def number(x: float | int) -> str:
    return repr(float(x)) if isinstance(x, float) else str(int(x))


def check_identifier(name: str) -> None:
    if not isinstance(name, str) or not _IDENTIFIER.match(name):
        raise ParameterError(
            f"name must be a plain SQL identifier (letters, digits, underscore), got {name!r}"
        )


def small_table(con: Any, view: str, table: str, data: pa.Table) -> None:
    con.register(view, data)
    try:
        con.execute(f"CREATE OR REPLACE TABLE {ident(table)} AS SELECT * FROM {ident(view)}")
    finally:
        con.unregister(view)


def metadata_table(release: Release) -> pa.Table:
    meta = read_metadata(attach_metadata(pa.table({}), release.metadata()))
    return pa.table({"key": list(meta), "value": list(meta.values())})


def comment(release: Release, name: str, extra: str = "") -> str:
    """The table comment: what the release is and where its metadata lives."""
    return literal(f"polars-dp {release.release_type} release: mechanism={release.mechanism}, "
                   f"epsilon={release.epsilon}, neighbours={release.neighbours}{extra}; "
                   f"metadata in {name}_meta")


def in_transaction(con: Any, views: dict[str, Any], build: Any) -> None:
    """Register ``views``, run ``build()`` and commit; on any error roll back and drop the views,
    so a failed registration leaves nothing half-made in the connection."""
    con.execute("BEGIN TRANSACTION")
    try:
        for view, data in views.items():
            con.register(view, data)
        build()
        for view in views:
            con.unregister(view)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        for view in views:
            with contextlib.suppress(Exception):  # the view may be gone already
                con.unregister(view)
        raise


def to_arrow(con: Any, name: str) -> pa.Table:
    """The release table ``name`` as Arrow (in release order, without ``cell``/``prefix``/``leaf``),
    with its ``polars_dp.*`` schema metadata re-attached from ``name_meta``."""
    check_identifier(name)
    try:
        rows = con.execute(f"SELECT key, value FROM {ident(name + '_meta')}").fetchall()
        order = "leaf" if dict(rows).get("release_type") == "tree" else "cell"
        hidden = "leaf" if order == "leaf" else "cell, prefix"
        table = con.sql(
            f"SELECT * EXCLUDE ({hidden}) FROM {ident(name)} ORDER BY {order}").to_arrow_table()
    except Exception as exc:  # duckdb.CatalogException and friends
        raise ReleaseFormatError(
            f"{name!r} is not a polars-dp release registered in this connection: {exc}"
        ) from None
    return attach_metadata(table, dict(rows))


def read_release(con: Any, name: str) -> Release:
    """The release registered as ``name`` (inverse of ``release.to_duckdb(con, name)``)."""
    return read_arrow_release(to_arrow(con, name))


__all__ = ["BATCH_WHERE", "check_identifier", "comment", "ident", "in_transaction", "literal",
           "metadata_table", "number", "read_release", "render", "small_table", "sql_dir", "to_arrow"]
