"""Releases that cannot be silently wrong (issue 12): verified reads, safe SQL registration.

Each test below reproduces one of the issue's cases; on the code before the fix it passed
silently (a wrong answer, a dropped table) instead of refusing.
"""

from __future__ import annotations

import json

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import polars_dp as pdp
from polars_dp.releases.integrity import SCALE_ROUNDING, payload_checksum
from polars_dp.releases.metadata import read_metadata
from tests.helpers import V0_1_0_FILES


# ---------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def people() -> pl.DataFrame:
    rng = np.random.default_rng(12)
    n = 3_000
    return pl.DataFrame({"age": rng.integers(0, 40, n),
                         "sex": rng.choice(["female", "male"], n),
                         "job": rng.choice(["clerk", "manager", "driver", "farmer"], n)})


def attributes() -> list:
    jobs = pdp.Hierarchy.from_dict({"office": ["clerk", "manager"], "field": ["driver", "farmer"]},
                                   level_names=["group"])
    return [pdp.Ordinal("age", 0, 39, width=4), pdp.Nominal("sex", categories=["female", "male"]),
            pdp.Nominal("job", jobs)]


@pytest.fixture(scope="module", params=["basic", "privelet"])
def grid(request, people) -> pdp.GridRelease:
    return getattr(people.dp, request.param)(attributes(), epsilon=1.0, seed=3)


@pytest.fixture(scope="module")
def points() -> pl.DataFrame:
    rng = np.random.default_rng(5)
    return pl.DataFrame({"x": rng.beta(2, 5, 4_000), "y": rng.beta(5, 2, 4_000)})


