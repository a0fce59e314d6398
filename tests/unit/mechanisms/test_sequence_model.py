import itertools
import json
import math

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

import polars_dp as pdp
from polars_dp.errors import ParameterError, QueryError, ReleaseFormatError
from polars_dp.evaluation.sequences import exact_top_k_strings, top_k_precision
from tests.helpers.sequences import random_sequences, substring_counts

ALPHABET = ["a", "b", "c"]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    seqs = ["".join(s) for s in random_sequences(rng, 400, ALPHABET, 6)]
    seqs += ["abab", "aab", "ccca"] * 200
    return pl.DataFrame({"s": seqs})


@pytest.fixture(scope="module")
def model(data):
    return data.dp.privtree_sequences("s", alphabet=ALPHABET, max_length=5, epsilon=2.0, seed=8)


def _brute_strings(model):
    labels = [*model.alphabet, "#"]
    strings = {(): 0}
    for v in range(1, model.n_nodes):
        parent_string = next(s for s, u in strings.items() if u == model.parent[v])
        strings[(labels[model.prepended[v]], *parent_string)] = v
    return strings


def _brute_frequency(model, q, strings, usable, chain=False):
    """The estimator of SequenceRelease.frequencies written out per string (plain Python)."""
    h = np.maximum(model.hist, 0.0)
    f = h[0, model.alphabet.index(q[0])]
    for j in range(1, len(q)):
        ctx = tuple(q[:j])
        # deepest suffix node reached through usable nodes only
        node = 0
        for i in range(1, len(ctx) + 1):
            v = strings.get(ctx[len(ctx) - i:])
            if v is None or not usable[v]:
                break
            node = v
        y = model.alphabet.index(q[j])
        if model.depth[node] == j and not chain:  # the node holds the whole prefix: count directly
            f = min(f, h[node, y])
        else:
            tot = h[node].sum()
            f *= h[node, y] / tot if tot > 0 else 0.0
    return f


@pytest.mark.parametrize("backoff", [0.0, 3.0])
def test_frequencies_follow_the_documented_estimator(model, backoff):
    strings = _brute_strings(model)
    usable = model.usable(backoff)
    assert usable[0]
    queries = [list(t) for k in range(1, 5) for t in itertools.product(ALPHABET, repeat=k)]
    got = model.frequencies(queries, backoff=backoff)
    want = [_brute_frequency(model, q, strings, usable) for q in queries]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9)
    assert model.frequency("ab", backoff=backoff) == pytest.approx(got[queries.index(["a", "b"])])


def test_chain_estimator_is_the_papers_formula(model):
    strings = _brute_strings(model)
    usable = np.ones(model.n_nodes, dtype=bool)
    queries = [list(t) for k in range(1, 5) for t in itertools.product(ALPHABET, repeat=k)]
    got = model.frequencies(queries, backoff=None, estimator="chain")
    want = [_brute_frequency(model, q, strings, usable, chain=True) for q in queries]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9)
    top = model.top_k(10, max_len=4, backoff=None, estimator="chain")
    np.testing.assert_allclose(np.sort(got)[::-1][:10], top["count"].to_numpy(), rtol=1e-12)
    with pytest.raises(ParameterError, match="estimator"):
        model.frequencies(["a"], estimator="mle")


def test_single_symbols_converge_at_large_epsilon(data):
    eps = 1e7
    m = data.dp.privtree_sequences("s", alphabet=ALPHABET, max_length=5, epsilon=eps, seed=1)
    truth = substring_counts([list(s)[:5] for s in data["s"]], 1)
    got = m.frequencies([[x] for x in ALPHABET])
    # root bin = clip(true + sum of n Laplace(b) draws); union bound at 1e-6 on |each draw|
    n = int(m.is_leaf.sum()) * 4
    b = m.params["leaf_noise_scale"]
    tol = n * b * math.log(n / 1e-6)
    for x, g in zip(ALPHABET, got, strict=True):
        assert abs(g - truth[(x,)]) <= tol
    assert tol < 1.0  # the check is meaningful: counts are integers in the hundreds


def test_top_k_is_the_best_of_all_strings(model):
    k = 15
    top = model.top_k(k, max_len=4)
    assert top.columns == ["string", "count", "extrapolated"] and top.height == k
    assert top.schema["string"] == pl.List(pl.String)
    queries = [list(t) for n in range(1, 5) for t in itertools.product(ALPHABET, repeat=n)]
    every = np.sort(model.frequencies(queries))[::-1]
    np.testing.assert_allclose(top["count"].to_numpy(), every[:k], rtol=1e-12)
    assert np.all(np.diff(top["count"].to_numpy()) <= 0)
    np.testing.assert_allclose(model.frequencies(top["string"].to_list()), top["count"].to_numpy())


def test_top_k_rejects_bad_k(model):
    with pytest.raises(ParameterError, match="k must be"):
        model.top_k(0)


