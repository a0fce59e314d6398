"""Block layouts of the exact wavelet pipeline shared by its tests: (attributes, transformed, slab)
with a Haar last axis long enough to be inverted level by level (301 cells x 512 coefficients)."""

from __future__ import annotations

import polars_dp as pdp

OCC = pdp.Nominal("occ", pdp.Hierarchy.from_dict({f"g{g}": [f"o{g}_{i}" for i in range(6)]
                                                   for g in range(3)}))
INCOME = pdp.Ordinal("income", 0, 300)

#: groups of batch items, one item per block, outer axes in column blocks, a 1-D axis
CASES = [
    ([pdp.Ordinal("age", 0, 4), OCC, INCOME], [False, True, True], 1 << 21),
    ([pdp.Ordinal("age", 0, 4), OCC, INCOME], [False, True, True], 5000),
    ([pdp.Ordinal("age", 0, 6), OCC, INCOME], [True, True, True], 20_000),
    ([pdp.Ordinal("age", 0, 6), pdp.Nominal("g", categories=[0, 1]), INCOME], [True, True, True], 3000),
    # an outer Haar axis with rows over padding only (11 cells: 3 of 16 rows), blocks of 3 rows cut there
    ([pdp.Ordinal("age", 0, 10), OCC, INCOME], [True, True, True], 40_000),
    ([INCOME], [True], 1 << 21),
]
