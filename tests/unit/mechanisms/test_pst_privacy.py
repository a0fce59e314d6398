"""Proof obligations of the sequence PrivTree: score properties, lambda, noise scales, split law."""

import itertools
import math

import numpy as np
import polars as pl
import pytest

import polars_dp.mechanisms.sequences as seqmech
from polars_dp.counting.sequences import encode_sequences, encoded_from_lists
from polars_dp.kernels.pst import pst_scores
from polars_dp.mechanisms.privtree_rule import privtree_sequence_params, privtree_split
from tests.helpers.sequences import END, START, all_nodes, histogram, pairs_of

Z = 5.0  # two-sided normal tail 5.7e-7: the false-failure probability of each statistical check


def _scores(pairs, nodes, alphabet):
    hist = np.array([histogram(pairs, n, [*alphabet, END]) for n in nodes])
    hashed = np.array([len(n) > 0 and n[0] == START for n in nodes])
    return pst_scores(hist, hashed)


@pytest.mark.parametrize("alphabet", [["a", "b"], ["a", "b", "c"]])
def test_score_monotone_and_one_pair_moves_one_path_by_at_most_one(alphabet):
    max_length = 3 if len(alphabet) == 2 else 2
    seqs = [list(t) for k in range(max_length + 1) for t in itertools.product(alphabet, repeat=k)]
    nodes = all_nodes(alphabet, max_length + 1)
    index = {n: i for i, n in enumerate(nodes)}
    # (child, parent): the parent's string drops the prepended symbol
    edges = [(index[n], index[n[1:]]) for n in nodes if n]
    all_pairs = sorted({p for s in seqs for p in pairs_of(s, max_length)}, key=repr)
    bases = [[]] + [[s] for s in seqs] + [[s, t] for s, t in itertools.combinations(seqs, 2)]
    for base in bases:
        pairs = [p for s in base for p in pairs_of(s, max_length)]
        before = _scores(pairs, nodes, alphabet)
        child, parent = np.array(edges).T
        assert np.all(before[child] <= before[parent]), "score not monotone"
        for ctx, y in all_pairs:
            after = _scores([*pairs, (ctx, y)], nodes, alphabet)
            diff = after - before
            assert set(np.unique(diff)) <= {0.0, 1.0}
            on_path = np.array([len(n) <= len(ctx) and tuple(ctx[len(ctx) - len(n):]) == n for n in nodes])
            assert not np.any(diff[~on_path]), "a node off the root-to-leaf path changed"
            # the changed nodes lie on one root-to-leaf path: each is a suffix of the next
            path = sorted((nodes[i] for i in np.flatnonzero(on_path)), key=len)
            assert all(b[len(b) - len(a):] == a for a, b in itertools.pairwise(path))


def test_whole_sequence_changes_each_score_by_at_most_l_top():
    alphabet, max_length = ["a", "b"], 3
    seqs = [list(t) for k in range(6) for t in itertools.product(alphabet, repeat=k)]
    nodes = all_nodes(alphabet, max_length + 1)
    base = [p for s in (["a", "b"], ["b"]) for p in pairs_of(s, max_length)]
    before = _scores(base, nodes, alphabet)
    for s in seqs:
        added = pairs_of(s, max_length)
        assert len(added) <= max_length + 1  # truncation bounds the pairs per sequence by l_top
        diff = _scores(base + added, nodes, alphabet) - before
        assert diff.min() >= 0 and diff.max() <= max_length + 1


def test_lambda_and_delta_formula():
    lam, delta = privtree_sequence_params(17, 20, 0.25)
    beta, l_top = 18, 21
    assert lam == pytest.approx((2 * beta - 1) / (beta - 1) * l_top / 0.25, rel=1e-12)
    assert lam == pytest.approx(35 / 17 * 84, rel=1e-12)
    assert delta == pytest.approx(lam * math.log(18), rel=1e-12)


