"""Sequence models against known Markov sources (noise removed by a test-only hook), error bars
of ``frequencies(..., std=True)``, and the public node cap."""

import inspect
import math

import numpy as np
import polars as pl
import pytest

import polars_dp.mechanisms.sequences as seqmech
from polars_dp.counting.sequences import encoded_from_lists
from polars_dp.errors import ParameterError
from polars_dp.kernels.pst import default_max_nodes
from polars_dp.mechanisms.ngram import ngram_sequences

Z = 5.0  # two-sided normal tail 5.7e-7: the false-failure probability of each statistical check
A = 3  # alphabet {0, 1, 2}


def draw_source(rng, n, max_length, next_probs, stop_prob):
    """``n`` sequences of a source where ``next_probs(prev2, prev1) -> (n, A)`` gives the next
    symbol's law from the last two symbols (``-1`` before the start) and ``stop_prob(t, prev1)``
    the probability of stopping after ``t`` symbols.  Also the exact law of the truncated length."""
    seqs = np.full((n, max_length), -1, dtype=np.int64)
    alive = np.ones(n, dtype=bool)
    prev2 = np.full(n, -1)
    prev1 = np.full(n, -1)
    for t in range(max_length):
        alive &= rng.random(n) >= stop_prob(t, prev1)
        p = next_probs(prev2, prev1)
        sym = (rng.random(n)[:, None] > np.cumsum(p, axis=1)).sum(axis=1)
        seqs[alive, t] = sym[alive]
        prev2, prev1 = np.where(alive, prev1, prev2), np.where(alive, sym, prev1)
    lengths = (seqs >= 0).sum(axis=1)
    return seqs, lengths


def order2_probs(prev2, prev1):
    """Variable order: after 0 the law depends on the symbol before it too; else order 1."""
    # rows: last symbol 0, 1, 2, and none yet (row 3)
    table1 = np.array([[0.2, 0.5, 0.3], [0.6, 0.1, 0.3], [0.3, 0.3, 0.4], [0.5, 0.3, 0.2]])
    p = table1[np.where(prev1 >= 0, prev1, 3)].copy()
    after_00 = (prev1 == 0) & (prev2 == 0)
    p[after_00] = [0.05, 0.15, 0.8]
    return p


def exact_length_law(stop_by_t_and_prev, next_probs, max_length):
    """Exact law of the truncated length by propagating (prev2, prev1) state probabilities."""
    states = {(-1, -1): 1.0}
    law = np.zeros(max_length + 1)
    for t in range(max_length):
        nxt: dict = {}
        for (p2, p1), w in states.items():
            stop = stop_by_t_and_prev(t, p1)
            law[t] += w * stop
            probs = next_probs(np.array([p2]), np.array([p1]))[0]
            for y in range(A):
                key = (p1, y)
                nxt[key] = nxt.get(key, 0.0) + w * (1 - stop) * probs[y]
        states = nxt
    law[max_length] = sum(states.values())
    return law


SOURCES = {
    # stop probability depends on the last symbol only (a variable-order Markov source)
    "order2_symbol_stop": lambda t, prev1: np.where(np.asarray(prev1) == 2, 0.35, 0.1) * (t > 0),
    # stop probability depends on the position since the start (needs contexts reaching '#')
    "position_stop": lambda t, prev1: np.broadcast_to(
        [0.0, 0.05, 0.4, 0.05, 0.05, 0.5, 0.1, 0.1, 0.1, 0.1][min(t, 9)], np.shape(prev1)),
}


@pytest.fixture
def noiseless(monkeypatch):
    """Test-only hook: PrivTree's split decisions without noise and leaf histograms without noise."""
    def split(score, depth, *, lam, delta, theta, rng, **_):
        return np.maximum(np.asarray(score, float) - depth * delta, theta - delta) > theta

    monkeypatch.setattr(seqmech, "privtree_split", split)
    monkeypatch.setattr(seqmech, "sample_noise", lambda src, scale, size, noise="exact": np.zeros(size))


