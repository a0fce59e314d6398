"""Sequences with PrivTree's prediction suffix tree: frequent strings, error bars, synthetic data.

    python examples/sequences.py [--sequences N]

Generated click paths over 6 pages follow a Markov chain (not real users).  The release is a
prediction suffix tree with noisy next-symbol counts (PrivTree's sequence model, Zhang, Xiao,
Xie, SIGMOD 2016).  Look at: the top-k strings with their estimated counts, a few string
frequencies beside their noise standard deviation, and synthetic sequences sampled from the
model (post-processing: no budget spent) whose length distribution follows the released one.
"""

from __future__ import annotations

import argparse

import numpy as np
import polars as pl
import pyarrow as pa

import polars_dp  # noqa: F401  (registers df.dp)

PAGES = ["home", "news", "sport", "weather", "shop", "help"]


def click_paths(n: int, seed: int = 0) -> pl.DataFrame:
    """Synthetic sessions: a Markov chain over PAGES, geometric lengths (capped at 12)."""
    rng = np.random.default_rng(seed)
    move = rng.dirichlet(np.full(len(PAGES), 0.5), len(PAGES))
    lengths = np.minimum(rng.geometric(0.25, n), 12)
    steps = np.zeros((n, 12), dtype=np.int64)
    state = rng.integers(0, len(PAGES), n)
    for t in range(12):  # a loop over positions, vectorised over sessions
        steps[:, t] = state
        cdf = np.cumsum(move[state], axis=1)
        state = np.minimum((cdf < rng.random(n)[:, None]).sum(axis=1), len(PAGES) - 1)
    kept = np.arange(12)[None, :] < lengths[:, None]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    pages = pa.ListArray.from_arrays(offsets, pa.array(np.array(PAGES)[steps[kept]]))
    return pl.from_arrow(pa.table({"pages": pages}))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequences", type=int, default=5_000)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--out", help="unused (every example accepts it)")
    args = parser.parse_args(argv)

    frame = click_paths(args.sequences)
    model = frame.dp.privtree_sequences("pages", alphabet=PAGES, max_length=12, epsilon=args.epsilon)
    print(model)
    print("\ntop 8 strings (estimated occurrences as substrings):")
    print(model.top_k(8))
    strings = [["home"], ["home", "news"], ["news", "sport", "shop"]]
    est, std = model.frequencies(strings, std=True)
    print("\nfrequencies with their noise std:")
    for s, f, e in zip(strings, est, std, strict=True):
        print(f"  {' > '.join(s):<24}{f:>9,.0f} ± {e:,.0f}")
    synthetic = model.sample(5)
    print("\nfive synthetic sessions (sampled from the model, no budget):")
    for seq in synthetic["sequence"].to_list():
        print("  " + " > ".join(seq))


if __name__ == "__main__":
    main()
