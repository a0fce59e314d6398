"""The privacy unit's contribution bound, by enumeration (:mod:`polars_dp.domains.privacy_unit`).

For a small table with identifiers, every neighbour on identifiers is enumerated: one
identifier's rows removed (``add_remove``) and one identifier's rows replaced by another
identifier's rows (``replace``).  After the truncation of :mod:`polars_dp.counting.truncation`
(the same key on both sides), the L1 change of what is noised (the frequency matrix; Privelet's
coefficients) is at most the plan's stated sensitivity: ``k`` and ``2k`` for the counts,
``rho`` times that for Privelet's coefficients.  The rows an identifier keeps depend on its own
rows only (the same whatever the other identifiers hold), in every engine.
"""

from __future__ import annotations

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pytest

import polars_dp as pdp
from polars_dp.counting.frequency import frequency_matrix
from polars_dp.counting.truncation import truncate
from polars_dp.errors import ColumnNotFoundError, DomainError, ParameterError
from polars_dp.kernels import wavelets as T

ATTRS = [pdp.Ordinal("a", 0, 7), pdp.Nominal("b", pdp.Hierarchy.flat(["p", "q", "r"]))]
KEY = 0x9E3779B97F4A7C15


def people() -> pl.DataFrame:
    """Five identifiers holding 1 to 5 rows each (some rows repeated)."""
    rng = np.random.default_rng(3)
    ids = np.repeat(np.arange(5), [1, 2, 3, 4, 5])
    return pl.DataFrame({"person": ids, "a": rng.integers(0, 8, ids.size),
                         "b": rng.choice(["p", "q", "r"], ids.size)})


def counts(frame: pl.DataFrame, k: int, key: int = KEY) -> np.ndarray:
    unit = pdp.Rows(max_per=k, id_column="person")
    return frequency_matrix(truncate(frame, unit, key, ["a", "b"]), ATTRS)


def neighbours(frame: pl.DataFrame, relation: str):
    ids = sorted(set(frame["person"].to_list()))
    for p in ids:
        rest = frame.filter(pl.col("person") != p)
        if relation == "add_remove":
            yield rest
            continue
        for q in ids:  # p's rows replaced by q's rows (relabelled p), and by a row of its own
            if q != p:
                theirs = frame.filter(pl.col("person") == q).with_columns(
                    person=pl.lit(p, frame.schema["person"]))
                yield pl.concat([rest, theirs])
        yield pl.concat([rest, pl.DataFrame({"person": [p], "a": [7], "b": ["r"]}, schema=frame.schema)])


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_count_sensitivity_by_enumeration(relation, k):
    frame = people()
    plan = pdp.plan("basic", ATTRS, epsilon=1.0, neighbours=relation,
                    privacy_unit=pdp.Rows(max_per=k, id_column="person"))
    base = counts(frame, k)
    worst = max(np.abs(counts(other, k) - base).sum() for other in neighbours(frame, relation))
    assert plan.sensitivity == (2 if relation == "replace" else 1) * k
    assert worst <= plan.sensitivity
    assert worst == plan.sensitivity  # tight on this table (identifiers with more than k rows)


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
def test_privelet_coefficients_sensitivity_by_enumeration(relation):
    k, frame = 2, people()
    plan = pdp.plan("privelet", ATTRS, epsilon=1.0, neighbours=relation,
                    privacy_unit=pdp.Rows(max_per=k, id_column="person"))
    mask = plan.transformed_mask

    def coefficients(f: pl.DataFrame) -> np.ndarray:
        return T.hn_forward(counts(f, k), ATTRS, mask)  # unnormalised W*c, what gets Lap(lambda)

    base = coefficients(frame)
    worst = max(np.abs(coefficients(o) - base).sum() for o in neighbours(frame, relation))
    assert worst <= plan.sensitivity * plan.rho + 1e-9