def _model(seqs, lengths, epsilon, **kw):
    enc = encoded_from_lists(seqs[seqs >= 0], lengths, A, seqs.shape[1])
    return seqmech.privtree_from_encoded(enc, alphabet=[0, 1, 2], epsilon=epsilon, tree_share=0.5,
                                         theta=0.0, rng=np.random.default_rng(0), **kw)


@pytest.mark.parametrize("source", list(SOURCES))
def test_exact_counts_reproduce_the_length_law_of_a_markov_source(noiseless, source):
    max_length, n, m = 10, 40_000, 100_000
    stop = SOURCES[source]
    seqs, lengths = draw_source(np.random.default_rng(11), n, max_length, order2_probs, stop)
    law = exact_length_law(lambda t, p1: float(stop(t, np.array([p1]))[0]), order2_probs, max_length)
    assert law.sum() == pytest.approx(1.0)
    model = _model(seqs, lengths, epsilon=1e6)
    sample = model.sample(m, seed=3)["sequence"].list.len().to_numpy()
    got = np.bincount(sample, minlength=max_length + 1) / m
    tv = 0.5 * np.abs(got - law).sum()
    # sampling alone: E TV <= 1/2 sum_l sqrt(p_l (1 - p_l) (1/n + 1/m)); the bound leaves room for it
    expected = 0.5 * np.sqrt(law * (1 - law) * (1 / n + 1 / m)).sum()
    assert expected < 0.01
    assert tv <= 0.02
    # with exact counts the direct estimator of short strings is the exact substring count
    first = np.bincount(seqs[:, 0][seqs[:, 0] >= 0], minlength=A)
    assert model.frequencies([[0], [1], [2]]) == pytest.approx(np.bincount(seqs[seqs >= 0], minlength=A))
    assert first.sum() == (lengths > 0).sum()


def test_position_dependent_stop_needs_the_start_marker(noiseless):
    """The stop law at t = 2 (0.4) differs from the pooled one; the model must reach '#'."""
    max_length, n = 10, 20_000
    seqs, lengths = draw_source(np.random.default_rng(5), n, max_length, order2_probs,
                                SOURCES["position_stop"])
    model = _model(seqs, lengths, epsilon=1e6)
    out = model.sample(50_000, seed=1)["sequence"].list.len().to_numpy()
    survive2 = (out >= 2).sum()
    p_stop = (out == 2).sum() / survive2
    assert abs(p_stop - 0.4) <= Z * math.sqrt(0.24 / survive2) + 3 * math.sqrt(0.24 / (lengths >= 2).sum())


def test_sample_signature():
    from polars_dp.releases.sequence import SequenceRelease
    sig = inspect.signature(SequenceRelease.sample)
    assert list(sig.parameters)[:2] == ["self", "n"]
    assert sig.parameters["seed"].kind is inspect.Parameter.KEYWORD_ONLY


# ---------------------------------------------------------------------- error bars
def _data(n=3000):
    rng = np.random.default_rng(2)
    seqs, lengths = draw_source(rng, n, 6, order2_probs, SOURCES["order2_symbol_stop"])
    return seqs, lengths


def _true_counts(seqs, strings):
    rows = [list(r[r >= 0]) for r in seqs]
    out = []
    for s in strings:
        k = len(s)
        out.append(sum(1 for r in rows for i in range(len(r) - k + 1) if r[i:i + k] == s))
    return np.array(out, dtype=float)


def test_ngram_std_is_exact_for_direct_counts():
    """Strings of length <= height are one noisy bin each: std = sqrt(2) * scale exactly.
    Mean of squared standardised errors is 1 within Z * sqrt(5 / n) (Laplace kurtosis 6)."""
    seqs, _ = _data()
    frame = pl.DataFrame({"s": [list(r[r >= 0]) for r in seqs]}, schema={"s": pl.List(pl.Int64)})
    strings = [[0], [1], [2], [0, 1], [1, 0], [2, 2]]
    truth = _true_counts(seqs, strings)
    assert truth.min() > 200  # no clipping at 0 and the min() with the prefix does not bind
    z2 = []
    for seed in range(400):
        m = ngram_sequences(frame, "s", alphabet=[0, 1, 2], max_length=6, epsilon=2.0, height=2, seed=seed)
        f, sd = m.frequencies(strings, std=True, backoff=0.0)
        np.testing.assert_allclose(sd, math.sqrt(2) * m.params["noise_scale"])
        z2.extend(((f - truth) / sd) ** 2)
    z2 = np.asarray(z2)
    assert abs(z2.mean() - 1) <= Z * math.sqrt(5 / z2.size)


