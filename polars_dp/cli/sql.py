"""``polars-dp sql release.parquet "SELECT ..."``: query a release with DuckDB SQL."""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from typing import cast

import duckdb
import polars as pl

import polars_dp as pdp
from polars_dp.cli.common import BadInput, check_output, one_line, open_release, scan, write_frame

EXAMPLES = """\
examples:
  polars-dp sql release.parquet "SELECT sum(count) FROM release WHERE age_lo >= 20 AND age_hi <= 29"
  polars-dp sql --script release.parquet people > people.sql   # then: duckdb my.duckdb -c ".read people.sql"
  polars-dp sql release.parquet --name people \\
      "SELECT * FROM people_range_count(age_lo := 20, age_hi := 29, occupation := 'Sales')"
  polars-dp sql tree.parquet "SELECT * FROM release_range_count(lon_lo := -75, lon_hi := -73)"
  polars-dp sql release.parquet "SELECT * FROM release" -o cells.csv
  polars-dp sql release.parquet --queries q.csv "SELECT * FROM release_range_counts('queries')"

A binned attribute (age in bins of 5 years) has the columns age_lo and age_hi, the first and last
value of each bin (a float domain's bins are [age_lo, age_hi)); single values keep the name (age).
The release is registered under --name (default: release) as release.to_duckdb(con, NAME) does: a
view with one row per cell (grid), leaf (spatial) or node and next symbol (sequence model), NAME_meta
with its metadata, and table macros: NAME_range_count(...) and NAME_range_counts('queries') for grid
and spatial releases, NAME_frequency([...]) and NAME_frequencies('queries') (plus the view
NAME_nodes) for sequence models.

The shell only reads the release.  It runs in an in-memory database locked once the release is
registered: no file or network access (read_csv, read_text, glob, COPY, ATTACH, INSTALL fail), no
extension installed or loaded, no setting changed (profiling, logging); --queries FILE loads a file
as the table queries.  Statements that read run (SELECT, DESCRIBE, SHOW, EXPLAIN, PRAGMA, CALL;
CREATE of a new table, view or macro); INSERT, UPDATE, DELETE, DROP, ALTER, COPY, CREATE OR
REPLACE and the like are refused.  Several statements (separated by ;) show each result in turn; a
result is written only with -o (atomically).
"""

#: Statement types the shell runs: reads, and the creation of new objects (a queries table).
#: Everything else (INSERT, UPDATE, DELETE, DROP, ALTER, COPY, EXPORT, ATTACH, INSTALL / LOAD,
#: PREPARE / EXECUTE, ...) would change the registered release or reach outside the database.
_READING = {"SELECT", "EXPLAIN", "PRAGMA", "CALL", "SET", "VARIABLE_SET", "TRANSACTION", "CREATE", "MULTI"}
#: Statement types whose rows are shown (a CREATE TABLE AS answers its row count: not shown).
_SHOWN = {"SELECT", "EXPLAIN", "PRAGMA", "CALL", "MULTI"}
_REPLACE = re.compile(r"^\s*CREATE\s+OR\s+REPLACE\b", re.IGNORECASE)

#: Applied once the release is registered, in this order (the lock last): no file system or
#: network access, no extension installed or loaded behind the query's back, no setting changed.
LOCK = ("SET enable_external_access = false", "SET autoinstall_known_extensions = false",
        "SET autoload_known_extensions = false", "SET lock_configuration = true")

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _rows_shown(text: str) -> int:
    """``--max-rows``: a whole number of rows >= 1."""
    try:
        rows = int(text)
    except ValueError:
        rows = 0
    if rows < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of rows >= 1")
    return rows


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "sql", parents=[common], epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
        help="run read-only DuckDB SQL on a release registered as a view and range-count macros",
        description="Open an in-memory DuckDB database, register the release under --name, lock the "
                    "database (no file, network, extension or setting) and run the SQL statements.  "
                    "Prints each result as a table (or CSV / JSON), or writes it with -o.")
    p.add_argument("query", metavar="SQL")
    p.add_argument("--name", default="release", help="table name of the release (default: release)")
    form = p.add_mutually_exclusive_group()  # one form for the result
    form.add_argument("-o", "--output", metavar="FILE", help="write the result (Parquet, CSV, ...)")
    form.add_argument("--csv", action="store_true", help="print the result as CSV")
    form.add_argument("--json", action="store_true", help="print the result as JSON rows")
    p.add_argument("--max-rows", type=_rows_shown, default=40,
                   help="rows shown in a printed table (default 40)")
    p.add_argument("--script", action="store_true",
                   help="print a SQL script that creates the release's tables and macros in any DuckDB "
                   "client from RELEASE.parquet (duckdb my.duckdb -c \".read release.sql\"); SQL is then "
                   "the NAME: polars-dp sql --script release.parquet people > people.sql")
    p.add_argument("--queries", metavar="FILE", help="a file (Parquet, CSV, ...) loaded as the table "
                   "queries, e.g. for NAME_range_counts('queries'): the shell itself reads no file")


