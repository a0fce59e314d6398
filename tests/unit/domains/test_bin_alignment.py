"""Python cell ranges of ordinal queries follow the definition of bin alignment, for every align,
on integer and float domains with partial last bins, open sides and nominal hierarchies."""

from __future__ import annotations

import numpy as np
import pytest

import polars_dp as pdp
from polars_dp.domains.queries import predicate_ranges, query_ranges
from tests.helpers.ranges import DOMAINS, expected_ranges, query_frame, random_queries


@pytest.mark.parametrize("align", ["exact", "outer", "inner"])
@pytest.mark.parametrize("domain", sorted(DOMAINS))
def test_python_ranges_follow_the_definition(domain, align):
    attrs = DOMAINS[domain]
    queries = random_queries(attrs, 400, seed=11)
    seen = set()
    for i, query in enumerate(queries):
        want = expected_ranges(attrs, query, align)
        frame = query_frame(attrs, [query], ids=[i])
        if isinstance(want, str):
            seen.add(want)
            with pytest.raises(pdp.QueryError, match=want):
                query_ranges(attrs, frame, align=align)
            with pytest.raises(pdp.QueryError, match=want):
                predicate_ranges(attrs, query, align=align)
            continue
        seen.add("ok")
        for starts, stops in (query_ranges(attrs, frame, align=align), predicate_ranges(attrs, query, align)):
            np.testing.assert_array_equal(np.ravel(starts), want[0], err_msg=f"{query} {align}")
            np.testing.assert_array_equal(np.ravel(stops), want[1], err_msg=f"{query} {align}")
    # the sample reaches every outcome its align has
    assert seen == {"exact": {"ok", "does not fall on bin edges", "contains no whole bin"},
                    "inner": {"ok", "contains no whole bin"}, "outer": {"ok"}}[align]
