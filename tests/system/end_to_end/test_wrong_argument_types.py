"""Arguments of the wrong kind get the library's ParameterError naming the argument and what to
give, not an error from inside Python, pyarrow or DuckDB."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import polars_dp as pdp

FRAME = pl.DataFrame({"a": [1, 2, 2]})
ATTRS = [pdp.Ordinal("a", 0, 9)]


def _releases() -> list[pdp.Release]:
    rng = np.random.default_rng(1)
    points = pl.DataFrame({"x": rng.random(50), "y": rng.random(50)})
    words = pl.DataFrame({"w": [[1, 2], [2, 3]]})
    return [pdp.basic(FRAME, ATTRS, epsilon=1.0, seed=1),
            pdp.privtree(points, ["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=1.0, seed=1),
            pdp.privtree_sequences(words, "w", alphabet=[1, 2, 3], max_length=3, epsilon=1.0, seed=1)]


@pytest.mark.parametrize("source", [123, None, ["r.parquet"]])
def test_read_release_takes_a_path_or_a_table(source):
    for read, table in ((pdp.read_release, " or a pyarrow Table"), (pdp.scan_release, "")):
        want = rf"a release is read from a path \(a str or os.PathLike\){table}, got {type(source).__name__}$"
        with pytest.raises(pdp.ParameterError, match=want) as e:
            read(source)
        assert e.value.parameter == "source"


@pytest.mark.parametrize("con", ["notacon", None, 3])
def test_to_duckdb_takes_a_connection(con):
    for release in _releases():
        with pytest.raises(pdp.ParameterError, match=r"in a DuckDB connection \(duckdb.connect") as e:
            release.to_duckdb(con, "r")
        assert e.value.parameter == "con"


def test_a_ledger_path_is_refused_saying_to_open_it(tmp_path):
    path = str(tmp_path / "b.ledger")
    for make in (lambda: pdp.Session(FRAME, epsilon=1.0, neighbours="replace", ledger=path, dataset="d"),
                 lambda: pdp.Accountant(total=1.0, ledger=path, dataset="d")):
        with pytest.raises(pdp.ParameterError, match=rf"pass ledger=pdp.Ledger\('{path}'\)") as e:
            make()
        assert e.value.parameter == "ledger"
    assert not (tmp_path / "b.ledger").exists()


def test_a_sessions_total_is_named_epsilon():
    with pytest.raises(pdp.ParameterError, match="^epsilon must be a finite number > 0") as e:
        pdp.Session(FRAME, epsilon=0, neighbours="replace")
    assert e.value.parameter == "epsilon"


def test_running_a_plan_needs_its_frame_once():
    acct = pdp.Accountant(total=1.0)
    plan = pdp.plan("basic", ATTRS, epsilon=0.25)
    for args in ((), (FRAME, FRAME)):
        with pytest.raises(pdp.ParameterError, match=rf"run\(plan, frame\) .* got {len(args)} frames"):
            acct.run(plan, *args)
    assert acct.spent == 0
    assert acct.run(plan, FRAME).epsilon == 0.25 and acct.run(plan, frame=FRAME).epsilon == 0.25


@pytest.mark.parametrize("geometry", ["yes", 1, None])
def test_geometry_is_true_or_false(geometry, tmp_path):
    release = _releases()[1]
    with pytest.raises(pdp.ParameterError, match="geometry must be True or False") as e:
        release.write_parquet(tmp_path / "r.parquet", geometry=geometry)
    assert e.value.parameter == "geometry" and list(tmp_path.iterdir()) == []