@pytest.fixture(scope="module", params=["privtree", "uniform_grid", "adaptive_grid", "privelet_grid"])
def tree(request, points) -> pdp.SpatialRelease:
    kw = {"bits": 3} if request.param == "privelet_grid" else {}
    return getattr(points.dp, request.param)(["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=1.0, seed=4, **kw)


def with_meta(table: pa.Table, drop_checksum: bool = True, **changes: str) -> pa.Table:
    """``table`` with ``polars_dp.<key>`` entries replaced (and, by default, no checksum, so that
    the recomputation checks are what refuses the edit)."""
    meta = dict(table.schema.metadata)
    if drop_checksum:
        meta.pop(b"polars_dp.checksum", None)
    for key, value in changes.items():
        meta[f"polars_dp.{key}".encode()] = value.encode()
    return table.replace_schema_metadata(meta)


# ---------------------------------------------------------------------- case 1: row order
def test_reordered_grid_table_is_restored_exactly(grid):
    table = grid.to_arrow()
    shuffled = table.sort_by([("count", "descending")])
    assert shuffled.column("count").to_pylist() != table.column("count").to_pylist()
    back = pdp.read_release(shuffled)
    assert back == grid
    assert back.range_count(age=(0, 7), job="office") == grid.range_count(age=(0, 7), job="office")


def test_reordered_tree_table_is_restored_exactly(tree):
    table = tree.to_arrow()
    perm = np.random.default_rng(0).permutation(table.num_rows)
    back = pdp.read_release(table.take(perm))
    assert back == tree
    assert back.range_count(x=(0.1, 0.6)) == pytest.approx(tree.range_count(x=(0.1, 0.6)), rel=1e-12)


def test_filtered_or_repeated_rows_are_refused(grid, tree, tmp_path):
    for release in (grid, tree):
        table = release.to_arrow()
        with pytest.raises(pdp.ReleaseFormatError, match="rows were removed|removed or added|do not tile"):
            pdp.read_release(table.slice(1))
        repeated = pa.concat_tables([table.slice(0, 1), table.slice(0, table.num_rows - 1)])
        with pytest.raises(pdp.ReleaseFormatError, match="repeated|tile|layout"):
            pdp.read_release(repeated)
    path = tmp_path / "cut.parquet"
    pq.write_table(grid.to_arrow().slice(0, 10), path)
    with pytest.raises(pdp.ReleaseFormatError):
        pdp.read_release(path)


def test_a_label_that_is_not_a_cell_is_refused(grid):
    table = grid.to_arrow()
    ages = table.column("age_lo").to_numpy().copy()
    ages[0] = 1  # not a bin edge of width-4 bins
    edited = table.set_column(table.schema.get_field_index("age_lo"), "age_lo", pa.array(ages))
    with pytest.raises(pdp.ReleaseFormatError, match="'age_lo' holds 1"):
        pdp.read_release(with_meta(edited))
    ends = table.column("age_hi").to_numpy().copy()
    ends[0] += 4  # the next bin's end: the range no longer names the row's bin
    edited = table.set_column(table.schema.get_field_index("age_hi"), "age_hi", pa.array(ends))
    with pytest.raises(pdp.ReleaseFormatError, match="'age_hi' holds 7 but that row's bin ends at 3"):
        pdp.read_release(with_meta(edited))
    groups = table.column("job_group").to_pylist()
    groups[0] = "field" if groups[0] == "office" else "office"
    edited = table.set_column(table.schema.get_field_index("job_group"), "job_group", pa.array(groups))
    with pytest.raises(pdp.ReleaseFormatError, match="job_group"):
        pdp.read_release(with_meta(edited))


# ---------------------------------------------------------------------- case 2: metadata edits
@pytest.mark.parametrize(("key", "value", "message"), [
    ("noise_scale", "0.001", "'noise_scale' is 0.001 but the declared parameters give"),
    ("epsilon", "-5", "'epsilon' must be a finite number > 0"),
    ("epsilon", "\"abc\"", "'epsilon' must be a finite number > 0"),
    ("epsilon", "abc", "'epsilon' is malformed"),
    ("epsilon", "NaN", "'epsilon' must be a finite number > 0"),
    ("epsilon", "2.0", "'noise_scale' is .* but the declared parameters give"),
    ("neighbours", "bogus", "'neighbours' must be one of"),
    ("neighbours", "add_remove", "'(noise_scale|params.sensitivity)' is .* but the declared parameters give"),
    ("mechanism", "none", "'mechanism' is 'none', not a known mechanism"),
    ("attributes", "[{\"kind\": \"circle\"}]", "'attributes' is malformed"),
    ("attributes", "{", "'attributes' is malformed"),
    ("shape", "[3, 2]", "'shape' is \\[3, 2\\]"),
    ("params", "[]", "'params' must be an object"),
    ("seeded", "\"yes\"", "'seeded' must be true or false"),
    ("noise", "quantum", "'noise' must be one of"),
])
def test_edited_grid_metadata_is_refused_naming_the_field(grid, key, value, message):
    with pytest.raises(pdp.ReleaseFormatError, match=message):
        pdp.read_release(with_meta(grid.to_arrow(), **{key: value}))


def test_edited_privelet_rho_is_refused():
    release = pl.DataFrame({"age": [1, 2, 30]}).dp.privelet([pdp.Ordinal("age", 0, 39)], epsilon=1.0, seed=0)
    params = dict(release.params, rho=1)
    table = with_meta(release.to_arrow(), params=json.dumps(params),
                      noise_scale=json.dumps(release.noise_scale / release.params["rho"]))
    with pytest.raises(pdp.ReleaseFormatError, match="'params.rho' is 1 but the declared parameters give 7"):
        pdp.read_release(table)


def test_noise_scale_rounded_up_to_a_lattice_is_accepted(grid):
    """Exact samplers may round the scale up (spending less than epsilon); within
    SCALE_ROUNDING that is accepted, beyond it (or below) refused."""
    up = grid.noise_scale * (1 + SCALE_ROUNDING / 2)
    edited = with_meta(grid.to_arrow(), noise_scale=repr(up))  # a checksum is required: recompute it
    edited = with_meta(edited, drop_checksum=False,
                       checksum=payload_checksum(read_metadata(edited), grid._payload_arrays()))
    assert pdp.read_release(edited).noise_scale == up
    for bad in (grid.noise_scale * (1 + 3 * SCALE_ROUNDING), grid.noise_scale * (1 - 1e-6)):
        with pytest.raises(pdp.ReleaseFormatError, match="noise_scale"):
            pdp.read_release(with_meta(grid.to_arrow(), noise_scale=repr(bad)))


def test_edited_tree_noise_parameters_are_refused(tree):
    table = tree.to_arrow()
    meta = read_metadata(table)
    params = json.loads(meta["params"])
    model = json.loads(meta["noise_model"])
    if model["kind"] == "independent_laplace":
        model["scale"] = model["scale"] / 2000
        with pytest.raises(pdp.ReleaseFormatError, match="noise_model.scale"):
            pdp.read_release(with_meta(table, noise_model=json.dumps(model)))
    key = next(k for k in ("leaf_noise_scale", "noise_scale", "epsilon_grid") if k in params)
    params[key] = params[key] * 3
    with pytest.raises(pdp.ReleaseFormatError, match=f"params.{key}"):
        pdp.read_release(with_meta(table, params=json.dumps(params)))
    with pytest.raises(pdp.ReleaseFormatError, match="'epsilon' must be a finite number > 0"):
        pdp.read_release(with_meta(table, epsilon="-1"))
    with pytest.raises(pdp.ReleaseFormatError, match="'bounds' is malformed"):
        pdp.read_release(with_meta(table, bounds="[[1, 0], [0, 1]]"))
    with pytest.raises(pdp.ReleaseFormatError, match="'layout'"):
        pdp.read_release(with_meta(table, layout="{\"kind\": \"hexagons\"}"))


JUNK = ["", "null", "[]", "{}", "1", "0", "-1", "\"x\"", "1e999", "[1, 2]", "{\"kind\": 3}", "true"]


def test_any_junk_metadata_value_is_a_release_format_error(grid, tree):
    """The bad-input catalogue: every metadata entry replaced by junk reads back or raises a
    ReleaseFormatError, never a bare ValueError/KeyError/TypeError."""
    for release in (grid, tree):
        table = release.to_arrow()
        for key in read_metadata(table):
            for junk in JUNK:
                try:
                    pdp.read_release(with_meta(table, **{key: junk}))
                except pdp.ReleaseFormatError:
                    pass


# ---------------------------------------------------------------------- checksum
def test_checksum_covers_values_and_metadata(grid, tree, tmp_path):
    for release in (grid, tree):
        path = release.write_parquet(tmp_path / "r.parquet")
        table = pq.read_table(path)
        meta = read_metadata(table)
        assert meta["checksum"].startswith("sha256:")
        assert pdp.read_release(path) == release
        count = table.column("count").to_numpy().copy()
        count[3] += 1.0
        edited = table.set_column(table.schema.get_field_index("count"), "count", pa.array(count))
        with pytest.raises(pdp.ReleaseFormatError, match="checksum does not match"):
            pdp.read_release(edited)
        with pytest.raises(pdp.ReleaseFormatError, match="checksum does not match"):
            pdp.read_release(with_meta(table, drop_checksum=False, created="2020-01-01T00:00:00+00:00"))
        assert payload_checksum(meta, release._payload_arrays()) == meta["checksum"]


def test_deleted_checksum_of_a_newer_file_is_refused(grid, tree):
    for release in (grid, tree):
        with pytest.raises(pdp.ReleaseFormatError, match="checksum was removed"):
            pdp.read_release(with_meta(release.to_arrow()))


def test_old_files_without_checksum_read_only_unverified():
    for path in V0_1_0_FILES:
        assert "checksum" not in read_metadata(pq.read_table(path))
        with pytest.raises(pdp.ReleaseFormatError, match="no checksum.*unverified=True"):
            pdp.read_release(path)
        assert pdp.read_release(path, unverified=True).verified is False


# ---------------------------------------------------------------------- case 3: to_duckdb
def test_to_duckdb_refuses_to_overwrite_the_users_tables(grid, tree):
    for release in (grid, tree):
        con = duckdb.connect()
        con.execute("CREATE TABLE sales (x INTEGER); INSERT INTO sales VALUES (42)")
        con.execute("CREATE TABLE sales_meta (note VARCHAR)")
        with pytest.raises(pdp.ParameterError, match=r"'sales', 'sales_meta'.*replace=True"):
            release.to_duckdb(con, "sales")
        assert con.sql("SELECT x FROM sales").fetchall() == [(42,)]       # untouched
        assert con.sql("SELECT count(*) FROM sales_meta").fetchall() == [(0,)]
        release.to_duckdb(con, "sales", replace=True)
        assert con.sql("SELECT count(*) FROM sales").fetchall()[0][0] == release.to_arrow().num_rows
        assert pdp.duckdb.read_release(con, "sales") == release


def test_to_duckdb_refuses_existing_macros_and_views(grid):
    con = duckdb.connect()
    con.execute("CREATE MACRO cube_range_count(a) AS a + 1")
    with pytest.raises(pdp.ParameterError, match="'cube_range_count'"):
        grid.to_duckdb(con, "cube")
    assert con.sql("SHOW TABLES").fetchall() == []
    con.execute("CREATE VIEW cube2 AS SELECT 1 AS one")
    with pytest.raises(pdp.ParameterError, match="'cube2'"):
        pdp.duckdb.register(con, "cube2", grid)
    grid.to_duckdb(con, "cube2", replace=True)
    grid.to_duckdb(con, "cube3")
    with pytest.raises(pdp.ParameterError, match="'CUBE3'.*'CUBE3_labels_sex'.*'CUBE3_range_counts'"):
        grid.to_duckdb(con, "CUBE3")                                      # names are case-insensitive


# ---------------------------------------------------------------------- small defects
def test_parquet_dtypes_match_to_polars(grid, tree, tmp_path):
    for release in (grid, tree):
        path = release.write_parquet(tmp_path / "r.parquet")
        assert pl.read_parquet(path).schema == release.to_polars().schema
        assert pl.read_parquet(path).schema == pdp.read_release(path).to_polars().schema


def test_unknown_label_error_is_one_sentence_with_the_query_id(grid):
    with pytest.raises(pdp.QueryError) as err:
        grid.range_counts(pl.DataFrame({"id": [1], "job": ["Sales"]}))
    assert str(err.value) == "job: 'Sales' is not a label of this hierarchy (query id=1)"


def test_cli_query_refuses_unaligned_bounds_unless_align_is_given(grid, tree, tmp_path, capsys):
    from polars_dp.cli import main

    path = grid.write_parquet(tmp_path / "g.parquet")
    capsys.readouterr()
    assert main(["query", str(path), "--where", "age=4..17", "--json"]) == 2
    error = capsys.readouterr().err
    assert "nearest aligned: age=4..19 (--align outer) or age=4..15 (--align inner)" in error
    assert main(["query", str(path), "--where", "age=4..17", "--align", "inner", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["count"] == pytest.approx(grid.range_count(age=(4, 15)))
    tree_path = tree.write_parquet(tmp_path / "t.parquet")
    assert main(["query", str(tree_path), "--where", "x=0.1..0.2", "--align", "outer"]) == 2
    assert "--align is for grid releases" in capsys.readouterr().err


@pytest.mark.parametrize("epsilon", [1e5, 1e7])
def test_exact_releases_at_huge_epsilon_read_back(epsilon):
    """The exact scale is rounded up to the 2^-20 grid: a large relative step when the scale is
    tiny, and still the documented rounding (regression: such releases were refused on read)."""
    points = pl.DataFrame({"x": [0.1, 0.5], "y": [0.2, 0.3]})
    releases = [pdp.basic(pl.DataFrame({"a": [1, 2, 3]}), [pdp.Ordinal("a", 0, 9)], epsilon=epsilon),
                pdp.privelet(pl.DataFrame({"a": [1, 2, 3]}), [pdp.Ordinal("a", 0, 9)], epsilon=epsilon)]
    releases += [getattr(pdp, m)(points, ["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=epsilon)
                 for m in ("privtree", "uniform_grid", "adaptive_grid")]
    for r in releases:
        assert r.noise == "exact"
        assert pdp.read_release(r.to_arrow()) == r
