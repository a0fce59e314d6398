"""The hierarchical mechanism: sensitivity of every level tuple by enumeration, exact budgets,
the error formula against seeded releases, Python = SQL error bars, files verified by
re-planning, and the refusals of bad input."""

from __future__ import annotations

import functools
import itertools
from fractions import Fraction

import duckdb
import numpy as np
import polars as pl
import pytest

import polars_dp as pdp
import polars_dp.counting.frequency as frequency
from polars_dp import compiled
from polars_dp.errors import ParameterError, ReleaseFormatError
from polars_dp.kernels.level_budgets import BUDGET_GRID, MAX_TUPLES
from polars_dp.kernels.level_inference import gls
from polars_dp.noise import exact_scale
from tests.helpers.privacy import constant_draws, edited_table

SMALL = [pdp.Ordinal("a", 0, 5),
         pdp.Nominal("b", pdp.Hierarchy.from_dict({"g": ["x", "y"], "h": ["z", "w"]}))]


def _unit_changes(cells: tuple[int, ...], neighbours: str):
    """Every change of the cell counts one row can make: +/- one cell (add/remove), or one cell
    down and another up (replace)."""
    n = int(np.prod(cells))
    for c in range(n):
        if neighbours == "add_remove":
            e = np.zeros(n, dtype=np.int64)
            e[c] = 1
            yield e.reshape(cells)
        else:
            for c2 in range(n):
                if c2 != c:
                    e = np.zeros(n, dtype=np.int64)
                    e[c], e[c2] = 1, -1
                    yield e.reshape(cells)


