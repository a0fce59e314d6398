"""The documented default of PrivTree's counted levels is the code's (the docstrings once said 12 // s)."""

from __future__ import annotations

import re

import polars_dp as pdp
from polars_dp.kernels.morton import MortonLayout
from polars_dp.mechanisms import privtree_levels as mechanism
from polars_dp.plans import privtree_levels as plan

DOCS = {"mechanisms.privtree_levels": mechanism.__doc__, "plans.privtree_levels.default_levels":
        plan.default_levels.__doc__, "privtree": pdp.privtree.__doc__}


def test_the_stated_default_rule_is_the_code():
    """Every ``max(1, N // s)`` a docstring states has ``N = DEFAULT_LEVEL_BITS``, the rule that
    :func:`default_levels` computes for every fanout, and ``levels=0`` stays the option's default."""
    for where, doc in DOCS.items():
        stated = {int(n) for n in re.findall(r"max\(1, (\d+) // (?:s|log2\(fanout\))\)", doc)}
        assert stated == {plan.DEFAULT_LEVEL_BITS}, (where, stated)
    for d in (1, 2, 3, 4, 8):
        for split_bits in range(1, d + 1):
            layout = MortonLayout(d, 6, split_bits)
            assert plan.default_levels(layout) == min(max(1, plan.DEFAULT_LEVEL_BITS // split_bits),
                                                      layout.max_depth)
    assert {o.name: o.default for o in pdp.plans.plan_class("privtree").options_table}["levels"] == 0
