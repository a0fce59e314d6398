from __future__ import annotations

import re
import warnings

import pytest

from polars_dp.cli import main


def test_demo_prints_releases_and_range_counts(capsys):
    assert main(["demo", "--seed", "3", "--epsilon", "0.5"]) == 0
    out = capsys.readouterr().out
    assert "1,414,593 rows" in out
    assert "epsilon=0.5" in out and "polars_dp.neighbours=replace" in out
    # the exact total sits next to the noisy answers of both mechanisms
    row = next(line for line in out.splitlines() if line.startswith("all personnel"))
    numbers = [float(x.replace(",", "")) for x in re.findall(r"-?[\d,]+(?:\.\d+)?", row)]
    true, basic, basic_std = numbers[0], numbers[1], numbers[2]
    assert true == 1_414_593
    assert abs(basic - true) < 6 * basic_std  # Laplace tail beyond 6 std: p < 3e-4
    assert "untransformed=['age']" in out
    row = next(line for line in out.splitlines() if line.startswith("southern hemisphere"))
    true, tree, grid = (float(x.replace(",", "")) for x in row.split()[-3:])
    assert abs(tree - true) < 0.05 * true and abs(grid - true) < 0.05 * true


def test_public_names_resolve():
    import polars_dp as pdp

    with warnings.catch_warnings():  # no name of __all__ is a deprecated one
        warnings.simplefilter("error", DeprecationWarning)
        missing = [name for name in pdp.__all__ if not hasattr(pdp, name)]
    assert missing == []
    with pytest.warns(DeprecationWarning):  # the former class names still resolve, outside __all__
        assert pdp.TreeRelease is pdp.SpatialRelease
    assert pdp.duckdb.register is not None
