"""``polars-dp query``: range counts (one from ``--where``, or a batch file) and sequence frequencies.

Answers are post-processing of the release: they cost no privacy budget.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from typing import Any

import polars as pl

import polars_dp as pdp
from polars_dp.cli.common import BadInput, check_output, one_line, open_release, scan, write_frame
from polars_dp.domains.queries import check_query_ids
from polars_dp.plans.grid import check_alpha

EXAMPLES = """\
examples:
  polars-dp query release.parquet                                   # the total count
  polars-dp query release.parquet --where "age=20..30" --where "occupation=Sales" --std
  polars-dp query release.parquet --where "age=..17"                # open range: age <= 17
  polars-dp query tree.parquet --where "lon=-75..-73" --where "lat=40..42"
  polars-dp query release.parquet --queries queries.csv -o answers.parquet --std --keep label
  polars-dp query pst.parquet --frequency "1 1 2" --frequency "3" --std   # sequence models
  polars-dp query pst.parquet --top-k 10

A --where is COLUMN=LO..HI (either side may be left out), COLUMN=VALUE, or for a nominal attribute
COLUMN=LABEL (a category or any group of its hierarchy).  A query file has <col>_lo / <col>_hi
columns (ordinal and spatial), <col> columns (nominal labels), optionally an id; a null or a
missing column means the whole domain.  For a sequence model it has a column `string`; the
answers add `extrapolated` (true: computed with the Markov assumption beyond the released nodes,
whose error the noise std does not cover), and a string longer than max_length counts 0.
"""

#: Releases answering query kind "range", for the type checker (the code asks ``query_kinds``).
RangeRelease = pdp.GridRelease | pdp.SpatialRelease
_INT = re.compile(r"^[+-]?\d+$")
#: A library range ``age=(20, 34)`` and option ``align='outer'``, as written on the command line.
_RANGE = re.compile(r"(\w+)=\(([^(),]+), ([^(),]+)\)")
_ALIGN = re.compile(r"align='(\w+)'")


def in_option_terms(message: str) -> str:
    """A query error in the command line's terms: ``age=20..34``, ``--align outer``."""
    return _ALIGN.sub(r"--align \1", _RANGE.sub(r"\1=\2..\3", message))


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "query", parents=[common], epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
        help="noisy range counts (with their noise std) or sequence frequencies from a release",
        description="Answer range-count queries from a release: one query from --where options, or a "
                    "batch from --queries.  Queries are post-processing: they spend no budget.")
    p.add_argument("-w", "--where", action="append", default=[], metavar="COL=LO..HI",
                   help="a predicate of the query (repeat for several columns)")
    p.add_argument("--queries", metavar="FILE", help="a batch of queries (Parquet, CSV, ...)")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="write the batch's answers here (Parquet, CSV, ...) instead of CSV on stdout")
    p.add_argument("--std", action="store_true", help="add the noise standard deviation of each answer")
    p.add_argument("--alpha", type=float, default=None, metavar="ALPHA",
                   help="add lo/hi, the interval holding the true count but for probability ALPHA "
                        "(e.g. 0.05) from the noise law alone; spatial releases: noise_lo/noise_hi, "
                        "the leaf noise only (as --std)")
    p.add_argument("--frequency", action="append", default=[], metavar="STRING",
                   help="sequence models: estimated occurrences of STRING (symbols separated by spaces "
                        "or commas; one-character symbols may be written together); an estimate "
                        "extrapolated by the Markov model is marked (its error is not in the noise std)")
    p.add_argument("--top-k", type=int, metavar="K", help="sequence models: the K most frequent strings")
    p.add_argument("--keep", action="append", default=[], metavar="COLUMN",
                   help="a column of --queries to copy to the answers as it is (besides id)")
    p.add_argument("--json", action="store_true", help="print answers as JSON")
    p.add_argument("--align", choices=("exact", "outer", "inner"), default="exact",
                   help="grid releases: an ordinal bound inside a bin is an error (exact, the default), "
                        "or the range is widened (outer) or narrowed (inner) to whole bins")
    p.add_argument("--density", choices=("uniform", "linear"), default=None,
                   help="spatial releases: points spread evenly inside a leaf crossing a query's "
                        "boundary (uniform, the default) or by a piecewise-linear density fitted to the "
                        "neighbouring leaves (linear; no error bar is stated then)")


