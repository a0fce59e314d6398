import numpy as np
import pytest

from polars_dp.domains.box import as_box
from polars_dp.errors import ParameterError
from polars_dp.kernels.morton import (
    MortonLayout,
    check_fanout,
    deinterleave,
    grid_coordinates,
    morton_codes,
    resolution_bits,
)


def naive_morton(coords, bits):
    d = len(coords)
    out = []
    for point in zip(*coords, strict=True):
        code = 0
        for p in range(d * bits):  # position 0 = most significant
            dim, bit = p % d, bits - 1 - p // d
            code = (code << 1) | ((int(point[dim]) >> bit) & 1)
        out.append(code)
    return np.array(out, dtype=np.int64)


@pytest.mark.parametrize("d", [1, 2, 3, 4, 5, 8])
def test_morton_codes_match_bitwise_definition_and_invert(d):
    bits = resolution_bits(d)
    assert d * bits <= 62
    rng = np.random.default_rng(d)
    coords = [rng.integers(0, 2**bits, 200) for _ in range(d)]
    coords[0][:2] = [0, 2**bits - 1]
    codes = morton_codes(coords, bits)
    np.testing.assert_array_equal(codes, naive_morton(coords, bits))
    for a, b in zip(deinterleave(codes, d, bits), coords, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(("d", "fanout"), [(2, 4), (2, 2), (3, 4), (4, 16), (4, 2), (3, 8)])
def test_every_node_is_a_contiguous_code_range_matching_its_box(d, fanout):
    box = as_box([f"c{j}" for j in range(d)], [(-1.0, 3.0)] * d)
    layout = MortonLayout(d, resolution_bits(d), check_fanout(fanout, d))
    rng = np.random.default_rng(7)
    pts = [rng.uniform(-1, 3, 3000) for _ in range(d)]
    codes = morton_codes(grid_coordinates(pts, box, layout.bits), layout.bits)
    for depth in (1, 2, 5):
        shift = layout.shift(depth)
        prefixes = rng.integers(0, 2 ** (depth * layout.split_bits), 6)
        # take prefixes of real points too, so nodes are not all empty
        prefixes = np.concatenate([prefixes, codes[:6] >> shift])
        lo, hi = layout.node_boxes(prefixes << shift, np.full(prefixes.size, depth), box)
        for p, nlo, nhi in zip(prefixes, lo, hi, strict=True):
            in_range = (codes >> shift) == p
            x = np.column_stack(pts)
            in_box = np.all((x >= nlo) & (x < nhi), axis=1)
            np.testing.assert_array_equal(in_range, in_box)
            halvings = layout.halvings(np.array([depth]))[0]
            np.testing.assert_allclose(nhi - nlo, 4.0 / 2.0**halvings)
        # round-robin: the dimensions split so far
        split = [layout.split_dims(L) for L in range(depth)]
        counts = np.bincount(np.concatenate(split).astype(int), minlength=d)
        np.testing.assert_array_equal(layout.halvings(np.array([depth]))[0], counts)


def test_fanout_and_bounds_validation():
    assert check_fanout(None, 3) == 3
    assert check_fanout(4, 3) == 2
    for bad in (3, 1, 0, 6, 16, 2.0, True):
        with pytest.raises(ParameterError):
            check_fanout(bad, 3)
    for bounds in ([(1, 1)], [(2, 1)], [(0, np.inf)], [(0, np.nan)], [("a", 1)], [(0, 1), (0, 1)]):
        with pytest.raises(ParameterError):
            as_box(["x"], bounds)
    with pytest.raises(ParameterError):
        as_box(["x", "x"], [(0, 1), (0, 1)])
    with pytest.raises(ParameterError):
        as_box([f"c{j}" for j in range(9)], [(0, 1)] * 9)
    assert as_box("x", (0, 1)).d == 1
    assert as_box(["y", "x"], {"x": (0, 1), "y": (2, 3)}).lo.tolist() == [2, 0]


@pytest.mark.parametrize("d", [2, 3])
def test_morton_codes_block_by_block_and_any_integer_dtype(d, monkeypatch):
    """Blocks that do not divide the points, int32 and uint32 coordinates: the same codes."""
    from polars_dp.kernels import morton

    bits = resolution_bits(d)
    rng = np.random.default_rng(20 + d)
    coords = [rng.integers(0, 2**bits, 101) for _ in range(d)]
    expected = naive_morton(coords, bits)
    monkeypatch.setattr(morton, "MORTON_BLOCK", 7)
    np.testing.assert_array_equal(morton_codes(coords, bits), expected)
    small = [c.astype(np.uint32 if k else np.int32) for k, c in enumerate(coords)] if bits <= 31 else coords
    np.testing.assert_array_equal(morton_codes(small, bits), expected)
    with pytest.raises(ParameterError, match="integer"):
        morton_codes([c.astype(float) for c in coords], bits)


def _grid_by_cells(counts: np.ndarray, lo: np.ndarray, hi: np.ndarray, q_lo: np.ndarray, q_hi: np.ndarray
                   ) -> float:
    """A box's count over one grid, cell by cell: each cell's count times the fraction of the
    cell inside the box (the uniformity assumption, written out)."""
    m, d = counts.shape[0], counts.ndim
    edges = [np.linspace(lo[j], hi[j], m + 1) for j in range(d)]
    total = 0.0
    for cell in np.ndindex(*counts.shape):
        frac = 1.0
        for j, c in enumerate(cell):
            a, b = edges[j][c], edges[j][c + 1]
            frac *= max(0.0, min(b, q_hi[j]) - max(a, q_lo[j])) / (b - a)
        total += counts[cell] * frac
    return total


@pytest.mark.parametrize("d", [1, 2, 3, 4])
def test_grid_sums_equal_the_cells_one_by_one_across_chunks(d, monkeypatch):
    """``grid_sums`` (interpolated prefix sums, ``4^d`` terms multiplied out from two halves of
    the dimensions) against the cell-by-cell sum, for pairs on grids of several sizes; a chunk of
    3 pairs gives the same answers as one chunk."""
    from polars_dp.kernels import spatial_sums

    rng = np.random.default_rng(d)
    grids, prefix, offsets = [], [], [0]
    for m in rng.integers(1, 4, 6):
        counts = rng.integers(-3, 20, (int(m),) * d).astype(np.float64)
        pre = np.zeros((int(m) + 1,) * d)
        pre[(slice(1, None),) * d] = counts
        for j in range(d):
            pre = np.cumsum(pre, axis=j)
        grids.append(counts)
        prefix.append(pre.ravel())
        offsets.append(offsets[-1] + pre.size)
    prefix_all = np.concatenate(prefix)
    pairs = 20
    g = rng.integers(0, len(grids), pairs)
    lo = rng.uniform(-1, 0, (pairs, d))
    hi = lo + rng.uniform(0.5, 2, (pairs, d))
    q_lo = rng.uniform(-1.5, 1, (pairs, d))
    q_hi = q_lo + rng.uniform(0, 1.5, (pairs, d))
    m = np.array([grids[k].shape[0] for k in g])
    args = (prefix_all, np.array(offsets)[g], m, lo, hi, q_lo, q_hi)
    got = spatial_sums.grid_sums(*args)
    want = [_grid_by_cells(grids[k], lo[i], hi[i], q_lo[i], q_hi[i]) for i, k in enumerate(g)]
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
    monkeypatch.setattr(spatial_sums, "GRID_SUMS_TERMS", 3 * 4 ** -(-d // 2))  # 3 pairs at a time
    np.testing.assert_array_equal(spatial_sums.grid_sums(*args), got)
