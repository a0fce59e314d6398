"""Every noise model states one error bar for Python and SQL: for each class of the noise-model
hierarchy (discovered, not listed: a new model is tested as soon as it exists), the Python
``std`` / accuracy of grid ranges and ``noise_std`` / ``noise_lo`` / ``noise_hi`` of spatial boxes
equal what the DuckDB macros render from the same model, within 1e-9, over several shapes, ranges
and ``alpha`` values."""

from __future__ import annotations

import dataclasses

import duckdb
import numpy as np
import polars as pl
import pytest

import polars_dp as pdp
from polars_dp.plans.noise_model import LevelLaplace, NoiseModel
from tests.helpers.ranges import DOMAINS, query_frame, random_queries
from tests.helpers.sql import POINTS, small_tree_release

ALPHAS = (0.01, 0.05, 0.3)
#: Grid shapes: the listed terms (mixed axes), untransformed axes, the chord bound (many terms).
SHAPES = {"listed": (DOMAINS["partial"], ["n", "t", "job"], "exact"),
          "untransformed": (DOMAINS["exact"], ["u"], "float"),
          "chord": ([pdp.Ordinal(c, 0, 15) for c in "abcd"], list("abcd"), "exact")}  # 9^4 terms


def _model_classes() -> list[type[NoiseModel]]:
    out, todo = [], [NoiseModel]
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if cls is not NoiseModel:
            out.append(cls)
    return sorted(out, key=lambda c: c.__name__)


def _model(cls: type[NoiseModel], scale: float, transformed: list[str],
           attrs: list | None = None) -> NoiseModel:
    """An instance of ``cls`` from its fields (a field of a new kind needs a value here); the
    block-level model is the one of a hierarchical plan over ``attrs`` (its fields follow from them)."""
    if cls is LevelLaplace:
        return pdp.plan("hierarchical", attrs or [pdp.Ordinal("a", 0, 9)], epsilon=1.0 / scale).noise_model
    values = {"scale": scale, "transformed": tuple(transformed), "reason": "a test of the error bars"}
    unknown = [f.name for f in dataclasses.fields(cls) if f.name not in values]  # type: ignore[arg-type]
    assert not unknown, f"{cls.__name__}: give the test a value for the fields {unknown}"
    return cls(**{f.name: values[f.name] for f in dataclasses.fields(cls)})  # type: ignore[arg-type]


def _state(release: pdp.Release, attribute: str, model: NoiseModel) -> None:
    """Make ``release`` state its error bars from ``model`` (its property ``attribute``)."""
    release.__class__ = type(f"With{type(model).__name__}", (type(release),),
                             {attribute: property(lambda self: model)})


def _close(got: np.ndarray, want: np.ndarray) -> float:
    """Largest relative |got - want|; NaN (no error bar) must be NaN on both sides."""
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    return float(np.max(np.abs(got[ok] - want[ok]) / np.maximum(1.0, np.abs(want[ok])), initial=0.0))


def test_every_noise_model_is_discovered():
    names = {c.__name__ for c in _model_classes()}
    assert {"IndependentLaplace", "WaveletLaplace", "Correlated"} <= names


@pytest.mark.parametrize("cls", _model_classes(), ids=lambda c: c.__name__)
@pytest.mark.parametrize("shape", list(SHAPES))
def test_grid_error_bars_of_the_model_are_its_sql(cls, shape):
    attrs, transformed, noise = SHAPES[shape]
    counts = np.random.default_rng(7).integers(0, 50, size=tuple(a.n_cells for a in attrs)).astype(float)
    release = pdp.GridRelease(counts, attrs, mechanism="privelet", epsilon=1.0, neighbours="replace",
                              noise_scale=1.5, noise=noise, params={"transformed": transformed})
    model = _model(cls, 1.7, transformed, attrs)
    _state(release, "noise_model", model)
    if shape == "chord":
        rng = np.random.default_rng(5)
        bounds = {a.column: np.sort(rng.integers(a.lo, a.hi + 1, (60, 2)), axis=1) for a in attrs}
        frame = pl.DataFrame({"id": range(60), **{f"{c}_{s}": b[:, j] for c, b in bounds.items()
                                                  for j, s in enumerate(("lo", "hi"))}})
    else:
        frame = query_frame(attrs, random_queries(attrs, 60, seed=3))
    con = duckdb.connect()
    release.to_duckdb(con, "r")
    con.register("q", frame.to_arrow())
    for alpha in ALPHAS:
        python = release.accuracy(frame, alpha, align="outer").fill_null(float("nan"))
        sql = con.sql(f"SELECT count, std, hi - count AS acc FROM r_range_counts('q', align := 'outer', "
                      f"alpha := {alpha}) ORDER BY id").pl().fill_null(float("nan"))
        std, acc = python["std"].to_numpy(), python["accuracy"].to_numpy()
        assert not (model.exact and np.isnan(std).any())
        assert _close(sql["std"].to_numpy(), std) <= 1e-9
        assert _close(sql["acc"].to_numpy(), acc) <= 1e-9


@pytest.mark.parametrize("cls", _model_classes(), ids=lambda c: c.__name__)
def test_spatial_error_bars_of_the_model_are_its_sql(cls):
    release = small_tree_release()
    model = _model(cls, 0.8, [])
    _state(release, "error_model", model)
    rng = np.random.default_rng(6)
    bounds = {c: np.sort(rng.random((40, 2)), axis=1) for c in POINTS.columns}
    boxes = pl.DataFrame({"id": range(40), **{f"{c}_{s}": b[:, j] for c, b in bounds.items()
                                              for j, s in enumerate(("lo", "hi"))}})
    con = duckdb.connect()
    release.to_duckdb(con, "t")
    con.register("q", boxes.to_arrow())
    columns = ["noise_std", "noise_lo", "noise_hi"]
    for alpha in ALPHAS:
        python = release.range_counts(boxes, alpha=alpha).select(columns).fill_null(float("nan"))
        sql = con.sql(f"SELECT {', '.join(columns)} FROM t_range_counts('q', alpha := {alpha}) "
                      "ORDER BY id").pl().fill_null(float("nan"))
        for c in columns:
            assert _close(sql[c].to_numpy(), python[c].to_numpy()) <= 1e-9, c
