"""``polars-dp release DATA --spec domain.toml -o release.parquet``: make and write a release."""

from __future__ import annotations

import argparse
import glob
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

import polars_dp as pdp
from polars_dp.cli.common import (
    BadInput,
    Messages,
    check_output,
    file_format,
    human_size,
    one_line,
    scan,
)
from polars_dp.cli.spec import load_spec
from polars_dp.ledger import exact_text

EXAMPLES = """\
examples:
  polars-dp release people.parquet --spec examples/specs/privelet.toml -o people_release.parquet
  polars-dp release "points/*.parquet" --spec examples/specs/privtree.toml -o tree.parquet
  polars-dp release sessions.csv --spec examples/specs/privtree_sequences.toml -o pst.parquet
  polars-dp release people.parquet --spec domain.toml --check     # validate only; reads no rows
  polars-dp release "lake/*.parquet" --spec examples/specs/basic.toml -o r.parquet --engine duckdb
  polars-dp release people.parquet --spec domain.toml -o r.parquet --ledger budget.ledger \\
      --dataset people --total 1.0      # refused if it would pass the dataset's total

The domain file (TOML) declares the mechanism, epsilon, neighbours, the columns and their public
domain; see examples/specs/ and the README's "Command line" section.  Each release of the same data
spends its epsilon again: --ledger FILE --dataset NAME charges it to a budget file that outlives the
process (polars-dp ledger FILE shows it).
"""


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "release", parents=[common], epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
        help="release DATA as declared by a TOML domain file and write it to Parquet",
        description="Read DATA once (lazily), release it with the mechanism of the domain file and write "
                    "the release atomically to Parquet.  Prints a summary.")
    p.add_argument("data", metavar="DATA",
                   help="Parquet / CSV / TSV / IPC / NDJSON file or glob (quote globs)")
    p.add_argument("--spec", required=True, metavar="DOMAIN.toml", help="the domain file")
    p.add_argument("-o", "--output", metavar="RELEASE.parquet", help="where to write the release")
    p.add_argument("--format", choices=["parquet", "csv", "tsv", "ipc", "ndjson"],
                   help="format of DATA (default: from its extension)")
    p.add_argument("--engine", choices=["polars", "duckdb"], default="polars",
                   help="where the rows are counted: Polars (streaming, default) or DuckDB (out of core, "
                        "within --memory-limit); grid and spatial mechanisms only")
    p.add_argument("--memory-limit", default="1GB", metavar="SIZE",
                   help="DuckDB's memory_limit with --engine duckdb (default 1GB; it spills beyond)")
    p.add_argument("--check", action="store_true",
                   help="validate the domain file and DATA's columns, then stop (no rows read, no release)")
    p.add_argument("--seed", type=int, default=None,
                   help="reproducible noise, for tests only: anyone who knows the seed can remove the noise")
    p.add_argument("--ledger", metavar="FILE",
                   help="a budget ledger file (created if absent): the release is charged to --dataset "
                        "before DATA is read, and refused if it would pass the dataset's total")
    p.add_argument("--dataset", metavar="NAME", help="the dataset of --ledger that DATA is")
    p.add_argument("--total", metavar="EPS",
                   help="the dataset's total epsilon, fixed by its first charge (needed then; later it must "
                        "match); exact decimals such as 0.3 are taken exactly")


def _in_domain_file_terms(message: str) -> str:
    """Library hints name keyword arguments (``key='a' ... or 'b'``) and declarations
    (``Ordinal('x', lo, hi, width=w)``); say what to write in a domain file instead."""
    for key in ("nulls", "on_out_of_domain"):
        for first, second in re.findall(rf"\b{key}='(\w+)'(?:[^'\[;]*?\bor '(\w+)')?", message):
            choices = " or ".join(f'{key} = "{v}"' for v in (first, second) if v)
            message += f" [domain file: add {choices} under [options]]"
    declared = r"Ordinal\('([^']*)', ([^,]+), ([^,]+), width=([^)]+)\)"
    for column, lo, hi, width in re.findall(declared, message):
        message += f" [domain file: lo = {lo}, hi = {hi}, width = {width} in the attribute of {column!r}]"
    return message


def duckdb_relation(source: str, fmt: str | None, spec: Any, memory_limit: str) -> Any:
    """DATA as a DuckDB relation (Parquet or CSV/TSV, file or glob), counted inside DuckDB."""
    if spec.shape == "sequences":
        raise BadInput("--engine duckdb counts grid and spatial releases; sequence models read their "
                       "sequences with Polars (drop --engine)")
    fmt = file_format(sorted(glob.glob(source))[0] if glob.has_magic(source) else source, fmt)
    if fmt not in ("parquet", "csv", "tsv"):
        raise BadInput(f"--engine duckdb reads Parquet or CSV/TSV, not {fmt}")
    try:
        con = duckdb.connect(config={"memory_limit": memory_limit})
    except duckdb.Error as exc:
        raise BadInput(f"--memory-limit {memory_limit!r}: {one_line(exc)}") from None
    if fmt == "parquet":
        return con.read_parquet(source)
    return con.read_csv(source, sep="\t" if fmt == "tsv" else ",")


