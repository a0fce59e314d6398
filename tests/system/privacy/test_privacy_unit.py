"""The privacy unit across the registry: every plan's scales carry the factor ``k``, every
release records the unit and a reader refuses an edited one; sequences by enumeration
(:mod:`polars_dp.domains.privacy_unit`)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import polars as pl
import pytest

import polars_dp as pdp
from polars_dp.counting.sequences import encode_sequences
from polars_dp.counting.truncation import truncate
from polars_dp.errors import ReleaseFormatError
from tests.helpers.privacy import CASE_IDS, CASES, FRAMES, edited_table

UNIT = pdp.Rows(max_per=3, id_column="person")
SCALES = ("scale", "leaf_scale", "cell_scale", "level1_scale", "level2_scale", "n_scale", "lam",
          "length_scale")


def with_people(frame: pl.DataFrame) -> pl.DataFrame:
    """Each row given to one of ``height // 2`` people (two rows or more each)."""
    return frame.with_columns(person=pl.int_range(pl.len()) % max(1, frame.height // 2))


def _scales(plan) -> dict[str, float]:
    out = {k: float(getattr(plan, k)) for k in SCALES if getattr(plan, k, None) is not None}
    out.update({f"level{j}": float(b) for j, b in enumerate(getattr(plan, "level_scales", []) or [])})
    return out


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_every_scale_is_k_times_the_one_row_scale(case):
    """Each noise scale is (up to the exact grid's rounding up) ``k`` times the ``Rows()`` one,
    and the plan still spends at most epsilon."""
    plain, unit = case.plan(1.0), case.plan(1.0, privacy_unit=UNIT)
    ones, threes = _scales(plain), _scales(unit)
    assert ones and ones.keys() == threes.keys()
    for name, one in ones.items():
        assert threes[name] == pytest.approx(3 * one, rel=1e-5), name
    assert 0 < unit.epsilon_spent <= Fraction(1.0)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_the_release_records_the_unit_and_a_reader_refuses_an_edited_one(case, tmp_path):
    frame = with_people(FRAMES[case.shape](False))
    release = case.plan(1.0, privacy_unit=UNIT).run(frame, seed=1)
    assert release.params["privacy_unit"] == {"max_per": 3, "id_column": "person"}
    path = tmp_path / "r.parquet"
    release.write_parquet(path)
    assert pdp.read_release(path).params["privacy_unit"] == release.params["privacy_unit"]

    def fewer(meta):
        meta["params"]["privacy_unit"]["max_per"] = 2

    def dropped(meta):
        del meta["params"]["privacy_unit"]

    for edit in (fewer, dropped):
        with pytest.raises(ReleaseFormatError):
            pdp.read_release(edited_table(release, edit))


def _root_histogram(frame: pl.DataFrame, k: int, max_length: int) -> np.ndarray:
    kept = truncate(frame, pdp.Rows(max_per=k, id_column="person"), 12345, ["s"])
    enc = encode_sequences(kept, "s", alphabet=[1, 2, 3], max_length=max_length)
    return np.bincount(enc.next_symbol, minlength=enc.beta)


@pytest.mark.parametrize("k", [1, 2])
def test_sequence_pairs_sensitivity_by_enumeration(k):
    """Removing one person's sequences moves the (context, symbol) pairs of any one context by at
    most ``k l_top`` (the root's, which holds every pair, checked): the plans' group."""
    frame = pl.DataFrame({"person": [0, 0, 0, 1, 2, 2],
                          "s": [[1, 2, 3, 1, 2], [2, 1, 3, 3], [3, 3, 3], [1], [2, 2, 2, 2], [1, 3]]})
    max_length = 3
    plan = pdp.plan("ngram_sequences", "s", alphabet=[1, 2, 3], max_length=max_length, epsilon=1.0,
                    privacy_unit=pdp.Rows(max_per=k, id_column="person"))
    base = _root_histogram(frame, k, max_length)
    worst = max(np.abs(_root_histogram(frame.filter(pl.col("person") != p), k, max_length) - base).sum()
                for p in range(3))
    assert plan.group == k * (max_length + 1)
    assert worst == plan.group  # person 0's sequences all reach max_length: tight


def test_sessions_take_the_unit():
    frame = with_people(FRAMES["grid"](False))
    session = pdp.Session(frame, epsilon=2.0, neighbours="replace", privacy_unit=UNIT)
    release = session.basic(CASES[0].args[0], epsilon=0.5)  # the session's unit
    assert release.params["sensitivity"] == 6 and release.params["privacy_unit"]["max_per"] == 3
    assert release.params["ledger"]["privacy_unit"] == UNIT.record()
    two = session.basic(CASES[0].args[0], epsilon=0.5, privacy_unit=pdp.Rows(max_per=2, id_column="person"))
    assert two.params["sensitivity"] == 4 and session.spent == 1.0  # the same individual: they compose
    assert "privacy_unit=Rows(max_per=3, id_column='person')" in repr(session)


@pytest.mark.parametrize("unit", [pdp.Rows(), pdp.Rows(max_per=3, id_column="other")])
def test_a_budget_refuses_a_release_protecting_another_individual(unit):
    """A row-level release is only ``m epsilon``-DP for a person with ``m`` rows: releases
    protecting different individuals do not compose, so the budget refuses them, charging
    nothing, whether it is a session's, an accountant's or a ledger's."""
    frame = with_people(FRAMES["grid"](False)).with_columns(other=pl.col("person"))
    attrs = CASES[0].args[0]
    session = pdp.Session(frame, epsilon=2.0, neighbours="replace", privacy_unit=UNIT)
    refused = "releases protecting different individuals do not compose"
    with pytest.raises(pdp.ParameterError, match=refused) as e:
        session.basic(attrs, epsilon=0.5, privacy_unit=unit)
    assert e.value.parameter == "privacy_unit" and session.spent == 0
    acct = pdp.Accountant(total=1.0)  # one row is the individual by default
    with pytest.raises(pdp.ParameterError, match="protects the rows of one 'person' as one individual"):
        acct.run(pdp.plan("basic", attrs, epsilon=0.5, privacy_unit=UNIT), frame)
    assert acct.spent == 0
    acct.run(pdp.basic, frame, attrs, epsilon=0.5)
    assert acct.spent == 0.5


def test_a_ledger_fixes_the_individual_of_a_dataset(tmp_path):
    frame = with_people(FRAMES["grid"](False))
    attrs = CASES[0].args[0]
    book = pdp.Ledger(tmp_path / "b.ledger")
    pdp.Session(frame, epsilon=1.0, neighbours="replace", ledger=book, dataset="d",
                privacy_unit=UNIT).basic(attrs, epsilon=0.25)
    assert book.dataset("d").id_column == "person" and book.dataset("d").to_json()["id_column"] == "person"
    with pytest.raises(pdp.LedgerError, match="id_column='person', not None .None: one row is one "
                                              "individual.: releases protecting different individuals"):
        pdp.Session(frame, epsilon=1.0, neighbours="replace", ledger=book, dataset="d")
    fresh = pdp.Ledger(tmp_path / "b.ledger")  # read from the file
    session = pdp.Session(frame, epsilon=1.0, neighbours="replace", ledger=fresh, dataset="d",
                          privacy_unit=pdp.Rows(max_per=1, id_column="person"))
    session.basic(attrs, epsilon=0.25)
    assert fresh.spent("d") == Fraction(1, 2)
    rows = pdp.Session(frame, epsilon=1.0, neighbours="replace", ledger=book, dataset="rows")
    rows.basic(attrs, epsilon=0.25)
    assert book.dataset("rows").id_column is None


def test_a_frames_session_takes_the_unit_and_the_ledger(tmp_path):
    frame = with_people(FRAMES["grid"](False))
    session = frame.dp.session(epsilon="1", neighbours="replace", privacy_unit=UNIT,
                               ledger=pdp.Ledger(tmp_path / "b.ledger"), dataset="d")
    release = session.basic(CASES[0].args[0], epsilon=0.5)
    assert release.params["privacy_unit"] == UNIT.record() and session.remaining == 0.5
    assert pdp.Ledger(tmp_path / "b.ledger").dataset("d").id_column == "person"
