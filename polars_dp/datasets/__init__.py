"""Small public datasets shipped with the package, with their public domain declarations.

``military``: every member of the US Army, Navy, Air Force and Marine Corps (1,414,593
people; US Department of Defense "Personnel trends by gender/race", public domain, via the
openintro R package).  Columns: grade, branch, gender, race, hisp, rank (1..11).
"""

from __future__ import annotations

from importlib.resources import files
from typing import Any, Literal, overload

import polars as pl

from polars_dp.domains.attributes import Nominal, Ordinal
from polars_dp.domains.hierarchy import Hierarchy

#: Public generalisation hierarchies of the military table's nominal columns.
MILITARY_HIERARCHIES: dict[str, Any] = {
    "grade": {"commissioned": ["officer", "warrant officer"], "enlisted": ["enlisted"]},
    "branch": {"Department of the Army": ["army"], "Department of the Navy": ["navy", "marine corps"],
               "Department of the Air Force": ["air force"]},
    "race": {"known": {"white": ["white"], "black": ["black"], "asian/pacific": ["asian", "p/i"],
                       "other": ["ami/aln", "multi"]},
             "unknown": ["unk"]},
}


def military_path() -> str:
    return str(files("polars_dp.datasets") / "military.parquet")


@overload
def load_military(lazy: Literal[False] = False) -> pl.DataFrame: ...
@overload
def load_military(lazy: Literal[True]) -> pl.LazyFrame: ...
def load_military(lazy: bool = False) -> pl.DataFrame | pl.LazyFrame:
    """The military personnel table (a LazyFrame scan when ``lazy``)."""
    return pl.scan_parquet(military_path()) if lazy else pl.read_parquet(military_path())


def military_attributes() -> list:
    """Public declarations of the military table: 3,696 cells."""
    return [
        Nominal("grade", Hierarchy.from_dict(MILITARY_HIERARCHIES["grade"], level_names=["class"])),
        Nominal("branch", Hierarchy.from_dict(MILITARY_HIERARCHIES["branch"], level_names=["department"])),
        Nominal("gender", categories=["female", "male"]),
        Nominal("race", Hierarchy.from_dict(MILITARY_HIERARCHIES["race"],
                                            level_names=["known", "group"])),
        Nominal("hisp", categories=[False, True]),
        Ordinal("rank", 1, 11),
    ]


__all__ = ["MILITARY_HIERARCHIES", "load_military", "military_attributes", "military_path"]