def accountant(args: argparse.Namespace, neighbours: str, privacy_unit: pdp.Rows | None
               ) -> pdp.Accountant | None:
    """The accountant of ``--ledger FILE --dataset NAME [--total EPS]`` protecting the domain
    file's individual (``[privacy_unit]``), or None without them."""
    if args.ledger is None and args.dataset is None and args.total is None:
        return None
    if args.ledger is None or args.dataset is None:
        raise BadInput("give --ledger FILE and --dataset NAME together (and --total EPS for a new dataset)")
    if args.seed is not None:
        raise BadInput("a release charged to a ledger cannot be seeded: a seed fixes the noise, so it "
                       "protects nothing and composes with nothing; drop --seed")
    ledger = pdp.Ledger(args.ledger)
    total = args.total
    if total is None:
        known = ledger.dataset(args.dataset)
        if known is None:
            raise BadInput(f"dataset {args.dataset!r} has no charge in {args.ledger} yet: give --total EPS, "
                           "its total budget (fixed by this first charge)")
        total = known.total
    return pdp.Accountant(total=total, neighbours=neighbours, ledger=ledger, dataset=args.dataset,
                          privacy_unit=privacy_unit)


def _has_no_rows(frame: pl.LazyFrame) -> bool:
    """Whether DATA has no rows (asked only to explain an error that has already happened)."""
    try:
        return frame.head(1).collect().height == 0
    except pl.exceptions.PolarsError:
        return False


def run(args: argparse.Namespace) -> int:
    msg = Messages(args.quiet)
    spec = load_spec(args.spec)
    if args.output is None and not args.check:
        raise BadInput("give -o RELEASE.parquet (or --check to only validate)")
    if args.output is not None:
        out = check_output(args.output, what="output")
        if out.suffix.lower() not in (".parquet", ".pq"):
            raise BadInput(f"output {args.output!r}: a release is written as Parquet; use a .parquet name")
    frame = scan(args.data, args.format)
    if args.output is not None:
        inputs = glob.glob(args.data) if glob.has_magic(args.data) else [args.data]
        if Path(args.output).resolve() in {Path(p).resolve() for p in inputs}:
            raise BadInput(f"output {args.output!r} is the input DATA; writing it would replace the "
                           "private data")
    try:
        schema = frame.collect_schema()
    except pl.exceptions.PolarsError as exc:
        raise BadInput(f"cannot read {args.data}: {one_line(exc)}") from None
    names = schema.names()
    missing = [c for c in spec.input_columns if c not in names]
    if missing and not names:
        raise BadInput(f"{args.data} has no columns; give a file with the declared columns "
                       f"{', '.join(spec.input_columns)}")
    if missing:
        raise BadInput(f"column {missing[0]!r} (declared at {spec.where(missing[0])}) is not in {args.data}; "
                       f"its columns: {', '.join(names)}")
    if spec.separator is not None and schema[spec.column] != pl.String:
        raise BadInput(f"column {spec.column!r} of {args.data} has type {schema[spec.column]}; separator "
                       f"(at {spec.where(spec.column)}) is for text columns: remove it")
    plan = f"{spec.mechanism} (epsilon={spec.epsilon:g}, neighbours={spec.effective_neighbours})"
    acct = accountant(args, spec.effective_neighbours, spec.privacy_unit)
    if args.check:
        if not args.quiet:
            print(f"ok: {args.spec} declares {plan} over {spec.domain_text()}; {args.data} has the "
                  f"columns {', '.join(spec.input_columns)}")
            if acct is not None:
                print(f"  budget: {exact_text(acct.remaining_exact)} of {exact_text(acct.total_exact)} left "
                      f"for dataset {args.dataset!r}")
        return 0
    if args.seed is not None:
        msg.warn(f"--seed {args.seed} makes the noise reproducible: anyone who knows the seed can remove "
                 "it. Never publish this release.")
    data = frame
    if args.engine == "duckdb":
        data = duckdb_relation(args.data, args.format, spec, args.memory_limit)
    msg.stage(f"releasing {args.data} with {plan} over {spec.size_text()} (counting in {args.engine})")
    t0 = time.perf_counter()
    try:
        release = spec.run(data, seed=args.seed, progress=not args.quiet, accountant=acct)
    except pl.exceptions.PolarsError as exc:
        raise BadInput(f"cannot read {args.data}: {one_line(exc)}") from None
    except pdp.ParameterError as exc:
        if "has type String" in str(exc) and _has_no_rows(frame):  # a CSV header: every type is String
            raise BadInput(f"{args.data} has a header but no rows, so its column types are unknown; add "
                           "rows, or give a Parquet file with typed columns") from None
        raise BadInput(spec.locate(str(exc), exc.parameter)) from None
    except pdp.PolarsDPError as exc:
        message = _in_domain_file_terms(str(exc))
        if spec.separator is not None and "null symbol" in message:
            message += " (with separator, a piece of text that is not an integer reads as null)"
        elif spec.separator is None and "whose symbols are not integers" in message:
            message += (" (a text column of integer symbols is split by separator = \" \" in the domain "
                        "file)")
        raise BadInput(message) from None
    secs = time.perf_counter() - t0
    release.annotate("seeded", args.seed is not None)  # recorded so that `info` can tell
    msg.stage(f"writing {args.output}")
    path = release.write_parquet(args.output)
    if not args.quiet:
        noise = release.noise_text()
        print(f"wrote {path} ({human_size(os.path.getsize(path))})")
        print(f"  mechanism    {release.mechanism}")
        print(f"  epsilon      {release.epsilon:g} (neighbours: {release.neighbours})")
        unit = release.plan.privacy_unit
        if unit.truncates:
            print(f"  privacy unit {unit.id_column!r}, at most {unit.max_per} row(s) each")
        print(f"  size         {release.size_text()}")
        if noise is not None:
            print(f"  noise scale  {noise}")
        print(f"  time         {secs:.2f} s")
        if acct is not None:
            print(f"  budget       {exact_text(acct.spent_exact)} of {exact_text(acct.total_exact)} spent on "
                  f"dataset {args.dataset!r} "
                  f"({args.ledger})")
        sys.stdout.flush()
    return 0
