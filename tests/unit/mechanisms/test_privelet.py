"""Privelet / Privelet+ releases: noise scale, equivalence with the paper's formula, statistics."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import polars as pl
import pytest

import polars_dp as pdp
import polars_dp.mechanisms.wavelet as privelet_module
from polars_dp.counting.frequency import frequency_matrix
from polars_dp.domains.queries import predicate_ranges
from polars_dp.errors import ColumnNotFoundError, DomainError, HierarchyError, ParameterError
from polars_dp.kernels import wavelet_blocks as TB
from polars_dp.kernels import wavelets as T
from polars_dp.noise import laplace, make_rng

FALSE_FAILURE = 1e-6

OCC = pdp.Hierarchy.from_dict({"office": ["clerk", "manager", "analyst"], "field": ["driver", "farmer"]})


def small_attrs():
    return [pdp.Ordinal("age", 0, 9), pdp.Nominal("occ", OCC), pdp.Nominal("sex", categories=["f", "m"])]


def small_frame(n: int = 400, seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    return pl.DataFrame({
        "age": rng.integers(0, 10, n),
        "occ": rng.choice(list(OCC.leaves), n),
        "sex": rng.choice(["f", "m"], n),
    })


def z_two_sided(p: float) -> float:
    return NormalDist().inv_cdf(1 - p / 2)


# ---------------------------------------------------------------- parameters
@pytest.mark.parametrize(("untransformed", "rho", "mechanism"), [
    ((), 5 * 3 * 2, "privelet"),          # P(age)=1+log2 16, P(occ)=height 3, P(sex)=height 2
    (["sex"], 5 * 3, "privelet+"),
    (["age", "sex"], 3, "privelet+"),
    (["age", "occ", "sex"], 1, "basic"),   # nothing transformed: exactly Basic, labelled so
])
@pytest.mark.parametrize(("neighbours", "factor"), [("replace", 2), ("add_remove", 1)])
def test_noise_scale_and_rho_are_recorded(untransformed, rho, mechanism, neighbours, factor):
    r = pdp.privelet(small_frame(), small_attrs(), epsilon=0.5, untransformed=untransformed,
                     neighbours=neighbours, seed=1)
    assert r.params["rho"] == rho
    assert r.noise_scale == pytest.approx(factor * rho / 0.5)
    assert r.mechanism == mechanism
    assert r.params["untransformed"] == list(untransformed)
    assert r.params["transformed"] == [c for c in ("age", "occ", "sex") if c not in untransformed]
    assert r.params["untransformed_auto"] is False
    back = pdp.read_release(r.to_arrow())
    assert back.params == r.params and back.noise_scale == r.noise_scale and back.mechanism == mechanism


def test_auto_rule_picks_age_and_gender_on_the_census_shape():
    # Sec. VI: S_A = {Age, Gender}; Occupation (512, 3 levels) and Income (1001) are transformed
    occupation = pdp.Hierarchy.from_dict({f"g{i}": list(range(64 * i, 64 * i + 64)) for i in range(8)})
    attrs = [pdp.Ordinal("age", 0, 100), pdp.Nominal("gender", categories=["f", "m"]),
             pdp.Nominal("occupation", occupation), pdp.Ordinal("income", 0, 1000)]
    transformed, auto = privelet_module.resolve_untransformed(tuple(attrs), "auto")
    assert transformed == [False, False, True, True] and auto
    assert privelet_module.privelet_rho(attrs, transformed) == 3 * 11
    # at the rule's boundary: |A| = 726 = P^2 H for L = 10 stays untransformed, 727 does not
    assert privelet_module.auto_untransformed(pdp.Ordinal("x", 1, 726))
    assert not privelet_module.auto_untransformed(pdp.Ordinal("x", 1, 727))


def test_auto_is_recorded_in_the_release():
    r = small_frame().dp.privelet(small_attrs(), epsilon=1.0, untransformed="auto", seed=2)
    assert r.params["untransformed_auto"] is True
    assert r.params["untransformed"] == ["age", "occ", "sex"]  # tiny domains: Basic is better
    assert r.noise_scale == pytest.approx(2.0)


# ---------------------------------------------------------------- equivalence with the paper
def paper_release(frame, attrs, transformed, scale, seed) -> np.ndarray:
    """inverse_HN(forward_HN(M) + Lap(scale)) computed directly on the whole array."""
    m = frequency_matrix(frame, attrs)
    u = T.hn_forward(m, attrs, transformed)
    u += laplace(make_rng(seed), scale, u.shape)
    return TB.hn_inverse(u, attrs, transformed)


@pytest.mark.parametrize("untransformed", [(), ["age"], ["occ"], ["age", "occ"], ["sex"]])
@pytest.mark.parametrize("slab", [1, 64, 1 << 21])
def test_release_equals_inverse_of_noisy_coefficients(untransformed, slab, monkeypatch):
    monkeypatch.setattr(privelet_module, "SLAB_CELLS", slab)
    frame, attrs = small_frame(), small_attrs()
    r = pdp.privelet(frame, attrs, epsilon=1.0, untransformed=untransformed, seed=7, noise="float")
    transformed = [a.column not in untransformed for a in attrs]
    expected = paper_release(frame, attrs, transformed, r.noise_scale, seed=7)
    np.testing.assert_allclose(r.counts, expected, atol=1e-8 * r.noise_scale)


def test_dataframe_lazyframe_and_function_agree():
    frame, attrs = small_frame(), small_attrs()
    a = frame.dp.privelet(attrs, epsilon=1.0, seed=3)
    b = frame.lazy().dp.privelet(attrs, epsilon=1.0, seed=3)
    c = pdp.privelet(frame, attrs, epsilon=1.0, seed=3)
    assert np.array_equal(a.counts, b.counts) and np.array_equal(a.counts, c.counts)
    assert not np.array_equal(a.counts, pdp.privelet(frame, attrs, epsilon=1.0, seed=4).counts)


# ---------------------------------------------------------------- statistics
def noise_replicas(attrs, transformed, scale, reps, seed) -> np.ndarray:
    """``reps`` independent noise fields of the mechanism (an extra untransformed leading axis)."""
    rep_axis = pdp.Ordinal("rep", 0, reps - 1)
    field = np.zeros((reps, *(a.n_cells for a in attrs)))
    privelet_module.add_wavelet_noise(field, [rep_axis, *attrs], [False, *transformed], scale,
                                      make_rng(seed))
    return field


def unit_noise_weights(attrs, transformed, sel) -> np.ndarray:
    """Weight of every unit-Laplace coefficient in the range sum ``sel`` (explicit inverse map)."""
    coef = [T.coefficient_count(a) if t else a.n_cells for a, t in zip(attrs, transformed, strict=True)]
    n = int(np.prod(coef))
    r = np.eye(n).reshape(n, *coef)
    r = TB.hn_inverse(r.reshape(n, *coef), [pdp.Ordinal("k", 0, n - 1), *attrs], [False, *transformed])
    return r[(slice(None), *sel)].reshape(n, -1).sum(axis=1)


@pytest.mark.parametrize(("untransformed", "query"), [
    ((), {"age": (2, 8), "occ": "office"}),
    (["sex"], {"age": (0, 4), "occ": "farmer", "sex": "m"}),
    (["age"], {"occ": "field", "age": (3, 3)}),
])
def test_monte_carlo_variance_matches_exact(untransformed, query):
    attrs = small_attrs()
    transformed = [a.column not in untransformed for a in attrs]
    release = pdp.privelet(small_frame(), attrs, epsilon=1.0, untransformed=untransformed, seed=5)
    lo, hi = predicate_ranges(release.attributes, query)
    sel = tuple(slice(int(a), int(b)) for a, b in zip(lo, hi, strict=True))
    exact = release.range_variance(lo[None, :], hi[None, :])[0]
    assert exact == pytest.approx(release.range_std(**query) ** 2, rel=1e-12)
    w = unit_noise_weights(attrs, transformed, sel) * release.noise_scale
    assert exact == pytest.approx(2 * (w**2).sum(), rel=1e-9)  # the hook agrees with the map

    reps = 20_000
    answers = noise_replicas(attrs, transformed, release.noise_scale, reps, seed=11)
    answers = answers[(slice(None), *sel)].reshape(reps, -1).sum(axis=1)
    sample_var = answers.var(ddof=1)
    # sample variance of a sum of Laplace terms: Var(s^2) ~ sigma^4 (2/(n-1) + kappa/n) with
    # excess kurtosis kappa = 3 sum w^4 / (sum w^2)^2 (Laplace: 3); chi-square is the kappa=0 case
    kappa = 3 * (w**4).sum() / (w**2).sum() ** 2
    sd = exact * math.sqrt(2 / (reps - 1) + kappa / reps)
    assert abs(sample_var - exact) <= z_two_sided(FALSE_FAILURE) * sd


def test_noise_has_mean_zero_per_cell():
    attrs = small_attrs()
    transformed = [True, True, False]
    reps = 20_000
    release = pdp.privelet(small_frame(), attrs, epsilon=1.0, untransformed=["sex"], seed=0)
    field = noise_replicas(attrs, transformed, release.noise_scale, reps, seed=12)
    shape = tuple(a.n_cells for a in attrs)
    idx = np.indices(shape).reshape(len(shape), -1)
    var = release.range_variance(idx.T, idx.T + 1).reshape(shape)
    z = z_two_sided(FALSE_FAILURE / var.size)  # Bonferroni over cells
    assert np.all(np.abs(field.mean(axis=0)) <= z * np.sqrt(var / reps))


def test_mean_of_releases_approaches_true_matrix():
    frame, attrs = small_frame(), small_attrs()
    truth = frequency_matrix(frame, attrs)
    reps = 300
    total = np.zeros_like(truth)
    rng = make_rng(21)
    for _ in range(reps):
        total += pdp.privelet(frame, attrs, epsilon=2.0, untransformed=["age"], seed=rng).counts
    release = pdp.privelet(frame, attrs, epsilon=2.0, untransformed=["age"], seed=0)
    idx = np.indices(truth.shape).reshape(truth.ndim, -1)
    var = release.range_variance(idx.T, idx.T + 1).reshape(truth.shape)
    z = z_two_sided(FALSE_FAILURE / truth.size)
    assert np.all(np.abs(total / reps - truth) <= z * np.sqrt(var / reps))


# ---------------------------------------------------------------- bad input
def test_unknown_untransformed_column():
    with pytest.raises(ParameterError, match="'income'.*not a declared attribute"):
        pdp.privelet(small_frame(), small_attrs(), epsilon=1.0, untransformed=["income"])
    with pytest.raises(ParameterError, match="untransformed must be"):
        pdp.privelet(small_frame(), small_attrs(), epsilon=1.0, untransformed=5)


def test_single_string_names_one_column():
    r = pdp.privelet(small_frame(), small_attrs(), epsilon=1.0, untransformed="sex", seed=0)
    assert r.params["untransformed"] == ["sex"]


def test_single_leaf_hierarchy_must_be_untransformed():
    frame = small_frame().with_columns(pl.lit("x").alias("one"))
    attrs = [pdp.Ordinal("age", 0, 9), pdp.Nominal("one", categories=["x"])]
    with pytest.raises(HierarchyError, match="single leaf"):
        pdp.privelet(frame, attrs, epsilon=1.0)
    r = pdp.privelet(frame, attrs, epsilon=1.0, untransformed=["one"], seed=0)
    assert r.params["rho"] == 5


@pytest.mark.parametrize("kwargs", [{"epsilon": 0}, {"epsilon": -1.0}, {"epsilon": float("nan")},
                                    {"epsilon": 1.0, "neighbours": "swap"}, {"epsilon": 1.0, "seed": -3}])
def test_bad_parameters(kwargs):
    with pytest.raises(ParameterError):
        pdp.privelet(small_frame(), small_attrs(), **kwargs)


def test_foundation_rejections_apply():
    frame = small_frame()
    with pytest.raises(ColumnNotFoundError):
        pdp.privelet(frame, [pdp.Ordinal("height", 0, 9)], epsilon=1.0)
    with pytest.raises(DomainError, match="outside the declared domain"):
        pdp.privelet(frame, [pdp.Ordinal("age", 0, 5)], epsilon=1.0)
    age = pl.when(pl.col("age") == 3).then(None).otherwise(pl.col("age"))
    with_null = frame.with_columns(age.alias("age"))
    with pytest.raises(DomainError, match="null"):
        pdp.privelet(with_null, small_attrs(), epsilon=1.0)
    r = pdp.privelet(with_null, small_attrs(), epsilon=1.0, nulls="drop", seed=0)
    assert r.counts.shape == (10, 5, 2)


def test_auto_that_transforms_nothing_is_labelled_basic():
    df = pl.DataFrame({"a": [0, 1, 2, 2], "g": ["x", "y", "x", "x"]})
    attrs = [pdp.Ordinal("a", 0, 3), pdp.Nominal("g", categories=["x", "y"])]
    r = df.dp.privelet(attrs, epsilon=1.0, untransformed="auto", seed=1)
    assert r.params["transformed"] == []
    assert r.mechanism == "basic" and "Basic" in r.params["note"] and "Basic" in repr(r)
    same = df.dp.basic(attrs, epsilon=1.0, seed=1)
    assert r.noise_scale == same.noise_scale


def test_a_misspelled_rule_for_untransformed_is_offered_the_rules():
    attrs = [pdp.Ordinal("a", 0, 9), pdp.Nominal("c", categories=["x", "y"])]
    with pytest.raises(pdp.ParameterError, match=r"'wrkload', which is not a declared attribute; declared: "
                                                 r"\['a', 'c'\] \(or one of the rules 'auto', 'workload'\)$"):
        pdp.plan("privelet", attrs, epsilon=1, untransformed="wrkload")
    with pytest.raises(pdp.ParameterError, match=r"declared: \['a', 'c'\]$"):  # a list names columns only
        pdp.plan("privelet", attrs, epsilon=1, untransformed=["b"])


def test_a_category_outside_the_declared_ones_says_to_declare_it():
    attrs = [pdp.Nominal("c", categories=["x", "y"])]
    with pytest.raises(pdp.DomainError, match="add the value to the declared categories or hierarchy"):
        pdp.privelet(pl.DataFrame({"c": ["z"]}), attrs, epsilon=1.0)
