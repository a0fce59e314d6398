"""``polars-dp info release.parquet``: what a release is, as text or JSON."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

import polars_dp as pdp
from polars_dp.cli.common import human_size, open_release

EXAMPLES = """\
examples:
  polars-dp info release.parquet
  polars-dp info release.parquet --json | jq .epsilon
"""

VERIFIED_TEXT = {True: "yes: the checksum matches (it detects corruption and truncation, not forgery)",
                 False: "NO: read with --unverified; no checksum vouches for these values"}
NEIGHBOUR_TEXT = {"replace": "replace (one row modified)",
                  "add_remove": "add_remove (one row added or removed)"}


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "info", parents=[common], epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
        help="show a release's mechanism, epsilon, neighbours, domain and size",
        description="Show what a release file states: whether its checksum verified it, mechanism, "
                    "epsilon, neighbour relation, whether its noise was seeded, the public domain, its "
                    "size, creation time and library version.")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def summary(path: str, release: pdp.Release) -> dict[str, Any]:
    params = {k: v for k, v in release.params.items() if k != "seeded"}
    return {
        "file": str(path), "file_bytes": os.path.getsize(path), "release_type": type(release).__name__,
        "mechanism": release.mechanism, "epsilon": release.epsilon, "neighbours": release.neighbours,
        # seeded: None when nothing vouches for it (a file without a checksum may claim anything)
        "verified": release.verified, "seeded": release.seeded if release.verified else None,
        "noise": release.noise, "noise_scale": release.stated_noise_scale(),
        "domain": release.domain_summary(), "size": release.size_summary(), "created": release.created,
        "version": release.library_version, "params": params,
    }


def run(args: argparse.Namespace) -> int:
    release = open_release(args.release, args.unverified)
    info = summary(args.release, release)
    if args.json:
        print(json.dumps(info, indent=2, default=str))
        return 0
    seeded = {True: "yes: reproducible noise, for tests only (do not publish)",
              False: "no (noise from the operating system's entropy)",
              None: "unknown (unverified release)"}[info["seeded"]]
    rows = [
        ("verified", VERIFIED_TEXT[release.verified]),
        ("mechanism", release.mechanism),
        ("epsilon", f"{release.epsilon:g}"),
        ("neighbours", NEIGHBOUR_TEXT.get(release.neighbours, release.neighbours)),
        ("seeded", seeded),
    ]
    if info["noise_scale"] is not None:
        rows.append(("noise scale", release.noise_text()))
    lines = release.domain_lines() or ["(not stated)"]  # a release type may state none
    rows.append(("domain", lines[0]))
    rows.extend(("", line) for line in lines[1:])
    rows += [("size", release.size_text()), ("created", release.created),
             ("version", f"polars-dp {release.library_version}")]
    params = ", ".join(f"{k}={v}" for k, v in info["params"].items() if k not in ("coefficients",))
    if params:
        rows.append(("params", params))
    print(f"{args.release}: {type(release).__name__}, {human_size(info['file_bytes'])}")
    for key, value in rows:
        print(f"  {key:<12} {value}")
    return 0
