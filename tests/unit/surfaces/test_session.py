"""Session: mechanisms as methods, charged before the data is read; ledger in the metadata."""

from __future__ import annotations

import inspect

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

import polars_dp as pdp
from polars_dp import mechanisms
from polars_dp.errors import BudgetExceededError, DomainError, ParameterError
from polars_dp.mechanisms.options import without_entries
from polars_dp.namespace import DPNamespace

ATTRS = [pdp.Ordinal("a", 0, 3)]


class Reads:
    """A LazyFrame that records (and refuses) every attempt to read it."""

    def __init__(self):
        self.count = 0

    def frame(self) -> pl.LazyFrame:
        def boom(s: pl.Series) -> pl.Series:
            self.count += 1
            raise RuntimeError("the private data was read")
        return pl.LazyFrame({"a": [0, 1, 2]}).select(pl.col("a").map_batches(boom, return_dtype=pl.Int64))


def test_the_guard_frame_detects_a_read():
    reads = Reads()
    with pytest.raises(RuntimeError, match="read"):
        pdp.basic(reads.frame(), ATTRS, epsilon=1.0)
    assert reads.count == 1


def test_over_budget_is_refused_before_the_data_is_read():
    reads = Reads()
    session = pdp.Session(reads.frame(), epsilon=1.0, neighbours="replace")
    with pytest.raises(BudgetExceededError, match="only 1 of the total 1 is left"):
        session.basic(ATTRS, epsilon=1.5)
    assert reads.count == 0 and session.spent == 0 and session.ledger == []
    with pytest.raises(RuntimeError):                   # within budget: charged, then read
        session.basic(ATTRS, epsilon=0.7)
    assert reads.count == 1 and session.spent == pytest.approx(0.7)
    with pytest.raises(BudgetExceededError):
        session.privelet(ATTRS, epsilon=0.4)
    assert reads.count == 1 and [e["epsilon"] for e in session.ledger] == [0.7]


def test_ledger_is_written_into_every_release(tmp_path):
    df = pl.DataFrame({"a": [0, 1, 1, 2, 3]})
    session = df.dp.session(epsilon=1.0, neighbours="replace")
    first = session.basic(ATTRS, epsilon=0.25, label="histogram")
    second = session.privelet(ATTRS, epsilon=0.5)
    assert session.spent == pytest.approx(0.75) and session.remaining == pytest.approx(0.25)
    entries = session.ledger
    assert [(e["label"], e["epsilon"], e["mechanism"]) for e in entries] == [
        ("histogram", 0.25, "basic"), ("privelet", 0.5, "privelet")]
    assert all(e["time"].endswith("+00:00") for e in entries)
    assert first.params["ledger"] == {"total_epsilon": 1.0, "neighbours": "replace", "entries": entries[:1]}
    assert second.params["ledger"]["entries"] == entries
    back = pdp.read_release(second.write_parquet(tmp_path / "r.parquet"))
    assert back.params["ledger"] == second.params["ledger"]
    assert back.params["rho"] == second.params["rho"]


def test_seeds_are_refused_before_charging_or_reading():
    reads = Reads()
    session = pdp.Session(reads.frame(), epsilon=1.0, neighbours="replace")
    with pytest.raises(ParameterError, match="cannot be seeded"):
        session.basic(ATTRS, epsilon=0.5, seed=1)
    assert reads.count == 0 and session.spent == 0


def test_neighbour_relation_is_the_sessions():
    rng = np.random.default_rng(0)
    df = pl.DataFrame({"x": rng.random(200), "seq": [[1, 2]] * 200})
    session = pdp.Session(df, epsilon=2.0, neighbours="replace")
    with pytest.raises(ParameterError, match="neighbours='replace'"):
        session.privtree(["x"], bounds=[(0, 1)], epsilon=0.5, neighbours="add_remove")
    tree = session.privtree(["x"], bounds=[(0, 1)], epsilon=0.5)
    assert tree.neighbours == "replace"
    with pytest.raises(ParameterError, match="add/remove-one"):   # sequence models: add_remove only
        session.ngram_sequences("seq", alphabet=[1, 2], max_length=3, epsilon=0.5)
    assert session.spent == pytest.approx(0.5)
    add_remove = pdp.Session(df, epsilon=1.0, neighbours="add_remove")
    model = add_remove.ngram_sequences("seq", alphabet=[1, 2], max_length=3, epsilon=0.5)
    assert model.params["ledger"]["entries"][0]["mechanism"] == "ngram_sequences"


def test_a_failed_release_stays_charged():
    session = pl.DataFrame({"a": [0, 9]}).dp.session(epsilon=1.0, neighbours="replace")
    with pytest.raises(DomainError):                     # raised after reading: it depends on the data
        session.basic(ATTRS, epsilon=0.4)
    assert session.spent == pytest.approx(0.4)


def test_data_passes_through_unchanged():
    table = pa.table({"a": [0, 1, 2, 3]})
    release = pdp.Session(table, epsilon=1.0, neighbours="add_remove").basic(ATTRS, epsilon=1.0)
    assert release.neighbours == "add_remove" and release.counts.shape == (4,)
    lazy = pl.LazyFrame({"a": [0, 1]}).dp.session(epsilon=1.0, neighbours="replace")
    assert isinstance(lazy, pdp.Session)


@pytest.mark.parametrize("name", mechanisms.__all__)
def test_methods_are_the_mechanisms_less_data_seed_and_neighbours(name):
    fn = getattr(mechanisms, name)
    want = [p for p in list(inspect.signature(fn).parameters.values())[1:]
            if p.name not in ("seed", "neighbours")]
    got = list(inspect.signature(getattr(pdp.Session, name)).parameters.values())
    assert got[1:-1] == want and got[-1].name == "label"
    doc = getattr(pdp.Session, name).__doc__
    assert inspect.cleandoc(without_entries(fn.__doc__, ("frame", "seed", "neighbours"))) in doc
    assert not any(f"\n{p} : " in doc for p in ("frame", "seed", "neighbours"))  # it takes none of them


def test_bad_session_parameters():
    with pytest.raises(ParameterError):
        pdp.Session(pl.DataFrame({"a": [0]}), epsilon=0, neighbours="replace")
    with pytest.raises(ParameterError):
        pdp.Session(pl.DataFrame({"a": [0]}), epsilon=1.0, neighbours="swap")
    with pytest.raises(TypeError):
        pl.DataFrame({"a": [0]}).dp.session(epsilon=1.0)   # the relation must be stated
    session = pdp.Session(pl.DataFrame({"a": [0]}), epsilon=1.0, neighbours="replace")
    with pytest.raises(ParameterError, match="label"):
        session.basic(ATTRS, epsilon=0.1, label="")
    assert session.spent == 0
    assert "Session" in repr(session) and "spent=0" in repr(session)
    assert hasattr(DPNamespace, "session")
