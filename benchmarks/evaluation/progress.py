"""Progress bars (tqdm when installed and enabled) and seeding of the evaluation."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

import numpy as np

T = TypeVar("T")


def progress(items: Iterable[T], *, enabled: bool, desc: str, total: int | None = None) -> Iterator[T]:
    """``items`` wrapped in a tqdm bar on stderr when ``enabled`` (plain iteration otherwise)."""
    if enabled:
        try:
            from tqdm import tqdm
        except ImportError:  # tqdm is in the optional "eval" extra
            return iter(items)
        return iter(tqdm(items, desc=desc, total=total, leave=False, dynamic_ncols=True))
    return iter(items)


def seeds(seed: Any, *key: Any) -> np.random.SeedSequence:
    """A reproducible SeedSequence for one (experiment, dataset, mechanism, epsilon, ...) cell:
    the same ``seed`` and ``key`` give the same stream, different keys independent ones."""
    digest = hashlib.sha256(repr(key).encode()).digest()
    words = np.frombuffer(digest, dtype=np.uint32).tolist()
    return np.random.SeedSequence([int(seed), *words])
