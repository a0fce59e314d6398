"""Privelet paper (Xiao, Wang, Gehrke, ICDE'10), Sec. VII: error of range-count queries by coverage quintile.

For every epsilon, each mechanism releases the table's frequency matrix once per repeat;
the same workload (random range-count queries: 1-4 predicates, ordinal random intervals,
nominal random non-root hierarchy nodes) is answered from each release.  Reported per
coverage quintile: average coverage, average square error ``(x - act)^2`` and average
relative error ``|x - act| / max(act, 0.1% n)``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import polars as pl

import polars_dp as pdp
from polars_dp.counting.frequency import frequency_matrix
from polars_dp.evaluation.references import true_answers
from polars_dp.evaluation.spatial_workloads import relative_errors
from polars_dp.evaluation.workloads import coverage

from .data import Table
from .metrics import answers, group_means, quintile_index, square_error
from .progress import progress, seeds

EPSILONS = (0.5, 0.75, 1.0, 1.25)
#: The Privelet paper's experimental choice S_A = {Age, Gender} (Sec. VII).
PAPER_UNTRANSFORMED = ("age", "gender")

Mechanism = Callable[[Table, float, Any], pdp.GridRelease]


def mechanisms(untransformed: Sequence[str] = PAPER_UNTRANSFORMED) -> dict[str, Mechanism]:
    """Basic, Privelet (nothing untransformed), Privelet+ (the paper's S_A) and Privelet+
    with the paper's selection rule (``untransformed="auto"``), all under replace-one."""
    def basic(t: Table, eps: float, seed: Any) -> pdp.GridRelease:
        return t.frame.dp.basic(t.attributes, epsilon=eps, seed=seed, **t.options)

    def privelet(sa: Any) -> Mechanism:
        def release(t: Table, eps: float, seed: Any) -> pdp.GridRelease:
            return t.frame.dp.privelet(t.attributes, epsilon=eps, untransformed=sa, seed=seed,
                                       **t.options)
        return release

    return {"Basic": basic, "Privelet": privelet(()), "Privelet+": privelet(tuple(untransformed)),
            "Privelet+ auto": privelet("auto")}


def run(table: Table, queries: pl.DataFrame, *, epsilons: Sequence[float] = EPSILONS,
        repeats: int = 1, seed: int = 0, mechanisms_: dict[str, Mechanism] | None = None,
        show_progress: bool = True) -> pl.DataFrame:
    """One row per (mechanism, epsilon, coverage quintile) with the average errors, plus
    the release's time and its ``untransformed`` set."""
    chosen = mechanisms_ or mechanisms()
    # the exact matrix answers the workload exactly (evaluation only; never released)
    counts = frequency_matrix(table.frame, table.attributes, **table.options)
    n = int(counts.sum())
    actual = true_answers(counts, table.attributes, queries)
    del counts
    cover = coverage(table.attributes, queries)
    quintile = quintile_index(cover)
    rows = []
    cells = [(name, eps, r) for eps in epsilons for name in chosen for r in range(repeats)]
    sq: dict[tuple[str, float], list[np.ndarray]] = {}
    rel: dict[tuple[str, float], list[np.ndarray]] = {}
    info: dict[tuple[str, float], dict[str, Any]] = {}
    for name, eps, r in progress(cells, enabled=show_progress, desc=f"privelet/{table.name}"):
        t0 = time.perf_counter()
        release = chosen[name](table, eps, seeds(seed, "privelet", table.name, name, eps, r))
        seconds = time.perf_counter() - t0
        noisy = answers(release, queries)
        sq.setdefault((name, eps), []).append(square_error(noisy, actual))
        rel.setdefault((name, eps), []).append(relative_errors(noisy, actual, n))
        info.setdefault((name, eps), {"seconds": [], "untransformed": _untransformed(release)})
        info[(name, eps)]["seconds"].append(seconds)
        del release
    cov_means = group_means(quintile, cover, 5)
    for (name, eps), errors in sq.items():
        sq_means = group_means(quintile, np.mean(errors, axis=0), 5)
        rel_means = group_means(quintile, np.mean(rel[(name, eps)], axis=0), 5)
        for q in range(5):
            rows.append({
                "dataset": table.name, "n": n, "epsilon": eps, "mechanism": name,
                "quintile": q + 1, "coverage": cov_means[q], "square_error": sq_means[q],
                "relative_error": rel_means[q], "queries": int(np.sum(quintile == q)),
                "seconds": float(np.mean(info[(name, eps)]["seconds"])),
                "untransformed": info[(name, eps)]["untransformed"],
            })
    return pl.DataFrame(rows)


def _untransformed(release: pdp.GridRelease) -> str:
    """The untransformed set a release records ('-' for Basic, which transforms nothing)."""
    if release.mechanism == "basic":
        return "all (no transform)"
    transformed = set(release.transformed)
    rest = [a.column for a in release.attributes if a.column not in transformed]
    return ", ".join(rest) if rest else "none"
