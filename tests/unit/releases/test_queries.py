"""Range-count queries in Python: answers vs brute-force sums, error bars, bad predicates."""

from __future__ import annotations

import itertools
import math

import numpy as np
import polars as pl
import pytest
from scipy import stats

import polars_dp as pdp
from polars_dp.counting.frequency import frequency_matrix
from polars_dp.domains.queries import predicate_ranges, query_ranges
from polars_dp.evaluation.references import selectivity, true_answers
from polars_dp.evaluation.workloads import coverage, random_workload
from polars_dp.kernels.prefix import box_sums, prefix_sums
from tests.helpers.domains import grid_attributes

ALPHA = 1e-6  # false-failure probability of each statistical check


@pytest.fixture(scope="module")
def release() -> pdp.GridRelease:
    attrs = grid_attributes()
    counts = np.random.default_rng(5).normal(10.0, 4.0, size=tuple(a.n_cells for a in attrs))
    return pdp.GridRelease(counts, attrs, mechanism="test", epsilon=1.0, neighbours="replace",
                           noise_scale=2.0)


def cell_mask(attribute, predicate) -> np.ndarray:
    """Brute force, independent of leaf_range / value_to_cell: which cells a predicate keeps."""
    if predicate is None:
        return np.ones(attribute.n_cells, dtype=bool)
    if isinstance(attribute, pdp.Ordinal):
        lo, hi = predicate
        lo = attribute.lo if lo is None else lo
        hi = attribute.hi if hi is None else hi
        lower = np.asarray(attribute.cell_labels(), dtype=np.float64)   # bin [lower, lower + width)
        upper = lower + attribute.width
        upper[-1] = attribute.hi + 1e-9                             # the last bin holds hi itself
        if attribute.integer:                                       # integer bins: values lower..upper-1
            return (upper > lo + 1e-12) & (lower <= hi + 1e-12)
        # float bins are half-open: a hi on an edge ends there (except the domain's top value)
        return (upper > lo + 1e-12) & ((lower < hi - 1e-12) | (hi >= attribute.hi))
    leaves = list(attribute.hierarchy.leaves)
    mask = np.array([leaf == predicate and type(leaf) is type(predicate) for leaf in leaves])
    for labels in attribute.hierarchy.level_labels().values():
        mask |= np.array([x == predicate and type(x) is type(predicate) for x in labels])
    if predicate == attribute.hierarchy.root:
        mask[:] = True
    return mask


def brute_force(release, predicates: dict) -> float:
    masks = [cell_mask(a, predicates.get(a.column)) for a in release.attributes]
    return float(release.counts[np.ix_(*masks)].sum())


def original_label(attribute, value):
    """The hierarchy label a batch value names (a string column names int/bool leaves by text)."""
    if not isinstance(value, str):
        return value
    labels = attribute.hierarchy.labels
    if value in labels:
        return value
    return next(x for x in labels if str(x).lower() == value)


def as_predicates(row: dict, attributes) -> dict:
    out = {}
    for a in attributes:
        if isinstance(a, pdp.Ordinal):
            lo, hi = row.get(f"{a.column}_lo"), row.get(f"{a.column}_hi")
            if lo is not None or hi is not None:
                out[a.column] = (a.lo if lo is None else lo, a.hi if hi is None else hi)
        elif row.get(a.column) is not None:
            out[a.column] = original_label(a, row[a.column])
    return out


def test_prefix_sums_is_the_summed_area_array():
    counts = np.random.default_rng(1).normal(size=(3, 4, 2))
    prefix = prefix_sums(counts)
    assert prefix.shape == (4, 5, 3)
    for j in itertools.product(*(range(n) for n in prefix.shape)):
        assert prefix[j] == pytest.approx(counts[: j[0], : j[1], : j[2]].sum(), abs=1e-12)