def test_sample_symbols_and_lengths(model):
    out = model.sample(3000, seed=5)
    assert out.columns == ["sequence"] and out.height == 3000
    flat = out["sequence"].explode().drop_nulls()
    assert set(flat.unique().to_list()) <= set(ALPHABET)
    assert out["sequence"].list.len().max() <= model.max_length
    assert model.sample(0).height == 0


def test_sample_first_symbol_follows_the_model(model):
    """Chi-square test of the first symbol (incl. 'ended at once') against the '#'-context
    histogram; the 1e-6 quantile of chi2 with 3 degrees of freedom is 30.7."""
    n = 20000
    out = model.sample(n, seed=17, calibrate=False)
    first = out["sequence"].list.first()
    observed = np.array([(first == x).sum() for x in ALPHABET] + [first.is_null().sum()], dtype=float)
    node = model.first_child[0] + model.alphabet_size  # the '#' child of the root
    p = model.hist[node] / model.hist[node].sum()
    mask = p > 0
    chi2 = ((observed[mask] - n * p[mask]) ** 2 / (n * p[mask])).sum()
    assert np.all(observed[~mask] == 0)
    assert chi2 < 30.7


def test_sample_reproduces_a_single_pattern_at_large_epsilon():
    df = pl.DataFrame({"s": [[4, 2]] * 2000})
    m = df.dp.privtree_sequences("s", alphabet=[2, 4, 6], max_length=3, epsilon=1e6, seed=3)
    out = m.sample(500, seed=1)
    assert out["sequence"].to_list() == [[4, 2]] * 500


def test_arrow_round_trip_and_metadata(model, tmp_path):
    table = model.to_arrow()
    assert table.num_rows == model.n_nodes * 4
    meta = pdp.releases.metadata.read_metadata(table)
    for key in ("mechanism", "epsilon", "neighbours", "alphabet", "max_length"):
        assert key in meta
    params = json.loads(meta["params"])
    for key in ("lambda", "delta", "tree_share"):  # parameters: in params only
        assert key in params and key not in meta
    assert meta["neighbours"] == "add_remove"
    path = model.write_parquet(tmp_path / "pst.parquet")
    again = pdp.read_release(path)
    assert isinstance(again, pdp.SequenceRelease) and again == model
    np.testing.assert_array_equal(again.frequencies(["abc", "c"]), model.frequencies(["abc", "c"]))
    # the root's rows are the symbol totals; '&' has a null next_symbol
    root = pl.from_arrow(table).filter(pl.col("node") == 0)
    assert root["next_symbol"].to_list() == [*ALPHABET, None]


def test_corrupt_table_is_rejected(model):
    table = model.to_arrow().slice(0, 5)
    with pytest.raises(ReleaseFormatError):
        pdp.SequenceRelease.from_arrow(table)


def test_query_errors(model):
    with pytest.raises(QueryError, match="outside the alphabet"):
        model.frequency("az")
    with pytest.raises(QueryError, match="empty string"):
        model.frequency("")


@pytest.fixture(scope="module")
def int_model():
    return pl.DataFrame({"w": [[1, 2], [2, 3]] * 20}).dp.privtree_sequences(
        "w", alphabet=range(1, 4), max_length=3, epsilon=1e4, seed=0)


@pytest.mark.parametrize(("query", "shown"), [
    ([1.5], "1.5"),                       # was truncated to [1]
    ([2.7, 3.2], "2.7, 3.2"),             # was the count of [2, 3]
    ([True], "True"),                     # was the count of [1]
    ([np.bool_(True), 2], "True"),
    ([2, "3"], "'3'"),                    # was parsed as 3
    ([np.float64(1.5)], "1.5"),
    ([float("nan")], "nan"),
    ([4, 1.5, None], "1.5, 4, None"),
    (np.array([1.5, 2.0]), "1.5"),
])
def test_a_symbol_that_is_no_integer_of_the_alphabet_is_refused(int_model, query, shown):
    """One rule for every query path: a symbol is refused, never rounded, truncated or parsed,
    with a sentence naming it and saying what to give (the same as the SQL macros')."""
    want = (f"query strings contain symbols outside the alphabet [1, 2, 3], e.g. {shown}; "
            "query only symbols of the alphabet (its integers)")
    for ask in (lambda: int_model.frequency(query), lambda: int_model.frequencies([[1], query]),
                lambda: int_model.frequency_table([query, [2]])):
        with pytest.raises(QueryError) as info:
            ask()
        assert str(info.value) == want


