"""The sequence and spatial mechanisms take every scale from their plans; files are checked
against the plan rebuilt from their metadata."""

import json
from fractions import Fraction

import polars as pl
import pytest

import polars_dp as pdp
from polars_dp.errors import ReleaseFormatError

SEQS = pl.DataFrame({"s": [[1, 2, 3], [2, 2], [3, 1, 1, 2], [], [1]] * 20})


@pytest.mark.parametrize("noise", ["exact", "float"])
@pytest.mark.parametrize("length_share", [0.0, 0.1])
def test_sequence_release_records_its_plan(noise, length_share):
    plan = pdp.plan("privtree_sequences", "s", alphabet=[1, 2, 3], max_length=5, epsilon=1.5,
                    tree_share=0.3, length_share=length_share, noise=noise)
    release = plan.run(SEQS, seed=2)
    p = release.params
    assert (p["lambda"], p["delta"], p["leaf_noise_scale"]) == (plan.lam, plan.delta, float(plan.leaf_scale))
    assert p["epsilon_tree"] == float(plan.epsilon_tree) and p["epsilon_leaf"] == float(plan.epsilon_leaf)
    if noise == "exact":  # the split adds up to epsilon exactly
        assert plan.epsilon_tree + plan.epsilon_length + plan.epsilon_leaf == Fraction(1.5)
    assert (plan.length_scale is None) == (length_share == 0)
    again = pdp.read_release(release.to_arrow()).plan  # rebuilt from the file's record
    assert (again.lam, again.delta, again.leaf_scale) == (plan.lam, plan.delta, plan.leaf_scale)
    direct = pdp.privtree_sequences(SEQS, "s", alphabet=[1, 2, 3], max_length=5, epsilon=1.5,
                                    tree_share=0.3, length_share=length_share, noise=noise, seed=2)
    assert direct.params == release.params and (direct.hist == release.hist).all()


def test_sequence_file_with_an_edited_share_is_refused(tmp_path):
    release = pdp.privtree_sequences(SEQS, "s", alphabet=[1, 2, 3], max_length=5, epsilon=1.0, seed=1)
    table = release.to_arrow()
    meta = dict(table.schema.metadata)
    params = json.loads(meta[b"polars_dp.params"])
    params["tree_share"] = 0.5  # the recorded split no longer follows from the declared share
    meta[b"polars_dp.params"] = json.dumps(params).encode()
    meta[b"polars_dp.tree_share"] = b"0.5"
    with pytest.raises(ReleaseFormatError, match="params.epsilon_tree"):
        type(release).from_arrow(table.replace_schema_metadata(meta))


POINTS = pl.DataFrame({"x": [0.1, 0.2, 0.5, 0.7, 0.9] * 40, "y": [0.3, 0.1, 0.6, 0.8, 0.2] * 40})


