"""Public domains shared by the Python and SQL query tests (tests only)."""

from __future__ import annotations

import polars_dp as pdp


def grid_attributes() -> list:
    occupations = pdp.Hierarchy.from_dict(
        {"Sales": {"Retail": ["cashier", "clerk"], "Agents": ["agent"]},
         "Tech": ["civil", "software", "data"], "Other": ["farmer"]},
        level_names=["sector", "family"])
    return [
        pdp.Ordinal("age", 0, 29, width=3),
        pdp.Nominal("job", occupations),
        pdp.Nominal("hisp", categories=[False, True]),
        pdp.Ordinal("score", 0.0, 1.0, width=0.1),
        pdp.Nominal("zone", {"north": [1, 2], "south": [3, 4, 5]}),
    ]
