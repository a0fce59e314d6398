"""The outputs experiment skips cleanly without the real data and computes its measures right."""

from __future__ import annotations

import numpy as np
import polars as pl

from benchmarks.evaluation import outputs_experiment as exp


def test_skips_cleanly_without_real_data(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("POLARS_DP_DATA", raising=False)
    monkeypatch.setattr(exp.data, "data_dir", lambda override=None: None)
    assert exp.main(["--out", str(tmp_path / "out"), "--data", str(tmp_path / "absent")]) == 0
    assert "skipping" in capsys.readouterr().out
    assert not (tmp_path / "out").exists()


def test_sampling_deviation_is_the_binomial_mean_absolute_deviation():
    rng = np.random.default_rng(0)
    n, p = 10_000, 0.3
    draws = rng.binomial(n, p, size=200_000)
    want = np.abs(draws - n * p).mean()
    got = exp.sampling_deviation(np.array([n * p]), n)[0]
    assert abs(got - want) <= 0.01 * want        # normal approximation, n p (1 - p) = 2,100


def test_ratios_divide_by_the_raw_error():
    errors = pl.DataFrame({"mechanism": ["m"] * 4, "epsilon": [1.0] * 4, "repeat": [0, 1, 0, 1],
                           "variant": ["raw", "raw", "nonnegative", "nonnegative"],
                           "abs_error": [4.0, 6.0, 1.0, 2.0]})
    out = exp.ratios(errors, ["mechanism", "epsilon"])
    assert out["ratio"].to_list() == [1.5 / 5.0]
