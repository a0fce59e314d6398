"""Every published noisy value carries its draw: no array is published exact beside a wasted draw.

The exact sampler is replaced by a known value per draw (:class:`tests.helpers.privacy.Draws`):
every draw ``C`` in one run, ``C + K`` in another, same data, same seed (the stand-in reads no
random bits, so PrivTree's decisions are the same in both).  A value published as "count plus
one draw" must then move by exactly ``K``; a wavelet release's counts by a noise field that does
not depend on the data; AG's first-level cells by what its consistency step does to a shift
``K`` of both levels.  A value published without its draw (the draw thrown away) does not move.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.privacy import CASE_IDS, CASES, Draws, check_cases_cover_registry, constant_draws

C, K = 1000, 3


def test_every_registered_mechanism_has_a_case():
    check_cases_cover_registry()


def _raw(release) -> dict[str, np.ndarray]:
    """The published values that are each an exact count plus one draw."""
    p = release.params
    out: dict[str, np.ndarray] = {}
    if release.mechanism == "basic":
        out["counts"] = release.counts.reshape(-1)
    elif release.mechanism in ("privtree", "uniform_grid"):
        if release.levels is not None:
            out["levels.noisy"] = release.levels.noisy
            out["noisy leaf counts"] = release.levels.noisy_leaves
        else:
            out["count"] = release.count
    elif release.mechanism == "privtree_subgrid":  # v and u; the consistent counts mix them
        out["noisy leaf counts"] = release.subgrid.noisy_leaf
        out["noisy sub-cell counts"] = release.subgrid.noisy_sub
    elif release.mechanism == "privtree_sequences":
        out["leaf histograms"] = release.hist[release.is_leaf]
        out["length_counts"] = np.asarray(p["length_counts"])
    elif release.mechanism == "ngram":
        out["hist"] = release.hist
    if str(p.get("n_source", "")).startswith("noisy"):
        out["n_used"] = np.asarray([p["n_used"]])
    return out


def _shifted(monkeypatch, case, *, varied: bool = False, **kw):
    """The release with every draw ``C``, then with every draw ``C + K`` (``varied``: ``C + K w``,
    ``w`` a fixed pseudo-random integer in 1..999 per position, so that no linear
    post-processing cancels the shift; the same for every dataset)."""
    constant_draws(monkeypatch, C)
    first = case.run(**kw)
    if varied:
        Draws(monkeypatch, lambda scale, shape: C + K * np.random.default_rng(5).integers(1, 1000, shape))
    else:
        constant_draws(monkeypatch, C + K)
    return first, case.run(**kw)


def _counts(release) -> np.ndarray:
    return np.asarray(release.counts if hasattr(release, "counts") else release.count).reshape(-1)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_every_published_draw_moves_its_value(monkeypatch, case):
    if case.mechanism in ("privelet", "privelet_grid", "hierarchical"):
        # counts + inverse(noise), or least squares (linear, exact on noiseless counts): the shift of
        # every count is a field of the draws alone
        a, b = _shifted(monkeypatch, case, varied=True)
        field = _counts(b) - _counts(a)
        assert np.all(np.abs(field) > 1e-6), "a published count does not depend on the draws"
        a2, b2 = _shifted(monkeypatch, case, varied=True, neighbour=True)
        np.testing.assert_allclose(_counts(b2) - _counts(a2), field, rtol=0, atol=1e-9)
        return
    a, b = _shifted(monkeypatch, case)
    if case.mechanism == "adaptive_grid":
        _check_adaptive_grid(a, b)
    raw_a, raw_b = _raw(a), _raw(b)
    assert raw_a or case.mechanism == "adaptive_grid", f"{case.id}: no published draw"
    for name in raw_a:
        assert raw_a[name].shape == raw_b[name].shape, f"{case.id}: {name} changed shape"
        np.testing.assert_array_equal(raw_b[name] - raw_a[name], K, err_msg=f"{case.id}: {name}")


def _first_level_sums(release) -> tuple[np.ndarray, np.ndarray]:
    """Per first-level cell of an AG release: the sum of its published counts and its sub-cells M."""
    m2 = np.asarray(release.layout["m2"])
    owner = np.repeat(np.arange(m2.size), m2**2)
    return np.bincount(owner, weights=release.count, minlength=m2.size), m2**2


def _check_adaptive_grid(a, b) -> None:
    """AG's consistency step on first-level counts ``v`` and second-level counts ``u``: a cell's
    published sum is ``(alpha^2 M v + (1 - alpha)^2 sum u) / (alpha^2 M + (1 - alpha)^2)``; with
    every draw shifted by ``K`` (``v`` by ``K``, ``sum u`` by ``M K``) it moves by
    ``K M (alpha^2 + (1 - alpha)^2) / (alpha^2 M + (1 - alpha)^2)``."""
    assert a.layout == b.layout, "the shift changed the second-level grid: choose another C"
    alpha = a.params["alpha"]
    sum_a, big_m = _first_level_sums(a)
    sum_b, _ = _first_level_sums(b)
    want = K * big_m * (alpha**2 + (1 - alpha) ** 2) / (alpha**2 * big_m + (1 - alpha) ** 2)
    np.testing.assert_allclose(sum_b - sum_a, want, rtol=1e-9)
