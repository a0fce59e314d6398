"""The command line with a privtree_subgrid release: release from its example domain file (the
same release as the Python call), info, query with its exact noise_std, SQL and a plot."""

from __future__ import annotations

import json

import numpy as np
import pytest

import polars_dp as pdp
from polars_dp.cli.spec import load_spec
from tests.helpers.cli import SPECS, data_for, run_cli

SPEC = SPECS / "privtree_subgrid.toml"


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli_subgrid")
    frame = data_for(load_spec(SPEC), 3000, seed=11)
    frame.write_parquet(d / "points.parquet")
    from polars_dp.cli import main

    path = d / "release.parquet"
    assert (
        main(
            ["release", str(d / "points.parquet"), "--spec", str(SPEC), "-o", str(path), "--seed", "7", "-q"]
        )
        == 0
    )
    return frame, path


def test_cli_release_is_the_python_release(released):
    frame, path = released
    want = pdp.privtree_subgrid(
        frame,
        ["lon", "lat"],
        bounds=[(-180, 180), (-90, 90)],
        epsilon=1.0,
        tree_share=0.2,
        leaf_share=0.5,
        c2=3.0,
        seed=7,
    )
    got = pdp.read_release(path)
    assert got.mechanism == "privtree_subgrid" and got.verified
    np.testing.assert_array_equal(got.count, want.count)
    np.testing.assert_array_equal(got.subgrid.noisy_leaf, want.subgrid.noisy_leaf)
    np.testing.assert_array_equal(got.codes, want.codes)


def test_cli_info_query_sql_and_plot(released, capsys, tmp_path):
    _, path = released
    release = pdp.read_release(path)
    code, out, _ = run_cli(capsys, "info", path, "--json")
    assert code == 0 and json.loads(out)["mechanism"] == "privtree_subgrid"
    code, out, _ = run_cli(
        capsys, "query", path, "--where", "lon=0..", "--where", "lat=-30.5..45", "--json", "--std"
    )
    answer = json.loads(out)
    assert code == 0
    assert answer["count"] == pytest.approx(release.range_count(lon=(0, 180), lat=(-30.5, 45)))
    assert answer["std"] == pytest.approx(release.range_std(lon=(0, 180), lat=(-30.5, 45)))
    assert answer["std"] > 0
    code, out, _ = run_cli(
        capsys,
        "sql",
        path,
        "--json",
        "SELECT count, noise_std FROM release_range_count(lon_lo := 0, lat_lo := -30.5, lat_hi := 45)",
    )
    (row,) = json.loads(out)
    assert code == 0 and row["count"] == pytest.approx(answer["count"], rel=1e-9)
    assert row["noise_std"] == pytest.approx(answer["std"], rel=1e-9)
    code, _, _ = run_cli(capsys, "plot", path, "-o", tmp_path / "leaves.png")
    assert code == 0 and (tmp_path / "leaves.png").stat().st_size > 0
