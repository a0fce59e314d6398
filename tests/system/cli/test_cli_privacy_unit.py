"""The domain file's ``[privacy_unit]`` table: the release bounds each person's rows in the
engine that counts and records the unit; a sequence file keeps one sequence per person."""

from __future__ import annotations

import polars as pl
import pytest

import polars_dp as pdp
from tests.helpers.cli import run_cli

GRID = """mechanism = "basic"
epsilon = {epsilon}
neighbours = "add_remove"
[privacy_unit]
id_column = "person"
max_per = 2
[[attributes]]
column = "a"
kind = "ordinal"
lo = 0
hi = 7
"""

SEQUENCES = """mechanism = "ngram_sequences"
epsilon = 1.0
column = "s"
alphabet = "abc"
max_length = 3
[privacy_unit]
id_column = "person"
"""


@pytest.mark.parametrize("engine", ["polars", "duckdb"])
def test_a_grid_release_bounds_each_person(engine, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    pl.DataFrame({"person": [1, 1, 1, 1, 2], "a": [1, 1, 1, 1, 5]}).write_parquet("rows.parquet")
    for epsilon in (1.0, 1e9):
        (tmp_path / "unit.toml").write_text(GRID.format(epsilon=epsilon))
        code, out, err = run_cli(capsys, "release", "rows.parquet", "--spec", "unit.toml",
                                 "-o", "out.parquet", "--engine", engine, "--seed", "3")
        assert code == 0, err
        assert "privacy unit 'person', at most 2 row(s) each" in out
        release = pdp.read_release("out.parquet")
        assert release.params["privacy_unit"] == {"max_per": 2, "id_column": "person"}
        assert 2 / epsilon <= release.noise_scale <= 2 / epsilon + 2**-20  # k / epsilon, on the exact grid
    # person 1's four rows in cell 1 count two; the noise at epsilon 1e9 rounds to nothing
    assert release.counts.tolist() == [0, 2, 0, 0, 0, 1, 0, 0]


def test_a_sequence_file_keeps_one_sequence_per_person(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    pl.DataFrame({"person": [1, 1, 2], "s": ["ab", "abc", "c"]}).write_parquet("s.parquet")
    (tmp_path / "s.toml").write_text(SEQUENCES)
    code, _, err = run_cli(capsys, "release", "s.parquet", "--spec", "s.toml", "-o", "out.parquet")
    assert code == 0, err
    release = pdp.read_release("out.parquet")
    assert release.params["privacy_unit"] == {"max_per": 1, "id_column": "person"}