def test_range_sums_equal_box_sums():
    rng = np.random.default_rng(2)
    counts = rng.normal(size=(5, 3, 4, 2))
    starts = np.stack([rng.integers(0, n, 300) for n in counts.shape], axis=1)
    stops = np.stack([rng.integers(s + 1, n + 1) for s, n in zip(starts.T, counts.shape, strict=True)],
                     axis=1)
    got = box_sums(prefix_sums(counts), starts, stops)
    want = [counts[tuple(slice(a, b) for a, b in zip(s, t, strict=True))].sum()
            for s, t in zip(starts, stops, strict=True)]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("predicates", [
    {},                                                       # full domain
    {"age": (0, 29), "job": "*", "score": (0.0, 1.0)},        # full domain, spelled out
    {"age": (4, 17)},                                         # partial bins at both ends
    {"score": (0.25, 0.3)},                                   # float bins
    {"job": "Sales"}, {"job": "Retail"}, {"job": "agent"},    # group, subgroup, leaf
    {"job": "Agents"},                                        # collapsed single-child group
    {"hisp": True}, {"zone": 4}, {"zone": "north"},          # bool leaf, int leaf, group
    {"age": (9, 9), "job": "Tech", "hisp": False, "score": (0.5, 0.79), "zone": "south"},
    {"age": (None, 10), "score": (0.3, None)},                # open sides
])
def test_range_count_equals_brute_force(release, predicates):
    """align="outer": every bin the range touches (the brute force keeps exactly those)."""
    assert release.range_count(**predicates, align="outer") == pytest.approx(
        brute_force(release, predicates), rel=1e-9, abs=1e-9)


def test_batch_workload_equals_brute_force_and_single_queries(release):
    queries = random_workload(release.attributes, 400, seed=11)
    answers = release.range_counts(queries)
    assert answers.columns == [*queries.columns, "count"]
    for row in answers.iter_rows(named=True):
        predicates = as_predicates(row, release.attributes)
        want = brute_force(release, predicates)
        assert row["count"] == pytest.approx(want, rel=1e-9, abs=1e-9), row
        assert release.range_count(**predicates) == pytest.approx(row["count"], rel=1e-12, abs=1e-9)


def test_batch_accepts_partial_columns_nulls_and_lazy_frames(release):
    queries = pl.DataFrame({"id": [7, 8, 9], "age_hi": [5, None, 29], "job": [None, "Tech", "clerk"]})
    out = release.range_counts(queries.lazy(), std=True)
    assert out["id"].to_list() == [7, 8, 9]
    for row, preds in zip(out.iter_rows(named=True),
                          [{"age": (0, 5)}, {"job": "Tech"}, {"job": "clerk"}], strict=True):
        assert row["count"] == pytest.approx(brute_force(release, preds), rel=1e-9, abs=1e-9)
        assert row["std"] == pytest.approx(release.range_std(**preds))


def test_std_is_basic_formula(release):
    starts, stops = predicate_ranges(release.attributes, {"age": (3, 11), "job": "Sales"})
    cells = int(np.prod(stops - starts))
    assert cells == 3 * 3 * 2 * 11 * 5
    assert release.range_std(age=(3, 11), job="Sales") == pytest.approx(math.sqrt(2 * 2.0**2 * cells))


def test_prefix_is_cached_and_counts_cannot_be_replaced(release):
    r = pdp.GridRelease(release.counts.copy(), release.attributes, mechanism="test", epsilon=1.0,
                        neighbours="replace", noise_scale=1.0)
    first = r.prefix
    assert r.prefix is first
    total = r.range_count()
    with pytest.raises(AttributeError, match="postprocess"):
        r.counts = r.counts + 1.0
    assert r.prefix is first and r.range_count() == total


