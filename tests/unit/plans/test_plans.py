"""Plans: public inputs only, the same releases as the mechanisms, one registry, error before data."""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest

import polars_dp as pdp
from polars_dp.cli.spec import MECHANISMS
from polars_dp.domains.queries import query_ranges
from polars_dp.kernels.tail_bounds import laplace_sum_accuracy
from polars_dp.plans import REGISTRY, known_mechanisms
from polars_dp.plans.grid import auto_untransformed, subset_errors, transformable, workload_transformed
from polars_dp.releases.integrity import KNOWN_MECHANISMS
from tests.helpers import REPO

ROOT = REPO


def _jobs():
    return pdp.Hierarchy.from_dict({"office": ["clerk", "typist", "manager"], "field": ["driver", "farmer"]})


@pytest.fixture
def attrs():
    return [pdp.Ordinal("age", 0, 99, width=10), pdp.Nominal("sex", categories=["f", "m"]),
            pdp.Nominal("job", _jobs())]


@pytest.fixture
def frame():
    rng = np.random.default_rng(5)
    n = 500
    return pl.DataFrame({"age": rng.integers(0, 100, n), "sex": rng.choice(["f", "m"], n),
                         "job": rng.choice(["clerk", "typist", "manager", "driver", "farmer"], n)})


def _one_sentence(message: str) -> bool:
    return re.search(r"\.\s+[A-Z]", message) is None and "\n" not in message


class RaisingFrame:
    """A frame that raises on any access: proves that nothing read it."""

    def __getattr__(self, name):
        raise AssertionError(f"the data was touched ({name})")


# ---------------------------------------------------------------------------- same releases
@pytest.mark.parametrize("mechanism, options", [
    ("basic", {}), ("basic", {"neighbours": "add_remove", "noise": "float"}),
    ("privelet", {}), ("privelet", {"untransformed": "auto"}), ("privelet", {"untransformed": ["sex"]}),
    ("privelet", {"untransformed": ["age", "sex", "job"]}), ("privelet", {"noise": "float"}),
])
def test_plan_run_is_the_mechanism(frame, attrs, mechanism, options):
    plan = pdp.plan(mechanism, attrs, epsilon=0.7, **options)
    a = plan.run(frame, seed=11)
    b = getattr(pdp, mechanism)(frame, attrs, epsilon=0.7, seed=11, **options)
    c = getattr(frame.dp, mechanism)(attrs, epsilon=0.7, seed=11, **options)
    for other in (b, c):
        assert np.array_equal(a.counts, other.counts)
        assert a.params == other.params and a.mechanism == other.mechanism
        assert a.noise_scale == other.noise_scale == plan.noise_scale
    assert a.mechanism == plan.release_mechanism
    assert a.noise_model == plan.noise_model


def test_plan_records_its_calibration(attrs):
    plan = pdp.plan("privelet", attrs, epsilon=0.5, neighbours="add_remove")
    rho = np.prod([1 + 4, 1 + 1, 3])  # age: 10 bins -> P = 1 + ceil(log2 10); sex: height 2; job: 3
    assert plan.rho == rho
    assert plan.sensitivity == 1
    assert plan.scale >= rho / 0.5 and plan.scale - rho / 0.5 <= 2.0**-20
    assert plan.epsilon_effective == pytest.approx(rho / float(plan.scale), rel=0)
    assert plan.epsilon_effective <= 0.5
    assert pdp.plan("basic", attrs, epsilon=2.0).noise_scale == 1.0  # Delta = 2 under replace


