"""``polars-dp release DATA --spec domain.toml -o release.parquet``: make and write a release."""

from __future__ import annotations

import argparse
import os
import sys
import time

import polars_dp as pdp
from polars_dp.cli.common import BadInput, Messages, check_output, fmt_number, human_size, scan
from polars_dp.cli.spec import load_spec

EXAMPLES = """\
examples:
  polars-dp release people.parquet --spec examples/specs/privelet.toml -o people_release.parquet
  polars-dp release "points/*.parquet" --spec examples/specs/privtree.toml -o tree.parquet
  polars-dp release sessions.csv --spec examples/specs/privtree_sequences.toml -o pst.parquet
  polars-dp release people.parquet --spec domain.toml --check     # validate only; reads no rows

The domain file (TOML) declares the mechanism, epsilon, neighbours, the columns and their public
domain; see examples/specs/ and the README's "Command line" section.  Each release of the same data
spends its epsilon again.
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
    p.add_argument("--check", action="store_true",
                   help="validate the domain file and DATA's columns, then stop (no rows read, no release)")
    p.add_argument("--seed", type=int, default=None,
                   help="reproducible noise, for tests only: anyone who knows the seed can remove the noise")
    p.set_defaults(func=run)


def noise_scale(release: pdp.Release) -> float | None:
    """The Laplace scale of the released values (per coefficient for wavelets), if a single one."""
    if isinstance(release, pdp.GridRelease):
        return release.noise_scale
    for key in ("leaf_noise_scale", "noise_scale"):
        if key in release.params:
            return float(release.params[key])
    return None


def size_text(release: pdp.Release) -> str:
    if isinstance(release, pdp.GridRelease):
        return f"{release.n_cells:,} cells"
    if isinstance(release, pdp.TreeRelease):
        return f"{release.n_leaves:,} leaves"
    return f"{release.n_nodes:,} nodes (height {release.height})"


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
    names = frame.collect_schema().names()
    missing = [c for c in spec.input_columns if c not in names]
    if missing:
        raise BadInput(f"column {missing[0]!r} (declared at {spec.where(missing[0])}) is not in {args.data}; "
                       f"its columns: {', '.join(names)}")
    plan = (f"{spec.mechanism}, epsilon={spec.epsilon:g}, neighbours={spec.effective_neighbours}, "
            f"domain {spec.domain_text()}")
    if args.check:
        if not args.quiet:
            print(f"ok: {args.spec} declares {plan}; {args.data} has the columns "
                  f"{', '.join(spec.input_columns)}")
        return 0
    if args.seed is not None:
        msg.warn(f"--seed {args.seed} makes the noise reproducible: anyone who knows the seed can remove "
                 "it. Never publish this release.")
    msg.stage(f"releasing {args.data}: {plan}")
    t0 = time.perf_counter()
    release = spec.run(frame, seed=args.seed, progress=not args.quiet)
    secs = time.perf_counter() - t0
    release.params["seeded"] = args.seed is not None  # recorded so that `info` can tell
    msg.stage(f"writing {args.output}")
    path = release.write_parquet(args.output)
    if not args.quiet:
        scale = noise_scale(release)
        print(f"wrote {path} ({human_size(os.path.getsize(path))})")
        print(f"  mechanism    {release.mechanism}")
        print(f"  epsilon      {release.epsilon:g} (neighbours: {release.neighbours})")
        print(f"  size         {size_text(release)}")
        if scale is not None:
            per = ", per wavelet coefficient" if "rho" in release.params else ""
            print(f"  noise scale  {fmt_number(scale)} (Laplace{per})")
        print(f"  time         {secs:.2f} s")
        sys.stdout.flush()
    return 0