@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
def test_adaptive_grid_file_is_checked_against_its_plan(neighbours):
    release = pdp.adaptive_grid(POINTS, ["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=1.0, seed=4,
                                neighbours=neighbours)
    plan = pdp.read_release(release.to_arrow()).plan  # rebuilt from the file's record
    assert isinstance(plan, pdp.plans.AdaptiveGridPlan)
    assert release.params["level2_noise_scale"] == float(plan.level2_scale)
    table = release.to_arrow()
    meta = dict(table.schema.metadata)
    params = json.loads(meta[b"polars_dp.params"])
    params["level2_noise_scale"] *= 0.9  # less noise than the declared epsilon pays for
    meta[b"polars_dp.params"] = json.dumps(params).encode()
    with pytest.raises(ReleaseFormatError, match="level2_noise_scale"):
        type(release).from_arrow(table.replace_schema_metadata(meta))


def test_privelet_grid_counts_once(monkeypatch):
    """counts -> Privelet noise -> release: the frame is counted once, by the grid count."""
    import polars_dp.counting.engines as engines

    calls = []
    real = engines.count

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(engines, "count", counting)
    release = pdp.privelet_grid(POINTS, ["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=1.0, bits=3, seed=1)
    assert len(calls) == 1
    plan = pdp.plan("privelet_grid", ["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=1.0, bits=3)
    assert release.params["rho"] == plan.rho == 16 and release.params["noise_scale"] == float(plan.scale)
    assert release.n_leaves == 64


def _duckdb():
    return pytest.importorskip("duckdb")


@pytest.mark.parametrize("mechanism", ["privtree", "uniform_grid"])
def test_spatial_sql_intervals_equal_python(mechanism, tmp_path):
    duckdb = _duckdb()
    import os
    import subprocess
    import sys
    from pathlib import Path

    import numpy as np

    rng = np.random.default_rng(3)
    pts = pl.DataFrame({"x": rng.random(3000), "y": rng.random(3000)})
    release = getattr(pdp, mechanism)(pts, ["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=1.0, seed=6)
    half = [rng.random(40) * 0.5 for _ in range(4)]
    boxes = pl.DataFrame({"id": list(range(40)), "x_lo": half[0], "x_hi": 0.5 + half[1],
                          "y_lo": half[2], "y_hi": 0.5 + half[3]})
    con = duckdb.connect()
    release.to_duckdb(con, "sp")
    con.register("boxes", boxes.to_arrow())
    for alpha in (0.05, 0.01):
        sql = con.sql(f"SELECT * FROM sp_range_counts('boxes', alpha := {alpha}) ORDER BY id").pl()
        py = release.range_counts(boxes, alpha=alpha)
        for col in ("noise_lo", "noise_hi"):
            assert np.allclose(sql[col], py[col], rtol=0, atol=1e-9)
        assert (py["noise_hi"] - py["noise_lo"] > 0).all()
    default = con.sql("SELECT noise_lo FROM sp_range_counts('boxes') ORDER BY id").pl()
    want_lo = release.range_counts(boxes, alpha=0.05)["noise_lo"]
    assert np.allclose(default["noise_lo"], want_lo, rtol=0, atol=1e-9)
    (lo, hi), = con.execute("SELECT noise_lo, noise_hi FROM sp_range_count(x_lo := 0.1, x_hi := 0.6)"
                            ).fetchall()
    want = release.range_noise_interval(0.05, x=(0.1, 0.6))
    assert lo == pytest.approx(want[0], abs=1e-9) and hi == pytest.approx(want[1], abs=1e-9)
    assert con.execute("SELECT noise_lo FROM sp_range_count(alpha := NULL)").fetchall() == [(None,)]
    with pytest.raises(duckdb.Error, match="alpha must lie strictly between 0 and 1"):
        con.execute("SELECT noise_lo FROM sp_range_count(alpha := 1.5)").fetchall()
    path = tmp_path / "sp.parquet"
    release.write_parquet(path)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    out = subprocess.run([sys.executable, "-m", "polars_dp", "query", str(path), "--where", "x=0.1..0.6",
                          "--alpha", "0.05", "--json"], capture_output=True, text=True, env=env, check=True)
    answer = json.loads(out.stdout)
    assert answer["noise_lo"] == pytest.approx(want[0], abs=1e-9)
    assert answer["noise_hi"] == pytest.approx(want[1], abs=1e-9)


def test_spatial_sql_intervals_are_null_without_an_error_bar():
    duckdb = _duckdb()
    release = pdp.adaptive_grid(POINTS, ["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=1.0, seed=4)
    con = duckdb.connect()
    release.to_duckdb(con, "ag")
    answer = con.execute("SELECT noise_std, noise_lo, noise_hi FROM ag_range_count(x_lo := 0.1)").fetchall()
    assert answer == [(None, None, None)]
    tree = pdp.privtree(POINTS, ["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=1.0, seed=4, levels=1)
    tree.to_duckdb(con, "lv")
    assert con.execute("SELECT noise_lo FROM lv_range_count(x_lo := 0.1)").fetchall() == [(None,)]
    py = tree.range_counts(pl.DataFrame({"x_lo": [0.1]}), alpha=0.05)
    assert py["noise_lo"].to_list() == [None] and py["noise_std"][0] is not None


# ---------------------------------------------------------------------------- exact composition
ATTRS = [pdp.Ordinal("age", 0, 99, width=10)]
AGES = pl.DataFrame({"age": [23, 35, 61, 70]})


def test_plan_spends_the_exact_sum_of_sensitivity_over_scale():
    plan = pdp.plan("basic", ATTRS, epsilon=0.1)  # replace: scale 2 / 0.1 rounded up = 20 exactly
    assert plan.epsilon_spent == Fraction(2) / Fraction(plan.scale) == Fraction(1, 10) < Fraction(0.1)
    tree = pdp.plan("privtree", ["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=0.3, levels=1)
    parts = (Fraction(7) / (3 * Fraction(tree.lam)) + 1 / Fraction(tree.leaf_scale)
             + sum(1 / Fraction(b) for b in tree.level_scales))
    assert tree.epsilon_spent == parts <= Fraction(0.3)
    ug = pdp.plan("uniform_grid", ["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=0.3)  # noisy n
    assert ug.epsilon_spent == 1 / Fraction(ug.n_scale) + 1 / Fraction(ug.cell_scale) <= Fraction(0.3)
    floats = pdp.plan("basic", ATTRS, epsilon=0.1, noise="float")
    assert floats.epsilon_spent == Fraction(0.1)


def test_ten_plans_at_a_tenth_fit_a_total_of_one():
    acct = pdp.Accountant(total=1.0)
    for _ in range(10):
        acct.run(pdp.plan("basic", ATTRS, epsilon=0.1), AGES)
    assert acct.spent_exact == 1 and acct.remaining == 0.0
    with pytest.raises(pdp.BudgetExceededError):
        acct.charge(5e-324, "one float step over")
    session = pdp.Session(AGES, epsilon=1.0, neighbours="replace")
    for _ in range(10):
        session.basic(ATTRS, epsilon=0.1)
    assert session.remaining == 0.0 and session.ledger[0]["epsilon_spent"] == 0.1
    with pytest.raises(pdp.BudgetExceededError):
        session.run(pdp.plan("basic", ATTRS, epsilon=0.1))
    functions = pdp.Accountant(total=1.0)  # a mechanism is charged its plan's spend: the same rule
    for _ in range(10):
        functions.run(AGES.dp.basic, ATTRS, epsilon=0.1)
    assert functions.spent_exact == 1
    with pytest.raises(pdp.BudgetExceededError):
        functions.run(AGES.dp.basic, ATTRS, epsilon=0.1)


def test_a_total_one_float_step_below_is_refused():
    import math

    acct = pdp.Accountant(total=math.nextafter(1.0, 0.0))
    for _ in range(9):
        acct.run(pdp.plan("basic", ATTRS, epsilon=0.1), AGES)
    with pytest.raises(pdp.BudgetExceededError):
        acct.run(pdp.plan("basic", ATTRS, epsilon=0.1), AGES)
    assert len(acct.ledger) == 9
    floats = pdp.Accountant(total=1.0, allow_float=True)  # float noise: the float's exact value
    for _ in range(9):
        floats.run(pdp.plan("basic", ATTRS, epsilon=0.1, noise="float"), AGES)
    with pytest.raises(pdp.BudgetExceededError):
        floats.run(pdp.plan("basic", ATTRS, epsilon=0.1, noise="float"), AGES)


def test_a_charge_never_exceeds_its_epsilon():
    acct = pdp.Accountant(total=1.0)
    with pytest.raises(pdp.ParameterError, match="exact charge"):
        acct.charge(0.1, "x", exact=Fraction(0.1) + Fraction(1, 10**30))
    assert acct.ledger == []


@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
def test_privtree_plan_lambda_is_the_release_lambda(neighbours):
    plan = pdp.plan("privtree", ["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=0.7, neighbours=neighbours)
    release = plan.run(POINTS, seed=3)
    assert release.params["lambda"] == plan.lam
