"""The command line from a domain file: release, inspect, query and SQL without writing Python.

    python examples/cli_domain_file.py [--out DIR]

Writes a small generated table (people.parquet) and its public domain declaration
(domain.toml) to DIR, then runs the ``polars-dp`` commands a shell user would type (the same
``main`` as the installed ``polars-dp`` script).  Look at: the domain file (every bound and
category is public, declared before seeing the data), the summary ``info`` prints, and the
answers of ``query`` and ``sql`` with their noise standard deviations.
"""

from __future__ import annotations

import argparse
import shlex
import tempfile
from pathlib import Path

import numpy as np
import polars as pl

from polars_dp.cli import main as polars_dp

DOMAIN = """\
# Income by age and gender, Privelet+ (wavelet noise on age and income, plain cells on gender).
description = "Income by age and gender"
mechanism = "privelet"
epsilon = 1.0
neighbours = "replace"

[options]
untransformed = ["gender"]
on_out_of_domain = "clamp"

[[attributes]]
column = "age"
kind = "ordinal"
lo = 0
hi = 99
width = 5

[[attributes]]
column = "gender"
kind = "nominal"
categories = ["female", "male"]

[[attributes]]
column = "income"
kind = "ordinal"
lo = 0
hi = 199999
width = 5000
"""


def run(*argv: str) -> None:
    print(f"\n$ polars-dp {shlex.join(argv)}", flush=True)
    code = polars_dp(list(argv))
    if code:
        raise SystemExit(f"polars-dp exited with {code}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--out", help="working folder (default: a temp folder)")
    args = parser.parse_args(argv)
    out = Path(args.out or tempfile.mkdtemp(prefix="polars_dp_example_"))
    out.mkdir(parents=True, exist_ok=True)

    rng = np.random.default_rng(0)
    pl.DataFrame({"age": rng.integers(18, 95, args.rows), "gender": rng.choice(["female", "male"], args.rows),
                  "income": rng.lognormal(10.5, 0.6, args.rows).astype(np.int64)}
                 ).write_parquet(out / "people.parquet")
    (out / "domain.toml").write_text(DOMAIN)
    print(f"domain file {out / 'domain.toml'}:\n{DOMAIN}")

    data, spec, release = str(out / "people.parquet"), str(out / "domain.toml"), str(out / "release.parquet")
    run("release", data, "--spec", spec, "-o", release)
    run("info", release)
    run("query", release, "--where", "age=20..39", "--where", "gender=female", "--std")
    run("sql", release, "SELECT gender, round(sum(count)) AS noisy FROM release "
                        "WHERE income_lo >= 50000 GROUP BY gender ORDER BY gender")


if __name__ == "__main__":
    main()