# ---------------------------------------------------------------------- parsing --where
def _split(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip() or not value.strip():
        raise BadInput(f"--where {text!r}: write COLUMN=LO..HI, COLUMN=VALUE or COLUMN=LABEL")
    return name.strip(), value.strip()


def _number(text: str, where: str) -> int | float:
    text = text.strip()
    try:
        value = int(text) if _INT.match(text) else float(text)
    except ValueError:
        raise BadInput(f"--where {where!r}: {text!r} is not a number") from None
    if isinstance(value, float) and math.isnan(value):
        raise BadInput(f"--where {where!r}: NaN is not a bound")
    return value


def parse_range(value: str, where: str) -> tuple[int | float | None, int | float | None]:
    """``"20..30"`` -> (20, 30); ``"..30"`` -> (None, 30); ``"20.."`` -> (20, None); ``"25"`` -> (25, 25)."""
    if ".." not in value:
        v = _number(value, where)
        return v, v
    left, right = value.split("..", 1)
    lo = _number(left, where) if left.strip() else None
    hi = _number(right, where) if right.strip() else None
    if lo is not None and hi is not None and lo > hi:
        raise BadInput(f"--where {where!r}: lo > hi; write the range as LO..HI with LO <= HI")
    return lo, hi


def nominal_label(attribute: pdp.Nominal, value: str, where: str) -> Any:
    """The hierarchy label ``value`` names (labels may be strings, integers or booleans)."""
    labels = attribute.hierarchy.labels
    candidates: list[Any] = [value]
    if _INT.match(value):
        candidates.append(int(value))
    if value.lower() in ("true", "false"):
        candidates.append(value.lower() == "true")
    for c in candidates:
        if any(type(c) is type(label) and c == label for label in labels):
            return c
    close = [str(x) for x in labels if str(x).lower() == value.lower()]
    hint = f"; did you mean {close[0]!r}?" if close else ""
    shown = ", ".join(map(repr, labels[1:11])) + (", ..." if len(labels) > 11 else "")
    raise BadInput(f"--where {where!r}: {value!r} is not a label of {attribute.column!r}{hint} "
                   f"(labels: {shown})")


def range_predicates(release: RangeRelease, wheres: list[str]) -> dict[str, Any]:
    """The ``--where`` options as keyword arguments of ``release.range_count``: a label of a nominal
    attribute, else ``(lo, hi)`` with an open side standing for the domain's own bound."""
    domain, word = release.range_domain(), release.column_word
    article = "an" if word[0] in "aeiou" else "a"
    preds: dict[str, Any] = {}
    for text in wheres:
        name, value = _split(text)
        if name not in domain:
            raise BadInput(f"--where {text!r}: {name!r} is not {article} {word} of this release; {word}s: "
                           f"{', '.join(release.columns)}")
        if name in preds:
            raise BadInput(f"--where {text!r}: {name!r} is restricted twice; give one range per {word}")
        bounds = domain[name]
        if isinstance(bounds, pdp.Nominal):
            if ".." in value:
                raise BadInput(f"--where {text!r}: {name!r} is nominal; give one label (a category or a "
                               "group of its hierarchy), not a range")
            preds[name] = nominal_label(bounds, value, text)
        else:
            lo, hi = parse_range(value, text)
            preds[name] = (bounds[0] if lo is None else lo, bounds[1] if hi is None else hi)
    return preds


def sequence_string(model: pdp.SequenceRelease, text: str, option: str = "--frequency") -> list[Any]:
    """``"1 1 2"`` / ``"1,1,2"`` -> [1, 1, 2]; ``"abc"`` -> ["a", "b", "c"] for one-character symbols."""
    parts = [p for p in re.split(r"[\s,]+", text.strip()) if p]
    if not parts:
        raise BadInput(f"{option} {text!r}: give at least one symbol")
    alphabet = model.alphabet
    if isinstance(alphabet[0], int):
        bad = [p for p in parts if not _INT.match(p)]
        if bad:
            raise BadInput(f"{option} {text!r}: {bad[0]!r} is not a symbol; the alphabet holds integers")
        return [int(p) for p in parts]
    if len(parts) == 1 and parts[0] not in alphabet:
        return list(parts[0])  # one-character symbols written together
    return parts


# ---------------------------------------------------------------------- answering
def _std_value(std: float | None) -> float | None:
    """One convention for a missing error bar (a post-processed release, AG, Privelet*): None, JSON null."""
    return None if std is None or math.isnan(std) else float(std)


def _print_answer(count: float, std: float | None, as_json: bool, asked: bool,
                  interval: tuple[float | None, float | None] | None = None, *,
                  keys: tuple[str, str] = ("lo", "hi")) -> None:
    """``asked``: --std was given (a missing error bar then prints as null / "no std");
    ``interval``: --alpha was given (``(None, None)``: post-processed, no interval);
    ``keys``: the interval columns of ``range_counts``; ``noise_lo`` / ``noise_hi`` for an
    interval covering the leaf noise only (a spatial release)."""
    std = _std_value(std)
    noise_only = keys[0].startswith("noise_")
    if as_json:
        extra = {} if interval is None else {keys[0]: interval[0], keys[1]: interval[1]}
        print(json.dumps({"count": count} | ({"std": std} if asked else {}) | extra))
        return
    text = f"{count:.1f}"
    if asked:
        text += " (no std: the release states no error bar)" if std is None else f" ± {std:.1f}"
    if interval is not None:
        if interval[0] is None:
            text += " [no interval: no error bar stated]" if noise_only else " [no interval: post-processed]"
        else:
            text += f" [{interval[0]:.1f}, {interval[1]:.1f}]" + (" (leaf noise only)" if noise_only else "")
    print(text)


def _alpha(args: argparse.Namespace) -> dict[str, Any]:
    """``alpha=`` for range counts (a spatial release's interval is its leaf noise's)."""
    if args.alpha is None:
        return {}
    try:
        check_alpha(args.alpha)
    except pdp.ParameterError as exc:
        raise BadInput(f"--alpha: {exc}") from None
    return {"alpha": args.alpha}


#: What a sequence answer marked extrapolated prints (as the spatial "(leaf noise only)").
EXTRAPOLATED_NOTE = "(extrapolated by the Markov model: its error is not in the noise std)"


def _print_sequences(frame: pl.DataFrame, std: bool, as_json: bool) -> None:
    """Print the rows of a ``frequency_table`` / ``top_k`` frame: string, count, std if asked,
    extrapolated."""
    rows = frame.select("string", "count", *(["std"] if std else []), "extrapolated").to_dicts()
    for row in rows:
        if std:
            row["std"] = _std_value(row["std"])
    if as_json:
        print(json.dumps(rows))
        return
    for row in rows:
        sd = "" if "std" not in row else ("  ± n/a" if row["std"] is None else f" ± {row['std']:.1f}")
        note = f"  {EXTRAPOLATED_NOTE}" if row["extrapolated"] else ""
        print(f"{row['count']:>12.1f}{sd}  {' '.join(map(str, row['string']))}{note}")


def _sequence(args: argparse.Namespace, model: pdp.SequenceRelease) -> int:
    if args.where:
        raise BadInput("a sequence model answers --frequency STRING, --top-k K or --queries (not --where)")
    if args.std and args.top_k is not None:
        raise BadInput("--std is for --frequency and --queries; --top-k lists the strings only")
    if args.queries:
        return _batch(args, model)
    if args.top_k is not None:
        if args.top_k < 1:
            raise BadInput(f"--top-k must be >= 1, got {args.top_k}")
        _print_sequences(model.top_k(args.top_k), False, args.json)
        return 0
    if not args.frequency:
        raise BadInput("give --frequency STRING, --top-k K or --queries FILE for a sequence model")
    strings = [sequence_string(model, s) for s in args.frequency]
    _print_sequences(model.frequency_table(strings), args.std, args.json)
    return 0


def _align(release: RangeRelease, args: argparse.Namespace) -> dict[str, Any]:
    """``align=`` for a release whose ranges fall on bins (grid); spatial releases have none."""
    if release.binned:
        return {"align": args.align}
    if args.align != "exact":
        raise BadInput("--align is for grid releases (bins); a spatial release answers any box")
    return {}


def _density(release: RangeRelease, args: argparse.Namespace) -> dict[str, Any]:
    """``density=`` for a spatial release (leaves crossing a query's boundary); grids have none."""
    if args.density is None:
        return {}
    if release.binned or not hasattr(release, "linear_slopes"):
        raise BadInput("--density is for spatial releases (PrivTree, UG, AG); this release answers "
                       "whole bins")
    return {"density": args.density}


def _batch(args: argparse.Namespace, release: Any) -> int:
    """Answer the queries of --queries FILE by the kind the release answers (``query_kinds``)."""
    if args.where:
        raise BadInput("give either --where (one query) or --queries FILE (a batch), not both")
    if args.output:
        check_output(args.output, formats=("parquet", "csv", "tsv", "ipc", "ndjson"), what="output")
    try:
        frame = scan(args.queries, what="--queries").collect()
    except pl.exceptions.PolarsError as exc:
        raise BadInput(f"cannot read {args.queries}: {one_line(exc)}") from None
    if "frequency" in release.query_kinds:
        if "string" not in frame.columns:
            raise BadInput(f"--queries {args.queries!r} needs a column 'string' for a sequence model")
        check_query_ids(frame)
        col = frame["string"]
        if col.null_count():
            row = int(col.is_null().arg_true()[0])
            raise BadInput(f"--queries {args.queries!r}: the string of row {row + 1} is empty (null); give "
                           "every query a string of symbols")
        where = f"--queries {args.queries!r}: string"
        strings = ([sequence_string(release, s, where) for s in col.to_list()] if col.dtype == pl.String
                   else col.to_list())
        table = release.frequency_table(strings)
        answers = frame.with_columns(table.select("count", *(["std"] if args.std else []), "extrapolated"))
    else:
        try:
            answers = release.range_counts(frame, std=args.std, passthrough=("id", *args.keep),
                                           **_align(release, args), **_alpha(args), **_density(release, args))
        except pdp.ParameterError as exc:
            raise BadInput(f"--density: {exc}") from None
        except pdp.QueryError as exc:
            raise BadInput(str(exc).replace("pass passthrough=[...]", "use --keep COLUMN")) from None
    if args.output:
        write_frame(answers, args.output)
        if not args.quiet:
            print(f"wrote {answers.height:,} answers to {args.output}", file=sys.stderr)
    elif args.json:
        print(answers.write_json())
    else:
        sys.stdout.write(answers.write_csv())
    return 0


def run(args: argparse.Namespace) -> int:
    if args.output and not args.queries:
        raise BadInput("-o is for the answers of --queries FILE; a single query prints its answer")
    release = open_release(args.release, args.unverified)
    if "frequency" in release.query_kinds:
        return _sequence(args, release)
    if args.frequency or args.top_k is not None:
        raise BadInput("--frequency and --top-k are for sequence models; this release is a "
                       f"{type(release).__name__} (use --where)")
    if "range" not in release.query_kinds:
        raise BadInput(f"a {type(release).__name__} answers neither range counts nor frequencies")
    if args.queries:
        return _batch(args, release)
    preds = range_predicates(release, args.where)
    density = _density(release, args)
    linear = density.get("density") == "linear"  # no error bar stated (SpatialRelease.range_counts)
    try:
        count = release.range_count(**preds, **_align(release, args), **density)
        std = release.range_std(**preds, **_align(release, args)) if args.std and not linear else None
    except pdp.ParameterError as exc:
        raise BadInput(f"--density: {exc}") from None
    except pdp.QueryError as exc:
        raise BadInput(in_option_terms(str(exc))) from None
    interval = (None if not _alpha(args) else (None, None) if linear
                else release.range_interval(args.alpha, **preds, **_align(release, args)))
    _print_answer(count, std, args.json, args.std, interval, keys=release.interval_columns)
    return 0
