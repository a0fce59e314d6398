"""Sequence PrivTree: build time on msnbc (or a synthetic Markov set of the same size).

Rows: reading + encoding (the baseline, ratio 1), the counting kernel (all contexts up to
length 4), the whole PrivTree mechanism at two epsilons, the n-gram baseline (h = 5), top-k
and sampling.  Peak RSS of one full build is measured in a child process.  ``--quick`` uses
100,000 sequences.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time

from benchmarks.seq_data import ALPHABET, load
from polars_dp.counting.sequences import context_histograms, encode_sequences
from polars_dp.mechanisms.ngram import ngram_sequences
from polars_dp.mechanisms.sequences import privtree_sequences

MAX_LENGTH = 20


def timed(fn, repeat: int = 3):
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def child_peak_rss(quick: bool) -> float:
    code = ("from benchmarks.seq_data import ALPHABET, load\n"
            "from polars_dp.mechanisms.sequences import privtree_sequences\n"
            f"lf, _ = load(quick={quick})\n"
            f"privtree_sequences(lf, 'pages', alphabet=ALPHABET, max_length={MAX_LENGTH},"
            " epsilon=1.6, seed=0)\n")
    subprocess.run([sys.executable, "-c", code], check=True)
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB -> MiB on Linux


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="100,000 sequences")
    quick = parser.parse_known_args(argv)[0].quick
    lf, name = load(quick)
    lf = lf.collect().lazy()  # time the mechanism, not the Parquet scan
    rows = []
    t_enc, enc = timed(lambda: encode_sequences(lf, "pages", alphabet=ALPHABET, max_length=MAX_LENGTH))
    rows.append(("read + truncate + encode", t_enc))
    t_cnt, _ = timed(lambda: [context_histograms(enc, k) for k in range(5)])
    rows.append(("counting kernel, contexts k=0..4", t_cnt))
    models = {}
    for eps in (0.1, 1.6):
        t, models[eps] = timed(lambda eps=eps: privtree_sequences(
            lf, "pages", alphabet=ALPHABET, max_length=MAX_LENGTH, epsilon=eps, seed=1))
        rows.append((f"privtree_sequences eps={eps} ({models[eps].n_nodes:,} nodes)", t))
    t, _ = timed(lambda: ngram_sequences(lf, "pages", alphabet=ALPHABET, max_length=MAX_LENGTH, epsilon=1.6,
                                         height=5, seed=1))
    rows.append(("ngram_sequences h=5", t))
    t, _ = timed(lambda: models[1.6].top_k(100))
    rows.append(("top_k(100) on the eps=1.6 PST", t))
    t, _ = timed(lambda: models[1.6].sample(100_000, seed=2))
    rows.append(("sample(100,000) from the eps=1.6 PST", t))
    print(f"data: {name}; max_length={MAX_LENGTH}; {enc.n_positions:,} positions; best of 3 runs")
    print(f"{'step':<48} {'seconds':>9} {'x encode':>9}")
    for label, t in rows:
        print(f"{label:<48} {t:>9.3f} {t / t_enc:>9.2f}")
    peak = child_peak_rss(quick)
    print(f"peak RSS of one eps=1.6 build (child process, incl. interpreter): {peak:,.0f} MiB")


if __name__ == "__main__":
    main()