def test_pst_std_exact_on_a_fixed_tree_and_approximate_for_chains(monkeypatch):
    """A fixed tree (noiseless split hook), real leaf noise.  Direct strings: exact std
    ``sqrt(2 b^2 L(u))``.  Chained strings (prefix deeper than the tree): the delta-method
    std is within 25% of the empirical sd at these relative noise levels (< 10%)."""
    def split(score, depth, *, lam, delta, theta, rng, **_):
        return (np.asarray(score) > 0) & (depth < 2)  # the root and its children split

    monkeypatch.setattr(seqmech, "privtree_split", split)
    seqs, lengths = _data(12_000)
    enc = encoded_from_lists(seqs[seqs >= 0], lengths, A, 6)
    direct = [[0], [1], [0, 1], [1, 0], [2, 0, 2], [0, 1, 2]]
    chained = [[0, 1, 2, 0], [2, 2, 0, 1]]
    truth = _true_counts(seqs, direct + chained)
    assert truth.min() > 100
    rng = np.random.default_rng(4)
    est, sds = [], []
    for _ in range(600):
        m = seqmech.privtree_from_encoded(enc, alphabet=[0, 1, 2], epsilon=8.0, tree_share=0.5, theta=0.0,
                                          rng=rng)
        assert m.height == 2
        f, sd = m.frequencies(direct + chained, std=True, backoff=0.0)
        est.append(f)
        sds.append(sd)
    est, sds = np.array(est), np.array(sds)
    k = len(direct)
    b = m.params["leaf_noise_scale"]
    assert np.all(sds[:, :k] <= math.sqrt(2 * b * b * m.is_leaf.sum()) + 1e-9)
    z2 = ((est[:, :k] - truth[:k]) / sds[:, :k]) ** 2
    assert abs(z2.mean() - 1) <= Z * math.sqrt(5 / z2.size)
    ratio = est[:, k:].std(axis=0) / sds[:, k:].mean(axis=0)
    assert np.all((ratio > 0.75) & (ratio < 1.25)), ratio


# ---------------------------------------------------------------------- node cap
def test_max_nodes_caps_the_tree(noiseless):
    seqs, lengths = draw_source(np.random.default_rng(1), 5000, 8, order2_probs, SOURCES["position_stop"])
    free = _model(seqs, lengths, epsilon=1e6)
    assert not free.params["capped"] and free.n_nodes > 200
    capped = _model(seqs, lengths, epsilon=1e6, max_nodes=200)
    assert capped.params["capped"] and capped.n_nodes <= 200
    assert capped.params["max_nodes"] == 200
    assert capped.sample(100, seed=0).height == 100
    with pytest.raises(ParameterError, match="max_nodes"):
        _model(seqs, lengths, epsilon=1.0, max_nodes=0)


def test_default_cap_bounds_a_huge_alphabet_at_huge_epsilon():
    """Regression: a tree that would need ~10^6 nodes of 1001 bins stops at the public default cap
    (about 33,000 nodes) instead of exhausting memory."""
    rng = np.random.default_rng(0)
    alphabet = list(range(1000))
    frame = pl.DataFrame({"s": rng.integers(0, 1000, size=(3000, 12)).tolist()})
    m = frame.dp.privtree_sequences("s", alphabet=alphabet, max_length=12, epsilon=1e6, seed=0)
    assert m.n_nodes <= default_max_nodes(1001) and m.params["capped"]


