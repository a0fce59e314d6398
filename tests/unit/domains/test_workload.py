"""Workloads as objects: Gram statistics against explicit query lists, the random generator's
expectation, combinations and the bad-input refusals."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import polars_dp as pdp
from polars_dp.domains import size
from polars_dp.domains.queries import query_ranges
from polars_dp.domains.workload import AxisWorkload
from polars_dp.errors import DomainTooLargeError, ParameterError
from polars_dp.evaluation.workloads import random_workload

HIER = pdp.Hierarchy.from_dict({"g1": ["a", "b", "c"], "g2": ["d", "e", "f"], "g3": ["h", "i", "j"]})


def dense_gram(axis: AxisWorkload, length: int) -> np.ndarray:
    """``Σ w q qᵀ`` from the listed intervals, a query reaching the last cell extended to ``length``."""
    starts, stops, weights = axis.intervals()
    g = np.zeros((length, length))
    for s, t, w in zip(starts, stops, weights, strict=True):
        q = np.zeros(length)
        q[s:(length if t >= axis.n else t)] = 1.0
        g += w * np.outer(q, q)
    return g


def dense_block_sums(g: np.ndarray, size: int) -> np.ndarray:
    nb = g.shape[0] // size
    return g.reshape(nb, size, nb, size).sum(axis=(1, 3))[np.arange(nb), np.arange(nb)]


AXES = [AxisWorkload("ranges", 7), AxisWorkload("prefixes", 7), AxisWorkload("random", 7),
        AxisWorkload("identity", 7), AxisWorkload("total", 7),
        pdp.workload.ranges(pdp.Nominal("n", HIER)).terms[0][1]["n"]]


@pytest.mark.parametrize("axis", AXES, ids=lambda a: a.kind)
@pytest.mark.parametrize(("size", "length"), [(1, 7), (7, 7), (2, 8), (4, 8), (8, 8), (4, 12)])
def test_block_sums_match_the_listed_queries(axis, size, length):
    if axis.kind == "nodes" and length != 9:
        length, size = 9, {1: 1, 7: 9, 2: 3, 4: 3, 8: 9}.get(size, 3)
    got = axis.block_sums(size, length)
    want = dense_block_sums(dense_gram(axis, length), size)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    _, _, weights = axis.intervals()
    assert weights.sum() == pytest.approx(axis.count)


def test_counts_and_closed_forms():
    n = 9
    assert AxisWorkload("ranges", n).count == n * (n + 1) / 2
    assert AxisWorkload("prefixes", n).count == n
    assert AxisWorkload("random", n).count == 1.0
    # the random generator: two independent uniform cells, sorted, inclusive
    s, t, w = AxisWorkload("random", n).intervals()
    assert w.sum() == pytest.approx(1.0)
    assert w[(s == 2) & (t == 5)][0] == pytest.approx(2 / n**2)
    assert w[(s == 4) & (t == 5)][0] == pytest.approx(1 / n**2)


def census_small():
    return [pdp.Ordinal("age", 0, 3), pdp.Nominal("sex", categories=["f", "m"]),
            pdp.Nominal("occ", HIER), pdp.Ordinal("inc", 0, 2)]


def full_gram(workload, attrs) -> np.ndarray:
    """The exact ``Σ_terms w ⊗_i G_i`` as a dense matrix."""
    total = None
    for w, axes in workload.axis_terms(attrs):
        g = np.ones((1, 1)) * w
        for ax in axes:
            g = np.kron(g, dense_gram(ax, ax.n))
        total = g if total is None else total + g
    return total


def test_random_ranges_is_the_generators_expectation():
    attrs = census_small()
    wl = pdp.workload.random_ranges(attrs)
    assert wl.queries == pytest.approx(1.0)
    exact = full_gram(wl, attrs)
    n = 12_000
    frame = random_workload(attrs, n, seed=5)
    starts, stops = query_ranges(attrs, frame)
    sizes = [a.n_cells for a in attrs]
    empirical = np.zeros_like(exact)
    q = np.zeros((n, int(np.prod(sizes))))
    grids = np.indices(sizes).reshape(len(sizes), -1).T  # every cell's coordinates
    inside = np.ones((n, grids.shape[0]), dtype=bool)
    for i in range(len(sizes)):
        inside &= (grids[None, :, i] >= starts[:, i, None]) & (grids[None, :, i] < stops[:, i, None])
    q = inside.astype(np.float64)
    empirical = q.T @ q / n
    # each entry is the mean of n Bernoulli variables: std <= 0.5 / sqrt(n); 6 sigmas over all entries
    assert np.abs(empirical - exact).max() < 6 * 0.5 / np.sqrt(n)
    # and the exact matrix is a probability: the diagonal is P(cell covered) in (0, 1]
    assert np.all((np.diag(exact) > 0) & (np.diag(exact) <= 1))


def test_marginals_and_combinations():
    a, b, c = pdp.Ordinal("a", 0, 3), pdp.Ordinal("b", 0, 4), pdp.Nominal("c", HIER)
    m2 = pdp.workload.marginals([a, b, c], 2)
    assert len(m2.terms) == 3
    assert m2.queries == 4 * 5 + 4 * 9 + 5 * 9
    k = pdp.workload.ranges(a) @ pdp.workload.prefixes(b)
    assert k.queries == 10 * 5
    np.testing.assert_allclose(full_gram(k, [a, b]), np.kron(full_gram(pdp.workload.ranges(a), [a]),
                                                             full_gram(pdp.workload.prefixes(b), [b])))
    u = pdp.workload.identity(a) + 2 * pdp.workload.total([a, b])
    assert u.queries == 4 + 2
    attrs = [a, b]
    want = np.kron(np.eye(4), np.ones((5, 5))) + 2 * np.ones((20, 20))
    np.testing.assert_allclose(full_gram(u, attrs), want)
    w = pdp.workload.union(pdp.workload.identity(a), pdp.workload.ranges(a), weights=[0.25, 0.5])
    assert w.queries == pytest.approx(0.25 * 4 + 0.5 * 10)


def test_bad_input_is_refused_in_one_sentence():
    a, b = pdp.Ordinal("a", 0, 3), pdp.Ordinal("b", 0, 4)
    with pytest.raises(ParameterError, match="not a declared attribute") as err:
        pdp.workload.ranges([a, b]).axis_terms([a])
    assert str(err.value).count(". ") == 0
    with pytest.raises(ParameterError, match="declares 'a'"):
        pdp.workload.ranges(pdp.Ordinal("a", 0, 9)).axis_terms([a])
    with pytest.raises(ParameterError, match="names no attribute"):
        pdp.workload.ranges([])
    with pytest.raises(ParameterError, match="no query"):
        pdp.workload.union()
    with pytest.raises(ParameterError, match="k must be an integer"):
        pdp.workload.marginals([a, b], 3)
    with pytest.raises(ParameterError, match="no prefixes"):
        pdp.workload.prefixes(pdp.Nominal("n", HIER))
    with pytest.raises(ParameterError, match="appears in two factors"):
        pdp.workload.ranges(a) @ pdp.workload.identity(a)
    with pytest.raises(ParameterError, match="weight"):
        pdp.workload.ranges(a) * 0


@pytest.mark.parametrize("weight", [True, 0, -1.0, float("nan"), float("inf"), "1"])
def test_a_workload_built_by_hand_refuses_a_weight_as_the_builders_do(weight):
    """The constructor's terms and boxes follow the one weight rule (a bool is not a weight)."""
    from polars_dp.domains.workload import Workload
    attrs = [pdp.Ordinal("a", 0, 3)]
    box = (weight, ("a",), np.zeros((1, 1), dtype=np.int64), np.ones((1, 1), dtype=np.int64))
    with pytest.raises(ParameterError, match="a workload weight must be a finite number > 0") as info:
        Workload(attrs, [], [box])
    assert info.value.parameter == "workload"
    with pytest.raises(ParameterError, match="a workload weight must be a finite number > 0"):
        Workload(attrs, [(weight, {"a": AxisWorkload("ranges", 4)})])
    assert Workload(attrs, [(np.float32(2.5), {"a": AxisWorkload("ranges", 4)})]).terms[0][0] == 2.5