def test_without_the_unit_one_identifier_moves_the_counts_by_its_rows():
    """What the unit fixes: untruncated, removing identifier 4 moves the matrix by 5 rows."""
    frame = people()
    moved = np.abs(frequency_matrix(frame, ATTRS) - frequency_matrix(frame.filter(pl.col("person") != 4),
                                                                         ATTRS)).sum()
    assert moved == 5 > pdp.plan("basic", ATTRS, epsilon=1.0, neighbours="add_remove").sensitivity


def _kept(frame) -> list[tuple]:
    return sorted(map(tuple, pl.DataFrame(frame).select("person", "a", "b").rows()))


def test_an_identifiers_rows_do_not_depend_on_the_others():
    frame = people()
    unit = pdp.Rows(max_per=2, id_column="person")
    alone = _kept(truncate(frame.filter(pl.col("person") == 4), unit, KEY, ["a", "b"]))
    together = [r for r in _kept(truncate(frame, unit, KEY, ["a", "b"])) if r[0] == 4]
    assert alone == together and len(alone) == 2


@pytest.mark.parametrize("engine", ["lazy", "arrow_table", "arrow_stream", "duckdb"])
def test_every_engine_keeps_at_most_k_rows_per_identifier(engine):
    frame = people()
    data = {"lazy": lambda: frame.lazy(), "arrow_table": frame.to_arrow,
            "arrow_stream": lambda: pa.RecordBatchReader.from_batches(frame.to_arrow().schema,
                                                                      frame.to_arrow().to_batches()),
            "duckdb": lambda: duckdb.connect().from_arrow(frame.to_arrow())}[engine]()
    out = truncate(data, pdp.Rows(max_per=2, id_column="person"), KEY, ["a", "b"])
    kept = pl.DataFrame(out.arrow().read_all()) if engine == "duckdb" else out.lazy().collect()
    per = kept.group_by("person").len().sort("person")["len"].to_list()
    assert per == [1, 2, 2, 2, 2]
    if engine != "duckdb":  # the same Polars rule whatever the Polars-side input
        assert _kept(kept) == _kept(truncate(frame, pdp.Rows(max_per=2, id_column="person"), KEY, ["a", "b"]))


def test_rows_is_one_row_per_individual():
    frame = people()
    assert truncate(frame, pdp.Rows(), KEY, ["a"]) is frame
    assert pdp.Rows().factor == 1 and not pdp.Rows().truncates
    assert pdp.Rows(id_column="person").factor == 1 and pdp.Rows(max_per=3, id_column="p").factor == 3


@pytest.mark.parametrize("engine", ["polars", "duckdb"])
def test_null_identifiers_are_refused_or_dropped(engine):
    frame = people().with_columns(person=pl.when(pl.col("a") == pl.col("a").max()).then(None)
                                  .otherwise(pl.col("person")))
    unit = pdp.Rows(max_per=2, id_column="person")

    def data():
        return frame if engine == "polars" else duckdb.connect().from_arrow(frame.to_arrow())

    with pytest.raises(DomainError, match="'person' has .* null"):
        truncate(data(), unit, KEY, ["a", "b"])
    kept = truncate(data(), unit, KEY, ["a", "b"], nulls="drop")
    kept = pl.DataFrame(kept.arrow().read_all()) if engine == "duckdb" else kept
    assert kept["person"].null_count() == 0
    with pytest.raises(ColumnNotFoundError, match="'who'"):
        truncate(data(), pdp.Rows(max_per=2, id_column="who"), KEY, ["a"])


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True])
def test_max_per_must_be_a_positive_integer(bad):
    with pytest.raises(ParameterError, match="max_per must be an integer >= 1"):
        pdp.Rows(max_per=bad, id_column="person")


def test_max_per_needs_an_identifier_and_no_count_column():
    with pytest.raises(ParameterError, match="needs id_column"):
        pdp.Rows(max_per=3)
    with pytest.raises(ParameterError, match="pre-aggregated"):
        pdp.plan("basic", ATTRS, epsilon=1.0, count_column="n",
                 privacy_unit=pdp.Rows(max_per=2, id_column="p"))
