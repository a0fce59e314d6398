import numpy as np
import polars as pl
import pytest

from polars_dp.counting.sequences import encode_sequences
from polars_dp.errors import ColumnNotFoundError, DomainError, ParameterError
from polars_dp.kernels.pst import grow_context_tree
from tests.helpers.sequences import (
    END,
    START,
    all_nodes,
    context_histograms,
    decode_context,
    histogram,
    pairs_of,
    random_sequences,
)

ALPHABET = [3, 7, 9]


def _frame(seqs):
    return pl.DataFrame({"s": seqs}, schema={"s": pl.List(pl.Int64)})


@pytest.mark.parametrize("max_length", [1, 3, 6])
def test_context_histograms_match_brute_force(max_length):
    rng = np.random.default_rng(11)
    seqs = random_sequences(rng, 60, ALPHABET, 7)
    enc = encode_sequences(_frame(seqs), "s", alphabet=ALPHABET, max_length=max_length)
    pairs = [p for s in seqs for p in pairs_of(s, max_length)]
    labels = [*ALPHABET, START]
    bins = [*ALPHABET, END]
    for k in range(4):
        hist = context_histograms(enc, k)
        assert hist.shape == (4**k, 4)
        for code in range(4**k):
            ctx = tuple(labels[d] for d in decode_context(code, k, 3))
            if START in ctx[1:]:
                assert hist[code].sum() == 0
                continue
            np.testing.assert_array_equal(hist[code], histogram(pairs, ctx, bins))


def test_full_tree_growth_matches_brute_force():
    rng = np.random.default_rng(5)
    seqs = random_sequences(rng, 40, ALPHABET, 5)
    enc = encode_sequences(_frame(seqs), "s", alphabet=ALPHABET, max_length=4)
    tree = grow_context_tree(enc, lambda h, d, starts_with_start: np.ones(h.shape[0], bool), max_depth=3)
    pairs = [p for s in seqs for p in pairs_of(s, 4)]
    labels = [*ALPHABET, START]
    strings = {0: ()}
    for v in range(1, tree.n_nodes):
        strings[v] = (labels[tree.prepended[v]], *strings[int(tree.parent[v])])
    assert len(strings) == len(set(strings.values())) and set(strings.values()) == set(all_nodes(ALPHABET, 3))
    for v, node in strings.items():
        np.testing.assert_array_equal(tree.hist[v], histogram(pairs, node, [*ALPHABET, END]))
    # every position lies in exactly one node per level
    for d in range(4):
        level = tree.depth == d
        assert tree.hist[level].sum() == sum(1 for ctx, _ in pairs if len(ctx) >= d)


def test_string_column_truncation_and_lazy_input():
    df = pl.DataFrame({"s": ["abca", "", "cc", "bbbbbbb"]})
    enc = encode_sequences(df.lazy(), "s", alphabet="abc", max_length=3)
    assert enc.n_sequences == 4
    # lengths after truncation 3, 0, 2, 3 -> positions 4 + 1 + 3 + 4
    assert enc.n_positions == 12
    assert enc.next_symbol.tolist() == [0, 1, 2, 3, 3, 2, 2, 3, 1, 1, 1, 3]
    assert enc.n_before.tolist() == [0, 1, 2, 3, 0, 0, 1, 2, 0, 1, 2, 3]


def test_string_list_column():
    df = pl.DataFrame({"s": [["x", "y"], ["y"]]})
    enc = encode_sequences(df, "s", alphabet=["y", "x"], max_length=5)
    assert enc.next_symbol.tolist() == [1, 0, 2, 0, 2]


@pytest.mark.parametrize(
    ("frame", "kwargs", "error", "words"),
    [
        (_frame([[3, 4]]), {"alphabet": ALPHABET, "max_length": 5}, DomainError, "outside the declared"),
        (_frame([[3], None]), {"alphabet": ALPHABET, "max_length": 5}, DomainError, "null sequence"),
        (_frame([[3, None]]), {"alphabet": ALPHABET, "max_length": 5}, DomainError, "null symbol"),
        (_frame([[3]]), {"alphabet": [], "max_length": 5}, ParameterError, "alphabet is empty"),
        (_frame([[3]]), {"alphabet": [3, 3], "max_length": 5}, ParameterError, "duplicate"),
        (_frame([[3]]), {"alphabet": [3, "a"], "max_length": 5}, ParameterError, "all ints or all strings"),
        (_frame([[3]]), {"alphabet": ALPHABET, "max_length": 0}, ParameterError, "max_length"),
        (_frame([[3]]), {"alphabet": ALPHABET, "max_length": 2.5}, ParameterError, "max_length"),
        (pl.DataFrame({"s": [1.5]}), {"alphabet": ALPHABET, "max_length": 2}, ParameterError, "List column"),
    ],
)
def test_bad_input(frame, kwargs, error, words):
    with pytest.raises(error, match=words):
        encode_sequences(frame, "s", **kwargs)


def test_missing_column():
    with pytest.raises(ColumnNotFoundError, match="'t' not found"):
        encode_sequences(_frame([[3]]), "t", alphabet=ALPHABET, max_length=2)


def test_symbols_past_the_cut_are_not_read():
    enc = encode_sequences(_frame([[3, 7, 99]]), "s", alphabet=ALPHABET, max_length=2)
    assert enc.next_symbol.tolist() == [0, 1, 3]


@pytest.mark.parametrize("frame", [
    pl.DataFrame({"s": ["ab", "ba"]}),          # characters, integer alphabet
    pl.DataFrame({"s": [["a", "b"]]}),
    pl.DataFrame({"s": [[1.0, 7.5]]}),
])
def test_symbols_of_another_type_than_the_alphabet_raise_domain_error(frame):
    with pytest.raises(DomainError, match="outside the declared alphabet|whose symbols are not integers"):
        frame.dp.privtree_sequences("s", alphabet=[1, 2], max_length=3, epsilon=1.0, seed=1)


def test_nested_lists_are_refused():
    with pytest.raises(ParameterError, match="nested list"):
        pl.DataFrame({"s": [[[1]]]}).dp.privtree_sequences("s", alphabet=[1], max_length=3, epsilon=1.0)
