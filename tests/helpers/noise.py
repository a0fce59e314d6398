"""Goodness-of-fit checks of integer noise against the exact discrete Laplace law (tests only)."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

ALPHA = 1e-6  # false-failure probability of each statistical check


def dlap_pmf(scale: float, values: np.ndarray) -> np.ndarray:
    q = math.exp(-1.0 / scale)
    return (1 - q) / (1 + q) * q ** np.abs(values)


def chi2_pvalue(samples: np.ndarray, pmf) -> float:
    """Chi-square p-value of integer ``samples`` against ``pmf`` (a unimodal pmf on the
    integers): one cell per value with expectation >= 5, plus one cell per tail."""
    n = samples.size
    support = np.arange(min(int(samples.min()), -1), max(int(samples.max()), 1) + 1)
    keep = np.flatnonzero(pmf(support) * n >= 5)
    if keep.size < 2:
        raise AssertionError("not enough cells for a chi-square test")
    a, b = int(support[keep[0]]), int(support[keep[-1]])
    width = 20 * (b - a + 1)
    left = pmf(np.arange(a - width, a)).sum()
    right = pmf(np.arange(b + 1, b + 1 + width)).sum()
    expected = np.concatenate([[left], pmf(np.arange(a, b + 1)), [right]]) * n
    counts = np.bincount(np.clip(samples, a - 1, b + 1) - (a - 1), minlength=b - a + 3)
    used = expected > 0
    if np.any(counts[~used] > 0):
        return 0.0
    chi2 = ((counts[used] - expected[used]) ** 2 / expected[used]).sum()
    return float(stats.chi2.sf(chi2, used.sum() - 1))


def assert_dlap(samples: np.ndarray, scale: float, *, alternatives: bool = True) -> None:
    """Samples fit DLap(scale); and they reject half, double and 1/1.5 times the scale."""
    samples = np.asarray(samples, dtype=np.int64).ravel()
    p = chi2_pvalue(samples, lambda v: dlap_pmf(scale, v))
    assert p > ALPHA, f"DLap({scale}) rejected: p = {p:.3g}"
    if alternatives:
        for wrong in (scale / 2, scale * 2, scale / 1.5):
            p_wrong = chi2_pvalue(samples, lambda v, w=wrong: dlap_pmf(w, v))
            assert p_wrong < ALPHA, f"{samples.size} draws cannot tell scale {scale} from {wrong}"
