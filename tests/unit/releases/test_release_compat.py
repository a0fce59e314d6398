"""Releases written by polars-dp 0.1.0 (checked in under tests/data, before checksums) still read
back identically when the caller opts in (``unverified=True``), and say they are unverified."""

from __future__ import annotations

import json

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import polars_dp as pdp
from polars_dp.cli import main
from polars_dp.releases.metadata import read_metadata
from tests.helpers import TESTS_DATA, V0_1_0_FILES

DATA = TESTS_DATA
FILES = V0_1_0_FILES


def _meta(table) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}


def test_the_old_files_are_there():
    assert len(FILES) == 6


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_old_release_is_refused_without_the_opt_in(path):
    with pytest.raises(pdp.ReleaseFormatError, match=r"no checksum.*read it with unverified=True"):
        pdp.read_release(path)
    with pytest.raises(pdp.ReleaseFormatError, match=r"unverified=True"):
        pdp.scan_release(path)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_old_release_reads_back_identically(path):
    stored = pq.read_table(path)
    release = pdp.read_release(path, unverified=True)
    assert release.verified is False and "verified=False" in repr(release)
    assert pdp.scan_release(path, unverified=True).collect().height == stored.num_rows
    again = release.to_arrow()
    for name in stored.column_names:
        # a binned ordinal column held each bin's lower value; it is now <column>_lo (and _hi)
        now = name if name in again.column_names else f"{name}_lo"
        assert again.column(now).to_pylist() == stored.column(name).to_pylist(), name
    old, new = _meta(stored), _meta(again)
    for key in ("polars_dp.release_type", "polars_dp.mechanism", "polars_dp.neighbours", "polars_dp.created"):
        assert new[key] == old[key]
    assert json.loads(new["polars_dp.epsilon"]) == json.loads(old["polars_dp.epsilon"])
    old_params = json.loads(old.get("polars_dp.params", "{}"))
    new_params = json.loads(new.get("polars_dp.params", "{}"))
    # a sequence model's eps_* entries are read and written as epsilon_*, the one spelling
    renamed = {"eps_tree": "epsilon_tree", "eps_leaf": "epsilon_leaf", "eps_length": "epsilon_length"}
    assert {k: new_params.get(renamed.get(k, k)) for k in old_params} == old_params
    assert json.loads(new["polars_dp.unverified"]) is True  # what is written from it says so


def test_old_grid_release_answers_queries():
    release = pdp.read_release(DATA / "v0_1_0_privelet.parquet", unverified=True)
    total = release.range_count()
    assert total == pytest.approx(float(release.counts.sum()))
    assert release.range_std(occupation="office") > 0


def test_old_tree_release_answers_queries():
    release = pdp.read_release(DATA / "v0_1_0_privtree.parquet", unverified=True)
    assert release.range_count(x=(0.0, 1.0), y=(0.0, 1.0)) == pytest.approx(float(release.count.sum()))


@pytest.mark.parametrize(("old", "new"), [("TreeRelease", "SpatialRelease"),
                                          ("SequenceModel", "SequenceRelease")])
def test_former_class_names_are_deprecated_aliases(old, new):
    with pytest.warns(DeprecationWarning, match=new):
        assert getattr(pdp, old) is getattr(pdp, new)
    assert old not in pdp.__all__ and new in pdp.__all__  # a star import brings the current name only


# ---------------------------------------------------------------------- a downgrade cannot forge
def _posing_as_0_1_0(release: pdp.Release, counts: np.ndarray) -> pa.Table:
    """``release`` with fabricated counts and the entries of newer writers deleted: what a file
    written before checksums looks like."""
    table = release.to_arrow()
    table = table.set_column(table.schema.get_field_index("count"), "count", pa.array(counts))
    meta = {k: v for k, v in table.schema.metadata.items()
            if k.decode().removeprefix("polars_dp.") not in ("format", "noise", "seeded", "checksum")}
    meta[b"polars_dp.version"] = b"0.1.0"
    params = json.loads(meta[b"polars_dp.params"])  # nor the exact scale and epsilon_effective
    meta[b"polars_dp.params"] = json.dumps({"sensitivity": params["sensitivity"]}).encode()
    return table.replace_schema_metadata(meta)


@pytest.fixture(scope="module")
def seeded_grid() -> pdp.GridRelease:
    frame = pl.DataFrame({"age": np.random.default_rng(8).integers(0, 100, 1_000)})
    return pdp.basic(frame, [pdp.Ordinal("age", 0, 99, width=10)], epsilon=1.0, seed=11)


def test_fabricated_counts_posing_as_0_1_0_are_refused_everywhere(seeded_grid, tmp_path, capsys):
    forged = _posing_as_0_1_0(seeded_grid, seeded_grid.counts * 1000)
    path = tmp_path / "forged.parquet"
    pq.write_table(forged, path)
    for read in (pdp.read_release, pdp.scan_release):
        with pytest.raises(pdp.ReleaseFormatError, match="no checksum.*unverified=True"):
            read(path)
    assert main(["query", str(path)]) == 2
    assert "--unverified" in capsys.readouterr().err
    legacy = pdp.read_release(path, unverified=True)  # opted in by name: it says what it is
    assert legacy.verified is False and legacy.seeded is False and "verified=False" in repr(legacy)
    assert main(["query", str(path), "--unverified"]) == 0
    assert "unverified" in capsys.readouterr().err


def test_what_is_written_from_an_unverified_release_stays_unverified(seeded_grid, tmp_path):
    """A fresh checksum over a re-written copy covers the ``unverified`` entry: the copy never passes
    for a verified release, in a file, after post-processing or through DuckDB."""
    legacy = pdp.read_release(_posing_as_0_1_0(seeded_grid, seeded_grid.counts), unverified=True)
    path = legacy.write_parquet(tmp_path / "copy.parquet")
    text = read_metadata(pq.read_schema(path))
    assert text["unverified"] == "true" and text["checksum"].startswith("sha256:")
    with pytest.raises(pdp.ReleaseFormatError, match="marked unverified.*unverified=True"):
        pdp.read_release(path)
    assert pdp.read_release(path, unverified=True).verified is False
    assert legacy.postprocess("nonnegative").verified is False
    assert "unverified" in read_metadata(legacy.postprocess("integer").to_arrow())
    con = duckdb.connect()
    legacy.to_duckdb(con, "legacy")
    with pytest.raises(pdp.ReleaseFormatError, match="marked unverified"):
        pdp.duckdb.read_release(con, "legacy")
    assert pdp.duckdb.attach(con, "legacy", unverified=True).verified is False
    fresh = pdp.read_release(seeded_grid.write_parquet(tmp_path / "fresh.parquet"))
    assert fresh.verified and "unverified" not in read_metadata(fresh.to_arrow())
    assert "verified" not in repr(fresh)
