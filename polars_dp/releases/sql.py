"""DuckDB glue shared by every release type: SQL templates, identifiers, one transaction.

The SQL lives in ``sql/*.sql`` templates (shipped in the wheel as ``polars_dp/sql``), rendered
per release by :func:`render`.  Every release type registers through one flow
(:func:`register`): the type describes its parts (:class:`Registration`: tables, macros,
the statements creating them) and the flow checks the names, handles
``replace`` and runs everything in one transaction (:func:`in_transaction`): a failure leaves
nothing half-made in the connection.  :func:`to_arrow` / :func:`read_release`
read a registered release back, with its ``polars_dp.*`` metadata re-attached from
``<name>_meta``.

What the macros read lives in internal tables (:func:`internal`, ``__pdp_<name>_cells`` and
friends); a user sees each through a view of its user columns (:func:`view`).  DuckDB views are
read-only, so an ``UPDATE`` through a user-facing name fails instead of making the table and
the macros disagree.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa

from polars_dp.domains.expressions import Sql
from polars_dp.domains.queries import ID_RULE
from polars_dp.errors import ParameterError, ReleaseFormatError
from polars_dp.plans.grid import ALPHA_REFUSAL
from polars_dp.releases.base import Release
from polars_dp.releases.card import Header
from polars_dp.releases.metadata import attach_metadata
from polars_dp.releases.reading import read_release as read_arrow_release
from polars_dp.releases.reading import release_class

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")

#: Appended to error messages of the batch macros: which query failed.
BATCH_WHERE = "' (query id=' || coalesce(CAST(q.id AS VARCHAR), 'NULL') || ')'"


#: Where a registration's objects live: the connection's current schema (or a temporary view).
_CURRENT = "database_name IN (current_database(), 'temp') AND schema_name IN (current_schema(), 'main')"


#: The ``checks`` CTE of a single-query macro: its columns are its named parameters and its id 0.
NO_CHECKS = "checks AS (SELECT true AS ok)"


def query_checks(queries: str, source: str, known: Sequence[str], *, batch: bool = True) -> str:
    """The ``checks`` CTE (``sql/query_checks.sql``) of a macro answering the relation ``queries``:
    refuses a column other than ``id`` and ``known``, and a missing, NULL or repeated id, as
    :func:`polars_dp.domains.queries.check_query_ids` does in Python.  ``source`` names a
    CTE holding ``queries`` with an ``id`` column (NULL when ``queries`` has none).  A
    single-query macro (``batch=False``) has nothing to check (:data:`NO_CHECKS`)."""
    if not batch:
        return NO_CHECKS
    return render("query_checks.sql", queries=queries, source=source,
                  known_list="[" + ", ".join(literal(c.lower()) for c in ["id", *known]) + "]",
                  known_text=literal(", ".join(known)), id_rule=literal(ID_RULE))


def checked_alpha(alpha: str = "alpha") -> Sql:
    """SQL of the macro parameter ``alpha`` as a DOUBLE: NULL for a NULL ``alpha``, an ``error()``
    with :func:`polars_dp.plans.grid.check_alpha`'s sentence outside (0, 1)."""
    return Sql(f"CASE WHEN {alpha} IS NULL THEN NULL WHEN NOT ({alpha} > 0 AND {alpha} < 1) "
               f"THEN error({literal(ALPHA_REFUSAL)} || CAST({alpha} AS VARCHAR)) "
               f"ELSE CAST({alpha} AS DOUBLE) END")


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


def internal(name: str, part: str = "cells") -> str:
    """Name of the internal table ``part`` of release ``name`` (``__pdp_<name>_<part>``): what the
    macros read; a user queries it through the view of :func:`view`."""
    return f"__pdp_{name}_{part}"


def view(name: str, source: str, comment_text: str, hidden: Sequence[str] = (), *,
         columns: str | None = None) -> str:
    """The statements creating view ``name`` over the internal table ``source``, without the
    ``hidden`` columns, or with the SQL select list ``columns`` (``sql/release_view.sql``)."""
    if columns is None:
        columns = f"* EXCLUDE ({', '.join(map(ident, hidden))})" if hidden else "*"
    return render("release_view.sql", view=ident(name), source=ident(source), columns=columns,
                  comment=comment_text, internal_comment=literal(f"internal table of {name}; query {name}"))


def check_identifier(name: str) -> None:
    if not isinstance(name, str) or not _IDENTIFIER.match(name):
        raise ParameterError(
            f"name must be a plain SQL identifier (letters, digits, underscore), got {name!r}"
        )


def check_free(con: Any, tables: list[str], macros: list[str], *, replace: bool) -> None:
    """Refuse (ParameterError naming them) when any table/view or macro that a registration
    would create already exists in the connection's current schema (or as a temporary view);
    with ``replace=True`` drop those tables, views and macros instead, so that the registration
    creates everything afresh.  DuckDB names are case-insensitive."""
    found_tables = {
        row[0].lower(): row[1] for row in con.execute(
            f"SELECT table_name, 'TABLE' FROM duckdb_tables() WHERE {_CURRENT} "
            f"UNION ALL SELECT view_name, 'VIEW' FROM duckdb_views() WHERE NOT internal AND {_CURRENT}"
        ).fetchall()}
    found_macros = {
        row[0].lower(): row[1] for row in con.execute(
            "SELECT function_name, CASE function_type WHEN 'macro' THEN 'MACRO' ELSE 'MACRO TABLE' END "
            f"FROM duckdb_functions() WHERE function_type IN ('macro', 'table_macro') AND {_CURRENT}"
        ).fetchall()}
    clash = [t for t in tables if t.lower() in found_tables]
    clash += [m for m in macros if m.lower() in found_macros]
    if not clash:
        return
    if not replace:
        raise ParameterError(
            f"registering would overwrite {', '.join(map(repr, clash))} in this DuckDB connection; "
            "choose another name, drop them, or pass replace=True to overwrite"
        )
    for names, found in ((tables, found_tables), (macros, found_macros)):
        for n in names:
            kind = found.get(n.lower())
            if kind is not None:
                con.execute(f"DROP {kind} {ident(n)}")


