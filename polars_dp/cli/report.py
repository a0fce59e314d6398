"""``polars-dp report release.parquet -o report.html``: a self-contained HTML page of a release."""

from __future__ import annotations

import argparse
import os

from polars_dp.cli.common import check_output, human_size, open_release
from polars_dp.releases.report import check_report_path

EXAMPLES = """\
examples:
  polars-dp report release.parquet -o release.html
  polars-dp report release.parquet -o release.html --alpha 0.01
"""


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "report", parents=[common], epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
        help="write a self-contained HTML report of a release: its card and figures with error bars",
        description="Write one HTML page (no script, no network): the release card, then the marginals with "
                    "error bars (grids), the leaf map (spatial releases) or the most frequent strings with "
                    "error bars (sequences).")
    p.add_argument("-o", "--output", required=True, metavar="REPORT.html", help="where to write the page")
    p.add_argument("--alpha", type=float, default=0.05,
                   help="error bars hold with probability 1 - alpha (default 0.05)")


def run(args: argparse.Namespace) -> int:
    out = check_output(check_report_path(args.output, what="output"), what="output")
    release = open_release(args.release, args.unverified)
    path = release.report(out, alpha=args.alpha)
    if not args.quiet:
        print(f"wrote {path} ({human_size(os.path.getsize(path))})")
    return 0
