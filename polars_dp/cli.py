"""Command line: ``python -m polars_dp demo`` (or ``polars-dp demo``)."""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import polars as pl


def _demo(args: argparse.Namespace) -> int:
    import polars_dp as pdp
    from polars_dp.counts import frequency_matrix
    from polars_dp.datasets import load_military, military_attributes

    frame = load_military(lazy=True)
    attrs = military_attributes()
    n = frame.select(pl.len()).collect().item()
    print(f"Dataset: US military personnel, {n:,} rows (bundled, public domain)")
    print("Declared public domain: " + " x ".join(f"{a.column}({a.n_cells})" for a in attrs)
          + f" = {int(np.prod([a.n_cells for a in attrs])):,} cells\n")

    releases = {}
    for name in _mechanisms():
        t0 = time.perf_counter()
        releases[name] = getattr(frame.dp, name)(attrs, epsilon=args.epsilon, seed=args.seed)
        print(f"{name:>9}: epsilon={args.epsilon}, neighbours='replace', "
              f"{releases[name].n_cells:,} noisy cells in {time.perf_counter() - t0:.2f} s")

    # the true counts are computed here only to show the error; a real analyst never sees them
    truth = pdp.GridRelease(frequency_matrix(frame, attrs), attrs, mechanism="none (true counts)",
                            epsilon=float("inf"), neighbours="replace", noise_scale=0)
    queries = [
        ("all personnel", {}),
        ("Department of the Navy, rank 5..11", {"branch": "Department of the Navy", "rank": (5, 11)}),
        ("female officers", {"gender": "female", "grade": "officer"}),
        ("asian/pacific, commissioned", {"race": "asian/pacific", "grade": "commissioned"}),
        ("hispanic marines, rank 1..3", {"hisp": True, "branch": "marine corps", "rank": (1, 3)}),
    ]
    header = f"\n{'range-count query':<36}{'true':>12}" + "".join(f"{k:>12}" for k in releases)
    print(header)
    print("-" * len(header.strip("\n")))
    for label, pred in queries:
        row = f"{label:<36}{truth.range_count(**pred):>12,.0f}"
        row += "".join(f"{r.range_count(**pred):>12,.0f}" for r in releases.values())
        print(row)
    print("\nReleases are Arrow tables with their privacy parameters in the schema metadata:")
    release = next(iter(releases.values()))
    meta = release.to_arrow().schema.metadata
    for key in (b"polars_dp.mechanism", b"polars_dp.epsilon", b"polars_dp.neighbours"):
        print(f"  {key.decode()} = {meta[key].decode()}")
    print(f"\n(seed={args.seed} makes this run reproducible; omit --seed in real use: "
          "a known seed lets anyone remove the noise)" if args.seed is not None else "")
    return 0


def _mechanisms() -> list[str]:
    import polars_dp  # noqa: F401
    from polars_dp.namespace import DPNamespace
    return [m for m in ("basic", "privelet") if hasattr(DPNamespace, m)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="polars-dp", description="Differentially private synopses.")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="release the bundled military table and compare range counts")
    demo.add_argument("--epsilon", type=float, default=1.0, help="privacy budget (default 1.0)")
    demo.add_argument("--seed", type=int, default=None, help="reproducible noise (never in production)")
    demo.set_defaults(func=_demo)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