@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
@pytest.mark.parametrize("levels", [None, {"a": [6, 3, 1]}, {"a": 3}])
def test_every_tuple_has_the_stated_sensitivity(neighbours, levels):
    plan = pdp.plan("hierarchical", SMALL, epsilon=1.0, neighbours=neighbours, levels=levels)
    want = 1 if neighbours == "add_remove" else 2
    assert plan.sensitivity == want
    cells = tuple(a.n_cells for a in SMALL)
    worst: dict[tuple[int, ...], int] = {}
    for change in _unit_changes(cells, neighbours):
        # the measurement is linear: the change of the block counts is the block counts of the change
        for t, y in plan.strategy.measure(change).items():
            worst[t] = max(worst.get(t, 0), int(np.abs(y).sum()))
    assert set(worst) == set(plan.measured) and len(worst) == plan.budget_units.size
    for t, value in worst.items():  # the total under replace: both rows in its one block
        blocks = int(np.prod([ax.length // ax.sizes[i] for ax, i in zip(plan.axes, t, strict=True)]))
        assert value == (want if blocks > 1 or neighbours == "add_remove" else 0)


def test_budgets_are_exact_and_sum_to_epsilon():
    plan = pdp.plan("hierarchical", SMALL, epsilon=0.7, neighbours="replace")
    eps = [plan.strategy.epsilons[t] for t in plan.measured]
    assert sum(eps, Fraction(0)) == Fraction(0.7)
    assert int(plan.budget_units.sum()) == BUDGET_GRID
    spent = Fraction(0)
    for t, e in zip(plan.measured, eps, strict=True):
        assert plan.tuple_scale(t) == exact_scale(2, e)
        spent += Fraction(2) / plan.tuple_scale(t)
    assert plan.epsilon_spent == spent <= Fraction(0.7)


def test_the_optimiser_reads_no_data(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("data read while planning")

    monkeypatch.setattr(frequency, "frequency_matrix", refuse)
    attrs = [pdp.Ordinal("a", 0, 63)]
    plan = pdp.plan("hierarchical", attrs, epsilon=1.0, workload=pdp.workload.ranges(attrs))
    assert plan.budget_choice == "workload" and len(plan.measured) < plan.budget_units.size


def test_noiseless_draws_give_the_exact_counts(monkeypatch):
    """With every draw 0 the least-squares estimate is the counts themselves."""
    constant_draws(monkeypatch, 0)
    df = pl.DataFrame({"a": [0, 1, 1, 5, 3, 2], "b": ["x", "y", "y", "w", "z", "x"]})
    release = pdp.hierarchical(df, SMALL, epsilon=1.0, seed=1)
    exact = pdp.basic(df, SMALL, epsilon=1.0, seed=1).counts  # Basic with zero draws: the counts
    np.testing.assert_allclose(release.counts, exact, atol=1e-9)


# ---------------------------------------------------------------------------- error against the formula
def _noise_operator(plan) -> tuple[np.ndarray, np.ndarray]:
    """``(L, scales)``: the release's noise is ``L z`` with ``z`` the independent draws (one per
    block of each measured tuple, in order) and ``scales`` their scales."""
    shapes = {t: plan.strategy.measure(np.zeros(tuple(a.n_cells for a in plan.attributes),
                                                dtype=np.int64))[t].shape for t in plan.measured}
    columns, scales = [], []
    for t in plan.measured:
        for idx in np.ndindex(shapes[t]):
            y = {s: np.zeros(shapes[s]) for s in plan.measured}
            y[t][idx] = 1.0
            columns.append(gls(y, plan.weights, plan.axes).reshape(-1))
            scales.append(Fraction(plan.tuple_scale(t)))
    return np.stack(columns, axis=1), np.array(scales, dtype=object)


@functools.cache
def _dlap_moments(scale: Fraction) -> tuple[float, float]:
    """Second and fourth moments of the discrete Laplace of ``scale``, ``P(k) = (1-q)/(1+q) q^|k|``:
    ``Σ_k k² q^k = q (1 + q) / (1 - q)³`` and ``Σ_k k⁴ q^k = q (1 + 11 q + 11 q² + q³) / (1 - q)⁵``."""
    q = float(np.exp(-1.0 / float(scale)))
    c = 2.0 * (1.0 - q) / (1.0 + q)
    return c * q * (1 + q) / (1 - q) ** 3, c * q * (1 + 11 * q + 11 * q * q + q**3) / (1 - q) ** 5


def _range_matrix(n: int) -> np.ndarray:
    lo, hi = np.triu_indices(n)
    q = np.zeros((lo.size, n))
    for i, (a, b) in enumerate(zip(lo, hi, strict=True)):
        q[i, a:b + 1] = 1.0
    return q


@pytest.mark.parametrize("case", ["1-D 64, optimised for all ranges", "2-D 16x16, uniform",
                                  "3-D 8x8x4, optimised for all ranges"])
def test_mean_squared_error_matches_the_formula(case):
    """200 seeded releases: the mean squared error over all ranges is the formula's within its
    sampling error.  Per release the error is ``X = zᵀ B z`` (``B = Lᵀ Qᵀ Q L / m``) with
    ``Var X = Σ_i B_ii² (μ4_i - 3 σ_i⁴) + 2 Σ_ij B_ij² σ_i² σ_j²`` (independent symmetric draws),
    so the mean of 200 is within ``8 √(Var X / 200)`` of the formula with probability >= 98%
    (Chebyshev); the intervals at ``alpha`` miss at most ``alpha`` of the answers."""
    if case.startswith("1-D"):
        attrs = [pdp.Ordinal("a", 0, 63)]
        workload = pdp.workload.ranges(attrs)
        plan = pdp.plan("hierarchical", attrs, epsilon=1.0, neighbours="add_remove", workload=workload)
        q = _range_matrix(64)
    elif case.startswith("2-D"):
        attrs = [pdp.Ordinal("a", 0, 15), pdp.Ordinal("b", 0, 15)]
        workload = pdp.workload.ranges(attrs)
        plan = pdp.plan("hierarchical", attrs, epsilon=1.0, neighbours="add_remove")
        r = _range_matrix(16)
        q = np.einsum("ij,kl->ikjl", r, r).reshape(r.shape[0] ** 2, 256)
    else:
        attrs = [pdp.Ordinal("a", 0, 7), pdp.Ordinal("b", 0, 7), pdp.Ordinal("c", 0, 3)]
        workload = pdp.workload.ranges(attrs)
        plan = pdp.plan("hierarchical", attrs, epsilon=1.0, neighbours="add_remove", workload=workload)
        r, s = _range_matrix(8), _range_matrix(4)
        q = np.einsum("ij,kl,mn->ikmjln", r, r, s).reshape(-1, 256)
    formula = plan.workload_error(workload)
    big_l, scales = _noise_operator(plan)
    b = big_l.T @ (q.T @ q) @ big_l / q.shape[0]
    sigma2, mu4 = np.array([_dlap_moments(s) for s in scales]).T
    assert float(np.diag(b) @ sigma2) == pytest.approx(formula, rel=1e-9)  # E X = tr(B Σ)
    var_x = float((np.diag(b) ** 2 * (mu4 - 3 * sigma2**2)).sum()
                  + 2 * ((b**2) * np.outer(sigma2, sigma2)).sum())
    rng = np.random.default_rng(11)
    cells = tuple(a.n_cells for a in attrs)
    df = pl.DataFrame({a.column: rng.integers(0, a.n_cells, 400) for a in attrs})
    exact = np.zeros(cells)
    np.add.at(exact, tuple(df[a.column].to_numpy() for a in attrs), 1.0)
    errors, misses, checked = [], 0, 0
    some = np.random.default_rng(3).choice(q.shape[0], 50, replace=False)
    acc = None
    for seed in range(200):
        release = plan.run(df, seed=seed)
        noise = (release.counts - exact).reshape(-1)
        answers = q @ noise
        errors.append(float(np.mean(answers**2)))
        if acc is None:
            acc = _accuracy(release, q[some], cells, 0.1)
        misses += int((np.abs(answers[some]) > acc).sum())
        checked += some.size
    mean = float(np.mean(errors))
    assert abs(mean - formula) <= 8 * np.sqrt(var_x / 200), (mean, formula, np.sqrt(var_x / 200))
    assert misses / checked <= 0.1


def _accuracy(release, rows: np.ndarray, cells: tuple[int, ...], alpha: float) -> np.ndarray:
    """The release's half-widths of the box queries ``rows`` (indicator rows over the cells)."""
    starts, stops = [], []
    for row in rows:
        idx = np.argwhere(row.reshape(cells) > 0)
        starts.append(idx.min(axis=0))
        stops.append(idx.max(axis=0) + 1)
    return release.range_accuracy(np.array(starts), np.array(stops), alpha)


# ---------------------------------------------------------------------------- SQL and files
def test_sql_error_bars_equal_python_off_the_measured_span():
    """Budgets for 1-way marginals leave the cells unmeasured: a cell's std is inf in Python and SQL."""
    attrs = [pdp.Ordinal("a", 0, 7), pdp.Ordinal("b", 0, 7)]
    df = pl.DataFrame({"a": [1, 2, 3, 7], "b": [0, 0, 5, 6]})
    release = pdp.hierarchical(df, attrs, epsilon=1.0, workload=pdp.workload.marginals(attrs, 1), seed=2)
    assert release.range_std(a=(3, 3), b=(2, 2)) == np.inf
    assert np.isfinite(release.range_std(a=(3, 3)))
    queries = pl.DataFrame({"id": [0, 1, 2], "a_lo": [3, 3, None], "a_hi": [3, 3, None],
                            "b_lo": [2, None, 1], "b_hi": [2, None, 6]})
    con = duckdb.connect()
    release.to_duckdb(con, "h")
    con.register("q", queries.to_arrow())
    sql = con.sql("SELECT std, hi - count AS acc FROM h_range_counts('q', alpha := 0.05) ORDER BY id").pl()
    python = release.accuracy(queries, 0.05)
    np.testing.assert_allclose(sql["std"].to_numpy(), python["std"].to_numpy(), rtol=1e-9)
    np.testing.assert_allclose(sql["acc"].to_numpy(), python["accuracy"].to_numpy(), rtol=1e-9)


def test_files_are_verified_by_replanning(tmp_path):
    attrs = [pdp.Ordinal("a", 0, 31)]
    df = pl.DataFrame({"a": list(range(32)) * 3})
    release = pdp.hierarchical(df, attrs, epsilon=1.0, workload=pdp.workload.prefixes(attrs), seed=4)
    assert release.params["budgets"] == "workload"
    path = tmp_path / "h.parquet"
    release.write_parquet(path)
    back = pdp.read_release(path)
    assert back == release and back.range_std(a=(3, 20)) == release.range_std(a=(3, 20))
    assert back.postprocess("nonnegative").counts.min() >= 0
    units = release.params["budget_units"]
    moved = [units[0] + 1, *units[1:]]  # no longer 2^20 in all
    with pytest.raises(ReleaseFormatError, match="budget_units"):
        pdp.read_release(edited_table(release, lambda meta: meta["params"].update(budget_units=moved)))
    shifted = [*units[1:], units[0]]  # a valid split, not this release's scales
    with pytest.raises(ReleaseFormatError):
        pdp.read_release(edited_table(release, lambda meta: meta["params"].update(budget_units=shifted)))


# ---------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(("options", "match"), [
    ({"workload": pdp.workload.ranges([pdp.Ordinal("z", 0, 3)])}, "'z', which is not a declared attribute"),
    ({"workload": pl.DataFrame({"a_lo": [], "a_hi": []}, schema={"a_lo": pl.Int64, "a_hi": pl.Int64})},
     "no query"),
    ({"levels": {"a": [64, 12, 1]}}, "do not nest"),
    ({"levels": {"zz": 2}}, "'zz', which is not a declared attribute"),
    ({"levels": {"a": 1}}, "b >= 2"),
    ({"levels": [2]}, "levels must map column names"),
])
def test_bad_input_is_one_typed_sentence(options, match):
    with pytest.raises(ParameterError, match=match) as info:
        pdp.plan("hierarchical", [pdp.Ordinal("a", 0, 63)], epsilon=1.0, **options)
    assert info.value.parameter in ("workload", "levels")
    assert str(info.value).count(". ") == 0


def test_tuples_past_the_cap_are_refused():
    attrs = [pdp.Ordinal(c, 0, 63) for c in "abcde"]  # 7^5 tuples
    assert 7**5 > MAX_TUPLES
    with pytest.raises(ParameterError, match="level tuples exceed the cap"):
        pdp.plan("hierarchical", attrs, epsilon=1.0)
    assert len(list(itertools.product(range(2), repeat=5))) == 32  # two levels each fit
    pdp.plan("hierarchical", attrs, epsilon=1.0, levels={c: [64, 1] for c in "abcde"})


def test_sql_script_answers_as_python(tmp_path):
    df = pl.DataFrame({"age": [23, 35, 35, 61], "sex": ["f", "m", "f", "f"]})
    attrs = [pdp.Ordinal("age", 0, 99), pdp.Nominal("sex", categories=["f", "m"])]
    workload = pdp.workload.prefixes(attrs[:1]) @ pdp.workload.identity(attrs[1:])
    release = pdp.hierarchical(df, attrs, epsilon=0.5, workload=workload, seed=1)
    release.write_parquet(tmp_path / "h.parquet")
    con = duckdb.connect()
    con.execute(release.sql_script(tmp_path / "h.parquet", "h"))
    count, std, lo, hi = con.sql("SELECT * FROM h_range_count(age_lo := 20, age_hi := 40, sex := 'f', "
                                 "alpha := 0.1)").fetchall()[0]
    assert count == pytest.approx(release.range_count(age=(20, 40), sex="f"), rel=1e-12)
    assert std == pytest.approx(release.range_std(age=(20, 40), sex="f"), rel=1e-9)
    assert (lo, hi) == pytest.approx(release.range_interval(0.1, age=(20, 40), sex="f"), rel=1e-9)
    assert release.sample(20, seed=3).height == 20


# ---------------------------------------------------------------------------- streamed = reference
def _reference_release(plan, frame, seed):
    """The straightforward release: every tuple's block counts from the whole pyramid, the noise
    of each in one draw (C order), then :func:`gls` on all of them at once."""
    from polars_dp.counting.frequency import frequency_matrix
    from polars_dp.noise import noise_source, sample_noise

    src = noise_source(seed)
    counts = frequency_matrix(frame, plan.attributes, integer=True)
    exact = plan.strategy.measure(counts)
    noisy = {t: exact[t].astype(np.float64)
             + sample_noise(src, plan.tuple_scale(t), exact[t].shape, plan.noise) for t in plan.measured}
    return gls(noisy, plan.weights, plan.axes)


def _bits(a):
    return np.ascontiguousarray(a, dtype=np.float64).view(np.int64)


STREAM_CASES = [
    ("padded 1-D", [pdp.Ordinal("a", 0, 100)], None, None),
    ("ordinal x nominal, workload", SMALL, "ranges", None),
    ("3-D padded, uniform", [pdp.Ordinal("a", 0, 12), pdp.Nominal("g", categories=[0, 1, 2]),
                             pdp.Ordinal("c", 0, 20)], None, None),
    ("3-D random ranges", [pdp.Ordinal("a", 0, 40), pdp.Nominal("g", categories=[0, 1]),
                           pdp.Nominal("o", pdp.Hierarchy.from_dict({f"h{g}": list(range(g * 4, g * 4 + 4))
                                                                     for g in range(3)})),
                           pdp.Ordinal("c", 0, 60)], "random", None),
    ("given levels", [pdp.Ordinal("a", 0, 29), pdp.Ordinal("c", 0, 17)], None, {"a": 4, "c": [18, 6, 1]}),
]


@pytest.mark.parametrize("noise", ["exact", "float"])
@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
@pytest.mark.parametrize("case", STREAM_CASES, ids=[c[0] for c in STREAM_CASES])
def test_streamed_release_equals_the_reference_bit_for_bit(case, neighbours, noise):
    _, attrs, workload, levels = case
    rng = np.random.default_rng(7)
    cols = {}
    for a in attrs:
        labels = np.asarray(a.cell_labels())
        cols[a.column] = labels[np.minimum(rng.zipf(1.5, 400) - 1, labels.size - 1)]
    frame = pl.DataFrame(cols)
    w = {"ranges": lambda: pdp.workload.ranges(attrs), "random": lambda: pdp.workload.random_ranges(attrs)}
    plan = pdp.plan("hierarchical", attrs, epsilon=1.0, neighbours=neighbours, noise=noise, levels=levels,
                    workload=w[workload]() if workload else None)
    want = _reference_release(plan, frame, 11)
    got = plan.run(frame, seed=11, progress=False).counts
    assert got.shape == want.shape
    np.testing.assert_array_equal(_bits(got), _bits(want))


def test_an_optimised_plan_on_slabs_cutting_coarser_blocks_equals_the_reference(monkeypatch):
    """A workload-optimised plan whose cells tuple is alone at the finest first-axis level
    (identity and prefixes of ``a`` by ``b``), summed in slabs of 5 rows that cut the coarser
    tuple's blocks of 32 (the slab size made small here; at full size it is ``2^23`` cells):
    the reference's bits (the sum once doubled the coarser tuple's values instead)."""
    import functools
    import importlib

    from polars_dp.kernels.level_inference import noisy_normal_sum

    module = importlib.import_module("polars_dp.mechanisms.hierarchical")
    monkeypatch.setattr(module, "noisy_normal_sum", functools.partial(noisy_normal_sum, slab_cells=240))
    a, b = pdp.Ordinal("a", 0, 26), pdp.Ordinal("b", 0, 47)
    w = pdp.workload
    rng = np.random.default_rng(2)
    frame = pl.DataFrame({"a": rng.integers(0, 27, 3000), "b": rng.integers(0, 48, 3000)})
    plan = pdp.plan("hierarchical", [a, b], epsilon=1.0,
                    workload=w.union(w.identity([a, b]), w.kron(w.prefixes(a), w.identity(b))))
    assert len(plan.measured) == 2 and plan.measured[0][1] == plan.measured[1][1]  # the cells tuple alone
    np.testing.assert_array_equal(_bits(plan.run(frame, seed=5, progress=False).counts),
                                  _bits(_reference_release(plan, frame, 5)))


def test_large_tuples_noised_by_blocks_take_the_reference_draws(monkeypatch):
    """Tuples of more than four noise chunks are noised a block of rows at a time (the chunk
    made small here so that a small domain has them): the same draws, the same bits."""
    import importlib

    module = importlib.import_module("polars_dp.mechanisms.hierarchical")
    monkeypatch.setattr(module, "NOISE_CHUNK", 1 << 16)  # a multiple of the sampler's block
    attrs = [pdp.Ordinal("a", 0, 299_999)]
    frame = pl.DataFrame({"a": np.random.default_rng(3).integers(0, 300_000, 5000)})
    plan = pdp.plan("hierarchical", attrs, epsilon=1.0, noise="exact")
    assert max(int(np.prod(plan.strategy.measure(np.zeros(300_000, dtype=np.int64))[t].shape))
               for t in plan.measured) > 4 << 16
    want = _reference_release(plan, frame, 5)
    np.testing.assert_array_equal(_bits(plan.run(frame, seed=5, progress=False).counts), _bits(want))


def _reference_with_streams(plan, frame, seed, chunk, above):
    """:func:`_reference_release` with every tuple of more than ``above`` padded blocks noised by
    blocks of rows (``chunk``'s multiples, as the streamed release cuts them), each block from
    its own stream ``src.block_streams()(first value)``, the root drawn at the tuple's turn."""
    from polars_dp.counting.frequency import frequency_matrix
    from polars_dp.noise import noise_source, sample_noise

    src = noise_source(seed)
    counts = frequency_matrix(frame, plan.attributes, integer=True)
    exact = plan.strategy.measure(counts)
    noisy = {}
    for t in plan.measured:
        y, scale = exact[t].astype(np.float64), plan.tuple_scale(t)
        if y.size <= above:
            noisy[t] = y + sample_noise(src, scale, y.shape, plan.noise)
            continue
        streams, row = src.block_streams(), y.size // y.shape[0]
        step = chunk // np.gcd(row, chunk)
        step *= max(1, chunk // (step * row))
        for a in range(0, y.shape[0], step):
            part = y[a:a + step]
            part += sample_noise(streams(a * row), scale, part.shape, plan.noise)
        noisy[t] = y
    return gls(noisy, plan.weights, plan.axes)


@pytest.mark.parametrize("noise", ["exact", "float"])
@pytest.mark.parametrize("threads", ["1", "2", "3"])
def test_the_largest_tuples_draw_by_blocks_of_their_own_on_any_threads(monkeypatch, threads, noise):
    """A tuple of more than ``STREAM_VALUES`` padded blocks (made small here) draws its noise by
    blocks of rows, each from its own stream keyed by its first value, on the environment's
    threads: the same bits as the reference drawing those blocks one after the other, whatever
    the threads; the smaller tuples keep the release's stream.  On several threads the counts
    are scattered with room in front (the compiled kernels made to run here), and the cells'
    tuple is built over them."""
    import importlib

    import polars_dp.counting.aggregate as aggregate
    import polars_dp.kernels.level_inference as inference
    import polars_dp.plans.base as plans_base

    module = importlib.import_module("polars_dp.mechanisms.hierarchical")
    monkeypatch.setattr(aggregate, "PARALLEL_CELLS", 0)
    monkeypatch.setattr(plans_base, "COMPILED_FROM", 0)
    rooms = []
    real_room = inference._room_of
    monkeypatch.setattr(inference, "_room_of", lambda *a: rooms.append(real_room(*a)) or rooms[-1])
    monkeypatch.setattr(module, "NOISE_CHUNK", 1 << 16)
    monkeypatch.setattr(module, "STREAM_VALUES", 1 << 18)
    monkeypatch.setenv("POLARS_DP_THREADS", threads)
    attrs = [pdp.Ordinal("a", 0, 299_999)]
    frame = pl.DataFrame({"a": np.random.default_rng(3).integers(0, 300_000, 5000)})
    plan = pdp.plan("hierarchical", attrs, epsilon=1.0, noise=noise)
    got = plan.run(frame, seed=5, progress=False).counts
    want = _reference_with_streams(plan, frame, 5, 1 << 16, 1 << 18)
    np.testing.assert_array_equal(_bits(got), _bits(want))
    assert [r is not None for r in rooms] == [compiled.enabled() and threads != "1"]
    assert not np.array_equal(_bits(want), _bits(_reference_release(plan, frame, 5)))  # the path is taken