def test_integral_floats_and_numpy_arrays_are_the_symbols(int_model):
    """``2.0`` is the symbol 2, as the data's 2.0 in a float list column is; a 1-D numpy array is a
    query string like a list (it was a Polars InvalidOperationError), a 2-D one a batch of them."""
    want = int_model.frequency([2, 3])
    assert int_model.frequency([2.0, np.float32(3.0)]) == want
    assert int_model.frequency([np.int64(2), np.uint8(3)]) == want
    assert int_model.frequency(np.array([2, 3])) == want
    assert int_model.frequency(pl.Series([2, 3])) == want
    np.testing.assert_array_equal(int_model.frequencies(np.array([[1, 2], [2, 3]])),
                                  int_model.frequencies([[1, 2], [2, 3]]))
    floats = pl.DataFrame({"w": [[1.0, 2.0], [2.0, 3.0]] * 20}).dp.privtree_sequences(
        "w", alphabet=range(1, 4), max_length=3, epsilon=1e4, seed=0)
    assert floats.frequency([2.0, 3.0]) == floats.frequency([2, 3]) == want


def test_a_text_alphabet_takes_strings_only(model):
    assert model.frequency(np.array(["a", "b"])) == model.frequency("ab") == model.frequency(["a", "b"])
    for query, shown in (([1], "1"), (["a", True], "True"), (["a", None], "None")):
        tail = rf"e\.g\. {shown}; query only symbols of the alphabet \(its strings\)"
        with pytest.raises(QueryError, match=tail):
            model.frequency(query)


def test_lazyframe_and_int_alphabet():
    lf = pl.LazyFrame({"p": [[1, 2, 3], [3, 3], [2]] * 50}, schema={"p": pl.List(pl.UInt8)})
    m = lf.dp.privtree_sequences("p", alphabet=range(1, 4), max_length=3, epsilon=1.0, seed=0)
    assert m.top_k(3).schema["string"] == pl.List(pl.Int64)
    assert isinstance(m.to_arrow(), pa.Table)


def test_ngram_noise_scale_and_exactness_at_large_epsilon(data):
    m = data.dp.ngram_sequences("s", alphabet=ALPHABET, max_length=5, epsilon=1.5, height=3, seed=2)
    assert m.params["noise_scale"] == pytest.approx(3 * 6 / 1.5)
    assert m.height == 2 and m.n_nodes == 1 + 4 + 3 * 4  # complete tree: every non-# node splits
    exact = data.dp.ngram_sequences("s", alphabet=ALPHABET, max_length=5, epsilon=1e7, height=3, seed=2)
    truth = substring_counts([list(s)[:5] for s in data["s"]], 3)
    queries = [list(t) for n in range(1, 4) for t in itertools.product(ALPHABET, repeat=n)]
    # with exact counts the chain of conditionals telescopes to the substring count
    np.testing.assert_allclose(exact.frequencies(queries), [truth[tuple(q)] for q in queries], atol=0.01)


def test_exact_top_k_matches_brute_force(data):
    for max_length in (None, 3):
        got = exact_top_k_strings(data, "s", alphabet=ALPHABET, k=12, max_length=max_length)
        seqs = [list(s) if max_length is None else list(s)[:max_length] for s in data["s"]]
        counts = substring_counts(seqs, 20)
        best = sorted(counts.values(), reverse=True)[:12]
        assert got["count"].to_list() == best
        assert all(counts[tuple(s)] == c for s, c in zip(got["string"].to_list(), got["count"], strict=True))
        assert top_k_precision(got, got) == 1.0


def test_pst_precision_is_high_at_large_epsilon(data):
    truth = exact_top_k_strings(data, "s", alphabet=ALPHABET, k=5)
    m = data.dp.privtree_sequences("s", alphabet=ALPHABET, max_length=6, epsilon=1e5, seed=0)
    assert top_k_precision(m.top_k(5), truth) >= 0.8


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": 1.0, "tree_share": 1.0}, "tree_share"),
        ({"epsilon": 1.0, "postprocess": "none"}, "postprocess"),
        ({"epsilon": 1.0, "max_length": 0}, "max_length"),
    ],
)
def test_mechanism_parameter_errors(data, kwargs, words):
    args = {"alphabet": ALPHABET, "max_length": 4, **kwargs}
    with pytest.raises(ParameterError, match=words):
        data.dp.privtree_sequences("s", **args)


def test_empty_frame_gives_a_model():
    empty = pl.DataFrame({"s": []}, schema={"s": pl.List(pl.Int64)})
    m = empty.dp.privtree_sequences("s", alphabet=[1, 2], max_length=3, epsilon=1.0, seed=0)
    assert m.n_nodes >= 1 and m.sample(10, seed=0)["sequence"].list.len().max() <= 3


def test_readme_example_shape():
    lf = pl.LazyFrame({"pages": [[1, 1, 2], [2, 3], [1]] * 100}, schema={"pages": pl.List(pl.UInt8)})
    model = lf.dp.privtree_sequences("pages", alphabet=range(1, 18), max_length=20, epsilon=1.0, seed=3)
    assert model.frequency([1, 1, 2]) >= 0
    assert model.top_k(10).columns == ["string", "count", "extrapolated"]
