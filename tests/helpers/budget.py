"""A frame that must not be read, and one small call of every registered mechanism (tests only)."""

from __future__ import annotations

from typing import Any

import polars as pl

import polars_dp as pdp


class Untouchable:
    """Private data that raises on any access: a refusal that leaves ``touched`` empty read nothing."""

    def __init__(self) -> None:
        object.__setattr__(self, "touched", [])

    def __getattr__(self, name: str) -> Any:
        self.touched.append(name)
        raise AssertionError(f"the private data was touched ({name})")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AssertionError(f"the private data was touched ({name})")


GRID = pl.DataFrame({"a": [0, 1, 1, 2, 3, 3, 3]})
POINTS = pl.DataFrame({"x": [0.1, 0.2, 0.4, 0.8, 0.9], "y": [0.3, 0.1, 0.6, 0.7, 0.2]})
SEQUENCES = pl.DataFrame({"s": ["ab", "abc", "ba", "c", "cab"]})
BOX = {"bounds": [(0, 1), (0, 1)]}

#: Mechanism -> (data, positional arguments, keyword arguments): one small release each.
CALLS: dict[str, tuple[pl.DataFrame, tuple[Any, ...], dict[str, Any]]] = {
    "basic": (GRID, ([pdp.Ordinal("a", 0, 3)],), {}),
    "privelet": (GRID, ([pdp.Ordinal("a", 0, 3)],), {}),
    "privtree": (POINTS, (["x", "y"],), {**BOX, "levels": 1}),
    "uniform_grid": (POINTS, (["x", "y"],), dict(BOX)),
    "adaptive_grid": (POINTS, (["x", "y"],), dict(BOX)),
    "privelet_grid": (POINTS, (["x", "y"],), {**BOX, "bits": 2}),
    "privtree_sequences": (SEQUENCES, ("s",), {"alphabet": "abc", "max_length": 4}),
    "ngram_sequences": (SEQUENCES, ("s",), {"alphabet": "abc", "max_length": 4, "height": 2}),
}

#: (mechanism, neighbour relation) pairs the mechanisms support.
RELATIONS = [(name, relation) for name in CALLS for relation in ("replace", "add_remove")
             if relation == "add_remove" or "sequences" not in name]


class Guarded:
    """A Polars LazyFrame (column ``a``, values 0..3) that counts, and refuses, every read."""

    def __init__(self) -> None:
        self.reads = 0

        def boom(s: pl.Series) -> pl.Series:
            self.reads += 1
            raise AssertionError("the private data was read")

        guarded = pl.col("a").map_batches(boom, return_dtype=pl.Int64)
        self.frame = pl.LazyFrame({"a": [0, 1, 2]}).select(guarded)