@dataclass
class Registration:
    """What registering one release creates in DuckDB, described by its type: the ``tables``
    and ``macros`` it creates (checked free first), the transient Arrow ``sources`` (view name
    -> table or batch reader, or a function making one when registered) its ``statements``
    read, and the ``statements`` (rendered ``sql/*.sql``) creating the tables and macros, run in
    order: plain SQL, no Python function, so a reopened database answers without Python.
    :mod:`polars_dp.releases.sql_script` replaces the sources by SQL over the release's Parquet
    file and runs the same statements."""

    tables: list[str]
    macros: list[str]
    sources: dict[str, Any]
    statements: list[str]


def check_connection(con: Any) -> None:
    """ParameterError unless ``con`` looks like a DuckDB connection (``execute`` and ``table``)."""
    if not (hasattr(con, "execute") and hasattr(con, "table")):
        raise ParameterError(f"a release is registered in a DuckDB connection (duckdb.connect(...)), got "
                             f"{type(con).__name__}", parameter="con")


def register(con: Any, name: str, parts: Registration, *, replace: bool = False) -> Any:
    """The one registration flow of every release type, in one transaction
    (:func:`in_transaction`): refuse (or with ``replace=True`` drop) the existing tables, views
    and macros of those names (:func:`check_free`), run the statements.  Returns the relation of
    table ``name``."""

    check_connection(con)

    def build() -> None:
        check_free(con, parts.tables, parts.macros, replace=replace)
        for statement in parts.statements:
            con.execute(statement)

    in_transaction(con, parts.sources, build)
    return con.table(name)


class Registered(Header, Protocol):
    """What the registration of any release reads of it: its header, type and metadata."""

    @property
    def release_type(self) -> str: ...
    @property
    def internal_columns(self) -> tuple[str, ...]: ...


def metadata_table(release: Registered) -> pa.Table:
    meta = release.export_metadata()
    return pa.table({"key": list(meta), "value": list(meta.values())})


def comment(release: Registered, name: str, extra: str = "") -> str:
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
            con.register(view, data() if callable(data) else data)
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


def stored_table(con: Any, name: str) -> str:
    """The table holding release ``name``'s rows: its internal table (:func:`internal`), or
    ``name`` itself in a database written before internal tables."""
    return internal(name) if _exists(con, "table", internal(name)) else name


def _exists(con: Any, kind: str, name: str) -> bool:
    """Whether a ``kind`` (``"table"`` or ``"view"``) named ``name`` is in the current schema."""
    query = f"SELECT count(*) FROM duckdb_{kind}s() WHERE {_CURRENT} AND lower({kind}_name) = ?"
    return bool(con.execute(query, [name.lower()]).fetchall()[0][0])


def to_arrow(con: Any, name: str) -> pa.Table:
    """The release table ``name`` as Arrow (in release order, without the internal columns of
    :attr:`Release.internal_columns` of its type), read from its stored table (:func:`stored_table`), with its
    ``polars_dp.*`` schema metadata re-attached from ``name_meta``."""
    check_identifier(name)
    try:
        rows = con.execute(f"SELECT key, value FROM {ident(name + '_meta')}").fetchall()
        hidden = release_class(dict(rows)).internal_columns
        if _exists(con, "view", internal(name, "rows")):  # a grid's labels derived from the cell number
            query = f"SELECT * EXCLUDE (cell) FROM {ident(internal(name, 'rows'))} ORDER BY cell"
        else:
            query = (f"SELECT * EXCLUDE ({', '.join(hidden)}) FROM {ident(stored_table(con, name))} "
                     f"ORDER BY {hidden[0]}")
        table = con.sql(query).to_arrow_table()
    except Exception as exc:  # duckdb.CatalogException and friends
        raise ReleaseFormatError(
            f"{name!r} is not a polars-dp release registered in this connection: {exc}"
        ) from None
    return attach_metadata(table, dict(rows))


def read_release(con: Any, name: str, *, unverified: bool = False) -> Release:
    """The release registered as ``name`` (inverse of ``release.to_duckdb(con, name)``), verified
    as :func:`polars_dp.read_release` (``unverified=True`` for one registered from an
    unverified release)."""
    return read_arrow_release(to_arrow(con, name), unverified=unverified)


__all__ = ["BATCH_WHERE", "NO_CHECKS", "Registered", "Registration", "check_free", "checked_alpha",
           "check_identifier", "comment", "ident", "in_transaction", "internal", "literal", "metadata_table",
           "number", "query_checks", "read_release", "register", "render", "sql_dir", "stored_table",
           "to_arrow", "view"]
