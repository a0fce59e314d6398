"""Releases written by polars-dp 0.1.0 (checked in under tests/data) still read back identically."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

import polars_dp as pdp
from tests.helpers import TESTS_DATA, V0_1_0_FILES

DATA = TESTS_DATA
FILES = V0_1_0_FILES


def _meta(table) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}


def test_the_old_files_are_there():
    assert len(FILES) == 6


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_old_release_reads_back_identically(path):
    stored = pq.read_table(path)
    release = pdp.read_release(path)
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
    assert {k: new_params.get(k) for k in old_params} == old_params


def test_old_grid_release_answers_queries():
    release = pdp.read_release(DATA / "v0_1_0_privelet.parquet")
    total = release.range_count()
    assert total == pytest.approx(float(release.counts.sum()))
    assert release.range_std(occupation="office") > 0


def test_old_tree_release_answers_queries():
    release = pdp.read_release(DATA / "v0_1_0_privtree.parquet")
    assert release.range_count(x=(0.0, 1.0), y=(0.0, 1.0)) == pytest.approx(float(release.count.sum()))


@pytest.mark.parametrize(("old", "new"), [("TreeRelease", "SpatialRelease"),
                                          ("SequenceModel", "SequenceRelease")])
def test_former_class_names_are_deprecated_aliases(old, new):
    with pytest.warns(DeprecationWarning, match=new):
        assert getattr(pdp, old) is getattr(pdp, new)
    assert old in pdp.__all__


def test_former_module_names_are_aliases():
    from polars_dp.releases import spatial, spatial_format, tree, tree_format

    assert tree.SpatialRelease is spatial.SpatialRelease is pdp.SpatialRelease
    assert tree_format.rebuilt_plan is spatial_format.rebuilt_plan
    assert tree.__all__ == spatial.__all__ and tree_format.__all__ == spatial_format.__all__
    assert pdp.SpatialRelease.release_type == "tree"  # the stored identifier every version has written
