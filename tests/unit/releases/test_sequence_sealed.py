"""A sequence release cannot be edited in place: every array attribute is read-only and cannot
be rebound, fresh from a mechanism, read back from a file or from DuckDB, so the answers never
drift from the file, the SQL tables and the checksum (#38, item 1)."""

from __future__ import annotations

import duckdb
import numpy as np
import polars as pl
import pytest

import polars_dp as pdp

ARRAYS = ("parent", "prepended", "hist", "first_child", "depth", "is_leaf")
SEQS = ["abcab", "ba", "ccc", "a", "abab", "cabba"] * 40


def _fresh_pst() -> pdp.SequenceRelease:
    return pl.DataFrame({"s": SEQS}).dp.privtree_sequences("s", alphabet="abc", max_length=5, epsilon=3.0,
                                                         seed=1)


def _fresh_ngram() -> pdp.SequenceRelease:
    return pl.DataFrame({"s": SEQS}).dp.ngram_sequences("s", alphabet="abc", max_length=5, epsilon=3.0,
                                                      height=3, seed=1)


def _from_file(tmp_path) -> pdp.SequenceRelease:
    path = tmp_path / "m.parquet"
    _fresh_pst().write_parquet(path)
    return pdp.read_release(path)


def _from_duckdb(tmp_path) -> pdp.SequenceRelease:
    con = duckdb.connect()
    pdp.duckdb.register(con, "m", _fresh_ngram())
    return pdp.duckdb.read_release(con, "m")


SOURCES = {"fresh PST": lambda tmp: _fresh_pst(), "fresh n-gram": lambda tmp: _fresh_ngram(),
           "read from a file": _from_file, "read from DuckDB": _from_duckdb}


@pytest.mark.parametrize("source", list(SOURCES))
@pytest.mark.parametrize("name", ARRAYS)
def test_every_array_is_read_only(source, name, tmp_path):
    model = SOURCES[source](tmp_path)
    values = getattr(model, name)
    before = model.frequencies(["ab", "c"])
    assert not values.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        values[0] = values[-1]
    with pytest.raises(ValueError, match="read-only"):
        values[...] = 0
    with pytest.raises(AttributeError):
        setattr(model, name, np.zeros_like(values))
    np.testing.assert_array_equal(model.frequencies(["ab", "c"]), before)


@pytest.mark.parametrize("name", ["alphabet", "max_length"])
def test_the_public_domain_cannot_be_rebound(name):
    model = _fresh_pst()
    with pytest.raises(AttributeError):
        setattr(model, name, "abcd" if name == "alphabet" else 50)
    assert model.frequency("a" * 6) == 0.0


def test_the_arrays_given_are_taken_over_read_only():
    """A release takes over the arrays it is given, as grid and spatial releases do
    (``releases.base.read_only``): the caller's array becomes read-only too, so editing it later
    cannot change the release, and nothing is copied."""
    model = _fresh_pst()
    hist = np.array(model.hist)
    taken = pdp.SequenceRelease(alphabet=model.alphabet, max_length=model.max_length, parent=model.parent,
                                prepended=model.prepended, hist=hist, mechanism=model.mechanism,
                                epsilon=model.epsilon, params=model.params)
    with pytest.raises(ValueError, match="read-only"):
        hist[0, 0] += 1e6
    assert np.shares_memory(taken.hist, hist)
    assert taken.hist[0, 0] == model.hist[0, 0] and taken.frequency("a") == model.frequency("a")
