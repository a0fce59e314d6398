"""Utility of the sequence releases on msnbc: top-k precision, length law, and where the noise is.

For k in (10, 50, 100) and epsilon in (0.1, 0.4, 1.6, 16): precision = |returned ∩ exact top-k| / k
against the exact top-k substrings of the *untruncated* data; ``TV len`` = total variation
distance between the lengths of 200,000 sampled sequences and those of the truncated data;
``root sd`` = noise sd of a root bin (a single-symbol count), ``sqrt(bin_noise_variance()[0])``:
for the PST the root is the sum of all ``L`` noisy leaves, ``b sqrt(2 L)``, for the n-gram one
noisy count, ``sqrt(2) h l_top / epsilon``.  Rows:

* ``privtree``: ``privtree_sequences`` with the library's defaults (tree_share 0.25, a length
  law from 5% of epsilon calibrating the sampler, direct estimator, back-off);
* ``privtree-paper``: tree_share 0.5, no length law, the paper's chain formula, no back-off
  (the library before);
* ``ngram-h5`` / ``ngram-paper``: the n-gram baseline (h = 5) answered both ways;
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
from polars_dp.evaluation import exact_top_k_strings, top_k_precision
from polars_dp.mechanisms.ngram import ngram_sequences
from polars_dp.mechanisms.sequences import privtree_sequences

MAX_LENGTH = 20
KS = (10, 50, 100)
EPSILONS = (0.1, 0.4, 1.6, 16.0)
SAMPLES = 200_000
PAPER = {"backoff": None, "estimator": "chain"}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="100,000 sequences, one run")
    args = parser.parse_known_args(argv)[0]
    runs = 1 if args.quick else args.runs
    lf, name = load(args.quick)
    frame = lf.collect()
    lf = frame.lazy()
    truth = {k: exact_top_k_strings(lf, "pages", alphabet=ALPHABET, k=k) for k in KS}
    trunc = {k: top_k_precision(exact_top_k_strings(lf, "pages", alphabet=ALPHABET, k=k,
                                                    max_length=MAX_LENGTH), truth[k]) for k in KS}
    lengths = np.minimum(frame["pages"].list.len().to_numpy(), MAX_LENGTH)
    true_law = np.bincount(lengths, minlength=MAX_LENGTH + 1) / lengths.size
    print(f"data: {name}; max_length={MAX_LENGTH}; mean over {runs} run(s)")
    head = " ".join(f"{'P@' + str(k):>6}" for k in KS)
    print(f"{'method':<15} {'epsilon':>7} {head} {'TV len':>7} {'root sd':>9} {'nodes':>8}")
    print(f"{'truncate':<15} {'-':>7} " + " ".join(f"{trunc[k]:>6.3f}" for k in KS)
          + f" {0.0:>7.4f} {0.0:>9.0f} {'-':>8}")
    builders = {
        "privtree": (lambda eps, seed: privtree_sequences(
            lf, "pages", alphabet=ALPHABET, max_length=MAX_LENGTH, epsilon=eps, seed=seed), {}),
        "privtree-paper": (lambda eps, seed: privtree_sequences(
            lf, "pages", alphabet=ALPHABET, max_length=MAX_LENGTH, epsilon=eps, tree_share=0.5,
            length_share=0.0, seed=seed), PAPER),
        "ngram-h5": (lambda eps, seed: ngram_sequences(
            lf, "pages", alphabet=ALPHABET, max_length=MAX_LENGTH, epsilon=eps, height=5, seed=seed), {}),
        "ngram-paper": (lambda eps, seed: ngram_sequences(
            lf, "pages", alphabet=ALPHABET, max_length=MAX_LENGTH, epsilon=eps, height=5, seed=seed), PAPER),
    }
    for label, (build, options) in builders.items():
        for eps in EPSILONS:
            prec, tv, root_sd, nodes = np.zeros(len(KS)), 0.0, 0.0, 0.0
            for seed in range(runs):
                model = build(eps, 1000 + seed)
                nodes += model.n_nodes / runs
                top = model.top_k(max(KS), **options)
                prec += [top_k_precision(top.head(k), truth[k]) / runs for k in KS]
                drawn = model.sample(SAMPLES, seed=seed, backoff=options.get("backoff", 3.0))
                law = np.bincount(drawn["sequence"].list.len().to_numpy(), minlength=MAX_LENGTH + 1) / SAMPLES
                tv += 0.5 * np.abs(law - true_law).sum() / runs
                root_sd += float(np.sqrt(model.bin_noise_variance()[0])) / runs
            print(f"{label:<15} {eps:>7} " + " ".join(f"{p:>6.3f}" for p in prec)
                  + f" {tv:>7.4f} {root_sd:>9,.0f} {nodes:>8,.0f}")


if __name__ == "__main__":
    main()
