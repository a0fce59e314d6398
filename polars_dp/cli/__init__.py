"""Command line: ``polars-dp <command>`` (or ``python -m polars_dp <command>``).

Commands: ``release`` (a release from a data file and a TOML domain file), ``info``,
``query``, ``sql``, ``plot``, ``demo``, ``ledger`` (a budget ledger file), ``card`` (a
release's card) and ``report`` (an HTML page of a release);
``polars-dp <command> --help`` shows an example of each.  Exit codes: 0 success, 2 bad input
(one line on stderr, nothing written), 1 any other failure.  The commands use only the public
API (``import polars_dp as pdp``); each is a module whose ``register`` adds its options and whose
``run(args)`` runs it.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
import traceback
from collections.abc import Iterator
from typing import NoReturn

import duckdb
import polars as pl

import polars_dp as pdp
from polars_dp.cli import card, demo, info, ledger, plot, query, release, report, sql
from polars_dp.cli.common import BadInput, Failure, one_line

DESCRIPTION = "Differentially private synopses from the command line."
EPILOG = """\
examples:
  polars-dp release people.parquet --spec domain.toml -o release.parquet
  polars-dp info release.parquet
  polars-dp query release.parquet --where "age=20..29" --where "occupation=Sales" --std
  polars-dp sql release.parquet "SELECT sum(count) FROM release WHERE age_lo >= 20 AND age_hi <= 29"
  polars-dp plot release.parquet -o figure.png --x age
  polars-dp demo
  polars-dp ledger budget.ledger
  polars-dp card release.parquet --json
  polars-dp report release.parquet -o release.html

exit codes: 0 ok, 2 bad input (one line on stderr, nothing written), 1 other errors.
"""


#: The commands that read a release file (each takes RELEASE.parquet first and ``--unverified`` last).
READERS = ("info", "query", "sql", "plot", "card", "report")
#: Errors the user fixes by changing the input (exit code 2).
BAD_INPUT = (BadInput, pdp.PolarsDPError, pl.exceptions.PolarsError, duckdb.Error, FileNotFoundError,
             PermissionError, IsADirectoryError, NotADirectoryError)


class Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors (exit code 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-q", "--quiet", action="store_true",
                        help="hide progress messages and summaries (results, warnings, errors still print)")
    common.add_argument("--traceback", action="store_true",
                        help="on an error, print the Python traceback (for bug reports)")
    parser = Parser(prog="polars-dp", description=DESCRIPTION, epilog=EPILOG,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"polars-dp {pdp.__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)
    reader = argparse.ArgumentParser(add_help=False, parents=[common])
    reader.add_argument("release", metavar="RELEASE.parquet")
    for module in (release, info, query, sql, plot, demo, ledger, card, report):
        name = module.__name__.rpartition(".")[2]
        module.register(sub, reader if name in READERS else common)  # the command's own options
        sub.choices[name].set_defaults(func=module.run)
    for name in READERS:
        sub.choices[name].add_argument(
            "--unverified", action="store_true",
            help="read a release that has no checksum (written by polars-dp 0.1.0, or with its checksum "
                 "removed): nothing vouches for its values; the output says so")
    return parser


class Terminated(BaseException):
    """SIGTERM, raised where the process is so that every ``finally`` (and the atomic writer's
    clean-up of its temporary file) runs, as for Ctrl-C."""


def _raise_terminated(signum: int, frame: object) -> NoReturn:
    raise Terminated


@contextlib.contextmanager
def _sigterm_as_exception() -> Iterator[None]:
    """Turn SIGTERM into :class:`Terminated` while a command runs (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns the exit code (0 ok, 2 bad input, 1 other errors, 130 / 143
    interrupted by Ctrl-C / SIGTERM, nothing left half-written)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors
        return exc.code if isinstance(exc.code, int) else 1
    try:
        with _sigterm_as_exception():
            return args.func(args)
    except KeyboardInterrupt:
        print("polars-dp: interrupted", file=sys.stderr)
        return 130
    except Terminated:
        print("polars-dp: terminated", file=sys.stderr)
        return 128 + signal.SIGTERM
    except BrokenPipeError:  # e.g. piped into `head`
        return 0
    except Exception as exc:
        if args.traceback:
            traceback.print_exc()
        bad = isinstance(exc, BAD_INPUT)
        kind = "error" if bad or isinstance(exc, Failure) else f"error ({type(exc).__name__})"
        print(f"polars-dp {args.command}: {kind}: {one_line(exc)}", file=sys.stderr)
        return 2 if bad else 1


__all__ = ["build_parser", "main"]
