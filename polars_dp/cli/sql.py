"""``polars-dp sql release.parquet "SELECT ..."``: query a release with DuckDB SQL."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys

import duckdb
import polars as pl
import pyarrow as pa

import polars_dp as pdp
from polars_dp.cli.common import BadInput, check_output, open_release, write_frame

EXAMPLES = """\
examples:
  polars-dp sql release.parquet "SELECT sum(count) FROM release WHERE age BETWEEN 20 AND 30"
  polars-dp sql release.parquet --name people \\
      "SELECT * FROM people_range_count(age_lo := 20, age_hi := 30, occupation := 'Sales')"
  polars-dp sql tree.parquet "SELECT * FROM release_range_count(lon_lo := -75, lon_hi := -73)"
  polars-dp sql release.parquet "SELECT * FROM release" -o cells.csv

The release is registered under --name (default: release): a table with one row per cell (grid),
leaf (spatial) or node and next symbol (sequence model), and NAME_meta with its metadata; grid and
spatial releases also get the table macros NAME_range_count(...) and NAME_range_counts('queries').
Everything runs in an in-memory database; nothing is written unless you give -o.
"""

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


def run(args: argparse.Namespace) -> int:
    if not _IDENTIFIER.match(args.name):
        raise BadInput(f"--name {args.name!r}: use letters, digits and _ (not starting with a digit)")
    if args.output:
        check_output(args.output, formats=("parquet", "csv", "tsv", "ipc", "ndjson"), what="output")
    release = open_release(args.release)
    con = duckdb.connect()
    if isinstance(release, pdp.SequenceRelease):  # no macros: its node table and its metadata
        con.from_arrow(release.to_arrow()).create(args.name)
        meta = {k: v if isinstance(v, str) else json.dumps(v) for k, v in release.metadata().items()}
        table = pa.table({"key": list(meta), "value": list(meta.values())})
        con.from_arrow(table).create(f"{args.name}_meta")
    else:
        release.to_duckdb(con, args.name)
    try:
        rel = con.sql(args.query)
    except duckdb.CatalogException as exc:
        names = [args.name, f"{args.name}_meta"]
        if not isinstance(release, pdp.SequenceRelease):
            names += [f"{args.name}_range_count(...)", f"{args.name}_range_counts('queries')"]
        first = str(exc).splitlines()[0]
        raise BadInput(f"{first} (this release is registered as {', '.join(names)})") from exc
    if rel is None:  # a statement without a result
        return 0
    result = pl.from_arrow(rel.arrow())
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
