"""Utility of the sequence releases on msnbc: precision of the top-k frequent strings.

For k in (10, 50, 100) and epsilon in (0.1, 0.4, 1.6): precision = |returned ∩ exact top-k| / k
against the exact top-k substrings of the *untruncated* data, for

* the PrivTree PST (``privtree_sequences``, tree_share 0.5),
* the fixed-height n-gram baseline (``ngram_sequences``, h = 5),
* Truncate: exact counts after truncation (NOT private; epsilon does not apply).

``max_length = 20`` is chosen from public knowledge only: the UCI documentation of msnbc gives
a mean of about 5.7 page views per user, and a cap near four times the published mean keeps
almost all of a typical session while bounding ``l_top = 21``.  Private mechanisms are averaged
over ``--runs`` seeds (default 3).  Falls back to a synthetic Markov set without the shared data.
"""

from __future__ import annotations

import argparse

import numpy as np

from benchmarks.seq_data import ALPHABET, load
from polars_dp.evaluation.sequences import exact_top_k_strings, top_k_precision
from polars_dp.mechanisms.ngram import ngram_sequences
from polars_dp.mechanisms.sequences import privtree_sequences

MAX_LENGTH = 20
KS = (10, 50, 100)
EPSILONS = (0.1, 0.4, 1.6)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="100,000 sequences, one run")
    args = parser.parse_known_args(argv)[0]
    runs = 1 if args.quick else args.runs
    lf, name = load(args.quick)
    lf = lf.collect().lazy()
    truth = {k: exact_top_k_strings(lf, "pages", alphabet=ALPHABET, k=k) for k in KS}
    trunc = {k: top_k_precision(exact_top_k_strings(lf, "pages", alphabet=ALPHABET, k=k,
                                                    max_length=MAX_LENGTH), truth[k]) for k in KS}
    print(f"data: {name}; max_length={MAX_LENGTH}; mean over {runs} run(s)")
    print(f"{'method':<10} {'epsilon':>7} " + " ".join(f"{'P@' + str(k):>7}" for k in KS) + f" {'nodes':>8}")
    print(f"{'truncate':<10} {'-':>7} " + " ".join(f"{trunc[k]:>7.2f}" for k in KS) + f" {'-':>8}")
    builders = {
        "privtree": lambda eps, seed: privtree_sequences(
            lf, "pages", alphabet=ALPHABET, max_length=MAX_LENGTH, epsilon=eps, seed=seed),
        "ngram-h5": lambda eps, seed: ngram_sequences(
            lf, "pages", alphabet=ALPHABET, max_length=MAX_LENGTH, epsilon=eps, height=5, seed=seed),
    }
    for label, build in builders.items():
        for eps in EPSILONS:
            prec = np.zeros(len(KS))
            nodes = 0
            for seed in range(runs):
                model = build(eps, 1000 + seed)
                nodes += model.n_nodes / runs
                prec += [top_k_precision(model.top_k(k), truth[k]) / runs for k in KS]
            print(f"{label:<10} {eps:>7} " + " ".join(f"{p:>7.2f}" for p in prec) + f" {nodes:>8,.0f}")


if __name__ == "__main__":
    main()