def test_every_mechanism_has_a_plan():
    assert set(REGISTRY) == {"basic", "privelet", "privtree", "uniform_grid", "adaptive_grid",
                             "privelet_grid", "privtree_sequences", "ngram_sequences", "privtree_subgrid",
                             "hierarchical"}
    for name, entry in REGISTRY.items():
        assert entry.runner is not None and entry.function is getattr(pdp, name)
        assert entry.plan_class.unknown_before_data
    p = pdp.plan("privtree", ["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=1.0)
    assert p.epsilon_tree + p.epsilon_leaf == 1
    assert p.noise_model.scale == pytest.approx(1 / 0.5, rel=1e-6)
    assert "leaves" in p.unknown_before_data
    g = pdp.plan("privelet_grid", ["x"], bounds=[(0, 1)], epsilon=1.0, bits=4)
    assert g.data_independent and g.rho == 5
    s = pdp.plan("ngram_sequences", "s", alphabet="ab", max_length=3, epsilon=2.0, height=2)
    assert s.noise_model.scale == pytest.approx(2 * 4 / 2.0, rel=1e-6)


def test_data_dependent_plans_run_as_their_mechanism():
    rng = np.random.default_rng(1)
    pts = pl.DataFrame({"x": rng.random(300), "y": rng.random(300)})
    plan = pdp.plan("privtree", ["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=1.0)
    a = plan.run(pts, seed=3)
    b = pdp.privtree(pts, ["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=1.0, seed=3)
    assert np.array_equal(a.count, b.count)
    assert a.params["leaf_noise_scale"] == pytest.approx(plan.noise_model.scale)


def test_the_registry_generates_the_surfaces():
    assert set(MECHANISMS) == set(REGISTRY)
    assert set(KNOWN_MECHANISMS) == set(known_mechanisms())
    assert {"privelet+", "ngram"} <= set(KNOWN_MECHANISMS)
    for name in REGISTRY:
        assert callable(getattr(pdp.namespace.DPNamespace, name))
        assert callable(getattr(pdp.Session, name))


# ---------------------------------------------------------------------------- no data
def test_a_plan_reads_no_data_and_bad_options_refuse_before_reading(attrs):
    with pytest.raises(pdp.ParameterError) as err:
        pdp.privelet(RaisingFrame(), attrs, epsilon=1.0, untransformed=["nope"])
    assert err.value.parameter == "untransformed"
    session = pdp.Session(RaisingFrame(), epsilon=1.0, neighbours="replace")
    with pytest.raises(pdp.ParameterError) as err:
        session.privelet(attrs, epsilon=0.5, nulls="bogus")
    assert err.value.parameter == "nulls" and session.spent == 0
    with pytest.raises(AssertionError, match="touched"):  # the frame does raise when read
        pdp.plan("basic", attrs, epsilon=1.0).run(RaisingFrame())


@pytest.mark.parametrize("call, parameter, words", [
    (lambda a: pdp.basic(pl.DataFrame(), a, epsilon=1.0, untransformed="auto"), "untransformed",
     "options are"),
    (lambda a: pdp.privtree_sequences(pl.DataFrame(), "s", alphabet="ab", max_length=2, epsilon=1.0,
                                      count_column="n"), "count_column", "options are"),
    (lambda a: pdp.privtree_sequences(pl.DataFrame(), "s", alphabet="ab", max_length=2, epsilon=1.0,
                                      on_out_of_domain="clamp"), "on_out_of_domain", "'raise', 'drop'"),
    (lambda a: pdp.plan("basic", a, epsilon=1.0, untransformed="auto"), "untransformed", "options are"),
    (lambda a: pdp.plan("privelet", a, epsilon=-1.0), "epsilon", "> 0"),
    (lambda a: pdp.plan("privelet", a, epsilon=1.0, noise="fuzzy"), "noise", "noise kind"),
    (lambda a: pdp.plan("privelet", a), "epsilon", "needs epsilon"),
    (lambda a: pdp.plan("privelet", a, epsilon=1.0, seed=1), "seed", "plan.run"),
    (lambda a: pdp.plan("nope", a, epsilon=1.0), "mechanism", "use one of"),
    (lambda a: pdp.plan("privtree", ["x"], bounds=[(0, 1)], epsilon=1.0, tree_share=1.5), "tree_share",
     "between"),
    # refused by the plan, before any scale (it divided by zero), as the encoder refuses it
    (lambda a: pdp.plan("privtree_sequences", "s", alphabet=[], max_length=2, epsilon=1.0), "alphabet",
     "alphabet is empty"),
    (lambda a: pdp.privtree_sequences(pl.DataFrame(), "s", alphabet="aba", max_length=2, epsilon=1.0),
     "alphabet", "duplicate symbols"),
    (lambda a: pdp.ngram_sequences(pl.DataFrame(), "s", alphabet="ab", max_length=2, epsilon=1.0,
                                   neighbours="replace"), "neighbours", "add/remove-one neighbours only"),
])
def test_parameter_errors_name_the_option(attrs, call, parameter, words):
    with pytest.raises(pdp.ParameterError, match=words) as err:
        call(attrs)
    assert err.value.parameter == parameter
    assert _one_sentence(str(err.value))


# ---------------------------------------------------------------------------- error before data
def test_plan_errors_match_the_release(frame, attrs):
    plan = pdp.plan("privelet", attrs, epsilon=1.0, untransformed=["sex"])
    release = plan.run(frame, seed=2)
    preds = {"age": (20, 59), "job": "office"}
    assert plan.range_std(**preds) == pytest.approx(release.range_std(**preds), rel=1e-12)
    queries = pdp.random_workload(attrs, 50, seed=4)
    p, r = plan.accuracy(queries), release.accuracy(queries)
    assert p.columns == ["id", "std", "accuracy"] and r.columns == ["id", "count", "std", "accuracy"]
    assert np.allclose(p["std"], r["std"], rtol=1e-12)
    assert np.allclose(p["accuracy"], r["accuracy"], rtol=1e-12)
    answers = release.range_counts(queries, std=True, alpha=0.05)
    assert np.allclose(answers["hi"] - answers["count"], r["accuracy"], rtol=1e-12)
    assert np.allclose(answers["count"] - answers["lo"], r["accuracy"], rtol=1e-12)
    assert (p["accuracy"] > p["std"]).all()
    post = release.postprocess("nonnegative").accuracy(queries)
    assert post["accuracy"].null_count() == post.height and post["std"].null_count() == post.height
    post_answers = release.postprocess("nonnegative").range_counts(queries, alpha=0.05)
    assert post_answers["lo"].null_count() == post.height


def test_single_cell_basic_accuracy_is_the_exact_law(attrs):
    plan = pdp.plan("basic", attrs, epsilon=1.0)  # DLap(2) per cell
    q = np.exp(-1 / 2.0)
    acc = plan.range_accuracy(np.array([[0, 0, 0]]), np.array([[1, 1, 1]]), 0.05)[0]
    k = int(acc)
    assert acc == k and 2 * q ** (k + 1) / (1 + q) <= 0.05 < 2 * q**k / (1 + q)


def test_epsilon_for_is_the_smallest_on_the_grid(attrs):
    plan = pdp.plan("privelet", attrs, epsilon=1.0)
    queries = pdp.random_workload(attrs, 30, seed=8)
    for over in ("max", "mean"):
        eps = plan.epsilon_for(queries, accuracy=40.0, over=over)
        reduce = np.max if over == "max" else np.mean
        assert reduce(plan.with_options(epsilon=eps).accuracy(queries)["accuracy"].to_numpy()) <= 40.0
        assert reduce(plan.with_options(epsilon=eps * 0.999).accuracy(queries)["accuracy"].to_numpy()) > 40.0
    float_plan = pdp.plan("privelet", attrs, epsilon=1.0, noise="float")
    eps = float_plan.epsilon_for(queries, accuracy=40.0)
    assert float_plan.with_options(epsilon=eps).accuracy(queries)["accuracy"].max() <= 40.0


@pytest.mark.parametrize("call, error, parameter", [
    (lambda p, q: p.accuracy(q, alpha=0), pdp.ParameterError, "alpha"),
    (lambda p, q: p.accuracy(q, alpha=1.0), pdp.ParameterError, "alpha"),
    (lambda p, q: p.accuracy(q, alpha=True), pdp.ParameterError, "alpha"),
    (lambda p, q: p.epsilon_for(q, accuracy=0), pdp.ParameterError, "accuracy"),
    (lambda p, q: p.epsilon_for(q, accuracy=1e-6), pdp.ParameterError, "accuracy"),
    (lambda p, q: p.epsilon_for(q, accuracy=5.0, over="median"), pdp.ParameterError, "over"),
    (lambda p, q: p.accuracy(q.head(0)), pdp.QueryError, None),
    (lambda p, q: p.accuracy(q.with_columns(pl.lit(1).alias("agee_lo"))), pdp.QueryError, None),
    (lambda p, q: p.accuracy(q.with_columns(pl.lit("pilot").alias("job"))), pdp.QueryError, None),
    (lambda p, q: pdp.plan("privelet", p.attributes, epsilon=1.0, untransformed="workload"),
     pdp.ParameterError, "workload"),
])
def test_bad_accuracy_input(attrs, call, error, parameter):
    plan = pdp.plan("privelet", attrs, epsilon=1.0)
    queries = pdp.random_workload(attrs, 5, seed=1)
    with pytest.raises(error) as err:
        call(plan, queries)
    if parameter is not None:
        assert err.value.parameter == parameter
    assert _one_sentence(str(err.value))


# ---------------------------------------------------------------------------- budget
def test_session_and_accountant_charge_a_plan_before_reading(frame, attrs):
    plan = pdp.plan("privelet", attrs, epsilon=0.4)
    session = pdp.Session(frame, epsilon=1.0, neighbours="replace")
    release = session.run(plan, label="cube")
    assert session.spent == pytest.approx(0.4) and session.ledger[0]["label"] == "cube"
    assert release.params["ledger"]["entries"][0]["epsilon"] == 0.4
    refused = pdp.Session(RaisingFrame(), epsilon=1.0, neighbours="add_remove")
    with pytest.raises(pdp.ParameterError, match="neighbours"):
        refused.run(plan)
    assert refused.spent == 0
    too_much = pdp.Session(RaisingFrame(), epsilon=0.3, neighbours="replace")
    with pytest.raises(pdp.BudgetExceededError):
        too_much.run(plan)
    acct = pdp.Accountant(total=1.0, neighbours="replace")
    out = acct.run(plan, frame)
    assert acct.spent == pytest.approx(0.4) and isinstance(out, pdp.GridRelease)
    assert acct.run(frame.dp.basic, attrs, epsilon=0.5).mechanism == "basic"  # the old form
    with pytest.raises(pdp.BudgetExceededError):
        acct.run(plan, RaisingFrame())


# ---------------------------------------------------------------------------- workload choice
def _shapes():
    def nested(groups, per, base=0):
        return pdp.Hierarchy.from_dict({f"h{base}_{g}": [base + g * per + j for j in range(per)]
                                        for g in range(groups)})
    occ = pdp.Hierarchy.from_dict({f"g{g}": list(range(g * 64, (g + 1) * 64)) for g in range(8)})
    census = [pdp.Ordinal("age", 0, 100), pdp.Nominal("gender", categories=[0, 1]),
              pdp.Nominal("occupation", occ), pdp.Ordinal("income", 0, 1000)]
    nominal5 = [pdp.Ordinal("age", 0, 99), pdp.Nominal("region", nested(4, 5)),
                pdp.Nominal("education", nested(4, 4)), pdp.Nominal("marital", nested(3, 3)),
                pdp.Ordinal("hours", 0, 99)]
    nominal6 = [pdp.Nominal("state", nested(10, 5)), pdp.Nominal("sector", nested(6, 8)),
                pdp.Nominal("sex", categories=[0, 1]), pdp.Ordinal("age", 0, 119),
                pdp.Nominal("degree", nested(3, 4)), pdp.Ordinal("year", 0, 15)]
    return {"census": census, "nominal5": nominal5, "nominal6": nominal6}


@pytest.mark.parametrize("shape", ["census", "nominal5", "nominal6"])
@pytest.mark.parametrize("wide", [False, True])
def test_workload_choice_is_the_best_subset(shape, wide):
    attrs = _shapes()[shape]
    queries = pdp.random_workload(attrs, 2000, seed=3)
    starts, stops = query_ranges(attrs, queries)
    if wide:  # the fifth with the largest coverage
        cover = np.prod((stops - starts) / [a.n_cells for a in attrs], axis=1)
        queries = queries.filter(pl.Series(cover >= np.quantile(cover, 0.8)))
    chosen = pdp.plan("privelet", attrs, epsilon=1.0, untransformed="workload", workload=queries,
                      noise="float")
    starts, stops = query_ranges(attrs, queries)

    def mean_error(transformed):
        untransformed = [a.column for a, t in zip(attrs, transformed, strict=True) if not t]
        return pdp.plan("privelet", attrs, epsilon=1.0, untransformed=untransformed, noise="float") \
            .range_variance(starts, stops).mean()

    best = min(mean_error(t) for t in itertools.product([False, True], repeat=len(attrs))
               if all(transformable(a) or not x for a, x in zip(attrs, t, strict=True)))
    mine = chosen.range_variance(starts, stops).mean()
    rule = mean_error([not auto_untransformed(a) for a in attrs])
    basic = mean_error([False] * len(attrs))
    assert mine <= 1.02 * best and mine <= rule * (1 + 1e-12) and mine <= basic * (1 + 1e-12)
    assert chosen.record()["untransformed_choice"] == "workload"


def test_greedy_above_the_exhaustive_limit(monkeypatch):
    attrs = _shapes()["nominal6"]
    queries = pdp.random_workload(attrs, 500, seed=9)
    starts, stops = query_ranges(attrs, queries)
    exhaustive = workload_transformed(attrs, starts, stops)
    monkeypatch.setattr("polars_dp.plans.grid.EXHAUSTIVE_MAX", 2)
    greedy = workload_transformed(attrs, starts, stops)
    errs = subset_errors(attrs, starts, stops, np.array([exhaustive, greedy]))
    rule = subset_errors(attrs, starts, stops, np.array([[not auto_untransformed(a) for a in attrs]]))[0]
    assert errs[1] <= rule and errs[1] <= 1.02 * errs[0]


def test_compare_rows(attrs):
    queries = pdp.random_workload(attrs, 200, seed=2)
    plans = [pdp.plan("basic", attrs, epsilon=1.0), pdp.plan("privelet", attrs, epsilon=1.0),
             pdp.plan("privelet", attrs, epsilon=1.0, untransformed="auto"),
             pdp.plan("privelet", attrs, epsilon=1.0, untransformed="workload", workload=queries)]
    table = pdp.compare(plans, queries)
    assert table.height == 4 and {"mean", "max", "q1", "q5"} <= set(table.columns)
    starts, stops = query_ranges(attrs, queries)
    for row, p in zip(table.iter_rows(named=True), plans, strict=True):
        err = p.range_variance(starts, stops)
        assert row["mean"] == pytest.approx(err.mean()) and row["max"] == pytest.approx(err.max())
        assert row["rmse"] == pytest.approx(np.sqrt(err.mean())) and row["plan"] == p.strategy_name
        assert np.mean([row[f"q{k}"] for k in range(1, 6)]) == pytest.approx(err.mean(), rel=0.05)
    assert table["mean"][3] <= table["mean"].min() * (1 + 1e-12)
    assert table["plan"][0] == "Basic" and table["neighbours"][0] == "replace"  # names, not reprs
    assert table["index"].to_list() == [0, 1, 2, 3] and table.schema["transformed"] == pl.List(pl.String)
    with pytest.raises(pdp.ParameterError):
        pdp.compare([], queries)


def test_compare_rows_are_told_apart_by_their_index():
    """Two plans of one strategy (here both fall back to Basic on one short axis) share a name;
    ``index`` says which input each row is, in both forms (the workload form sorts by rmse)."""
    attrs = [pdp.Ordinal("a", 0, 3)]
    plans = [pdp.plan("privelet", attrs, epsilon=1.0, untransformed="auto"),
             pdp.plan("basic", attrs, epsilon=2.0)]
    table = pdp.compare(plans, pdp.random_workload(attrs, 20, seed=1))
    assert table["index"].to_list() == [0, 1] and table.schema["transformed"] == pl.List(pl.String)
    best = pdp.compare(plans, pdp.workload.ranges(attrs))
    assert best["index"].to_list() == [1, 0] and best["epsilon"].to_list() == [2.0, 1.0]


# ---------------------------------------------------------------------------- typed df.dp
@pytest.mark.skipif(shutil.which("mypy") is None and not any(
    (Path(p) / "mypy").exists() for p in sys.path if p), reason="mypy is not installed")
def test_df_dp_type_checks(tmp_path):
    good = tmp_path / "good.py"
    good.write_text(
        "import polars as pl\nimport polars_dp as pdp\n\n"
        "df = pl.DataFrame({'age': [1, 2]})\n"
        "release: pdp.GridRelease = pdp.dp(df).privelet([pdp.Ordinal('age', 0, 9)], epsilon=1.0)\n"
        "count: float = release.range_count(age=(0, 4))\n"
        "plan: pdp.Plan = pdp.plan('basic', [pdp.Ordinal('age', 0, 9)], epsilon=1.0)\n")
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import polars as pl\nimport polars_dp as pdp\n\n"
        "df = pl.DataFrame({'age': [1, 2]})\n"
        "n: int = pdp.dp(df).basic([pdp.Ordinal('age', 0, 9)], epsilon=1.0)\n")
    env = {**os.environ, "MYPYPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "mypy", "--follow-imports=silent", "--no-incremental",
           "--cache-dir", str(tmp_path / ".mypy"), "--python-executable", sys.executable]
    ok = subprocess.run([*cmd, str(good)], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    ko = subprocess.run([*cmd, str(bad)], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert ko.returncode == 1 and "GridRelease" in ko.stdout, ko.stdout


@pytest.mark.parametrize("mechanism, options", [("privtree", {}), ("uniform_grid", {}),
                                                ("uniform_grid", {"n": 300}), ("privelet_grid", {"bits": 3})])
def test_spatial_files_verify_against_the_rebuilt_plan(tmp_path, mechanism, options):
    rng = np.random.default_rng(2)
    pts = pl.DataFrame({"x": rng.random(300), "y": rng.random(300)})
    release = getattr(pdp, mechanism)(pts, ["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=1.0, seed=1,
                                      **options)
    plan = pdp.read_release(release.to_arrow()).plan  # rebuilt from the file's record
    assert plan.name == mechanism and plan.record(**{k: release.params[k] for k in plan.data_keys()
                                                     if k in release.params}) == release.params
    release.write_parquet(tmp_path / "r.parquet")
    table = pq.read_table(tmp_path / "r.parquet")
    meta = dict(table.schema.metadata)
    params = json.loads(meta[b"polars_dp.params"])
    key = "leaf_noise_scale" if mechanism == "privtree" else "noise_scale"
    params[key] = params[key] * 0.9
    meta[b"polars_dp.params"] = json.dumps(params).encode()
    meta.pop(b"polars_dp.checksum", None)
    with pytest.raises(pdp.ReleaseFormatError, match=key):
        pdp.SpatialRelease.from_arrow(table.replace_schema_metadata(meta))


# ---------------------------------------------------------------------------- intervals everywhere
def test_python_sql_and_cli_intervals_agree(tmp_path, frame, attrs):
    duckdb = pytest.importorskip("duckdb")
    release = pdp.privelet(frame, attrs, epsilon=1.0, untransformed=["sex"], seed=6)
    queries = pdp.random_workload(attrs, 200, seed=5)
    con = duckdb.connect()
    release.to_duckdb(con, "rel")
    con.register("qs", queries.to_arrow())
    for alpha in (0.05, 0.01):
        sql = con.sql(f"SELECT id, lo, hi FROM rel_range_counts('qs', alpha := {alpha}) ORDER BY id").pl()
        py = release.range_counts(queries, alpha=alpha)
        assert np.allclose(sql["lo"], py["lo"], rtol=0, atol=1e-9)
        assert np.allclose(sql["hi"], py["hi"], rtol=0, atol=1e-9)
    default = con.sql("SELECT lo FROM rel_range_counts('qs') ORDER BY id").pl()
    assert np.allclose(default["lo"], release.range_counts(queries, alpha=0.05)["lo"], rtol=0, atol=1e-9)
    lo, hi = con.execute("SELECT lo, hi FROM rel_range_count(age_lo := 20, age_hi := 59, job := 'office')"
                         ).fetchall()[0]
    one = release.range_counts(pl.DataFrame({"age_lo": [20], "age_hi": [59], "job": ["office"]}), alpha=0.05)
    assert lo == pytest.approx(one["lo"][0], abs=1e-9) and hi == pytest.approx(one["hi"][0], abs=1e-9)
    assert con.execute("SELECT lo FROM rel_range_count(alpha := NULL)").fetchall() == [(None,)]
    with pytest.raises(duckdb.Error, match="alpha must lie strictly between 0 and 1"):
        con.execute("SELECT lo FROM rel_range_count(alpha := 1.5)").fetchall()
    release.postprocess("nonnegative").to_duckdb(con, "pp")
    post = con.execute("SELECT lo, hi FROM pp_range_count(age_lo := 20, age_hi := 59)").fetchall()
    assert post == [(None, None)]
    # the command line
    path = tmp_path / "r.parquet"
    release.write_parquet(path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "polars_dp", "query", str(path), "--where", "age=20..59",
                          "--where", "job=office", "--alpha", "0.05", "--json"], capture_output=True,
                         text=True, env=env, check=True)
    answer = json.loads(out.stdout)
    assert answer["lo"] == pytest.approx(one["lo"][0], abs=1e-9)
    assert answer["hi"] == pytest.approx(one["hi"][0], abs=1e-9)
    bad = subprocess.run([sys.executable, "-m", "polars_dp", "query", str(path), "--alpha", "0"],
                         capture_output=True, text=True, env=env)
    assert bad.returncode != 0 and "alpha must lie strictly between 0 and 1" in bad.stderr


def test_spatial_intervals_are_leaf_noise_only():
    rng = np.random.default_rng(4)
    pts = pl.DataFrame({"x": rng.random(2000), "y": rng.random(2000)})
    release = pdp.uniform_grid(pts, ["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=1.0, n=2000, seed=2)
    boxes = pl.DataFrame({"id": [1, 2], "x_lo": [0.1, 0.0], "x_hi": [0.6, 1.0], "y_lo": [0.2, 0.0],
                          "y_hi": [0.9, 1.0]})
    out = release.range_counts(boxes, alpha=0.05)
    half = (out["noise_hi"] - out["count"]).to_numpy()
    assert np.allclose(out["count"] - out["noise_lo"], half)
    scale = release.noise_model.scale
    # at least the exact single-leaf quantile of the largest term, at most Chernoff with all weights 1
    assert (half >= scale * np.log(1 / 0.05) - 1e-9).all()
    cells = release.params["m"] ** 2
    assert half[1] <= laplace_sum_accuracy(
        [(np.ones((1, 1)), np.full((1, 1), float(cells)))], scale, 0.05, "float")[0] * 1.05
    post = release.postprocess("nonnegative").range_counts(boxes, alpha=0.05)
    assert post["noise_lo"].null_count() == 2
    with pytest.raises(pdp.ParameterError, match="alpha"):
        release.range_counts(boxes, alpha=2.0)


@pytest.mark.parametrize(("d", "fanout"), [(1, 2), (2, 4), (3, 8), (4, 4), (5, 4)])
def test_privtree_default_fanout_halves_every_axis_up_to_3_dimensions_and_two_from_4(d, fanout):
    """The default is public (the number of dimensions alone) and recorded; an explicit fanout
    is kept."""
    bounds = [(0.0, 1.0)] * d
    columns = [f"x{i}" for i in range(d)]
    plan = pdp.plan("privtree", columns, bounds=bounds, epsilon=1.0)
    assert plan.layout.fanout == fanout == plan.record()["fanout"]
    assert pdp.plan("privtree", columns, bounds=bounds, epsilon=1.0, fanout=2).layout.fanout == 2


@pytest.mark.parametrize("mechanism", ["privtree_sequences", "ngram_sequences"])
def test_sequence_mechanisms_take_their_one_relation_stated(mechanism):
    """``neighbours="add_remove"`` may be written, as for every mechanism (it was an unknown
    option): the same release as without it."""
    frame = pl.DataFrame({"s": [[1, 2], [2, 3], [1]]})
    fn = getattr(pdp, mechanism)
    stated = fn(frame, "s", alphabet=[1, 2, 3], max_length=3, epsilon=1.0, neighbours="add_remove", seed=5)
    implied = fn(frame, "s", alphabet=[1, 2, 3], max_length=3, epsilon=1.0, seed=5)
    assert stated.neighbours == implied.neighbours == "add_remove"
    assert stated.to_arrow().equals(implied.to_arrow())