@pytest.mark.parametrize("neighbours", ["replace", "add_remove"])
def test_basic_std_matches_empirical_noise(neighbours):
    """200 seeded Basic releases x 100 disjoint 4-cell boxes = 20,000 independent errors.

    A k-cell sum of Laplace noise has excess kurtosis 3/k, so the sample variance s^2 of N
    errors has Var(s^2) ~ (2 + 3/k) sigma^4 / N (CLT); the bound holds with prob. 1 - ALPHA.
    """
    attrs = [pdp.Ordinal("a", 0, 199), pdp.Nominal("g", {"x": ["p", "q"], "y": ["r", "s"]})]
    rng = np.random.default_rng(3)
    frame = pl.DataFrame({"a": rng.integers(0, 200, 2000), "g": rng.choice(["p", "q", "r", "s"], 2000)})
    truth = pdp.GridRelease(frequency_matrix(frame, attrs), attrs, mechanism="none",
                            epsilon=1.0, neighbours=neighbours, noise_scale=1.0)
    queries = pl.DataFrame({"a_lo": np.arange(0, 200, 2), "a_hi": np.arange(1, 200, 2),
                            "g": ["x", "y"] * 50})
    exact = truth.range_counts(queries)["count"].to_numpy()
    errors, stds = [], None
    for seed in range(200):
        r = frame.dp.basic(attrs, epsilon=0.8, neighbours=neighbours, seed=seed)
        answers = r.range_counts(queries, std=True)
        errors.append(answers["count"].to_numpy() - exact)
        stds = answers["std"].to_numpy()
    errors = np.concatenate(errors)
    sigma2 = stds[0] ** 2
    assert np.allclose(stds**2, 2 * 4 * (pdp.noise.histogram_sensitivity(neighbours) / 0.8) ** 2)
    z = (errors.var() - sigma2) / (sigma2 * math.sqrt((2 + 3 / 4) / errors.size))
    assert abs(z) < stats.norm.isf(ALPHA / 2)


# ---------------------------------------------------------------------- bad predicates
@pytest.mark.parametrize(("predicates", "message"), [
    ({"height": (1, 2)}, "'height' is not an attribute"),
    ({"job": "Clerk"}, "job: 'Clerk' is not a label"),
    ({"zone": "5"}, "zone: '5' is not a label"),
    ({"age": (20, 10)}, "age: lo=20 > hi=10"),
    ({"age": (0, 30)}, "age: 30 is outside the declared domain"),
    ({"score": (-0.1, 0.5)}, "score: -0.1 is outside"),
    ({"age": 5}, "age: give an inclusive (lo, hi) pair"),
    ({"age": ("a", 5)}, "age: lo='a' is not a number"),
    ({"job": ["clerk", "agent"]}, "job: give one label (a category or a node of its hierarchy), got"),
    ({"zone": (1, 2)}, "zone: give one label"),
])
def test_bad_single_predicates(release, predicates, message):
    with pytest.raises(pdp.QueryError, match=message.replace("(", r"\(").replace(")", r"\)")):
        release.range_count(**predicates)


@pytest.mark.parametrize(("queries", "message"), [
    ({"id": [1, 2], "height_lo": [1, 2]}, "query column 'height_lo' is not a predicate"),
    ({"id": [1, 2], "age": [1, 2]}, "query column 'age' is not a predicate"),
    ({"id": [1, 2], "job": ["Sales", "Clerk"]}, r"job: 'Clerk' is not a label.*query id=2"),
    ({"id": [1, 2], "age_lo": [3, 20], "age_hi": [5, 10]}, r"age: lo=20 > hi=10.*query id=2"),
    ({"id": [1, 2], "age_hi": [3, 30]}, r"age_hi: 30 is outside the declared domain.*query id=2"),
    ({"age_lo": ["a", "b"]}, "column 'age_lo' has type String"),
    ({"job": [1.5, 2.5]}, "column 'job' has type Float64"),
    ({"hisp": ["yes", None]}, "hisp: 'yes' is not a label.*query row 0"),
])
def test_bad_batch_predicates(release, queries, message):
    with pytest.raises(pdp.QueryError, match=message):
        release.range_counts(pl.DataFrame(queries))


def test_batch_label_types(release):
    as_text = release.range_counts(pl.DataFrame({"hisp": ["true", None], "zone": ["4", "north"]}))
    typed = release.range_counts(pl.DataFrame({"hisp": [True, None], "zone": [4, None]}))
    assert as_text["count"][0] == pytest.approx(typed["count"][0])
    assert as_text["count"][0] == pytest.approx(brute_force(release, {"hisp": True, "zone": 4}))
    assert as_text["count"][1] == pytest.approx(brute_force(release, {"zone": "north"}))


def test_passthrough_keeps_extra_columns(release):
    out = release.range_counts(pl.DataFrame({"name": ["all"], "job": ["Tech"]}), passthrough=["name"])
    assert out["name"].to_list() == ["all"]


