"""Grid and spatial releases are sealed: no array they expose can be written in place, and none
of their arrays can be rebound; the numbers change only through ``postprocess`` (issue #38, 1)."""

import duckdb
import numpy as np
import polars as pl
import pytest

import polars_dp as pdp

ATTRS = [pdp.Ordinal("age", 0, 63, width=4), pdp.Nominal("sex", categories=["f", "m"])]


def grid_frame():
    rng = np.random.default_rng(7)
    return pl.DataFrame({"age": rng.integers(0, 64, 3000), "sex": rng.choice(["f", "m"], 3000)})


def point_frame():
    rng = np.random.default_rng(8)
    return pl.DataFrame({"x": rng.beta(2, 5, 3000), "y": rng.uniform(0, 1, 3000)})


SPATIAL = {"bounds": [(0, 1), (0, 1)], "epsilon": 1.0, "seed": 3}
KINDS = {
    "basic": lambda: pdp.basic(grid_frame(), ATTRS, epsilon=0.5, seed=1),
    "privelet": lambda: pdp.privelet(grid_frame(), ATTRS, epsilon=0.5, seed=1),
    "privelet+": lambda: pdp.privelet(grid_frame(), ATTRS, epsilon=0.5, seed=1, untransformed=["sex"]),
    "privtree": lambda: pdp.privtree(point_frame(), ["x", "y"], levels=0, **SPATIAL),
    "privtree levels=2": lambda: pdp.privtree(point_frame(), ["x", "y"], levels=2, **SPATIAL),
    "uniform_grid": lambda: pdp.uniform_grid(point_frame(), ["x", "y"], **SPATIAL),
    "adaptive_grid": lambda: pdp.adaptive_grid(point_frame(), ["x", "y"], **SPATIAL),
    "privelet_grid": lambda: pdp.privelet_grid(point_frame(), ["x", "y"], bits=3, **SPATIAL),
}


def public_arrays(release):
    """Every ndarray reachable from a public attribute of the release (the box's bounds and the
    counted levels' arrays too), by name."""
    found = {}
    for name in dir(release):
        if name.startswith("_"):
            continue
        value = getattr(release, name)
        if isinstance(value, np.ndarray):
            found[name] = value
        elif name in ("box", "levels") and value is not None:
            for inner in dir(value):
                if not inner.startswith("_") and isinstance(getattr(value, inner, None), np.ndarray):
                    found[f"{name}.{inner}"] = getattr(value, inner)
    return found


def assert_sealed(release):
    arrays = public_arrays(release)
    assert arrays
    for name, array in arrays.items():
        with pytest.raises(ValueError, match="read-only"):
            array[...] = 0
        assert not array.flags.writeable, name
    for name in [n for n in arrays if "." not in n and n != "prefix"]:
        with pytest.raises(AttributeError, match="postprocess"):
            setattr(release, name, np.zeros_like(arrays[name]))


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_public_array_is_read_only_fresh_read_back_and_postprocessed(kind, tmp_path):
    release = KINDS[kind]()
    expected = {"counts", "prefix"} if isinstance(release, pdp.GridRelease) else \
        {"lo", "hi", "depth", "count", "box.lo", "box.hi"}
    release.range_count()  # the cached prefix sums exist
    assert expected <= set(public_arrays(release))
    assert_sealed(release)
    path = release.write_parquet(tmp_path / "r.parquet")
    assert_sealed(pdp.read_release(path))
    assert_sealed(pdp.read_release(path).postprocess("nonnegative"))
    assert_sealed(release.postprocess("nonnegative"))


def test_counted_levels_are_read_only():
    release = KINDS["privtree levels=2"]()
    levels = release.levels
    for name in ("noisy", "noisy_leaves", "finest_starts", "finest_depth", "finest_counts"):
        with pytest.raises(ValueError, match="read-only"):
            getattr(levels, name)[0] = 1.0
    with pytest.raises(ValueError, match="read-only"):
        levels.estimate.xhat[-1][0] = 1.0
    with pytest.raises(AttributeError):
        levels.finest_counts = levels.finest_counts + 1  # frozen


def test_a_numpy_clip_cannot_make_the_answers_disagree():
    """The issue's reproducer: a clip in place used to leave the cached prefix (range_count, the
    DuckDB macros) on the old counts while the table, plain SQL and the file had the new ones."""
    release = KINDS["basic"]()
    before = release.range_count()
    with pytest.raises(ValueError, match="read-only"):
        release.counts[release.counts < 0] = 0
    con = duckdb.connect()
    release.to_duckdb(con, "r")
    plain = con.sql("SELECT sum(count) FROM r").fetchall()[0][0]
    macro = con.sql("SELECT count FROM r_range_count()").fetchall()[0][0]
    assert before == pytest.approx(plain) == pytest.approx(macro)
    assert pl.DataFrame(release)["count"].sum() == pytest.approx(before)
    clipped = release.postprocess("nonnegative")  # the way to change the numbers: recorded
    assert clipped.params["postprocessed"][0]["method"] == "nonnegative"
    assert clipped.range_std(age=(0, 63)) is None


def test_the_memory_under_an_array_cannot_be_made_writeable_again():
    """Not a view over a writeable array: neither its base nor ``setflags`` reopens it."""
    for release in (KINDS["basic"](), KINDS["privtree"]()):
        for array in public_arrays(release).values():
            base = array
            while isinstance(base, np.ndarray):
                assert not base.flags.writeable
                base = base.base
            with pytest.raises(ValueError):
                array.setflags(write=True)


@pytest.mark.parametrize("kind", ["basic", "privtree levels=2", "adaptive_grid"])
def test_params_are_read_only_and_their_lists_are_copies(kind, tmp_path):
    """``params`` holds the scales the error bars and the file state: an edit raises, and editing a
    list handed out changes neither the answers nor the file."""
    release = KINDS[kind]()
    before = release.metadata()
    key = next(iter(release.params))
    with pytest.raises(TypeError, match="read-only"):
        release.params[key] = 0
    with pytest.raises(TypeError, match="read-only"):
        del release.params[key]
    for name in release.params:
        value = release.params[name]
        if isinstance(value, list):
            value.append(1e9)
        elif isinstance(value, dict):
            value["edited"] = 1
    assert release.metadata()["params"] == before["params"]
    assert pdp.read_release(release.write_parquet(tmp_path / "r.parquet")).params == release.params


def test_only_the_librarys_annotations_can_be_added():
    release = KINDS["basic"]()
    release.annotate("seeded", True)
    assert release.params["seeded"] is True
    with pytest.raises(pdp.ParameterError, match="annotate takes one of"):
        release.annotate("noise_scale", 0.0)
