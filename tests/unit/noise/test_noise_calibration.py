"""The noise every mechanism actually draws, per neighbour relation, against the exact law.

Each test takes the noise out of seeded releases (release minus truth, or the lattice
coefficients for Privelet, or the draws recorded by a spy on the sampler when the release
post-processes them) and checks it against the discrete Laplace pmf at the scale derived here
from the paper's formula.  ``assert_dlap`` also checks that the same draws reject half the
scale, double the scale and 1.5 times the epsilon, so every test can fail.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from scipy import stats

import polars_dp as pdp
import polars_dp.mechanisms.ngram as ngram_module
import polars_dp.mechanisms.sequences as seq_module
import polars_dp.mechanisms.spatial_grids as grids_module
import polars_dp.mechanisms.spatial_tree as privtree_module
import polars_dp.mechanisms.wavelet_lattice as privelet_exact
from polars_dp.counting.frequency import frequency_matrix
from polars_dp.domains.box import as_box
from polars_dp.errors import ParameterError
from polars_dp.kernels import wavelet_blocks as TB
from polars_dp.kernels import wavelets as T
from polars_dp.kernels.morton import MortonLayout, grid_coordinates, morton_codes, resolution_bits
from tests.helpers.noise import ALPHA, assert_dlap
from tests.helpers.samplers import with_out

Z = stats.norm.isf(ALPHA / 2)
RELATIONS = [("replace", 2), ("add_remove", 1)]


def spy(monkeypatch, module, name="sample_noise"):
    """Record ``(scale, draws)`` of every call of ``module.sample_noise``."""
    calls = []
    real = getattr(module, name)

    def wrapper(src, scale, size, noise):
        out = real(src, scale, size, noise)
        calls.append((float(scale), np.asarray(out)))
        return out

    monkeypatch.setattr(module, name, wrapper)
    return calls


# ---------------------------------------------------------------- Basic
@pytest.mark.parametrize(("neighbours", "sens"), RELATIONS)
def test_basic_cells(neighbours, sens):
    frame = pl.DataFrame({"a": np.arange(0, 30_000, 7) % 20_000})
    attrs = [pdp.Ordinal("a", 0, 19_999)]
    eps = 1.3
    r = pdp.basic(frame, attrs, epsilon=eps, neighbours=neighbours, seed=1)
    assert r.noise == "exact" and r.seeded
    noise = r.counts - frequency_matrix(frame, attrs)
    assert np.array_equal(noise, np.round(noise))
    assert_dlap(noise, sens / eps)
    assert r.params["epsilon_effective"] <= eps


# ---------------------------------------------------------------- Privelet / Privelet+
def lattice_noise(release, truth, attrs, transformed) -> list[tuple[float, np.ndarray]]:
    """``D (u(release) - u(truth))`` per lattice factor ``D``: must be integers."""
    du = T.hn_forward(release - truth, attrs, transformed)
    d = np.ones([1] * len(attrs))
    for k, (a, t) in enumerate(zip(attrs, transformed, strict=True)):
        if t and isinstance(a, pdp.Nominal):
            f = a.hierarchy.fanouts[a.hierarchy.node_parent[1:]]
            shape = [1] * len(attrs)
            shape[k] = f.size + 1
            d = d * np.r_[1, 2 * (f - 1)].reshape(shape)
    d = np.broadcast_to(d, du.shape)
    z = du * d
    assert np.allclose(z, np.round(z), atol=1e-6), "noisy coefficients are off the lattice"
    return [(float(v), np.round(z[d == v]).astype(np.int64)) for v in np.unique(d)]


@pytest.mark.parametrize(("neighbours", "sens"), RELATIONS)
def test_privelet_haar_coefficients(neighbours, sens):
    attrs = [pdp.Ordinal("a", 0, 4095)]
    frame = pl.DataFrame({"a": np.arange(5000) % 4096})
    eps = 8.0
    r = pdp.privelet(frame, attrs, epsilon=eps, neighbours=neighbours, seed=2)
    rho = 1 + 12
    ((d, z),) = lattice_noise(r.counts, frequency_matrix(frame, attrs), attrs, [True])
    assert d == 1 and z.size == 4096
    assert_dlap(z, sens * rho / eps)


def _occupations(rng, n: int) -> list[str]:
    return [f"o{g}_{i}" for g, i in zip(rng.integers(0, 4, n), rng.integers(0, 64, n), strict=True)]


def _nominal_attrs():
    occ = pdp.Hierarchy.from_dict({f"g{g}": [f"o{g}_{i}" for i in range(64)] for g in range(4)})
    return [pdp.Ordinal("a", 0, 63), pdp.Nominal("occ", occ)]


@pytest.mark.parametrize(("neighbours", "sens"), RELATIONS)
def test_privelet_nominal_lattice(neighbours, sens, monkeypatch):
    """Nominal coefficients: ``D u`` integers with ``D = 2 (f - 1)``, noise ``DLap(D lambda)``
    per coefficient; the release is the float inverse of ``(D u + Z) / D`` and nothing else.
    (The inverse's sibling-mean refinement moves the release's own coefficients off the
    lattice, so the draws are taken from a spy on the sampler.)"""
    calls = []
    real = privelet_exact.discrete_laplace

    def spy_dlap(src, t, s, n):
        out = real(src, t, s, n)
        calls.append((Fraction(t, s), out))
        return out

    monkeypatch.setattr(privelet_exact, "discrete_laplace", with_out(spy_dlap))
    attrs = _nominal_attrs()
    rng = np.random.default_rng(0)
    frame = pl.DataFrame({"a": rng.integers(0, 64, 3000), "occ": _occupations(rng, 3000)})
    eps = 40.0
    r = pdp.privelet(frame, attrs, epsilon=eps, neighbours=neighbours, seed=3)
    lam = Fraction(r.params["noise_scale_exact"])
    assert float(lam) == pytest.approx(sens * (1 + 6) * 3 / eps, rel=1e-5) and lam >= Fraction(sens * 21) / 40
    draws = {float(scale / lam): z for scale, z in calls}
    assert sorted(draws) == [1.0, 6.0, 126.0]
    assert_dlap(draws[126.0], 126 * float(lam))  # 64 x 256 leaf coefficients
    assert_dlap(draws[6.0], 6 * float(lam), alternatives=False)
    # the release is the float inverse of the noisy lattice coefficients and of nothing else
    assert_release_is_inverse_of_noisy_lattice(monkeypatch, frame, attrs, epsilon=eps, neighbours=neighbours,
                                               seed=3)


def assert_release_is_inverse_of_noisy_lattice(monkeypatch, frame, attrs, **kw):
    """Record the noisy coefficients the pipeline hands to the inverse, block by block; check that
    ``D`` times them are integers (the lattice) and that the release is exactly their inverse."""
    blocks = []
    real_perturb = privelet_exact.lattice_perturb

    def recording(scale, src, factors):
        perturb = real_perturb(scale, src, factors)

        def record(numerators, denominators, start):
            out = perturb(numerators, denominators, start)
            d = np.broadcast_to(denominators, out.shape)
            assert np.allclose(out * d, np.round(out * d), rtol=0, atol=1e-6), "off the lattice"
            blocks.append((start, out.ravel().copy()))
            return out

        return record

    monkeypatch.setattr(privelet_exact, "lattice_perturb", recording)
    r = pdp.privelet(frame, attrs, **kw)
    monkeypatch.setattr(privelet_exact, "lattice_perturb", real_perturb)
    shape = [T.coefficient_count(a) for a in attrs]
    coef = np.full(int(np.prod(shape)), np.nan)
    for start, values in blocks:
        coef[start:start + values.size] = values
    assert not np.isnan(coef).any()  # every coefficient was noised exactly once
    expected = TB.hn_inverse(coef.reshape(shape), attrs, [True] * len(attrs))
    np.testing.assert_allclose(r.counts, expected, rtol=0, atol=1e-9 * np.abs(expected).max())


def test_privelet_exact_blocks_cover_the_coefficients_once(monkeypatch):
    """Many small blocks (Haar axis first, nominal and Haar axes): the release is still the
    inverse of its noisy lattice coefficients, each drawn once."""
    attrs = [pdp.Ordinal("a", 0, 63), _nominal_attrs()[1], pdp.Ordinal("b", 0, 40)]
    rng = np.random.default_rng(11)
    frame = pl.DataFrame({"a": rng.integers(0, 64, 2000), "occ": _occupations(rng, 2000),
                          "b": rng.integers(0, 41, 2000)})
    monkeypatch.setattr(privelet_exact, "SLAB_CELLS", 1000)
    assert_release_is_inverse_of_noisy_lattice(monkeypatch, frame, attrs, epsilon=1.0, seed=13)


@pytest.mark.parametrize(("neighbours", "sens"), RELATIONS)
def test_privelet_plus_untransformed_axis(neighbours, sens):
    attrs = _nominal_attrs()[::-1] + [pdp.Ordinal("b", 0, 31)]
    rng = np.random.default_rng(1)
    frame = pl.DataFrame({"occ": _occupations(rng, 2000), "a": rng.integers(0, 64, 2000),
                          "b": rng.integers(0, 32, 2000)})
    eps = 6.0
    r = pdp.privelet(frame, attrs, epsilon=eps, untransformed=["occ"], neighbours=neighbours, seed=4)
    assert r.mechanism == "privelet+"
    rho = (1 + 6) * (1 + 5)
    ((d, z),) = lattice_noise(r.counts, frequency_matrix(frame, attrs), attrs, [False, True, True])
    assert d == 1
    assert_dlap(z, sens * rho / eps)


@pytest.mark.parametrize(("neighbours", "sens"), RELATIONS)
def test_privelet_grid_coefficients(neighbours, sens):
    rng = np.random.default_rng(2)
    frame = pl.DataFrame({"x": rng.random(500), "y": rng.random(500)})
    eps = 16.0
    r = pdp.privelet_grid(frame, ["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=eps, bits=6,
                          neighbours=neighbours, seed=5)
    grid = r.count.reshape(64, 64)
    truth = np.histogram2d(frame["x"], frame["y"], bins=64, range=[(0, 1), (0, 1)])[0]
    attrs = [pdp.Ordinal("x", 0, 63), pdp.Ordinal("y", 0, 63)]
    ((_, z),) = lattice_noise(grid, truth, attrs, [True, True])
    assert_dlap(z, sens * 7 * 7 / eps)


# ---------------------------------------------------------------- PrivTree (spatial)
@pytest.mark.parametrize(("neighbours", "factor"), RELATIONS)
def test_privtree_leaf_counts(neighbours, factor):
    rng = np.random.default_rng(3)
    xy = rng.random((20_000, 2)) ** 2
    frame = pl.DataFrame({"x": xy[:, 0], "y": xy[:, 1]})
    bounds = [(0.0, 1.0), (0.0, 1.0)]
    box = as_box(["x", "y"], bounds)
    layout = MortonLayout(2, resolution_bits(2), 2)
    codes = np.sort(morton_codes(grid_coordinates([xy[:, 0], xy[:, 1]], box, layout.bits), layout.bits))
    eps, share = 3.0, 0.6
    noise = []
    for seed in range(3):
        r = pdp.privtree(frame, ["x", "y"], bounds=bounds, epsilon=eps, tree_share=share,
                         neighbours=neighbours, seed=seed, levels=0)
        span = np.left_shift(np.int64(1), [layout.shift(int(d)) for d in r.depth])
        truth = np.searchsorted(codes, r.codes + span) - np.searchsorted(codes, r.codes)
        noise.append(r.count - truth)
    noise = np.concatenate(noise)
    assert noise.size > 5000
    eps_leaf = float(Fraction(eps) - Fraction(eps) * Fraction(share))
    assert_dlap(noise, factor / eps_leaf)


def _tail_probability(x: np.ndarray, lam: float) -> np.ndarray:
    return np.where(x >= 0, 0.5 * np.exp(-np.maximum(x, 0) / lam), 1 - 0.5 * np.exp(np.minimum(x, 0) / lam))


@pytest.mark.parametrize(("neighbours", "factor"), RELATIONS)
def test_privtree_split_decisions(neighbours, factor, monkeypatch):
    """Every decision drawn in a release follows ``P[Lap(lambda) > theta - b]`` with ``lambda``
    from the paper's formula (group factor 2 under replace); half, double and 1.5x epsilon fail."""
    seen = []
    real = privtree_module.privtree_split

    def spy_split(score, depth, *, lam, delta, theta, rng, noise):
        out = real(score, depth, lam=lam, delta=delta, theta=theta, rng=rng, noise=noise)
        seen.append((np.asarray(score, dtype=np.float64), depth, delta, theta, out))
        return out

    monkeypatch.setattr(privtree_module, "privtree_split", spy_split)
    rng = np.random.default_rng(4)
    xy = np.vstack([rng.normal(0.3, 0.05, (3000, 2)), rng.random((3000, 2))]).clip(0, 0.999)
    frame = pl.DataFrame({"x": xy[:, 0], "y": xy[:, 1]})
    eps, share, beta = 0.4, 0.5, 4
    for seed in range(150):
        pdp.privtree(frame, ["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=eps, tree_share=share,
                     neighbours=neighbours, seed=seed)
    lam = (2 * beta - 1) * factor / ((beta - 1) * eps * share)
    x = np.concatenate([th - np.maximum(s - d * dl, th - dl) for s, d, dl, th, _ in seen])
    hit = np.concatenate([o for *_, o in seen]).astype(float)
    informative = np.abs(x - seen[0][2]) > 1e-9  # clamped nodes have x = delta whatever the data

    def z_scores(lam_):
        out = []
        for part in (informative & (x < 0), informative & (x >= 0)):
            p = _tail_probability(x[part], lam_)
            out.append((hit[part].sum() - p.sum()) / math.sqrt((p * (1 - p)).sum()))
        return np.abs(out)

    assert np.all(z_scores(lam) < Z)
    for wrong in (lam / 2, lam * 2, lam / 1.5):
        assert np.any(z_scores(wrong) > Z), f"decisions cannot tell lambda {lam} from {wrong}"


# ---------------------------------------------------------------- UG / AG
@pytest.mark.parametrize(("neighbours", "sens"), RELATIONS)
def test_uniform_grid_cells(neighbours, sens):
    rng = np.random.default_rng(5)
    frame = pl.DataFrame({"x": rng.random(2000), "y": rng.random(2000)})
    eps = 1.5
    r = pdp.uniform_grid(frame, ["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=eps, n=400_000,
                         neighbours=neighbours, seed=6)
    m = r.params["m"]
    assert m * m > 10_000
    truth = np.histogram2d(frame["x"], frame["y"], bins=m, range=[(0, 1), (0, 1)])[0].ravel()
    assert_dlap(r.count - truth, sens / eps)


@pytest.mark.parametrize(("neighbours", "sens"), RELATIONS)
def test_uniform_grid_replace_without_public_n(neighbours, sens):
    """Under replace the exact N is free; under add_remove N costs n_share of epsilon."""
    rng = np.random.default_rng(6)
    frame = pl.DataFrame({"x": rng.random(200_000), "y": rng.random(200_000)})
    eps = 2.0
    r = pdp.uniform_grid(frame, ["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=eps, neighbours=neighbours,
                         seed=7)
    eps_grid = eps if neighbours == "replace" else float(Fraction(eps) - Fraction(0.05) * Fraction(eps))
    m = r.params["m"]
    truth = np.histogram2d(frame["x"], frame["y"], bins=m, range=[(0, 1), (0, 1)])[0].ravel()
    assert_dlap(r.count - truth, sens / eps_grid)


@pytest.mark.parametrize(("neighbours", "sens"), RELATIONS)
def test_adaptive_grid_levels(neighbours, sens, monkeypatch):
    """Level 1 spends alpha * eps, level 2 (1 - alpha) * eps: each draw at its own scale."""
    calls = spy(monkeypatch, grids_module)
    rng = np.random.default_rng(7)
    frame = pl.DataFrame({"x": rng.random(1000), "y": rng.random(1000)})
    eps, alpha = 1.0, 0.3
    pdp.adaptive_grid(frame, ["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=eps, n=4_000_000, alpha=alpha,
                      neighbours=neighbours, seed=8)
    (_, level1), (_, level2) = calls
    assert level1.size > 10_000 and level2.size > 10_000
    assert_dlap(level1, sens / (alpha * eps))
    assert_dlap(level2, sens / ((1 - alpha) * eps))


# ---------------------------------------------------------------- sequences (add_remove only)
def _sequences(n: int, seed: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    return pl.DataFrame({"s": ["".join(rng.choice(list("abcd"), rng.integers(1, 9))) for _ in range(n)]})


def test_pst_leaf_histograms(monkeypatch):
    calls = spy(monkeypatch, seq_module)
    frame = _sequences(3000, 8)
    eps, share, max_length = 4.0, 0.5, 6
    draws = []
    for seed in range(4):
        m = pdp.privtree_sequences(frame, "s", alphabet="abcd", max_length=max_length, epsilon=eps,
                                   tree_share=share, length_share=0.0, seed=seed)
        assert m.noise == "exact" and m.seeded
    draws = np.concatenate([d.ravel() for _, d in calls])
    assert draws.size > 3000
    assert_dlap(draws, (max_length + 1) / (eps * (1 - share)))


def test_pst_tree_lambda_uses_group_privacy():
    m = pdp.privtree_sequences(_sequences(200, 9), "s", alphabet="abcd", max_length=6, epsilon=1.0,
                               tree_share=0.25, seed=1)
    beta, l_top = 5, 7
    lam = (2 * beta - 1) / (beta - 1) * l_top / 0.25
    assert lam <= m.params["lambda"] < lam + 2**-19
    assert m.params["delta"] >= m.params["lambda"] * math.log(beta)
    assert m.params["delta"] < m.params["lambda"] * math.log(beta) + 2**-19


def test_ngram_cells(monkeypatch):
    calls = spy(monkeypatch, ngram_module)
    eps, height, max_length = 30.0, 4, 5
    for seed in range(6):
        m = pdp.ngram_sequences(_sequences(500, 10), "s", alphabet="abcd", max_length=max_length, epsilon=eps,
                                height=height, seed=seed)
        assert calls[-1][1].shape == m.hist.shape
    draws = np.concatenate([d.ravel() for _, d in calls])
    assert_dlap(draws, height * (max_length + 1) / eps)


# ---------------------------------------------------------------- metadata and bad input
def test_releases_record_noise_and_seeded(tmp_path):
    frame = pl.DataFrame({"a": [1, 2, 3]})
    attrs = [pdp.Ordinal("a", 0, 9)]
    seeded = pdp.basic(frame, attrs, epsilon=1.0, seed=1)
    plain = pdp.basic(frame, attrs, epsilon=1.0, noise="float")
    assert "seeded" in repr(seeded) and "seeded" not in repr(plain)
    meta = seeded.to_arrow().schema.metadata
    assert meta[b"polars_dp.noise"] == b"exact" and meta[b"polars_dp.seeded"] == b"true"
    assert plain.to_arrow().schema.metadata[b"polars_dp.noise"] == b"float"
    back = pdp.read_release(seeded.write_parquet(tmp_path / "r.parquet"))
    assert back.noise == "exact" and back.seeded
    # a file written before exact noise: no noise / seeded keys
    table = seeded.to_arrow()
    new_keys = (b"polars_dp.noise", b"polars_dp.seeded", b"polars_dp.checksum",  # none of them in 0.1.0
                b"polars_dp.format")
    old = {k: v for k, v in table.schema.metadata.items() if k not in new_keys}
    old[b"polars_dp.params"] = b'{"sensitivity": 2}'  # nor the exact scale and epsilon_effective
    with pytest.raises(pdp.ReleaseFormatError, match="no checksum"):  # a seeded release posing as old
        type(seeded).from_arrow(table.replace_schema_metadata(old))
    legacy = type(seeded).from_arrow(table.replace_schema_metadata(old), unverified=True)
    assert legacy.noise == "float" and legacy.seeded is False and legacy.verified is False


def test_tree_and_sequence_releases_record_noise():
    frame = pl.DataFrame({"x": [0.1, 0.2], "y": [0.3, 0.4]})
    t = pdp.privtree(frame, ["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=1.0, seed=1)
    back = pdp.SpatialRelease.from_arrow(t.to_arrow())
    assert (back.noise, back.seeded) == ("exact", True) and "seeded" in repr(t)
    s = pdp.ngram_sequences(pl.DataFrame({"s": ["ab", "ba"]}), "s", alphabet="ab", max_length=3, epsilon=1.0,
                            height=2, noise="float")
    assert (s.noise, s.seeded) == ("float", False)
    assert isinstance(s.to_arrow(), pa.Table)


@pytest.mark.parametrize("call", [
    lambda f, **k: pdp.basic(f, [pdp.Ordinal("x", 0, 1)], epsilon=1.0, **k),
    lambda f, **k: pdp.privelet(f, [pdp.Ordinal("x", 0, 1)], epsilon=1.0, **k),
    lambda f, **k: pdp.privtree(f, ["x"], bounds=[(0, 1)], epsilon=1.0, **k),
    lambda f, **k: pdp.uniform_grid(f, ["x"], bounds=[(0, 1)], epsilon=1.0, **k),
    lambda f, **k: pdp.adaptive_grid(f, ["x"], bounds=[(0, 1)], epsilon=1.0, **k),
    lambda f, **k: pdp.privelet_grid(f, ["x"], bounds=[(0, 1)], epsilon=1.0, **k),
])
def test_unknown_noise_kind_is_refused(call):
    with pytest.raises(ParameterError, match="noise="):
        call(pl.DataFrame({"x": [0, 1]}), noise="gaussian")


@pytest.mark.parametrize("bad", ["1.0", True])
def test_epsilon_must_be_a_number(bad):
    with pytest.raises(ParameterError, match="epsilon"):
        pdp.basic(pl.DataFrame({"x": [0, 1]}), [pdp.Ordinal("x", 0, 1)], epsilon=bad)
    with pytest.raises(ParameterError, match="epsilon"):
        pdp.privtree(pl.DataFrame({"x": [0.5]}), ["x"], bounds=[(0, 1)], epsilon=bad)