def test_passthrough_is_one_name_or_several_and_id_is_always_allowed(release):
    queries = pl.DataFrame({"id": [7], "label": ["all"], "job": ["Tech"]})
    expected = release.range_counts(queries.drop("label"))["count"][0]
    for passthrough in ("label", ["label"], ("label",)):
        out = release.range_counts(queries, passthrough=passthrough)
        assert out.columns[:3] == ["id", "label", "job"] and out["count"][0] == expected
    with pytest.raises(pdp.QueryError, match="query column 'label' is not a predicate"):
        release.range_counts(queries, passthrough="lab")


# ---------------------------------------------------------------------- workloads
def test_workload_shape_and_predicate_counts(release):
    attrs = release.attributes
    w = random_workload(attrs, 5000, seed=4)
    assert w["id"].to_list() == list(range(5000))
    assert random_workload(attrs, 5000, seed=4).equals(w)
    used = np.stack([w[a.column if isinstance(a, pdp.Nominal) else f"{a.column}_lo"].is_not_null()
                     .to_numpy() for a in attrs], axis=1)
    k = used.sum(axis=1)
    assert k.min() == 1 and k.max() == 4
    # k uniform on {1,2,3,4}: each count is Binomial(5000, 1/4); 1e-6 two-sided bound
    z = stats.norm.isf(ALPHA / 2)
    for j in range(1, 5):
        assert abs((k == j).sum() - 1250) < z * math.sqrt(5000 * 0.25 * 0.75)
    starts, stops = query_ranges(attrs, w)
    assert np.all(starts < stops)
    for axis, a in enumerate(attrs):
        if isinstance(a, pdp.Nominal):   # a non-root node: never the whole axis
            assert np.all((stops - starts)[used[:, axis], axis] < a.n_cells)


def test_workload_caps_predicates_at_dimension():
    attrs = [pdp.Ordinal("a", 0, 9), pdp.Nominal("b", categories=["x", "y"])]
    w = random_workload(attrs, 300, seed=1)
    assert set(w.columns) == {"id", "a_lo", "a_hi", "b"}
    assert (w["a_lo"].is_not_null() | w["b"].is_not_null()).all()
    assert (w["a_lo"] <= w["a_hi"]).all()


def test_coverage_and_selectivity(release):
    w = random_workload(release.attributes, 50, seed=9)
    cov = coverage(release.attributes, w)
    ones = np.ones(release.shape)
    np.testing.assert_allclose(cov, true_answers(ones, release.attributes, w) / ones.size)
    sel = selectivity(np.abs(release.counts), release.attributes, w)
    np.testing.assert_allclose(sel * np.abs(release.counts).sum(),
                               [brute_force(pdp.GridRelease(np.abs(release.counts), release.attributes,
                                                            mechanism="x", epsilon=1, neighbours="replace",
                                                            noise_scale=1),
                                            as_predicates(row, release.attributes))
                                for row in w.iter_rows(named=True)], rtol=1e-9)


def test_workload_bad_parameters():
    with pytest.raises(pdp.ParameterError):
        random_workload([pdp.Ordinal("a", 0, 9)], -1)
    with pytest.raises(pdp.ParameterError):
        random_workload([pdp.Ordinal("a", 0, 9)], 5, max_predicates=0)


def test_privelet_std_matches_empirical_noise():
    """1,000 seeded Privelet+ releases; per query, the sample variance of the errors vs std**2.

    Each answer's noise is a linear combination of independent Laplace draws, whose excess
    kurtosis is at most Laplace's (3), so Var(s^2) <= (2 + 3) sigma^4 / R (CLT).  Bonferroni
    over the queries keeps the false-failure probability at ALPHA.
    """
    occ = pdp.Hierarchy.from_dict({"office": ["clerk", "typist", "manager"], "field": ["driver", "farmer"],
                                   "other": ["artist"]})
    attrs = [pdp.Ordinal("age", 0, 12), pdp.Nominal("occ", occ), pdp.Nominal("sex", categories=["f", "m"])]
    rng = np.random.default_rng(5)
    frame = pl.DataFrame({"age": rng.integers(0, 13, 300), "occ": rng.choice(list(occ.leaves), 300),
                          "sex": rng.choice(["f", "m"], 300)})
    queries = pl.DataFrame({
        "age_lo": [0, 3, None, 5, 0, 12], "age_hi": [12, 9, None, 5, 6, 12],
        "occ": [None, "office", "farmer", "field", "clerk", None],
        "sex": [None, None, "m", None, "f", "f"],
    })
    exact = pdp.GridRelease(frequency_matrix(frame, attrs), attrs, mechanism="none",
                            epsilon=1.0, neighbours="replace", noise_scale=1.0
                            ).range_counts(queries)["count"].to_numpy()
    reps = 1000
    errors = np.empty((reps, queries.height))
    for seed in range(reps):
        r = frame.dp.privelet(attrs, epsilon=1.0, untransformed=["sex"], seed=seed)
        answers = r.range_counts(queries, std=True)
        errors[seed] = answers["count"].to_numpy() - exact
    sigma2 = answers["std"].to_numpy() ** 2
    assert r.transformed == ("age", "occ")
    z = (errors.var(axis=0) - sigma2) / (sigma2 * math.sqrt(5 / reps))
    assert np.all(np.abs(z) < stats.norm.isf(ALPHA / (2 * queries.height)))


