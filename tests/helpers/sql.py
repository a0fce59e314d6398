"""Small releases of each type that the DuckDB tests register (seeded: test data only), and what
the plain-SQL tests share: Python's answers to their statements and the comparison."""

from __future__ import annotations

import itertools
import shutil
import sys
from pathlib import Path

import numpy as np
import polars as pl

import polars_dp as pdp

__all__ = ["ALPHA", "CLI", "POINTS", "grid_statements", "max_diff", "python_rows", "small_sequence_release",
           "small_subgrid_release", "small_tree_release", "tree_and_sequence_cases"]

POINTS = pl.DataFrame({"x": np.random.default_rng(3).beta(2, 5, 3_000),
                       "y": np.random.default_rng(4).beta(5, 2, 3_000)})


def small_tree_release(**options: object) -> pdp.SpatialRelease:
    """A PrivTree release of :data:`POINTS` on the unit square."""
    return POINTS.dp.privtree(["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=1.0, seed=2, **options)


def small_subgrid_release() -> pdp.SpatialRelease:
    """A PrivTree release with sub-grids (``privtree_subgrid``) of :data:`POINTS` on the unit square."""
    return POINTS.dp.privtree_subgrid(["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=1.0, seed=2)


def small_sequence_release() -> pdp.SequenceRelease:
    """A PrivTree sequence model over the alphabet ``abc``."""
    frame = pl.DataFrame({"s": ["abcab", "ba", "ccc", "a", "abab"] * 60})
    return frame.dp.privtree_sequences("s", alphabet="abc", max_length=5, epsilon=3.0, seed=1)


#: The ``alpha`` of the plain-SQL tests' batch statements.
ALPHA = 0.01
#: The DuckDB command-line client (the ``duckdb-cli`` package of the test extra).
CLI = shutil.which("duckdb") or (str(Path(sys.executable).with_name("duckdb"))
                                 if Path(sys.executable).with_name("duckdb").exists() else None)


def python_rows(name: str, release: pdp.Release, frame: pl.DataFrame) -> list[list]:
    """Python's answers to the two statements of case ``name``."""
    if isinstance(release, pdp.GridRelease):
        batch = release.range_counts(frame, std=True, align="outer")
        acc = release.accuracy(frame, ALPHA, align="outer")["accuracy"]
        rows = [[i, c, s, c - a, c + a] for i, c, s, a in zip(batch["id"], batch["count"], batch["std"], acc,
                                                               strict=True)]
        whole = release.accuracy(pl.DataFrame({"id": [0]}), 0.05)  # the macro's default alpha
        c, s, a = whole["count"][0], whole["std"][0], whole["accuracy"][0]
        return [rows, [[c, s, c - a, c + a]]]
    if isinstance(release, pdp.SpatialRelease):
        columns = ("id", "count", "noise_std", "noise_lo", "noise_hi")
        batch = release.range_counts(frame, alpha=ALPHA).select(columns)
        one = release.range_counts(pl.DataFrame({"x_lo": [0.1], "x_hi": [0.6]}), alpha=0.05)
        return [batch.rows(), one.select("count", "noise_std", "noise_lo", "noise_hi").rows()]
    table = release.frequency_table(frame["string"].to_list())
    rows = [[i, *r] for i, r in enumerate(table.select("count", "std", "extrapolated").rows())]
    return [rows, release.frequency_table([["a", "b"]]).select("count", "std", "extrapolated").rows()]


def max_diff(got: list, want: list) -> tuple[float, tuple]:
    """Largest |got - want| over every answer (rows and columns in the same order), inf when the
    shapes or a non-number differ."""
    worst, where = 0.0, ()
    for n, (g_rows, w_rows) in enumerate(zip(got, want, strict=True)):
        assert len(g_rows) == len(w_rows)
        for g, w in zip(g_rows, w_rows, strict=True):
            for x, y in zip(g, w, strict=True):
                if isinstance(y, bool) or y is None or x is None:
                    assert x == y
                else:
                    diff = abs(float(x) - float(y)) / max(1.0, abs(float(y)))
                    if diff > worst:
                        worst, where = diff, (n, g, w)
    return worst, where


def grid_statements(name: str) -> list[str]:
    """The batch and single-query statements of grid release ``name`` (queries in ``<name>_q``)."""
    return [f"SELECT id, count, std, lo, hi FROM {name}_range_counts('{name}_q', align := 'outer', "
            f"alpha := {ALPHA}) ORDER BY id",
            f"SELECT count, std, lo, hi FROM {name}_range_count()"]


def tree_and_sequence_cases() -> dict[str, tuple[pdp.Release, pl.DataFrame, list[str]]]:
    """Per release name: a small spatial release (``t``), one with counted top levels (``tl``),
    one with sub-grids (``ts``) and a sequence model (``s``), each with its batch of queries and
    the statements whose rows Python gives."""
    boxes = pl.DataFrame({"id": range(40), **{f"{c}_{s}": np.sort(np.random.default_rng(6).random((40, 2)),
                                                                    axis=1)[:, j]
                                              for c in POINTS.columns for j, s in enumerate(("lo", "hi"))}})
    cases = {name: (tree, boxes, [
        f"SELECT id, count, noise_std, noise_lo, noise_hi FROM {name}_range_counts('{name}_q', "
        f"alpha := {ALPHA}) ORDER BY id",
        f"SELECT count, noise_std, noise_lo, noise_hi FROM {name}_range_count(x_lo := 0.1, x_hi := 0.6)"])
        for name, tree in {"t": small_tree_release(), "tl": small_tree_release(levels=2),
                           "ts": small_subgrid_release()}.items()}
    strings = [list(t) for k in range(1, 5) for t in itertools.product("abc", repeat=k)]
    cases["s"] = (small_sequence_release(), pl.DataFrame({"id": range(len(strings)), "string": strings}), [
        "SELECT id, count, std, extrapolated FROM s_frequencies('s_q') ORDER BY id",
        "SELECT count, std, extrapolated FROM s_frequency(['a', 'b'])"])
    return cases
