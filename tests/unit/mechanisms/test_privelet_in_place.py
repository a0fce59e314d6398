"""The exact pipeline writing over the counts: the outer coefficient rows that fit in the counts'
memory live there (:class:`~polars_dp.kernels.row_store.SplitRows`), only the extra rows are
new, and the release is bit for bit the one computed into a separate array."""

from __future__ import annotations

import tracemalloc
from fractions import Fraction

import numpy as np
import pytest

import polars_dp as pdp
import polars_dp.mechanisms.wavelet_lattice as privelet_exact
from polars_dp.kernels import lattice_blocks as TL
from polars_dp.kernels import wavelets as T
from polars_dp.kernels.row_store import SplitRows
from polars_dp.noise import noise_source
from tests.helpers.wavelet_cases import CASES, INCOME, OCC

UNEVEN = pdp.Nominal("c", pdp.Hierarchy.from_dict({"g1": ["a", "b", "c"], "g2": ["d", "e", "f", "g", "h"],
                                                   "g3": ["i", "j"]}))
HAAR70 = pdp.Ordinal("b", 0, 69)  # 128 coefficients over 70 cells

#: the shared layouts, plus outer axes whose coefficient rows straddle the counts' rows
LAYOUTS = [*CASES,
           ([HAAR70, UNEVEN, INCOME], [True, True, True], 8192),
           ([pdp.Ordinal("u", 0, 2), HAAR70, OCC, INCOME], [False, True, True, True], 30_000),
           ([HAAR70, pdp.Ordinal("v", 0, 3), OCC, INCOME], [True, False, True, True], 30_000)]


def _run(counts, attrs, transformed, slab, *, in_place, approximate, variants):
    perturb = privelet_exact.lattice_perturb(Fraction(7, 3), noise_source(4),
                                             privelet_exact.lattice_factors(attrs, transformed))
    if not variants:  # forward, noise, inverse: no folded division, no noise-first axis
        perturb = (lambda p: lambda *a, **k: p(*a, **k))(perturb)
    work = counts.astype(np.int64, copy=False)  # consumed when in place
    out = work.view(np.float64) if in_place else np.empty(work.shape)
    got = TL.hn_lattice_inverse(work, attrs, transformed, perturb, out=out, slab_cells=slab,
                                approximate=approximate)
    assert got is out
    return got


@pytest.mark.parametrize(("attrs", "transformed", "slab"), LAYOUTS)
@pytest.mark.parametrize(("approximate", "variants"), [(False, True), (False, False), (True, True)])
def test_writing_over_the_counts_gives_the_same_bits(attrs, transformed, slab, approximate, variants):
    counts = np.random.default_rng(9).poisson(4.0, tuple(a.n_cells for a in attrs)).astype(np.int64)
    kw = {"approximate": approximate, "variants": variants}
    apart = _run(counts.copy(), attrs, transformed, slab, in_place=False, **kw)
    over = _run(counts.copy(), attrs, transformed, slab, in_place=True, **kw)
    assert np.array_equal(apart.view(np.int64), over.view(np.int64))


def test_writing_over_the_counts_allocates_only_the_extra_rows():
    """Outer axis: 70 cells, 128 coefficient rows.  Apart, the pipeline needs all 128 rows (and
    the output); over the counts only the 58 extra rows, plus scratch of a few blocks."""
    long_axis = pdp.Ordinal("w", 0, 1999)
    attrs, transformed, slab = [HAAR70, UNEVEN, long_axis], [True, True, True], 1 << 15
    counts = np.random.default_rng(1).poisson(4.0, tuple(a.n_cells for a in attrs)).astype(np.int64)
    inner_cells = UNEVEN.n_cells * long_axis.n_cells
    rows = T.coefficient_count(HAAR70)
    peaks = {}
    for in_place in (False, True):
        _run(counts.copy(), attrs, transformed, slab, in_place=in_place, approximate=False,
             variants=True)  # warm: caches and compiled kernels are not the pipeline's memory
        work = counts.copy()
        tracemalloc.start()
        _run(work, attrs, transformed, slab, in_place=in_place, approximate=False, variants=True)
        peaks[in_place] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    store = rows * inner_cells * 8
    extra = (rows - HAAR70.n_cells) * inner_cells * 8
    assert peaks[False] >= store + counts.size * 8  # the whole buffer and the output
    assert peaks[True] < extra + 16 * slab * 8, (peaks, extra, store)  # + block scratch


def test_split_rows_reads_and_writes_across_the_split():
    head, tail = np.arange(12.0).reshape(3, 4), np.arange(12.0, 20.0).reshape(2, 4)
    whole = np.vstack([head, tail])
    s = SplitRows(head, tail)
    assert s.shape == (5, 4)
    assert np.array_equal(s.rows(2, 2), whole[2:4]) and np.array_equal(s.rows(0, 2), whole[:2])
    assert np.shares_memory(s.rows(3, 2), tail)  # within one part: a view
    assert np.array_equal(s.columns(1, 2), whole[:, 1:3])
    s.set_rows(1, -np.ones((3, 4)))
    s.set_columns(3, np.full(5, 7.0))
    whole[1:4] = -1
    whole[:, 3] = 7
    assert np.array_equal(np.vstack([head, tail]), whole)
    assert np.array_equal(SplitRows.whole(whole).columns(0, 2), whole[:, :2])
