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

``--words``: the sampled length law on 200,000 synthetic words (26 letters, a letter-bigram chain,
lengths around 9.3 independent of the letters), where a suffix tree cannot see the position
since the start: the paper's configuration, the back-off alone, and the defaults (length law).

``max_length = 20`` is chosen from public knowledge only: the UCI documentation of msnbc gives
a mean of about 5.7 page views per user, and a cap near four times the published mean keeps
almost all of a typical session while bounding ``l_top = 21``.  Private mechanisms are averaged
over ``--runs`` seeds (default 3).  Falls back to a synthetic Markov set without the shared data.
"""

from __future__ import annotations

import argparse

import numpy as np
import polars as pl
import pyarrow as pa

from benchmarks.seq_data import ALPHABET, load
from polars_dp.evaluation.sequences import exact_top_k_strings, top_k_precision
from polars_dp.mechanisms.ngram import ngram_sequences
from polars_dp.mechanisms.sequences import privtree_sequences

MAX_LENGTH = 20
KS = (10, 50, 100)
EPSILONS = (0.1, 0.4, 1.6, 16.0)
SAMPLES = 200_000
PAPER = {"backoff": None, "estimator": "chain"}


def synthetic_words(n: int = 200_000, seed: int = 0) -> pl.DataFrame:
    """``n`` words over a..z: letters from a random bigram chain, lengths ``round(N(9.3, 2.8))``
    clipped to 1..40, independent of the letters (the shape of an English word list)."""
    rng = np.random.default_rng(seed)
    a = 26
    chain = rng.dirichlet(np.full(a, 0.3), size=a + 1)
    lengths = np.clip(rng.normal(9.3, 2.8, n).round().astype(int), 1, 40)
    letters = np.zeros((n, 40), dtype=int)
    prev = np.full(n, a)
    for t in range(40):
        letters[:, t] = (rng.random(n)[:, None] > np.cumsum(chain[prev], axis=1)).sum(axis=1).clip(0, a - 1)
        prev = letters[:, t]
    kept = (letters + 97).astype(np.uint8)[np.arange(40)[None, :] < lengths[:, None]]  # row-major
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return pl.from_arrow(pa.table({"w": pa.ListArray.from_arrays(pa.array(offsets), pa.array(kept))}))


def words(epsilons: tuple[float, ...] = (1.0, 16.0)) -> None:
    """Sampled length law on synthetic words: the paper's configuration vs the defaults."""
    frame = synthetic_words()
    true = np.minimum(frame["w"].list.len().to_numpy(), MAX_LENGTH)
    true_law = np.bincount(true, minlength=MAX_LENGTH + 1) / true.size
    alphabet = list(range(97, 123))
    print(f"synthetic words: {frame.height:,}; mean length {true.mean():.2f}; "
          f"at the cap {(true == MAX_LENGTH).mean():.3f}")
    configs = {"paper": ({"tree_share": 0.5, "length_share": 0.0}, None),
               "back-off only": ({"length_share": 0.0}, 3.0), "defaults": ({}, 3.0)}
    for eps in epsilons:
        for label, (kwargs, backoff) in configs.items():
            model = privtree_sequences(frame, "w", alphabet=alphabet, max_length=MAX_LENGTH, epsilon=eps,
                                       seed=1, **kwargs)
            drawn = model.sample(100_000, seed=2, backoff=backoff)["sequence"].list.len().to_numpy()
            law = np.bincount(drawn, minlength=MAX_LENGTH + 1) / drawn.size
            print(f"  eps={eps:<5} {label:<14} mean {drawn.mean():6.2f}  "
                  f"at cap {(drawn == MAX_LENGTH).mean():.3f}  TV {0.5 * np.abs(law - true_law).sum():.4f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="100,000 sequences, one run")
    parser.add_argument("--words", action="store_true", help="only the synthetic word-list check")
    args = parser.parse_known_args(argv)[0]
    if args.words:
        words()
        return
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