def test_mechanism_uses_the_formula_and_leaf_scale(monkeypatch):
    seen = {"split": set(), "laplace": []}
    real_split, real_noise = seqmech.privtree_split, seqmech.sample_noise

    def spy_split(score, depth, *, lam, delta, theta, rng, noise):
        seen["split"].add((lam, delta, theta))
        return real_split(score, depth, lam=lam, delta=delta, theta=theta, rng=rng, noise=noise)

    def spy_noise(src, scale, size, noise):
        seen["laplace"].append((scale, size))
        return real_noise(src, scale, size, noise)

    monkeypatch.setattr(seqmech, "privtree_split", spy_split)
    monkeypatch.setattr(seqmech, "sample_noise", spy_noise)
    df = pl.DataFrame({"s": ["abcab", "ba", "ccc", "a"] * 30})
    model = seqmech.privtree_sequences(df, "s", alphabet="abc", max_length=4, epsilon=2.0, tree_share=0.3,
                                       length_share=0.1, seed=4, noise="float")
    beta, l_top, eps_tree, eps_length = 4, 5, 0.6, 0.2
    eps_leaf = 2.0 - eps_tree - eps_length
    lam = (2 * beta - 1) / (beta - 1) * l_top / eps_tree
    ((got_lam, got_delta, theta),) = seen["split"]
    assert got_lam == pytest.approx(lam) and got_delta == pytest.approx(lam * math.log(beta)) and theta == 0
    (scale, size), (length_scale, length_size) = seen["laplace"]
    assert scale == pytest.approx(l_top / eps_leaf)
    assert size == (int(model.is_leaf.sum()), beta)
    # the length law: one count per truncated length 0..max_length, sensitivity 1
    assert length_scale == pytest.approx(1 / eps_length) and tuple(length_size) == (4 + 1,)
    assert model.params["epsilon_length"] == pytest.approx(eps_length)
    assert len(model.params["length_counts"]) == 5
    assert model.params["lambda"] == pytest.approx(lam)
    assert model.params["leaf_noise_scale"] == pytest.approx(l_top / eps_leaf)
    assert model.neighbours == "add_remove"


def test_leaf_noise_variance_matches_scale():
    """Root bins = true count + sum of the leaves' noise (no clipping at these counts):
    ``Var = n_leaves * 2 * scale^2``.  The mean of the standardised squares is 1 with
    standard error <= sqrt(5 / n) (Laplace kurtosis 6)."""
    seqs = ["ab"] * 3000 + ["ba"] * 2000 + ["aab"] * 1000
    enc = encode_sequences(pl.DataFrame({"s": seqs}), "s", alphabet="ab", max_length=3)
    true_root = np.bincount(enc.next_symbol, minlength=3).astype(float)
    rng = np.random.default_rng(123)
    z2 = []
    for _ in range(600):
        m = seqmech.privtree_from_encoded(enc, alphabet="ab", epsilon=1.0, tree_share=0.5, theta=0.0, rng=rng)
        sd = math.sqrt(2 * m.is_leaf.sum()) * m.params["leaf_noise_scale"]
        z2.extend(((m.hist[0] - true_root) / sd) ** 2)
    z2 = np.asarray(z2)
    assert abs(z2.mean() - 1) <= Z * math.sqrt(5 / z2.size)


def test_split_law_on_empty_counts_kernel():
    rng = np.random.default_rng(7)
    beta, n = 5, 200_000
    lam, delta = privtree_sequence_params(beta - 1, 9, 1.0, noise="exact")
    zeros = np.zeros(n)
    for depth, p in [(0, 0.5), (1, 1 / (2 * beta)), (6, 1 / (2 * beta))]:
        frac = privtree_split(zeros, depth, lam=lam, delta=delta, theta=0.0, rng=rng).mean()
        assert abs(frac - p) <= Z * math.sqrt(p * (1 - p) / n)


def test_split_law_on_empty_data_mechanism():
    """Empty data: the root splits w.p. 1/2; its non-'#' children w.p. 1/(2 beta); '#' never."""
    enc = encoded_from_lists(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), 2, 4)
    rng = np.random.default_rng(99)
    runs, root_splits, child_total, child_splits = 1500, 0, 0, 0
    for _ in range(runs):
        m = seqmech.privtree_from_encoded(enc, alphabet="ab", epsilon=1.0, tree_share=0.5, theta=0.0, rng=rng)
        if m.is_leaf[0]:
            continue
        root_splits += 1
        kids = np.flatnonzero(m.parent == 0)
        hashed = kids[m.prepended[kids] == 2]
        assert m.is_leaf[hashed].all()
        plain = kids[m.prepended[kids] < 2]
        child_total += plain.size
        child_splits += int((~m.is_leaf[plain]).sum())
    assert abs(root_splits / runs - 0.5) <= Z * math.sqrt(0.25 / runs)
    p = 1 / 6
    assert abs(child_splits / child_total - p) <= Z * math.sqrt(p * (1 - p) / child_total)


def test_depth_never_exceeds_l_top_and_hash_nodes_are_leaves():
    df = pl.DataFrame({"s": ["aaaa"] * 5000})
    m = seqmech.privtree_sequences(df, "s", alphabet="ab", max_length=4, epsilon=50.0, seed=2)
    assert m.height <= 5
    assert m.is_leaf[m.prepended == 2].all()
