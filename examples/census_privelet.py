"""A census-like cube released with Privelet+, answered with error bars.

    python examples/census_privelet.py [--rows N] [--epsilon E]

Generated people (age, gender, occupation in a public sector hierarchy, income) are released
once with Privelet+ (Xiao, Wang, Gehrke, ICDE 2010): wavelet noise on age, occupation and
income, plain Laplace cells on gender.  Look at: the noise scale lambda and rho (from the
public domain only), and each range count beside its exact noise standard deviation.  The
true counts are printed only to show the error; a real analyst never sees them.
"""

from __future__ import annotations

import argparse

import numpy as np
import polars as pl

import polars_dp as pdp
from polars_dp.evaluation import exact_range_count, frequency_matrix  # NOT private: to show the error

SECTORS = {"public": ["teacher", "nurse", "clerk"], "private": ["driver", "engineer", "cook", "farmer"]}


def people(n: int, seed: int = 0) -> pl.DataFrame:
    """Synthetic stand-in for a census table (not real people)."""
    rng = np.random.default_rng(seed)
    jobs = [job for group in SECTORS.values() for job in group]
    weights = np.linspace(2, 1, len(jobs))
    return pl.DataFrame({
        "age": rng.integers(18, 90, n),
        "gender": rng.choice(["female", "male"], n),
        "occupation": rng.choice(jobs, n, p=weights / weights.sum()),
        "income": np.minimum(rng.lognormal(10.5, 0.6, n), 199_999).astype(np.int64),
    })


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--out", help="unused (every example accepts it)")
    args = parser.parse_args(argv)

    frame = people(args.rows)
    attrs = [
        pdp.Ordinal("age", 0, 99, width=5),                      # 20 bins of five years
        pdp.Nominal("gender", categories=["female", "male"]),
        pdp.Nominal("occupation", pdp.Hierarchy.from_dict(SECTORS, level_names=["sector"])),
        pdp.Ordinal("income", 0, 199_999, width=5_000),          # 40 bins of $5,000
    ]
    release = frame.dp.privelet(attrs, epsilon=args.epsilon, untransformed=["gender"])
    print(release)
    print(f"noise scale lambda = {release.noise_scale:.3g}, rho = {release.params['rho']} "
          f"(from the public domain), {release.n_cells:,} cells\n")

    truth = frequency_matrix(frame, attrs)  # NOT private: only to show the error below
    queries = [
        ("everyone", {}),
        ("age 30..49", {"age": (30, 49)}),
        ("women in the public sector", {"gender": "female", "occupation": "public"}),
        ("nurses aged 20..39", {"occupation": "nurse", "age": (20, 39)}),
        ("men earning 50k..100k", {"gender": "male", "income": (50_000, 99_999)}),
    ]
    print(f"{'range count':<30}{'true':>9}{'noisy':>11}{'± std':>9}")
    for label, predicates in queries:
        print(f"{label:<30}{exact_range_count(truth, attrs, **predicates):>9,.0f}"
              f"{release.range_count(**predicates):>11,.0f}{release.range_std(**predicates):>9,.0f}")

    batch = pl.DataFrame({"id": [1, 2, 3], "age_lo": [20, 40, 60], "age_hi": [39, 59, 79]})
    print("\nmany queries at once (a frame of ranges), with the std column:")
    print(release.range_counts(batch, std=True))


if __name__ == "__main__":
    main()