def error_text(exc: BaseException) -> str:
    """DuckDB's error on one line; a macro called with wrong arguments keeps its signature."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    first = one_line(exc)
    for marker in ("Candidate macros:", "Candidate functions:"):
        if marker in lines:
            signatures = lines[lines.index(marker) + 1:]
            first = first.replace(" You might need to add explicit type casts.", "").rstrip(".")
            return f"{first}; call it as {' or '.join(signatures)}"
    return first


def reading_statements(con: duckdb.DuckDBPyConnection, query: str) -> list[tuple[str, str]]:
    """The statements of ``query`` as (type, text); BadInput for one that would write (see the help)."""
    try:
        statements = [(s.type.name, s.query) for s in con.extract_statements(query)]
    except duckdb.Error as exc:
        raise BadInput(error_text(exc)) from None
    except ValueError as exc:  # a statement type this DuckDB client does not know
        raise BadInput(f"a statement of unknown type ({exc}); polars-dp sql runs only statements that "
                       "read") from None
    if not statements:
        raise BadInput("the SQL holds no statement; give a query such as 'SELECT * FROM release'")
    for k, (kind, text) in enumerate(statements, 1):
        if kind not in _READING or _REPLACE.match(text):
            words = " ".join(text.split()[:3 if _REPLACE.match(text) else 1]).upper()
            raise BadInput(f"{words} (statement {k}) would change the registered release or reach outside "
                           "the database, but polars-dp sql only reads; write a query's result with -o FILE")
    return statements


def load_queries(con: duckdb.DuckDBPyConnection, source: str) -> None:
    """The file ``source`` (``--queries``, read by Polars) as the table ``queries``."""
    frame = scan(source, what="--queries").collect()
    con.register("__pdp_queries_source", frame.to_arrow())
    try:
        con.execute("CREATE TABLE queries AS SELECT * FROM __pdp_queries_source")
    except duckdb.CatalogException as exc:
        raise BadInput(f"--queries: {one_line(exc)}; register the release under another --name") from exc
    finally:
        con.unregister("__pdp_queries_source")


def _results(con: duckdb.DuckDBPyConnection, statements: list[tuple[str, str]], release: pdp.Release,
             name: str) -> list[tuple[str, pl.DataFrame]]:
    """Each statement run in turn; the rows of those that return rows (:data:`_SHOWN`)."""
    results = []
    for k, (kind, statement) in enumerate(statements, 1):
        where = f" (statement {k})" if len(statements) > 1 else ""
        try:
            rel = con.sql(statement)
            table = None if rel is None or kind not in _SHOWN else rel.to_arrow_table()
            if table is not None and table.num_columns:
                text = " ".join(statement.split()).rstrip(";")
                results.append((text, cast(pl.DataFrame, pl.from_arrow(table))))
        except duckdb.CatalogException as exc:
            raise BadInput(f"{one_line(exc)}{where} (this release is registered as "
                           f"{', '.join(release.sql_names(name))})") from exc
        except (duckdb.PermissionException, duckdb.InvalidInputException) as exc:
            text = error_text(exc)
            if isinstance(exc, duckdb.PermissionException) or "configuration has been locked" in text:
                text += "; polars-dp sql reads only the registered release"
            raise BadInput(text + where) from exc
        except duckdb.Error as exc:
            raise BadInput(error_text(exc) + where) from exc
    return results


def script(args: argparse.Namespace) -> int:
    """``--script``: ``release.sql_script(RELEASE, NAME)`` on stdout."""
    name = args.query
    if not _IDENTIFIER.match(name):
        raise BadInput(f"--script takes the release's NAME after the file, got {name!r}: use letters, digits "
                       "and _ (not starting with a digit)")
    if args.output or args.queries or args.csv or args.json:
        raise BadInput("--script prints the SQL script on stdout (redirect it: > release.sql) and takes no "
                       "-o, --queries, --csv or --json")
    release = open_release(args.release, args.unverified)
    try:
        text = release.sql_script(args.release, name)
    except (pdp.ParameterError, pdp.ReleaseFormatError) as exc:
        raise BadInput(f"--script: {exc}") from None
    sys.stdout.write(text)
    return 0


def run(args: argparse.Namespace) -> int:
    if args.script:
        return script(args)
    if not _IDENTIFIER.match(args.name):
        raise BadInput(f"--name {args.name!r}: use letters, digits and _ (not starting with a digit)")
    if args.output:
        check_output(args.output, formats=("parquet", "csv", "tsv", "ipc", "ndjson"), what="output")
    release = open_release(args.release, args.unverified)
    con = duckdb.connect()
    statements = reading_statements(con, args.query)
    release.to_duckdb(con, args.name)
    if args.queries:
        load_queries(con, args.queries)
    for statement in LOCK:  # no file, network, extension or setting change from now on
        con.execute(statement)
    results = _results(con, statements, release, args.name)
    if not results:
        return 0
    if len(results) > 1 and (args.output or args.csv or args.json):
        flag = "-o" if args.output else "--csv" if args.csv else "--json"
        raise BadInput(f"{len(results)} statements return rows but {flag} takes one result; run them one "
                       "at a time (or drop the flag to print every result)")
    result = results[0][1]
    if args.output:
        write_frame(result, args.output)
        if not args.quiet:
            print(f"wrote {result.height:,} rows to {args.output}", file=sys.stderr)
    elif args.csv:
        sys.stdout.write(result.write_csv())
    elif args.json:
        sys.stdout.write(result.write_json() + "\n")
    else:
        _print_all(results, args.max_rows)
    return 0


def _print_all(results: list[tuple[str, pl.DataFrame]], max_rows: int) -> None:
    """Print each result as a table, after its statement when there are several."""
    width = shutil.get_terminal_size((160, 24)).columns
    with pl.Config(tbl_rows=max_rows, tbl_cols=-1, fmt_str_lengths=60, tbl_width_chars=width):
        for k, (statement, result) in enumerate(results):
            if len(results) > 1:
                print(("\n" if k else "") + f"-- {' '.join(statement.split())}")
            print(result)