# ---------------------------------------------------------------------- bin alignment
def test_a_bound_inside_a_bin_is_refused_naming_the_aligned_bounds():
    """Issue 12 case 4: weight=(100_000, 200_000) with bins of 10,000 was silently widened to
    whole bins (200,000 opens a new bin); now an error, or an explicit outer/inner choice."""
    weight = pdp.Ordinal("weight", 0, 1_500_000, width=10_000)
    counts = np.arange(weight.n_cells, dtype=np.float64)
    r = pdp.GridRelease(counts, [weight], mechanism="basic", epsilon=1.0, neighbours="replace",
                        noise_scale=2.0)
    with pytest.raises(pdp.QueryError, match=r"weight=\(100000, 209999\) \(align='outer'\) or "
                                             r"weight=\(100000, 199999\) \(align='inner'\)"):
        r.range_count(weight=(100_000, 200_000))
    with pytest.raises(pdp.QueryError, match="nearest aligned"):
        r.range_std(weight=(100_000, 200_000))
    assert r.range_count(weight=(100_000, 200_000), align="outer") == counts[10:21].sum()
    assert r.range_count(weight=(100_000, 200_000), align="inner") == counts[10:20].sum()
    assert r.range_count(weight=(100_000, 199_999)) == counts[10:20].sum()          # aligned: exact
    assert r.range_count(weight=(105_000, 199_999), align="inner") == counts[11:20].sum()
    assert r.range_std(weight=(105_000, 200_000), align="inner") == pytest.approx(math.sqrt(2 * 4 * 9))
    with pytest.raises(pdp.QueryError, match="contains no whole bin"):
        r.range_count(weight=(101_000, 102_000), align="inner")
    queries = pl.DataFrame({"id": [4, 5], "weight_lo": [0, 100_000], "weight_hi": [9_999, 200_000]})
    with pytest.raises(pdp.QueryError, match=r"nearest aligned.*\(query id=5\)"):
        r.range_counts(queries)
    out = r.range_counts(queries, align="outer")
    assert out["count"].to_list() == [counts[0], counts[10:21].sum()]
    with pytest.raises(pdp.ParameterError, match="align"):
        r.range_counts(queries, align="nearest")


def test_float_bins_are_half_open():
    """A float bin is [e_k, e_{k+1}): a hi on an edge ends there; the domain's hi closes the last bin."""
    score = pdp.Ordinal("score", 0.0, 1.0, width=0.25)  # bins [0, .25) [.25, .5) [.5, .75) [.75, 1) {1.0}
    counts = np.array([1.0, 10.0, 100.0, 1000.0, 10000.0])
    r = pdp.GridRelease(counts, [score], mechanism="basic", epsilon=1.0, neighbours="replace",
                        noise_scale=2.0)
    assert r.range_count(score=(0.25, 0.75)) == 110.0
    assert r.range_count(score=(0.5, 1.0)) == 11100.0
    assert r.range_count(score=(0.25, None)) == 11110.0
    with pytest.raises(pdp.QueryError, match=r"score=\(0.25, 0.75\) \(align='outer'\)"):
        r.range_count(score=(0.3, 0.6))
    assert r.range_count(score=(0.3, 0.6), align="outer") == 110.0
    with pytest.raises(pdp.QueryError, match="contains no whole bin"):
        r.range_count(score=(0.3, 0.6), align="inner")
