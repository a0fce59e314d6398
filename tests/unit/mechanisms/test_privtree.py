"""PrivTree: privacy proof obligations (PrivTree paper Sec. 3: privacy, tree size) and input validation."""

import math

import numpy as np
import polars as pl
import pytest

import polars_dp  # noqa: F401  (registers df.dp)
import polars_dp.mechanisms.spatial_tree as privtree_module
from polars_dp.domains.box import as_box
from polars_dp.errors import ColumnNotFoundError, DomainError, ParameterError
from polars_dp.kernels.morton import (
    MortonLayout,
    check_fanout,
    grid_coordinates,
    morton_codes,
    resolution_bits,
)
from polars_dp.mechanisms.privtree_rule import privtree_split
from polars_dp.mechanisms.spatial_tree import grow_tree, privtree, privtree_delta, privtree_lambda
from polars_dp.noise import make_rng

Z = 4.89  # two-sided normal quantile for a false-failure probability of 1e-6


# ---------------------------------------------------------------- exact privacy loss on a path
def log_tails(x, lam):
    """(log P[x + Lap(lam) > 0], log P[x + Lap(lam) <= 0])."""
    if x >= 0:
        return math.log1p(-0.5 * math.exp(-x / lam)), math.log(0.5) - x / lam
    return math.log(0.5) + x / lam, math.log1p(-0.5 * math.exp(x / lam))


def path_log_ratio(counts, lam, delta, theta, plus, clamp=True):
    """|log P[decisions | D] - log P[decisions | D']| along one root-to-leaf path: every node
    splits except the last; D' adds (+1) or removes (-1) one point on this path."""
    total = 0.0
    for depth, c in enumerate(counts):
        b, b2 = c - depth * delta, c + plus - depth * delta
        if clamp:
            b, b2 = max(b, theta - delta), max(b2, theta - delta)
        (s1, n1), (s2, n2) = log_tails(b - theta, lam), log_tails(b2 - theta, lam)
        total += (s1 - s2) if depth < len(counts) - 1 else (n1 - n2)
    return abs(total)


def worst_path_loss(lam, delta, theta, clamp=True, rng=None):
    worst = 0.0
    for c0 in np.linspace(-3 * lam, 60 * lam, 400):  # constant counts: the tightest paths
        for k in range(1, 45):
            if c0 - k * delta < theta - delta - 3 * lam:
                break
            for plus in (1, -1):
                worst = max(worst, path_log_ratio([c0] * k, lam, delta, theta, plus, clamp))
    for _ in range(300):  # random monotone (non-increasing) paths
        k = int(rng.integers(1, 30))
        counts = np.sort(rng.integers(0, int(40 * lam), k))[::-1]
        for plus in (1, -1):
            worst = max(worst, path_log_ratio(list(counts), lam, delta, theta, plus, clamp))
    return worst


@pytest.mark.parametrize("beta", [2, 4, 8, 16, 256])
def test_split_decisions_cost_at_most_eps_tree(beta):
    eps_tree = 0.7
    lam, delta = privtree_lambda(eps_tree, beta), privtree_delta(privtree_lambda(eps_tree, beta), beta)
    assert lam == pytest.approx((2 * beta - 1) / ((beta - 1) * eps_tree))
    assert delta == pytest.approx(lam * math.log(beta))
    for theta in (0.0, 5.0):
        assert worst_path_loss(lam, delta, theta, rng=np.random.default_rng(beta)) <= eps_tree * (1 + 1e-9)


