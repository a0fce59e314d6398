"""progress=True shows the stage names on stderr; progress=False writes nothing."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import polars_dp as pdp
from polars_dp.errors import ParameterError
from polars_dp.progress import LARGE_WORK, Progress, show_progress

ATTRS = [pdp.Ordinal("age", 0, 9), pdp.Nominal("sex", categories=["f", "m"])]
POINTS = pl.DataFrame({"x": np.linspace(0, 1, 300), "y": np.linspace(1, 0, 300)})
TABLE = pl.DataFrame({"age": np.arange(300) % 10, "sex": ["f", "m"] * 150})
SEQS = pl.DataFrame({"s": ["abca", "bb", "cab", "a"] * 20})

CASES = {
    "basic": (lambda p: pdp.basic(TABLE, ATTRS, epsilon=1.0, seed=1, progress=p), ["counting", "noise"]),
    "privelet": (lambda p: pdp.privelet(TABLE, ATTRS, epsilon=1.0, seed=1, progress=p),
                 ["counting", "noise + inverse transform"]),
    "privtree": (lambda p: POINTS.dp.privtree(["x", "y"], bounds=[(0, 1)] * 2, epsilon=1.0, seed=1,
                                              progress=p), ["counting", "tree", "noise"]),
    "uniform_grid": (lambda p: POINTS.dp.uniform_grid(["x", "y"], bounds=[(0, 1)] * 2, epsilon=1.0, seed=1,
                                                      progress=p), ["counting", "noise"]),
    "adaptive_grid": (lambda p: POINTS.dp.adaptive_grid(["x", "y"], bounds=[(0, 1)] * 2, epsilon=1.0, seed=1,
                                                        progress=p), ["counting", "noise"]),
    "privelet_grid": (lambda p: POINTS.dp.privelet_grid(["x", "y"], bounds=[(0, 1)] * 2, epsilon=1.0, seed=1,
                                                        bits=3, progress=p), ["counting", "noise"]),
    "privtree_sequences": (lambda p: SEQS.dp.privtree_sequences("s", alphabet="abc", max_length=4,
                                                                epsilon=1.0, seed=1, progress=p),
                           ["counting", "tree"]),
    "ngram_sequences": (lambda p: SEQS.dp.ngram_sequences("s", alphabet="abc", max_length=4, epsilon=1.0,
                                                          seed=1, progress=p), ["counting", "noise"]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_mechanism_progress_shows_stages_only_when_asked(name, capsys):
    run, stages = CASES[name]
    run(False)
    assert capsys.readouterr().err == ""
    run(True)
    err = capsys.readouterr().err
    for stage in stages:
        assert stage in err, (stage, err)


def test_every_mechanism_has_a_progress_option():
    import inspect

    from polars_dp import mechanisms
    for name in ("basic", "privelet", "privtree", "uniform_grid", "adaptive_grid", "privelet_grid",
                 "privtree_sequences", "ngram_sequences"):
        param = inspect.signature(getattr(mechanisms, name)).parameters["progress"]
        assert param.default is None


def test_range_counts_and_writing_progress(capsys, tmp_path):
    grid = pdp.basic(TABLE, ATTRS, epsilon=1.0, seed=1)
    tree = POINTS.dp.privtree(["x", "y"], bounds=[(0, 1)] * 2, epsilon=1.0, seed=1)
    grid.range_counts(pl.DataFrame({"age_lo": [1], "age_hi": [5]}), progress=False)
    tree.range_counts(pl.DataFrame({"x_lo": [0.1], "x_hi": [0.5]}), progress=False)
    grid.write_parquet(tmp_path / "a.parquet", progress=False)
    assert capsys.readouterr().err == ""
    grid.range_counts(pl.DataFrame({"age_lo": [1], "age_hi": [5]}), std=True, progress=True)
    assert "prefix sums" in capsys.readouterr().err
    tree.range_counts(pl.DataFrame({"x_lo": [0.1], "x_hi": [0.5]}), progress=True)
    assert "queries" in capsys.readouterr().err
    grid.write_parquet(tmp_path / "b.parquet", progress=True)
    assert "writing" in capsys.readouterr().err


def test_automatic_progress_needs_a_terminal_and_large_work(monkeypatch):
    class Tty:
        def isatty(self):
            return True
    assert not show_progress(None, LARGE_WORK)  # pytest's stderr is not a terminal
    monkeypatch.setattr("sys.stderr", Tty())
    assert show_progress(None, LARGE_WORK) and show_progress(None, None)
    assert not show_progress(None, LARGE_WORK - 1)


def test_progress_option_is_checked():
    with pytest.raises(ParameterError, match="progress"):
        Progress("x", "yes")


def test_stage_bar_reaches_its_total(capsys, monkeypatch):
    monkeypatch.setattr("polars_dp.progress._is_terminal", lambda: True)  # bars are for terminals
    bar = Progress("task", True)
    with bar.stage("work", total=10) as advance:
        advance(3)
    assert "100%" in capsys.readouterr().err


def test_progress_off_a_terminal_is_one_plain_line_per_stage(capsys):
    """Small defect: a log got each stage twice on one line and a pile of carriage-return frames."""
    pdp.privtree(POINTS, ["x", "y"], bounds=[(0, 1)] * 2, epsilon=1.0, seed=1, progress=True)
    err = capsys.readouterr().err
    assert "\r" not in err
    lines = err.splitlines()
    assert lines == [f"privtree: {stage}" for stage in ("counting (finest cells)", "tree", "noise")], lines


@pytest.mark.parametrize("name", ["basic", "privelet", "privtree", "uniform_grid"])
def test_automatic_bars_are_the_same_either_side_of_the_large_work_threshold(name, monkeypatch):
    """Neighbouring tables of LARGE_WORK - 1 and LARGE_WORK rows: on a terminal, whether bars
    appear is decided from public sizes only (it followed the row count)."""
    from polars_dp import progress as module

    monkeypatch.setattr(module, "_is_terminal", lambda: True)
    monkeypatch.setattr(module, "tqdm", lambda *a, **k: type("Bar", (), {"update": _ignore, "close": _ignore,
                                                                        "total": None, "n": 0})())
    decided = []
    resolve = module.show_progress
    monkeypatch.setattr(module, "show_progress", lambda p, w=0: decided.append(resolve(p, w)) or decided[-1])
    for rows in (LARGE_WORK - 1, LARGE_WORK):
        table = pl.DataFrame({"age": np.zeros(rows, dtype=np.int64), "x": np.full(rows, 0.5),
                              "y": np.full(rows, 0.5)})
        if name in ("basic", "privelet"):
            getattr(pdp, name)(table, [pdp.Ordinal("age", 0, 9)], epsilon=1.0, seed=1)
        else:
            extra = {"resolution": 4} if name == "privtree" else {}
            getattr(pdp, name)(table, ["x", "y"], bounds=[(0, 1)] * 2, epsilon=1.0, seed=1, **extra)
    assert len(decided) == 2 and decided[0] == decided[1], decided


def _ignore(*args, **kwargs):
    return None
