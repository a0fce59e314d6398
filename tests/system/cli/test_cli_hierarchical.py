"""The hierarchical mechanism from a domain file: the same release as the Python call, queried
with its error bars from the command line."""

from __future__ import annotations

import json

import numpy as np
import polars as pl

import polars_dp as pdp
from tests.helpers.cli import run_cli

SPEC = """mechanism = "hierarchical"
epsilon = 1.0
neighbours = "add_remove"

[options]
levels = { age = 4 }

[[attributes]]
column = "age"
kind = "ordinal"
lo = 0
hi = 63

[[attributes]]
column = "sex"
kind = "nominal"
categories = ["f", "m"]
"""


def test_hierarchical_release_from_a_domain_file(tmp_path, capsys):
    frame = pl.DataFrame({"age": [1, 5, 30, 63, 22, 22], "sex": ["f", "m", "f", "f", "m", "m"]})
    frame.write_parquet(tmp_path / "d.parquet")
    (tmp_path / "h.toml").write_text(SPEC)
    out = tmp_path / "r.parquet"
    code, stdout, _ = run_cli(capsys, "release", tmp_path / "d.parquet", "--spec", tmp_path / "h.toml",
                              "-o", out, "--seed", "3")
    assert code == 0 and "mechanism    hierarchical" in stdout
    attrs = [pdp.Ordinal("age", 0, 63), pdp.Nominal("sex", categories=["f", "m"])]
    expected = pdp.hierarchical(frame, attrs, epsilon=1.0, neighbours="add_remove", levels={"age": 4}, seed=3)
    got = pdp.read_release(out)
    np.testing.assert_array_equal(got.counts, expected.counts)
    assert got.params["levels"] == {"age": [64, 16, 4, 1], "sex": [2, 1]}
    code, stdout, _ = run_cli(capsys, "query", out, "-w", "age=16..47", "--std", "--json")
    assert code == 0
    answer = json.loads(stdout)
    assert answer["count"] == expected.range_count(age=(16, 47))
    assert answer["std"] == expected.range_std(age=(16, 47))
