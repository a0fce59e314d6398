"""Sequence data for the sequence benchmarks: msnbc when available, else a synthetic Markov set."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

MSNBC = Path(__file__).resolve().parents[2] / "shared" / "data" / "seq_msnbc.parquet"
ALPHABET = list(range(1, 18))


def markov_sequences(n: int, seed: int = 0) -> pl.DataFrame:
    """``n`` sequences over 1..17 from a sticky first-order Markov chain (mean length ~4.75)."""
    rng = np.random.default_rng(seed)
    lengths = rng.geometric(1 / 4.75, size=n)
    total = int(lengths.sum())
    first = np.cumsum(lengths) - lengths
    stay = rng.random(total) < 0.6
    fresh = rng.zipf(1.6, size=total) % 17 + 1
    stay[first] = False
    # a sticky chain: each symbol repeats the previous one w.p. 0.6 (forward fill of fresh draws)
    idx = np.where(stay, 0, np.arange(total))
    np.maximum.accumulate(idx, out=idx)
    values = fresh[idx].astype(np.uint8)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    pages = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(values))
    return pl.from_arrow(pa.table({"pages": pages}))


def load(quick: bool = False) -> tuple[pl.LazyFrame, str]:
    """(LazyFrame with List column ``pages``, description)."""
    n = 100_000 if quick else None
    if MSNBC.exists():
        lf = pl.scan_parquet(MSNBC).select("pages")
        return (lf.head(n) if n else lf), f"msnbc ({n or 989_818:,} sequences)"
    n = n or 989_818
    return markov_sequences(n).lazy(), f"synthetic Markov ({n:,} sequences; msnbc absent)"