# ---------------------------------------------------------------------- back-off
def _hand_model(leaf_scale):
    """Root split into children 0, 1, 2 and '#' (code 3); bins: symbols 0..2 and '&' (code 3); a
    PrivTree record stating only its leaf scale (the noise sums up the tree)."""
    from polars_dp.releases.sequence import SequenceRelease
    hist = np.array([[600.0, 300.0, 100.0, 1000.0],   # root
                     [200.0, 100.0, 0.0, 300.0],      # '0'
                     [100.0, 100.0, 50.0, 50.0],      # '1'
                     [0.0, 100.0, 50.0, 650.0],       # '2'
                     [3.0, 0.0, 0.0, 1.0]])           # '#': a noise-sized total
    return SequenceRelease(alphabet=[0, 1, 2], max_length=4, parent=[-1, 0, 0, 0, 0],
                         prepended=[-1, 0, 1, 2, 3], hist=hist, mechanism="privtree_sequences",
                         epsilon=1.0, params={"leaf_noise_scale": leaf_scale})


def test_back_off_skips_nodes_whose_total_is_noise():
    """The '#' leaf has total 4 against a total sd of b sqrt(2 beta) = 2 sqrt(8) b: with b = 1 it is
    below 3 sd and the first symbol follows the root's histogram; with b = 0.1 it is used."""
    for b, node in ((1.0, 0), (0.1, 4)):
        m = _hand_model(b)
        sd = math.sqrt(2 * b * b * 4)
        assert m.usable()[4] == (4.0 >= 3 * sd)
        n = 40_000
        first = m.sample(n, seed=9)["sequence"].list.first()
        observed = np.array([(first == x).sum() for x in range(3)] + [first.is_null().sum()], dtype=float)
        p = m.hist[node] / m.hist[node].sum()
        mask = p > 0
        assert np.all(observed[~mask] == 0)
        chi2 = ((observed[mask] - n * p[mask]) ** 2 / (n * p[mask])).sum()
        assert chi2 < 30.7  # 1e-6 quantile of chi2 with at most 3 degrees of freedom
    assert np.array_equal(_hand_model(1.0).usable(None), np.ones(5, dtype=bool))


# ---------------------------------------------------------------------- length calibration
def test_calibrated_stops_hit_the_target_and_keep_relative_odds():
    from polars_dp.releases.sequence import calibrated_stops
    rng = np.random.default_rng(0)
    p = rng.uniform(0.01, 0.9, 1000)
    free = rng.random(1000) < 0.8
    p[~free] = 1.0
    for target in (0.3, 0.5, 0.9):
        out = calibrated_stops(p, free, target)
        assert out.mean() == pytest.approx(target, abs=1e-9)
        assert np.array_equal(out[~free], p[~free])
        shift = np.log(out[free] / (1 - out[free])) - np.log(p[free] / (1 - p[free]))
        assert np.ptp(shift) < 1e-6  # one common log-odds shift


def test_released_length_law_calibrates_a_shallow_tree(noiseless):
    """Noise removed; epsilon small enough that the tree stays shallow and cannot see the
    position since the start.  The released length law (exact here) fixes the sampled lengths."""
    max_length, n, m = 10, 40_000, 100_000
    stop = SOURCES["position_stop"]
    seqs, lengths = draw_source(np.random.default_rng(11), n, max_length, order2_probs, stop)
    model = _model(seqs, lengths, epsilon=0.5, length_share=0.1)
    empirical = np.bincount(lengths, minlength=max_length + 1) / n
    np.testing.assert_allclose(model.length_law(), empirical * n)
    tvs = {}
    for calibrate in (False, True):
        out = model.sample(m, seed=3, calibrate=calibrate)["sequence"].list.len().to_numpy()
        tvs[calibrate] = 0.5 * np.abs(np.bincount(out, minlength=max_length + 1) / m - empirical).sum()
    expected = 0.5 * np.sqrt(empirical * (1 - empirical) / m).sum()  # sampling error alone
    assert expected < 0.005
    assert tvs[True] <= 0.02 < tvs[False]
