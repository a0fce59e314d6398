"""The command line: release from every example domain file, info, query, sql, plot, bad input.

Most checks call ``main([...])`` in this process; ``test_cli_subprocess.py`` runs the real
``python -m polars_dp``.  Answers are compared with the Python API on the same release file and
with sums of the released counts, so a wrong predicate or option mapping fails.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import polars_dp as pdp
from polars_dp.cli.common import write_atomic
from polars_dp.cli.spec import SpecError, load_spec
from tests.helpers.cli import SPECS, data_for, png_pixels, png_size, run_cli

EXAMPLES = sorted(p.name for p in SPECS.glob("*.toml"))
CSV_EXAMPLES = {"basic.toml", "ngram_sequences.toml"}  # exercised with CSV input; the rest Parquet


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """Data for every example domain file (drawn from its declared domain), released once each."""
    d = tmp_path_factory.mktemp("cli")
    for i, name in enumerate(EXAMPLES):
        spec = load_spec(SPECS / name)
        frame = data_for(spec, 3000, seed=i)
        stem = name.removesuffix(".toml")
        if name in CSV_EXAMPLES:
            frame.write_csv(d / f"{stem}.csv")
        else:
            frame.write_parquet(d / f"{stem}.parquet")
    return d


def _data(workdir: Path, name: str) -> Path:
    stem = name.removesuffix(".toml")
    return workdir / (f"{stem}.csv" if name in CSV_EXAMPLES else f"{stem}.parquet")


@pytest.fixture(scope="module")
def released(workdir) -> dict[str, Path]:
    from polars_dp.cli import main

    out = {}
    for name in EXAMPLES:
        path = workdir / f"{name.removesuffix('.toml')}_release.parquet"
        assert main(["release", str(_data(workdir, name)), "--spec", str(SPECS / name), "-o", str(path),
                     "--seed", "7", "-q"]) == 0
        out[name.removesuffix(".toml")] = path
    return out


# ---------------------------------------------------------------------- release
def test_there_is_an_example_for_every_mechanism():
    from polars_dp.cli.spec import MECHANISMS

    assert {load_spec(SPECS / n).mechanism for n in EXAMPLES} == set(MECHANISMS)


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_example_releases_what_it_declares(name, released, capsys):
    spec = load_spec(SPECS / name)
    release = pdp.read_release(released[name.removesuffix(".toml")])
    assert release.epsilon == spec.epsilon
    assert release.neighbours == spec.effective_neighbours
    assert release.params["seeded"] is True
    code, out, _ = run_cli(capsys, "info", released[name.removesuffix(".toml")], "--json")
    info = json.loads(out)
    assert code == 0 and info["epsilon"] == spec.epsilon and info["seeded"] is True
    if spec.shape == "grid":
        assert release.attributes == spec.attributes
        assert info["domain"]["attributes"] == [a.to_json() for a in spec.attributes]
        assert info["size"]["cells"] == math.prod(a.n_cells for a in spec.attributes)
    elif spec.shape == "points":
        assert release.columns == list(spec.columns)
        assert info["domain"]["bounds"] == [list(b) for b in spec.bounds]
    else:
        assert tuple(release.alphabet) == spec.alphabet and release.max_length == spec.max_length


def test_release_equals_the_python_call_it_declares(workdir, released):
    """privelet.toml written out by hand in Python: same seed, same data -> the same counts."""
    frame = pl.read_parquet(_data(workdir, "privelet.toml"))
    occupation = pdp.Hierarchy.from_dict({"office": ["clerk", "manager", "engineer"],
                                          "field": ["driver", "farmer", "builder"]}, level_names=["sector"])
    attrs = [pdp.Ordinal("age", 0, 99, 5), pdp.Nominal("gender", categories=["female", "male"]),
             pdp.Nominal("occupation", occupation), pdp.Ordinal("income", 0, 199_999, 1000)]
    expected = pdp.privelet(frame, attrs, epsilon=1.0, neighbours="replace", untransformed=["gender"],
                            on_out_of_domain="clamp", seed=7)
    got = pdp.read_release(released["privelet"])
    assert got.mechanism == expected.mechanism == "privelet+"
    np.testing.assert_array_equal(got.counts, expected.counts)
    assert "occupation_sector" in got.to_arrow().column_names

    points = pl.read_parquet(_data(workdir, "privtree.toml"))
    tree = pdp.privtree(points, ["lon", "lat"], bounds=[(-180, 180), (-90, 90)], epsilon=1.0, tree_share=0.5,
                        neighbours="add_remove", seed=7)
    got_tree = pdp.read_release(released["privtree"])
    np.testing.assert_array_equal(got_tree.count, tree.count)


def test_release_prints_a_summary_and_stage_messages(workdir, tmp_path, capsys):
    out = tmp_path / "r.parquet"
    code, stdout, stderr = run_cli(capsys, "release", _data(workdir, "basic.toml"), "--spec",
                                   SPECS / "basic.toml", "-o", out)
    assert code == 0
    assert f"wrote {out}" in stdout and "mechanism    basic" in stdout and "656 cells" in stdout
    assert "noise scale  2 (Laplace)" in stdout  # replace neighbours: Lap(2 / epsilon), epsilon = 1
    assert "releasing" in stderr and "warning" not in stderr  # no seed: no warning
    assert pdp.read_release(out).params["seeded"] is False
    code, stdout, stderr = run_cli(capsys, "release", _data(workdir, "basic.toml"), "--spec",
                                   SPECS / "basic.toml", "-o", out, "--quiet", "--seed", "1")
    assert code == 0 and stdout == ""
    assert stderr.count("\n") == 1 and "Never publish" in stderr  # --quiet keeps the seed warning


def test_neighbours_of_the_domain_file_reach_the_mechanism(workdir, tmp_path, capsys):
    spec = tmp_path / "basic.toml"
    text = (SPECS / "basic.toml").read_text()
    spec.write_text(text.replace('neighbours = "replace"', 'neighbours = "add_remove"'))
    code, _, _ = run_cli(capsys, "release", _data(workdir, "basic.toml"), "--spec", spec, "-o",
                         tmp_path / "r.parquet", "-q")
    release = pdp.read_release(tmp_path / "r.parquet")
    assert code == 0 and release.neighbours == "add_remove"
    assert release.noise_scale == 1.0  # add/remove one row: Lap(1 / epsilon) per cell


def test_progress_reaches_mechanisms_that_accept_it(workdir, tmp_path, capsys, monkeypatch):
    seen = []
    real = pdp.basic

    def basic(frame, attributes, *, epsilon, neighbours="replace", seed=None, on_out_of_domain="raise",
              nulls="raise", progress=False):
        seen.append(progress)
        return real(frame, attributes, epsilon=epsilon, neighbours=neighbours, seed=seed,
                    on_out_of_domain=on_out_of_domain, nulls=nulls)

    monkeypatch.setattr(pdp, "basic", basic)
    for quiet in ([], ["-q"]):
        code, _, _ = run_cli(capsys, "release", _data(workdir, "basic.toml"), "--spec", SPECS / "basic.toml",
                             "-o", tmp_path / "r.parquet", *quiet)
        assert code == 0
    assert seen == [True, False]


def test_release_check_validates_without_releasing(workdir, tmp_path, capsys):
    code, out, _ = run_cli(capsys, "release", _data(workdir, "privtree.toml"), "--spec",
                           SPECS / "privtree.toml", "--check")
    assert code == 0 and out.startswith("ok:") and "lon, lat" in out
    assert list(tmp_path.iterdir()) == []


def test_release_reads_a_glob(workdir, tmp_path, capsys):
    frame = pl.read_parquet(_data(workdir, "privtree.toml"))
    frame[:1000].write_parquet(tmp_path / "part1.parquet")
    frame[1000:].write_parquet(tmp_path / "part2.parquet")
    out = tmp_path / "tree.parquet"
    code, _, _ = run_cli(capsys, "release", str(tmp_path / "part*.parquet"), "--spec",
                         SPECS / "uniform_grid.toml", "-o", out, "--seed", "3", "-q")
    assert code == 0
    whole = pdp.uniform_grid(frame, ["lon", "lat"], bounds=[(-180, 180), (-90, 90)], epsilon=1.0, c=10.0,
                             seed=3)
    np.testing.assert_array_equal(pdp.read_release(out).count, whole.count)


def test_sequences_as_text_with_a_separator(workdir, tmp_path, capsys):
    """A CSV column "3 1 4" with separator = " " releases the same model as the List column."""
    frame = pl.read_parquet(_data(workdir, "privtree_sequences.toml"))
    frame.with_columns(pl.col("pages").list.eval(pl.element().cast(pl.String)).list.join("  ")) \
        .write_csv(tmp_path / "pages.csv")
    spec = tmp_path / "seq.toml"
    spec.write_text((SPECS / "privtree_sequences.toml").read_text() + 'separator = " "\n')
    code, _, err = run_cli(capsys, "release", tmp_path / "pages.csv", "--spec", spec, "-o",
                           tmp_path / "pst.parquet", "--seed", "7", "-q")
    assert code == 0, err
    expected = pdp.privtree_sequences(frame, "pages", alphabet=range(1, 18), max_length=20, epsilon=1.0,
                                      seed=7)
    got = pdp.read_release(tmp_path / "pst.parquet")
    np.testing.assert_array_equal(got.hist, expected.hist)
    code, _, err = run_cli(capsys, "release", _data(workdir, "privtree_sequences.toml"), "--spec", spec, "-o",
                           tmp_path / "x.parquet", "-q")
    assert code == 2 and "separator" in err and "is for text columns" in err
    plain = tmp_path / "plain.toml"  # the text column without a separator: told to give one
    plain.write_text((SPECS / "privtree_sequences.toml").read_text())
    code, _, err = run_cli(capsys, "release", tmp_path / "pages.csv", "--spec", plain, "-o",
                           tmp_path / "y.parquet", "-q")
    assert code == 2 and 'split by separator = " " in the domain file' in err, err
    assert not (tmp_path / "y.parquet").exists()


# ---------------------------------------------------------------------- info
def test_info_text(released, capsys):
    code, out, _ = run_cli(capsys, "info", released["privelet"])
    assert code == 0
    for text in ("mechanism    privelet+", "epsilon      1", "neighbours   replace", "seeded       yes",
                 "age: ordinal [0, 99] in bins of 5 (20 cells)", "occupation: nominal", "48,000 cells",
                 f"polars-dp {pdp.__version__}", "created"):
        assert text in out, text
    code, out, _ = run_cli(capsys, "info", released["privtree_sequences"])
    assert "alphabet of 17: 1 2 3" in out and "max_length 20" in out and "nodes" in out


def test_info_of_a_release_made_in_python_states_its_seeding(tmp_path, capsys):
    """The metadata's ``seeded`` (every writer since checksums records it), not the command line's
    own note: a release made in Python is not "not recorded"."""
    frame = pl.DataFrame({"x": [1, 2, 3]})
    for seed, seeded in ((None, False), (3, True)):
        release = pdp.basic(frame, [pdp.Ordinal("x", 0, 3)], epsilon=1.0, seed=seed)
        release.write_parquet(tmp_path / "r.parquet")
        code, out, _ = run_cli(capsys, "info", tmp_path / "r.parquet", "--json")
        assert code == 0 and json.loads(out)["seeded"] is seeded and json.loads(out)["verified"] is True
        code, out, _ = run_cli(capsys, "info", tmp_path / "r.parquet")
        assert "seeded       " + ("yes" if seeded else "no (") in out and "not recorded" not in out


# ---------------------------------------------------------------------- query
def test_query_where_matches_sums_of_released_cells(released, capsys):
    release = pdp.read_release(released["basic"])  # age 18..99 x gender x education
    counts = release.counts
    cases = [
        (["--where", "age=20..30"], counts[2:13].sum()),
        (["--where", "age=..20", "--where", "gender=female"], counts[:3, 0].sum()),
        (["--where", "age=90..", "--where", "education=college"], counts[72:, :, 2].sum()),
        (["--where", "age=25"], counts[7].sum()),
        ([], counts.sum()),
    ]
    for args, expected in cases:
        code, out, _ = run_cli(capsys, "query", released["basic"], *args, "--json", "--std")
        answer = json.loads(out)
        assert code == 0
        assert answer["count"] == pytest.approx(expected, rel=1e-9, abs=1e-6), args
        # Basic: independent Lap(2) per cell -> std = sqrt(2 * 2^2 * cells)
        cells = round(answer["std"] ** 2 / 8)
        assert answer["std"] == pytest.approx(math.sqrt(8 * cells))
    code, out, _ = run_cli(capsys, "query", released["basic"], "--where", "age=20..30", "--std")
    count, std = (float(x) for x in out.split(" ± "))
    assert count == pytest.approx(counts[2:13].sum(), abs=0.05)
    assert std == pytest.approx(math.sqrt(8 * 11 * 2 * 4), abs=0.05)


def test_query_hierarchy_groups_and_spatial_ranges(released, capsys):
    release = pdp.read_release(released["privelet"])
    code, out, _ = run_cli(capsys, "query", released["privelet"], "--where", "occupation=office", "--json")
    assert json.loads(out)["count"] == pytest.approx(release.counts[:, :, :3, :].sum())
    tree = pdp.read_release(released["privtree"])
    code, out, _ = run_cli(capsys, "query", released["privtree"], "--where", "lon=-180..180", "--json")
    assert code == 0 and json.loads(out)["count"] == pytest.approx(tree.count.sum())
    _, out, _ = run_cli(capsys, "query", released["privtree"], "--where", "lon=0..", "--where",
                           "lat=-30.5..45", "--json", "--std")
    answer = json.loads(out)
    assert answer["count"] == pytest.approx(tree.range_count(lon=(0, 180), lat=(-30.5, 45)))
    assert answer["std"] == pytest.approx(tree.range_std(lon=(0, 180), lat=(-30.5, 45)))


def test_query_batch_file(released, tmp_path, capsys):
    queries = pl.DataFrame({"id": [1, 2, 3], "age_lo": [20, None, 50], "age_hi": [30, 40, None],
                            "education": ["college", None, "none"]})
    queries.write_csv(tmp_path / "q.csv")
    out = tmp_path / "answers.parquet"
    code, _, _ = run_cli(capsys, "query", released["basic"], "--queries", tmp_path / "q.csv", "-o", out,
                         "--std")
    assert code == 0
    expected = pdp.read_release(released["basic"]).range_counts(queries, std=True)
    got = pl.read_parquet(out)
    assert got["id"].to_list() == [1, 2, 3]
    np.testing.assert_allclose(got["count"].to_numpy(), expected["count"].to_numpy())
    np.testing.assert_allclose(got["std"].to_numpy(), expected["std"].to_numpy())
    code, stdout, _ = run_cli(capsys, "query", released["basic"], "--queries", tmp_path / "q.csv")
    assert code == 0 and stdout.splitlines()[0] == "id,age_lo,age_hi,education,count"


def test_query_batch_keeps_named_columns(released, tmp_path, capsys):
    pl.DataFrame({"label": ["young"], "age_lo": [18], "age_hi": [29]}).write_parquet(tmp_path / "q.parquet")
    code, _, err = run_cli(capsys, "query", released["basic"], "--queries", tmp_path / "q.parquet")
    assert code == 2 and "use --keep COLUMN" in err
    code, out, _ = run_cli(capsys, "query", released["basic"], "--queries", tmp_path / "q.parquet", "--keep",
                           "label", "--json")
    row = json.loads(out)[0]
    assert code == 0 and row["label"] == "young"
    assert row["count"] == pytest.approx(pdp.read_release(released["basic"]).counts[:12].sum())


def test_query_sequence_models(released, tmp_path, capsys):
    model = pdp.read_release(released["privtree_sequences"])
    code, out, _ = run_cli(capsys, "query", released["privtree_sequences"], "--frequency", "1 2",
                           "--frequency", "3,3,4", "--json")
    got = json.loads(out)
    assert code == 0 and [g["string"] for g in got] == [[1, 2], [3, 3, 4]]
    np.testing.assert_allclose([g["count"] for g in got], model.frequencies([[1, 2], [3, 3, 4]]))
    code, out, _ = run_cli(capsys, "query", released["privtree_sequences"], "--top-k", "4", "--json")
    top = model.top_k(4)
    assert [r["string"] for r in json.loads(out)] == top["string"].to_list()
    ngram = pdp.read_release(released["ngram_sequences"])
    code, out, _ = run_cli(capsys, "query", released["ngram_sequences"], "--frequency", "abc", "--json")
    assert json.loads(out)[0]["count"] == pytest.approx(ngram.frequency(["a", "b", "c"]))


def test_query_sequence_answers_say_which_are_extrapolated(tmp_path, capsys):
    """Every sequence answer of the command line says whether it is extrapolated (a note in
    text, a key in JSON, a column in a batch); a string longer than max_length counts 0; the
    SQL macro takes a text where the alphabet holds text (#38)."""
    seqs = ["abc"] * 300 + ["dbe"] * 300 + ["a", "d", "b", "ab", "db"] * 300
    model = pl.DataFrame({"s": seqs}).dp.ngram_sequences("s", alphabet="abcde", max_length=3, epsilon=1.0,
                                                        height=2, seed=3)
    path = tmp_path / "m.parquet"
    model.write_parquet(path)
    want = model.frequency_table(["ab", "abc", "abcd"])
    assert want["extrapolated"].to_list() == [False, True, False]
    code, out, _ = run_cli(capsys, "query", path, "--frequency", "ab", "--frequency", "abc", "--frequency",
                           "abcd", "--std")
    lines = out.splitlines()
    assert code == 0 and len(lines) == 3
    assert "extrapolated" not in lines[0]
    assert "extrapolated" in lines[1] and "not in the noise std" in lines[1]
    assert lines[2].split()[:3] == ["0.0", "±", "0.0"]
    code, out, _ = run_cli(capsys, "query", path, "--frequency", "ab", "--frequency", "abc", "--frequency",
                           "abcd", "--std", "--json")
    rows = json.loads(out)
    assert [r["extrapolated"] for r in rows] == [False, True, False]
    assert [r["count"] for r in rows] == pytest.approx(want["count"].to_list())
    code, out, _ = run_cli(capsys, "query", path, "--top-k", "12", "--json")
    top = model.top_k(12)
    assert [r["extrapolated"] for r in json.loads(out)] == top["extrapolated"].to_list()
    pl.DataFrame({"id": [1, 2, 3], "string": ["ab", "abc", "abcd"]}).write_csv(tmp_path / "q.csv")
    code, out, _ = run_cli(capsys, "query", path, "--queries", tmp_path / "q.csv", "--std")
    got = pl.read_csv(out.encode())
    assert code == 0 and got.columns == ["id", "string", "count", "std", "extrapolated"]
    assert got["extrapolated"].to_list() == [False, True, False] and got["count"][2] == 0
    code, out, _ = run_cli(capsys, "sql", path, "--json", "SELECT * FROM release_frequency('abc')")
    (row,) = json.loads(out)
    assert code == 0 and row["count"] == pytest.approx(want["count"][1]) and row["extrapolated"] is True


# ---------------------------------------------------------------------- sql
def test_sql_unknown_table_names_what_is_registered(released, capsys):
    code, _, err = run_cli(capsys, "sql", released["basic"], "--name", "people",
                           "SELECT * FROM range_count(age_lo := 20, age_hi := 30)")
    assert code == 2
    assert "range_count" in err and "registered as people, people_meta, people_range_count(...)" in err
    code, _, err = run_cli(capsys, "sql", released["privtree_sequences"], "SELECT * FROM nodes")
    assert code == 2 and "registered as release, release_nodes, release_meta, release_frequency([...])" in err


@pytest.mark.parametrize(("flags", "said"), [
    (("--csv", "--json"), "argument --json: not allowed with argument --csv"),
    (("--json", "-o", "x.csv"), "not allowed with argument --json"),
    (("--max-rows", "-1"), "argument --max-rows: '-1' is not a number of rows >= 1"),
    (("--max-rows", "many"), "argument --max-rows: 'many' is not a number of rows >= 1"),
])
def test_sql_takes_one_result_form_and_a_positive_row_count(released, capsys, flags, said):
    code, out, err = run_cli(capsys, "sql", released["privelet"], "SELECT 1 AS one", *flags)
    assert code == 2 and said in err and out == "", err


def test_sql(released, tmp_path, capsys):
    release = pdp.read_release(released["basic"])
    code, out, _ = run_cli(capsys, "sql", released["basic"], "--name", "people", "--csv",
                           "SELECT sum(count) AS total FROM people WHERE age BETWEEN 20 AND 30")
    assert code == 0
    assert float(out.splitlines()[1]) == pytest.approx(release.counts[2:13].sum())
    code, out, _ = run_cli(capsys, "sql", released["basic"], "--json",
                           "SELECT * FROM release_range_count(age_lo := 20, age_hi := 30)")
    row = json.loads(out)[0]
    assert row["count"] == pytest.approx(release.range_count(age=(20, 30)))
    assert row["std"] == pytest.approx(release.range_std(age=(20, 30)))
    model = pdp.read_release(released["privtree_sequences"])
    code, out, _ = run_cli(capsys, "sql", released["privtree_sequences"], "--csv",
                           "SELECT count(*) AS n FROM release")
    assert code == 0 and int(out.splitlines()[1]) == model.n_nodes * (model.alphabet_size + 1)
    code, out, _ = run_cli(capsys, "sql", released["basic"], "SELECT age, count FROM release LIMIT 3")
    assert code == 0 and "shape: (3, 2)" in out and "┆" in out  # a printed table
    target = tmp_path / "cells.parquet"
    code, _, _ = run_cli(capsys, "sql", released["privtree"], "SELECT * FROM release", "-o", target)
    assert code == 0 and pl.read_parquet(target).height == pdp.read_release(released["privtree"]).n_leaves


# ---------------------------------------------------------------------- plot
@pytest.mark.parametrize(("name", "extra"), [
    ("basic", ["--x", "age"]),                        # 1-D marginal of an ordinal, error bars
    ("privelet", ["--x", "occupation"]),              # 1-D marginal of a nominal
    ("privelet", ["--x", "income", "--y", "age"]),    # 2-D marginal (std varies: two panels)
    ("basic", ["--x", "age", "--y", "education"]),    # 2-D marginal (std constant: one panel)
    ("privtree", ["--color", "density"]),             # leaf boxes
    ("adaptive_grid", []),
    ("privtree_sequences", ["--top-k", "12"]),        # top-k strings
    ("ngram_sequences", []),
])
def test_plot_writes_a_png_of_the_requested_size(name, extra, released, tmp_path, capsys):
    out = tmp_path / "figure.png"
    code, _, err = run_cli(capsys, "plot", released[name], "-o", out, *extra, "--size", "6x4", "--dpi", "50")
    assert code == 0, err
    assert png_size(out) == (300, 200)
    pixels = png_pixels(out)
    assert pixels.std() > 0.05  # not a blank canvas
    assert [p.name for p in tmp_path.iterdir()] == ["figure.png"]  # no temporary file left


def test_plot_of_a_four_dimensional_tree(tmp_path, capsys):
    rng = np.random.default_rng(0)
    frame = pl.DataFrame({c: rng.uniform(0, 1, 2000) for c in "abcd"})
    tree = pdp.privtree(frame, list("abcd"), bounds=[(0, 1)] * 4, epsilon=1.0, seed=0)
    tree.write_parquet(tmp_path / "t.parquet")
    code, _, err = run_cli(capsys, "plot", tmp_path / "t.parquet", "-o", tmp_path / "t.png", "--x", "c",
                           "--y", "a")
    assert code == 0, err
    assert png_size(tmp_path / "t.png") == (800, 600)


def test_plot_without_matplotlib_says_how_to_install_it(released, tmp_path, capsys, monkeypatch):
    for mod in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    code, out, err = run_cli(capsys, "plot", released["basic"], "-o", tmp_path / "f.png")
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "pip install 'polars-dp[plot]'" in err
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------- bad input
def _bad_spec(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    return path


GRID = ('mechanism = "basic"\nepsilon = 1\n[[attributes]]\ncolumn = "age"\nkind = "ordinal"\nlo = 18\n'
        'hi = 99\n')

BAD_SPECS = [  # (domain file text, expected line, expected words)
    ('mechanism = "basic"\nepsilon = \n', 2, "not valid TOML"),
    ('mechanism = "laplace"\nepsilon = 1\n', 1, "unknown mechanism 'laplace'"),
    ('epsilon = 1\n', None, "missing key 'mechanism'"),
    ('mechanism = "basic"\n[[attributes]]\ncolumn = "a"\nkind = "ordinal"\nlo = 0\nhi = 1\nepsilon = 1\n',
     None,
     "missing key 'epsilon'; line 7 puts it in attributes[1]: write top-level keys before the first [table]"),
    ('mechanism = "basic"\nepsilon = -1\n', 2, "epsilon: must be a finite number > 0"),
    ('mechanism = "basic"\nepsilon = "one"\n', 2, "epsilon: expected a number"),
    ('mechanism = "basic"\nepsilon = 1\nepsilion = 2\n', 3, "epsilion: unknown key"),
    ('mechanism = "basic"\nepsilon = 1\nneighbours = "swap"\n', 3, "neighbours: 'swap'"),
    (GRID + '[[attributes]]\ncolumn = "age"\nkind = "nominal"\ncategories = ["a"]\n', 9,
     "attributes[2].column: column 'age' is already declared in attributes[1]"),
    (GRID + '[[attributes]]\ncolumn = "x"\nkind = "ordinal"\nlo = 50\nhi = 10\n', 12,
     "attributes[2].hi: hi = 10 is below lo = 50"),
    (GRID + '[[attributes]]\ncolumn = "x"\nkind = "ordinal"\nlo = 0\nhi = 10\nwidth = 0\n', 13,
     "attributes[2].width: must be > 0"),
    (GRID + '[[attributes]]\ncolumn = "x"\nkind = "categorical"\n', 10, "attributes[2].kind: 'categorical'"),
    (GRID + '[[attributes]]\ncolumn = "x"\nkind = "nominal"\n', 8, "needs exactly one of categories"),
    (GRID + '[[attributes]]\ncolumn = "x"\nkind = "nominal"\ncategories = ["a", "a"]\n', 11, "listed twice"),
    (GRID + '[[attributes]]\ncolumn = "x"\nkind = "nominal"\nhierarchy = "nope.json"\n', 11,
     "does not exist"),
    (GRID + '[options]\nfanout = 4\n', 9, "options.fanout: basic has no option 'fanout'"),
    (GRID + '[options]\nseed = 4\n', 9, "options.seed: a seed makes the noise removable"),
    ('mechanism = "privtree"\nepsilon = 1\nbounds = {lon = [10, 0]}\n', 3, "lo must be < hi"),
    ('mechanism = "privtree"\nepsilon = 1\ncolumns = ["a", "b"]\nbounds = [[0, 1]]\n', 4,
     "has 1 pair(s) for 2 columns"),
    ('mechanism = "privtree"\nepsilon = 1\nbounds = {a = [0, 1]}\nattributes = []\n', 4,
     "attributes: not used by mechanism 'privtree'"),
    ('mechanism = "ngram_sequences"\nepsilon = 1\ncolumn = "s"\nalphabet = "abca"\nmax_length = 5\n', 4,
     "lists a symbol twice"),
    ('mechanism = "ngram_sequences"\nepsilon = 1\ncolumn = "s"\nalphabet = "ab"\nmax_length = 0\n', 5,
     "max_length: must be >= 1"),
    ('mechanism = "privtree_sequences"\nepsilon = 1\nneighbours = "replace"\ncolumn = "s"\nalphabet = "ab"\n'
     'max_length = 5\n', 3, "add/remove-one-sequence neighbours only"),
]


@pytest.mark.parametrize(("text", "line", "words"), BAD_SPECS)
def test_bad_domain_files_name_the_key_and_line(text, line, words, tmp_path):
    path = _bad_spec(tmp_path, text)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    message = str(info.value)
    assert words in message
    assert message.startswith(f"{path}:{line}: " if line else f"{path}: ")


def test_option_values_the_mechanism_rejects_are_located(workdir, tmp_path, capsys):
    spec = _bad_spec(tmp_path, 'mechanism = "privtree"\nepsilon = 1\nbounds = {lon = [-180, 180], '
                               'lat = [-90, 90]}\n[options]\ntheta = 0\nfanout = 3\n')
    code, out, err = run_cli(capsys, "release", _data(workdir, "privtree.toml"), "--spec", spec, "-o",
                             tmp_path / "r.parquet", "-q")
    assert code == 2 and out == ""
    assert err.startswith(f"polars-dp release: error: {spec}:6: options.fanout: fanout must be a power")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.toml"]


def test_hierarchy_files(tmp_path):
    (tmp_path / "tree.json").write_text(json.dumps({"x": {"office": ["clerk", "boss"], "field": ["farmer"]}}))
    (tmp_path / "parents.json").write_text(json.dumps({"office": None, "clerk": "office", "boss": "office",
                                                       "farmer": None}))
    (tmp_path / "bad.csv").write_text("node,up\nclerk,office\n")
    spec = _bad_spec(tmp_path, GRID + '[[attributes]]\ncolumn = "job"\nkind = "nominal"\n'
                                      'hierarchy = "tree.json"\nhierarchy_key = "x"\n')
    attr = load_spec(spec).attributes[1]
    assert list(attr.hierarchy.leaves) == ["clerk", "boss", "farmer"] and attr.hierarchy.height == 3
    spec.write_text(GRID + '[[attributes]]\ncolumn = "job"\nkind = "nominal"\nhierarchy = "parents.json"\n')
    assert load_spec(spec).attributes[1].hierarchy.leaf_range("office") == (0, 2)
    spec.write_text(GRID + '[[attributes]]\ncolumn = "job"\nkind = "nominal"\nhierarchy = "bad.csv"\n')
    with pytest.raises(SpecError, match=r"bad.toml:11: attributes\[2\].hierarchy: .*header 'child,parent'"):
        load_spec(spec)
    spec.write_text(GRID + '[[attributes]]\ncolumn = "job"\nkind = "nominal"\nhierarchy = "tree.json"\n'
                           'hierarchy_key = "y"\n')
    with pytest.raises(SpecError, match=r"bad.toml:12: attributes\[2\].hierarchy_key: .*no key 'y'"):
        load_spec(spec)


@pytest.fixture
def bad_input_cases(workdir, released, tmp_path):
    people, spec, out = _data(workdir, "privelet.toml"), SPECS / "privelet.toml", tmp_path / "out.parquet"
    bad_toml = _bad_spec(tmp_path, 'mechanism = "basic"\nepsilon = [\n')
    unknown = tmp_path / "unknown.toml"
    unknown.write_text('mechanism = "laplace"\nepsilon = 1\n')
    missing_col = tmp_path / "missing.toml"
    missing_col.write_text(GRID.replace('"age"', '"salary"'))
    return [
        (["release", people, "--spec", tmp_path / "none.toml", "-o", out], "domain file"),
        (["release", people, "--spec", bad_toml, "-o", out], "not valid TOML"),
        (["release", people, "--spec", unknown, "-o", out], "unknown mechanism 'laplace'"),
        (["release", people, "--spec", missing_col, "-o", out], "column 'salary' (declared at"),
        (["release", tmp_path / "nope.parquet", "--spec", spec, "-o", out], "does not exist"),
        (["release", str(tmp_path / "*.csv"), "--spec", spec, "-o", out], "matches no file"),
        (["release", people, "--spec", spec, "-o", tmp_path / "no" / "out.parquet"], "does not exist"),
        (["release", people, "--spec", spec, "-o", tmp_path / "out.csv"], "written as Parquet"),
        (["release", people, "--spec", spec], "give -o"),
        (["release", people, "--spec", spec, "-o", people], "would replace the private data"),
        (["release", people, "--spec", SPECS / "privtree.toml", "-o", out], "column 'lon'"),
        (["query", released["privelet"], "--where", "salary=1..2"], "'salary' is not an attribute"),
        (["query", released["privelet"], "--where", "age=30..20"], "lo > hi"),
        (["query", released["privelet"], "--where", "age=abc"], "'abc' is not a number"),
        (["query", released["privelet"], "--where", "age"], "write COLUMN=LO..HI"),
        (["query", released["privelet"], "--where", "occupation=Sales"], "'Sales' is not a label"),
        (["query", released["privelet"], "--where", "occupation=a..b"], "is nominal"),
        (["query", released["privelet"], "--where", "age=200..300"], "outside the declared domain"),
        (["query", released["privtree"], "--where", "lon=5..1"], "lo > hi"),
        (["query", released["privtree_sequences"], "--frequency", "1 99"], "outside the alphabet"),
        (["query", released["privtree_sequences"], "--where", "a=1"], "sequence model"),
        (["query", people, "--where", "age=1..2"], "is not a polars-dp release"),
        (["query", released["basic"], "--queries", tmp_path / "q.csv"], "does not exist"),
        (["info", spec], "is not a readable Parquet file"),
        (["info", tmp_path], "is a directory"),
        (["sql", released["basic"], "SELEC 1"], "Parser Error"),
        (["sql", released["basic"], "SELECT * FROM nope"], "nope"),
        (["sql", released["basic"], "--name", "1x", "SELECT 1"], "--name '1x'"),
        (["plot", people, "-o", tmp_path / "f.png"], "is not a polars-dp release"),
        (["plot", released["basic"], "-o", tmp_path / "f.jpg"], ".png, .svg or .pdf"),
        (["plot", released["basic"], "-o", tmp_path / "f.png", "--x", "height"],
         "'height' is not an attribute"),
        (["plot", released["basic"], "-o", tmp_path / "f.png", "--size", "big"], "--size 'big'"),
        (["query"], "required: RELEASE.parquet"),
        (["release", people], "required: --spec"),
        (["frobnicate"], "invalid choice"),
    ]


def test_bad_input_catalogue(bad_input_cases, tmp_path, capsys):
    """Each bad input: exit code 2, one line on stderr naming the problem, nothing written."""
    before = sorted(tmp_path.iterdir())
    for args, words in bad_input_cases:
        quiet = ["--quiet"] if args[0] != "frobnicate" and len(args) > 1 else []
        code, out, err = run_cli(capsys, *args, *quiet)
        assert code == 2, (args, err)
        assert out == "", args
        assert err.count("\n") == 1 and err.endswith("\n"), (args, err)
        assert words in err, (args, err)
        assert "Traceback" not in err
        assert sorted(tmp_path.iterdir()) == before, args  # no output, no temporary file


def test_unexpected_errors_exit_1_with_one_line(released, capsys, monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(pdp.GridRelease, "range_count", boom)
    code, out, err = run_cli(capsys, "query", released["basic"])
    assert code == 1 and out == ""
    assert err == "polars-dp query: error (RuntimeError): disk on fire\n"
    code, _, err = run_cli(capsys, "query", released["basic"], "--traceback")
    assert code == 1 and "Traceback" in err


def test_atomic_write_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "answers.csv"
    target.write_text("old")

    def half_then_fail(tmp: Path) -> None:
        tmp.write_text("partial")
        raise OSError("no space left on device")

    with pytest.raises(OSError, match="no space"):
        write_atomic(target, half_then_fail)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["answers.csv"]


# ---------------------------------------------------------------------- help
@pytest.mark.parametrize("command", ["release", "info", "query", "sql", "plot", "demo"])
def test_every_command_has_help_with_an_example(command, capsys):
    code, out, _ = run_cli(capsys, command, "--help")
    assert code == 0
    assert "example" in out and f"polars-dp {command}" in out.split("example", 1)[1]


@pytest.mark.parametrize("name", ["basic.toml", "privelet.toml", "privtree.toml"])
def test_engine_duckdb_gives_the_release_of_the_polars_engine(name, workdir, released, tmp_path, capsys):
    path = tmp_path / "duck.parquet"
    code, _, _ = run_cli(capsys, "release", str(_data(workdir, name)), "--spec", str(SPECS / name), "-o",
                         str(path), "--seed", "7", "--quiet", "--engine", "duckdb", "--memory-limit", "256MB")
    assert code == 0
    duck, ref = pdp.read_release(path), pdp.read_release(released[name.removesuffix(".toml")])
    assert duck.to_arrow().equals(ref.to_arrow())  # same cells, same noise (metadata not compared)


def test_engine_duckdb_refuses_sequences_and_bad_limits(workdir, tmp_path, capsys):
    out = tmp_path / "x.parquet"
    code, _, err = run_cli(capsys, "release", str(_data(workdir, "privtree_sequences.toml")), "--spec",
                           str(SPECS / "privtree_sequences.toml"), "-o", str(out), "--engine", "duckdb")
    assert code == 2 and "sequence" in err and not out.exists()
    code, _, err = run_cli(capsys, "release", str(_data(workdir, "basic.toml")), "--spec",
                           str(SPECS / "basic.toml"), "-o", str(out), "--engine", "duckdb",
                           "--memory-limit", "lots")
    assert code == 2 and "--memory-limit" in err and not out.exists()


def test_library_hints_are_translated_to_domain_file_terms_and_only_those_given():
    """An out-of-domain hint names on_out_of_domain only (it also added nulls = "drop", from its
    "or 'drop'"), a null hint nulls only, and a declaration is spelled as the file's keys."""
    from polars_dp.cli.release import _in_domain_file_terms
    outside = "column 'a': 2 value(s) outside [0, 9]; pass on_out_of_domain='clamp' (nearest cell) or 'drop'"
    got = _in_domain_file_terms(outside)
    assert got.endswith('[domain file: add on_out_of_domain = "clamp" or on_out_of_domain = "drop" '
                        'under [options]]')
    assert "nulls" not in got
    nulls = "column 'a' has 1 null value(s); pass nulls='drop' (drops those rows)"
    assert _in_domain_file_terms(nulls).endswith('[domain file: add nulls = "drop" under [options]]')
    floats = "declare float bounds such as Ordinal('px', -4.0, 4.0, width=1.0), or on_out_of_domain='drop'"
    got = _in_domain_file_terms(floats)
    assert "[domain file: lo = -4.0, hi = 4.0, width = 1.0 in the attribute of 'px']" in got
    assert 'on_out_of_domain = "drop" under' in got and "clamp" not in got
