"""``pdp.duckdb.attach`` answers only from a stored release that passes the checks of
:func:`polars_dp.read_release`: a count changed in the database file, or a parameter changed
with the checksum recomputed, is refused when the file is reopened."""

from __future__ import annotations

import json

import duckdb
import pytest

import polars_dp as pdp
from polars_dp.releases.integrity import CHECKSUM_KEY, payload_checksum
from tests.helpers.privacy import CASES

ATTACHED = [c for c in CASES if c.id in ("basic", "privtree_levels", "uniform_grid", "privtree_sequences")]


def _stored(case, tmp_path):
    release = case.run(seed=6, epsilon=2.0)
    path = str(tmp_path / "releases.duckdb")
    with duckdb.connect(path) as con:
        release.to_duckdb(con, "r")
    return release, path


@pytest.mark.parametrize("case", ATTACHED, ids=[c.id for c in ATTACHED])
def test_attach_refuses_an_edited_count(case, tmp_path):
    release, path = _stored(case, tmp_path)
    with duckdb.connect(path) as con:
        assert pdp.duckdb.attach(con, "r") == release
        # the user's name is a read-only view: the counts live in the internal table
        con.execute("UPDATE __pdp_r_cells SET count = count + 1000 WHERE rowid = 0")
    with duckdb.connect(path) as con, pytest.raises(pdp.ReleaseFormatError):
        pdp.duckdb.attach(con, "r")


@pytest.mark.parametrize("case", ATTACHED, ids=[c.id for c in ATTACHED])
def test_attach_refuses_an_edited_parameter_with_its_checksum_recomputed(case, tmp_path):
    release, path = _stored(case, tmp_path)
    with duckdb.connect(path) as con:
        text = dict(con.execute("SELECT key, value FROM r_meta").fetchall())
        params = json.loads(text["params"])
        spent = next(k for k in params if k.endswith("epsilon_effective"))
        params[spent] /= 4  # claims a quarter of the loss
        text["params"] = json.dumps(params)
        text[CHECKSUM_KEY] = payload_checksum(text, release._payload_arrays())
        for key in ("params", CHECKSUM_KEY):
            con.execute("UPDATE r_meta SET value = ? WHERE key = ?", [text[key], key])
    with duckdb.connect(path) as con, pytest.raises(pdp.ReleaseFormatError, match="epsilon_effective"):
        pdp.duckdb.attach(con, "r")
