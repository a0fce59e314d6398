"""``polars-dp sql release.parquet "SELECT ..."``: query a release with DuckDB SQL."""

from __future__ import annotations

import argparse
import re
import shutil
import sys

import duckdb
import polars as pl

import polars_dp as pdp
from polars_dp.cli.common import BadInput, check_output, one_line, open_release, write_frame

EXAMPLES = """\
examples:
  polars-dp sql release.parquet "SELECT sum(count) FROM release WHERE age_lo >= 20 AND age_hi <= 29"
  polars-dp sql release.parquet --name people \\
      "SELECT * FROM people_range_count(age_lo := 20, age_hi := 29, occupation := 'Sales')"
  polars-dp sql tree.parquet "SELECT * FROM release_range_count(lon_lo := -75, lon_hi := -73)"
  polars-dp sql release.parquet "SELECT * FROM release" -o cells.csv

A binned attribute (age in bins of 5 years) has the columns age_lo and age_hi, the first and last
value of each bin (a float domain's bins are [age_lo, age_hi)); single values keep the name (age).
The release is registered under --name (default: release) as release.to_duckdb(con, NAME) does: a
table with one row per cell (grid), leaf (spatial) or node and next symbol (sequence model), NAME_meta
with its metadata, and table macros: NAME_range_count(...) and NAME_range_counts('queries') for grid
and spatial releases, NAME_frequency([...]) and NAME_frequencies('queries') (plus the table
NAME_nodes) for sequence models.  Everything runs in an in-memory database and only reads: statements
that would write or fetch files (COPY ... TO, EXPORT DATABASE, ATTACH, INSTALL / LOAD) are refused,
and a result is written only with -o (atomically).
"""

#: Statement types that write or fetch files (how the help names them); COPY is allowed only as
#: COPY table FROM file.
_WRITING = {"COPY": "COPY ... TO", "COPY_DATABASE": "COPY FROM DATABASE", "EXPORT": "EXPORT DATABASE",
            "ATTACH": "ATTACH", "LOAD": "INSTALL / LOAD"}
_COPY_FROM = re.compile(r"^\s*COPY\s+[\w.\"]+(\s*\([^)]*\))?\s+FROM\b", re.IGNORECASE)

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "sql", parents=[common], epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
        help="run DuckDB SQL on a release registered as a table and range-count macros",
        description="Open an in-memory DuckDB database, register the release under --name and run the "
                    "SQL query.  Prints the result as a table (or CSV / JSON), or writes it with -o.")
    p.add_argument("release", metavar="RELEASE.parquet")
    p.add_argument("query", metavar="SQL")
    p.add_argument("--name", default="release", help="table name of the release (default: release)")
    p.add_argument("-o", "--output", metavar="FILE", help="write the result (Parquet, CSV, ...)")
    p.add_argument("--csv", action="store_true", help="print the result as CSV")
    p.add_argument("--json", action="store_true", help="print the result as JSON rows")
    p.add_argument("--max-rows", type=int, default=40, help="rows shown in a printed table (default 40)")
    p.set_defaults(func=run)


def registered_names(release: pdp.Release, name: str) -> list[str]:
    """What ``release.to_duckdb(con, name)`` creates, as a user calls it."""
    if isinstance(release, pdp.SequenceRelease):
        return [name, f"{name}_nodes", f"{name}_meta", f"{name}_frequency([...])",
                f"{name}_frequencies('queries')"]
    return [name, f"{name}_meta", f"{name}_range_count(...)", f"{name}_range_counts('queries')"]


def error_text(exc: BaseException) -> str:
    """DuckDB's error on one line; a macro called with wrong arguments keeps its signature."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    first = lines[0]
    for marker in ("Candidate macros:", "Candidate functions:"):
        if marker in lines:
            signatures = lines[lines.index(marker) + 1:]
            first = first.replace(" You might need to add explicit type casts.", "").rstrip(".")
            return f"{first}; call it as {' or '.join(signatures)}"
    return first


def _refuse_writes(con: duckdb.DuckDBPyConnection, query: str) -> None:
    """BadInput for a statement that would write or fetch a file (see the help)."""
    try:
        statements = con.extract_statements(query)
    except duckdb.Error as exc:
        raise BadInput(error_text(exc)) from None
    for k, statement in enumerate(statements, 1):
        kind = statement.type.name
        if kind in _WRITING and not (kind == "COPY" and _COPY_FROM.match(statement.query)):
            raise BadInput(f"{_WRITING[kind]} (statement {k}) would write or fetch a file but polars-dp sql "
                           "only reads; write a query's result with -o FILE instead")


def run(args: argparse.Namespace) -> int:
    if not _IDENTIFIER.match(args.name):
        raise BadInput(f"--name {args.name!r}: use letters, digits and _ (not starting with a digit)")
    if args.output:
        check_output(args.output, formats=("parquet", "csv", "tsv", "ipc", "ndjson"), what="output")
    release = open_release(args.release, args.unverified)
    con = duckdb.connect()
    _refuse_writes(con, args.query)
    release.to_duckdb(con, args.name)
    try:
        rel = con.sql(args.query)
        if rel is None:  # a statement without a result
            return 0
        result = pl.from_arrow(rel.arrow())
    except duckdb.CatalogException as exc:
        raise BadInput(f"{one_line(exc)} (this release is registered as "
                       f"{', '.join(registered_names(release, args.name))})") from exc
    except duckdb.Error as exc:
        raise BadInput(error_text(exc)) from exc
    if isinstance(result, pl.Series):  # pragma: no cover
        result = result.to_frame()
    if args.output:
        write_frame(result, args.output)
        if not args.quiet:
            print(f"wrote {result.height:,} rows to {args.output}", file=sys.stderr)
    elif args.csv:
        sys.stdout.write(result.write_csv())
    elif args.json:
        sys.stdout.write(result.write_json() + "\n")
    else:
        width = shutil.get_terminal_size((160, 24)).columns
        with pl.Config(tbl_rows=args.max_rows, tbl_cols=-1, fmt_str_lengths=60, tbl_width_chars=width):
            print(result)
    return 0