def test_gram_statistics_past_memory_are_refused_before_allocating(monkeypatch):
    """An axis whose Gram statistics would take more than the machine's memory is refused with
    DomainTooLargeError by the one size rule (the count's), from its declared size alone; one
    that fits is computed as before."""
    monkeypatch.setattr(size, "total_memory_bytes", lambda: 1 << 20)  # a 1 MiB machine
    fits = AxisWorkload("ranges", 1000)
    assert fits.block_sums(1, 1000).sum() == pytest.approx(1000 * 1001 * 1002 / 6)
    assert fits.half_sums(8, 1000).shape == (125,)
    wide = AxisWorkload("ranges", 1 << 16)
    for call in (lambda: wide.block_sums(1, 1 << 16), lambda: wide.block_sums(4, 1 << 17, fold=False),
                 lambda: wide.half_sums(2, 1 << 16)):
        with pytest.raises(DomainTooLargeError, match=r"an axis of the workload has [0-9,]+ cells \('ranges' "
                                                      r"queries on 65,536 cells.*use coarser bins"):
            call()
    n = 1 << 10
    listed = AxisWorkload("nodes", n, np.zeros(n, dtype=np.int64), np.arange(1, n + 1, dtype=np.int64),
                          np.ones(n))
    assert listed.block_sums(1 << 6, n).shape == (16,)  # 16 blocks x 1,024 intervals fit
    with pytest.raises(DomainTooLargeError, match=r"1,024 blocks x 1,024 listed intervals"):
        listed.block_sums(1, n)
    with pytest.raises(DomainTooLargeError, match="'x' declares"):
        query_ranges([pdp.Ordinal("x", 0, 2**63)], pl.DataFrame({"x_lo": [0]}))
    assert size.MAX_AXIS_CELLS == 2**63 - 1
    size.check_cell_indices([pdp.Ordinal("x", 0, 2**63 - 2)])  # 2^63 - 1 cells: indexable