def test_the_released_parameters_satisfy_the_bound():
    df = pl.DataFrame({"x": np.linspace(0, 1, 500), "y": np.linspace(0, 1, 500) ** 2})
    for fanout, neighbours in ((4, "add_remove"), (2, "add_remove"), (4, "replace")):
        r = df.dp.privtree(["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=1.3, tree_share=0.4, fanout=fanout,
                           neighbours=neighbours, seed=1, levels=0)
        lam, delta, theta = r.params["lambda"], r.params["delta"], r.params["theta"]
        per_step = 0.4 * 1.3 / (2 if neighbours == "replace" else 1)  # replace = remove + add
        assert worst_path_loss(lam, delta, theta, rng=np.random.default_rng(0)) <= per_step * (1 + 1e-9)
        sensitivity = 2 if neighbours == "replace" else 1
        assert r.params["leaf_noise_scale"] == pytest.approx(sensitivity / (0.6 * 1.3))


def test_without_the_clamp_the_bound_breaks():
    lam = privtree_lambda(1.0, 4)
    delta = privtree_delta(lam, 4)
    sparse = [0.0] * 40  # an empty path far below theta
    assert path_log_ratio(sparse, lam, delta, 0.0, 1, clamp=True) <= 1.0
    assert path_log_ratio(sparse, lam, delta, 0.0, 1, clamp=False) > 5.0


# ---------------------------------------------------------------- the code's decision probabilities
def node_counts(starts, depths, fanout):
    """Total nodes of a tree from its leaves: internal = (leaves - 1) / (beta - 1)."""
    return starts.size + (starts.size - 1) // (fanout - 1)


@pytest.mark.parametrize("noise", ["exact", "float"])
def test_empty_data_split_probabilities_and_tree_size(noise):
    layout = MortonLayout(2, 31, 2)
    beta = layout.fanout
    lam = privtree_lambda(0.5, beta, noise=noise)
    delta = privtree_delta(lam, beta, noise=noise)
    rng = make_rng(2024)
    runs = 20000
    sizes = np.empty(runs)
    root_split = 0
    depth1_nodes = depth1_split = 0
    empty = np.zeros(0, dtype=np.int64)
    for i in range(runs):
        starts, depths, counts = grow_tree(empty, None, layout, lam=lam, delta=delta, theta=0.0, rng=rng,
                                           noise=noise)
        assert not counts.any()
        sizes[i] = node_counts(starts, depths, beta)
        if starts.size > 1:
            root_split += 1
            depth1_nodes += beta
            depth1_split += beta - int(np.sum(depths == 1))
    # root: P[Lap > 0] = 1/2; depth >= 1: P[-delta + Lap > 0] = exp(-ln beta) / 2 = 1/(2 beta)
    assert abs(root_split / runs - 0.5) <= Z * math.sqrt(0.25 / runs)
    p1 = 1 / (2 * beta)
    assert abs(depth1_split / depth1_nodes - p1) <= Z * math.sqrt(p1 * (1 - p1) / depth1_nodes)
    # E|T| = 1 + beta; Var|T| = 3 beta^2 - beta (Galton-Watson, subtree mean 2, variance 4 beta - 2)
    assert abs(sizes.mean() - (1 + beta)) <= Z * math.sqrt((3 * beta**2 - beta) / runs)


@pytest.mark.parametrize("noise", ["exact", "float"])
@pytest.mark.parametrize("count", [3, 12, 40])
def test_split_probability_of_a_populated_node_follows_the_biased_clamped_count(count, noise):
    layout = MortonLayout(2, 31, 2)
    beta, theta = layout.fanout, 2.0
    lam = privtree_lambda(1.0, beta, noise=noise)
    delta = privtree_delta(lam, beta, noise=noise)
    codes = np.zeros(count, dtype=np.int64)  # all points in the lowest corner cell
    rng = make_rng(99)
    runs = 4000
    root = child = 0
    for _ in range(runs):
        starts, depths, _ = grow_tree(codes, None, layout, lam=lam, delta=delta, theta=theta, rng=rng,
                                      noise=noise)
        if starts.size > 1:
            root += 1
            child += int(depths[0] > 1)  # the populated depth-1 child (first in code order) split
    for hits, trials, depth in ((root, runs, 0), (child, root, 1)):
        b = max(count - depth * delta, theta - delta) - theta
        p = 1 - 0.5 * math.exp(-b / lam) if b >= 0 else 0.5 * math.exp(b / lam)
        assert abs(hits / trials - p) <= Z * math.sqrt(p * (1 - p) / trials)


def noiseless_tree_size(x, y, theta, x0, x1, y0, y1):
    """|T*|: split a quadtree node iff its exact count exceeds theta (no noise, no bias)."""
    if x.size <= theta:
        return 1
    xm, ym = (x0 + x1) / 2, (y0 + y1) / 2
    size = 1
    for left in (True, False):
        for low in (True, False):
            m = ((x < xm) == left) & ((y < ym) == low)
            size += noiseless_tree_size(x[m], y[m], theta, *((x0, xm) if left else (xm, x1)),
                                        *((y0, ym) if low else (ym, y1)))
    return size


@pytest.mark.parametrize(("epsilon", "theta"), [(0.5, 50.0), (2.0, 200.0)])
def test_expected_tree_size_is_at_most_twice_the_noiseless_tree(epsilon, theta):
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.beta(0.5, 5, 3000), rng.uniform(0, 1, 500)])
    y = np.concatenate([rng.beta(5, 0.7, 3000), rng.uniform(0, 1, 500)])
    t_star = noiseless_tree_size(x, y, theta, 0, 1, 0, 1)
    assert t_star > 1
    df = pl.DataFrame({"x": x, "y": y})
    gen = make_rng(11)
    sizes = np.array([
        node_counts(r.codes, r.depth, 4)
        for r in (privtree(df, ["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=epsilon, theta=theta, seed=gen)
                  for _ in range(150))
    ])
    # one-sided: the sample mean may exceed the expectation by Z standard errors
    assert sizes.mean() - Z * sizes.std(ddof=1) / math.sqrt(sizes.size) <= 2 * t_star


def test_leaf_counts_get_laplace_noise_of_scale_one_over_eps_leaf():
    rng = np.random.default_rng(3)
    x, y = rng.beta(2, 5, 30_000), rng.uniform(0, 1, 30_000)
    r = pl.DataFrame({"x": x, "y": y}).dp.privtree(["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=1.0, seed=4)
    lo, hi = r.lo, r.hi
    pts = np.column_stack([x, y])
    exact = np.zeros(r.n_leaves)
    for start in range(0, pts.shape[0], 2000):  # brute-force containment (half-open leaves)
        p = pts[start:start + 2000, None, :]
        exact += np.all((p >= lo) & (p < hi), axis=2).sum(axis=0)
    assert exact.sum() == pts.shape[0]
    assert r.n_leaves > 1000
    resid = r.count - exact
    scale = 1 / 0.5  # Lap(1 / eps_leaf), eps_leaf = 0.5; E|X| = scale, sd |X| = scale
    assert abs(np.abs(resid).mean() - scale) <= Z * scale / math.sqrt(r.n_leaves)
    assert abs(resid.mean()) <= Z * math.sqrt(2) * scale / math.sqrt(r.n_leaves)


# ---------------------------------------------------------------- frames and bad input
def test_lazyframe_and_dataframe_give_the_same_release():
    rng = np.random.default_rng(0)
    df = pl.DataFrame({"x": rng.uniform(0, 10, 5000), "y": rng.normal(0, 1, 5000).clip(-5, 5), "z": 1})
    a = df.dp.privtree(["x", "y"], bounds=[(0, 10), (-5, 5)], epsilon=1.0, seed=8)
    b = df.lazy().dp.privtree(["x", "y"], bounds={"x": (0, 10), "y": (-5, 5)}, epsilon=1.0, seed=8)
    assert a.leaves.equals(b.leaves)
    assert a.n_leaves > 4


@pytest.mark.parametrize(("kwargs", "error"), [
    ({"bounds": [(0, 1), (1, 1)]}, ParameterError),
    ({"bounds": [(0, 1), (2, 1)]}, ParameterError),
    ({"bounds": [(0, 1)]}, ParameterError),
    ({"fanout": 3}, ParameterError),
    ({"fanout": 8}, ParameterError),
    ({"fanout": 1}, ParameterError),
    ({"epsilon": 0}, ParameterError),
    ({"epsilon": -1.0}, ParameterError),
    ({"epsilon": float("nan")}, ParameterError),
    ({"epsilon": "one"}, ParameterError),
    ({"tree_share": 0.0}, ParameterError),
    ({"tree_share": 1.0}, ParameterError),
    ({"theta": float("inf")}, ParameterError),
    ({"neighbours": "bounded"}, ParameterError),
    ({"columns": ["x", "w"]}, ColumnNotFoundError),
    ({"columns": ["x", "s"]}, ParameterError),
])
def test_bad_parameters_raise(kwargs, error):
    df = pl.DataFrame({"x": [0.1, 0.5], "y": [0.2, 0.9], "s": ["a", "b"]})
    args = {"columns": ["x", "y"], "bounds": [(0, 1), (0, 1)], "epsilon": 1.0, **kwargs}
    with pytest.raises(error):
        df.dp.privtree(args.pop("columns"), **args)


@pytest.mark.parametrize("values", [[0.1, 1.5], [-0.1, 0.5], [0.1, float("nan")], [0.1, None]])
def test_points_outside_the_box_nan_and_null_raise_domain_error(values):
    df = pl.DataFrame({"x": values, "y": [0.5, 0.5]})
    with pytest.raises(DomainError, match="'x'"):
        df.dp.privtree(["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=1.0)


def test_opt_ins_clamp_and_drop():
    df = pl.DataFrame({"x": [0.1, 1.5, None, float("nan")], "y": [0.5, 0.5, 0.2, 0.3]})
    with pytest.raises(DomainError):
        df.dp.privtree(["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=1.0, nulls="drop")
    r = df.dp.privtree(["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=1e6, nulls="drop",
                       on_out_of_domain="clamp", seed=0)
    assert r.range_count() == pytest.approx(2.0, abs=1e-3)
    assert r.range_count(x=(0.99, 1.0)) == pytest.approx(1.0, abs=0.05)  # 1.5 was clamped onto x = 1


def reference_grow_tree(codes, layout, *, lam, delta, theta, rng):
    """The level loop by its definition: every node counted with two searchsorted calls."""
    prefixes = np.zeros(1, dtype=np.int64)
    children = np.arange(layout.fanout, dtype=np.int64)
    starts, depths, counts = [], [], []
    for depth in range(layout.max_depth + 1):
        shift = layout.shift(depth)
        first = prefixes << shift
        c = (np.searchsorted(codes, first + (np.int64(1) << shift)) - np.searchsorted(codes, first))
        split = (np.zeros(prefixes.size, dtype=bool) if depth == layout.max_depth
                 else privtree_split(c, depth, lam=lam, delta=delta, theta=theta, rng=rng))
        starts.append(first[~split])
        depths.append(np.full(int((~split).sum()), depth))
        counts.append(c[~split])
        if not split.any():
            break
        prefixes = ((prefixes[split] << layout.split_bits)[:, None] | children).ravel()
    start = np.concatenate(starts)
    order = np.argsort(start, kind="stable")
    return start[order], np.concatenate(depths)[order], np.concatenate(counts)[order]


@pytest.mark.parametrize(("d", "fanout"), [(2, 4), (2, 2), (3, 8), (1, 2)])
@pytest.mark.parametrize("scan", [0, 16, 10**9])  # binary search only, mixed, scans only
def test_grow_tree_matches_reference_and_accepts_cell_counts(d, fanout, scan, monkeypatch):
    monkeypatch.setattr(privtree_module, "SCAN_PER_BOUNDARY", scan)
    layout = MortonLayout(d, resolution_bits(d), check_fanout(fanout, d))
    box = as_box([f"c{j}" for j in range(d)], [(0.0, 1.0)] * d)
    rng = np.random.default_rng(d)
    pts = [np.clip(np.r_[rng.normal(0.3, 0.01, 3000), rng.uniform(0, 1, 2000)], 0, 1) for _ in range(d)]
    coarse = layout.bits - 12  # many points share a finest cell: duplicates and weights
    codes = np.sort(morton_codes([g >> coarse << coarse for g in grid_coordinates(pts, box, layout.bits)],
                                 layout.bits))
    lam = privtree_lambda(0.5, layout.fanout, noise="exact")
    kw = dict(lam=lam, delta=privtree_delta(lam, layout.fanout, noise="exact"), theta=0.0)
    ref = reference_grow_tree(codes, layout, rng=make_rng(5), **kw)
    raw = grow_tree(codes, None, layout, rng=make_rng(5), **kw)
    cells, weights = np.unique(codes, return_counts=True)
    weighted = grow_tree(cells, weights, layout, rng=make_rng(5), **kw)
    assert ref[0].size > 20
    for got in (raw, weighted):
        for a, b in zip(got, ref, strict=True):
            np.testing.assert_array_equal(a, b)
    assert raw[2].sum() == codes.size
