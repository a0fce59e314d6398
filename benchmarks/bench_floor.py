"""Mechanisms against the plain-numpy floor, measured in the same process, interleaved.

The floor of a grid mechanism is what any implementation must do at least: the cell index
computed from the columns as numpy arrays (integer codes: nominal leaves are looked up in a
table), ``np.bincount(minlength=cells)``, the same noise sampler on every coefficient and,
for Privelet, the same inverse kernel (:func:`polars_dp.kernels.wavelet_blocks.hn_inverse` on the
whole noise array).  Ratios are medians of mechanism / floor over interleaved repeats.

Cases (``--cases``):
  census   Age 101 x Gender 2 x Occupation 512 (8 x 64) x Income 1001 = 1.04e8 cells, 1e7 rows
  1d       one ordinal axis of 2^20 cells, 1e7 rows
  nominal  Age 100 x Region 20 x Education 16 x Marital 9 x Hours 100 (three small nominal
           hierarchies), 2.9e7 cells, 1e7 rows
  privtree PrivTree on 1e7 clustered 2-D points vs the uniform grid (UG) on the same points
  memory   peak memory of each mechanism on the census shape (fresh process each) / the size of
           the dense count array (float64)
  read     ``pdp.read_release`` of a 4.55M-cell Privelet+ release (census shape with income in
           bins of 23) from Parquet, in a fresh process: cold and warm seconds, minor page
           faults, and the peak memory growth against the release's array size (target
           <= 0.5 s and <= 1.5x)
  rows     in-memory counting: Basic from a two-column DataFrame (age 0..99 x hours 0..99,
           1e4 cells, int64 columns) at 1e6, 1e7, 3e7 and 1e8 rows against its numpy floor
           (``a * 100 + b``, ``np.bincount``, the same exact sampler).  Warm: one process holds
           every size's frame (the same generator), each repetition times one interleaved pair
           per size, the sizes in a rotating order (medians of ``--repeats``); cold: each call
           the first of a fresh process (which builds the frame first), the two kinds of
           process interleaved, one at a time.  Targets at 1e8
           rows: warm <= 1.2x, cold <= 1.5x, minor page faults <= 2x the floor's; CPU ns/row
           within +-20 % of their median over the sizes (wall ns/row printed beside it)
  fixed    the fixed cost of a release: CPU of a 1,000-row Basic release (the rows case's
           columns, 1e4 cells), seeded and unseeded, warm (back to back) and cold (each after a
           32 MB pass that evicts the caches, as a release finds them after counting a large
           input); medians of ``max(200, 40 x --repeats)`` calls in one process

With ``--noise exact`` each Privelet release is also set against its model floor
(:func:`model_floor`: every draw at the sampler's one-core rate, plus six passes over the cube
at the copy bandwidth), measured right after that release, so that both see the same machine:
the ratio printed is the median over ``--repeats`` such pairs.

The wavelet and prefix stages are also timed alone (noise + inverse on zeros; the first
prefix-sum build; one streamed batch of range counts), since the count stage is being
improved separately.  ``--noise exact`` passes ``noise="exact"`` to the mechanisms when they
accept it (else the float sampler is used and the table says so) and uses the exact discrete
Laplace sampler in the floor when :mod:`polars_dp.noise` has one.

The machine is shared: every ratio is the median over ``--repeats`` (at least 5) interleaved
pairs, each pair timed back to back with the order alternating, of the wall-clock ratio and,
beside it, the CPU-time ratio (``time.process_time``: every thread of the process); the load
average is printed before every case.  ``--contended`` starts one CPU-bound process of its own
(a busy loop) for the whole run and stops it at the end, so the targets are checked on a
machine where another user computes.  Treat absolute times as +-30 %, ratios as the result.

    python -m benchmarks.bench_floor [--quick] [--cases census,1d,...] [--noise float|exact]
                                     [--repeats 5] [--contended] [--row-sizes 1e6,1e7,3e7,1e8]
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from fractions import Fraction

import numpy as np

from benchmarks.memory import hwm_bytes

TARGETS = {"basic": 1.3, "privelet+": 1.8, "privelet": 3.0}
TARGET_PRIVTREE = 2.0
TARGET_PRIVTREE_1E6_S = 0.3
TARGET_MEMORY = 2.5
TARGET_READ_S = 0.5
TARGET_READ_MEMORY = 1.5
TARGET_ROWS_WARM = 1.2
TARGET_ROWS_COLD = 1.5
TARGET_ROWS_FAULTS = 2.0
TARGET_ROWS_LINEAR = 0.2
MIN_PAIRS = 5
ROW_SIZES = (1_000_000, 10_000_000, 30_000_000, 100_000_000)
QUICK_ROW_SIZES = (100_000, 1_000_000, 3_000_000)
TARGET_FIXED_MS = 0.5
CASES = ("census", "1d", "nominal", "privtree", "memory", "read", "rows", "fixed")


# ---------------------------------------------------------------------------- clocks
def load() -> str:
    """The 1-, 5- and 15-minute load averages and the number of cores."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg()) + f" on {os.cpu_count()} cores"


def timed(fn, *args, **kwargs) -> dict:
    """Wall seconds, CPU seconds (every thread of this process) and minor page faults of one call."""
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    c0, t0 = time.process_time(), time.perf_counter()
    result = fn(*args, **kwargs)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    del result
    return {"wall": wall, "cpu": cpu, "minflt": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0}


def interleaved(first, second, repeats: int) -> list[tuple[dict, dict]]:
    """``repeats`` interleaved pairs of calls, the order alternating (first-second, second-first)."""
    out = []
    for i in range(repeats):
        if i % 2:
            b = timed(second)
            a = timed(first)
        else:
            a = timed(first)
            b = timed(second)
        out.append((a, b))
    return out


def pair_ratios(runs: list[tuple[dict, dict]]) -> dict:
    """Medians of the pairs' wall and CPU ratios, their spread, and each side's medians."""
    wall = [a["wall"] / b["wall"] for a, b in runs]
    cpu = [a["cpu"] / b["cpu"] for a, b in runs if b["cpu"] > 0]
    return {"ratio": statistics.median(wall), "cpu_ratio": statistics.median(cpu) if cpu else float("nan"),
            "ratio_range": [min(wall), max(wall)], "pairs": len(runs),
            "seconds": statistics.median(a["wall"] for a, _ in runs),
            "floor": statistics.median(b["wall"] for _, b in runs),
            "cpu_seconds": statistics.median(a["cpu"] for a, _ in runs),
            "floor_cpu": statistics.median(b["cpu"] for _, b in runs),
            "minflt": statistics.median(a["minflt"] for a, _ in runs),
            "floor_minflt": statistics.median(b["minflt"] for _, b in runs)}


class Contention:
    """One CPU-bound process of the benchmark's own (a busy loop) while the block runs."""

    def __init__(self, active: bool):
        self.active = active
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> Contention:
        if self.active:
            self.proc = subprocess.Popen([sys.executable, "-c", "while True:\n    pass"])
            time.sleep(1.0)  # let it reach the run queue
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait()

    def describe(self) -> str:
        return (f"contended: one CPU-bound busy loop of this benchmark (pid {self.proc.pid}) runs throughout"
                if self.proc is not None else "not contended by this benchmark (other users may be)")


# ---------------------------------------------------------------------------- data
def case_attributes(case: str, quick: bool) -> tuple[list, list[str]]:
    """Attributes of a case and the Privelet+ untransformed columns."""
    import polars_dp as pdp
    if case == "census":
        groups, per = (8, 8) if quick else (8, 64)
        occ = pdp.Hierarchy.from_dict({f"g{g}": list(range(g * per, (g + 1) * per)) for g in range(groups)})
        return ([pdp.Ordinal("age", 0, 100), pdp.Nominal("gender", categories=[0, 1]),
                 pdp.Nominal("occupation", occ), pdp.Ordinal("income", 0, 1000)], ["age", "gender"])
    if case == "1d":
        return [pdp.Ordinal("x", 0, (1 << (16 if quick else 20)) - 1)], []

    def nested(groups: int, per: int, base: int):
        return pdp.Hierarchy.from_dict({f"h{base}_{g}": [base + g * per + j for j in range(per)]
                                        for g in range(groups)})
    return ([pdp.Ordinal("age", 0, 99), pdp.Nominal("region", nested(4, 5, 0)),
             pdp.Nominal("education", nested(4, 4, 0)), pdp.Nominal("marital", nested(3, 3, 0)),
             pdp.Ordinal("hours", 0, 49 if quick else 99)], ["age"])


def case_rows(case: str, attrs: list, n: int, seed: int = 2010):
    """Synthetic rows (integer columns; nominal leaves are integers)."""
    import polars as pl
    rng = np.random.default_rng(seed)
    cols = {}
    for a in attrs:
        m = a.n_cells
        if hasattr(a, "hierarchy"):
            leaves = np.asarray(a.hierarchy.leaves)
            cols[a.column] = leaves[np.minimum(rng.zipf(1.3, n) - 1, m - 1)]
        elif m > 100_000:
            cols[a.column] = np.minimum(rng.lognormal(np.log(m) - 3, 1.5, n), m - 1).astype(np.int64)
        else:
            cols[a.column] = np.clip(rng.normal(m / 3, m / 5, n), 0, m - 1).astype(np.int64)
    return pl.DataFrame(cols)


# ---------------------------------------------------------------------------- noise
def accepts_noise(fn) -> bool:
    return "noise" in inspect.signature(fn).parameters


def exact_sampler():
    """``(source, sample(src, scale: Fraction, size) -> int64)`` of the exact sampler, or None."""
    import polars_dp.noise as nz
    if not all(hasattr(nz, f) for f in ("noise_source", "discrete_laplace")):
        return None
    return nz.noise_source(1), lambda src, scale, size: nz.discrete_laplace(
        src, scale.numerator, scale.denominator, size)


# ---------------------------------------------------------------------------- floors
def cell_index(columns: list[np.ndarray], attrs: list) -> np.ndarray:
    """Flat C-order cell of every row, from integer numpy columns (nominal: a lookup table)."""
    idx = np.zeros(columns[0].size, dtype=np.int64)
    for x, a in zip(columns, attrs, strict=True):
        idx *= a.n_cells
        if hasattr(a, "hierarchy"):
            labels = np.asarray(a.cell_labels())
            table = np.empty(int(labels.max()) + 1, dtype=np.int64)
            table[labels] = np.arange(labels.size)
            idx += table[x]
        else:
            idx += x - int(a.lo)
    return idx


def floor_basic(columns, attrs, scale: float, noise: str):
    shape = tuple(a.n_cells for a in attrs)
    counts = np.bincount(cell_index(columns, attrs), minlength=int(np.prod(shape)))
    exact = exact_sampler() if noise == "exact" else None
    if exact:
        src, sample = exact
        return counts + sample(src, Fraction(scale).limit_denominator(1 << 20), counts.size)
    return counts + np.random.default_rng(1).laplace(0.0, scale, counts.size)


def floor_privelet(columns, attrs, transformed, scale: float, noise: str):
    from polars_dp.kernels import wavelet_blocks as WB
    from polars_dp.kernels import wavelet_exact as WE
    from polars_dp.kernels import wavelets as W
    shape = tuple(a.n_cells for a in attrs)
    counts = np.bincount(cell_index(columns, attrs), minlength=int(np.prod(shape))).reshape(shape)
    exact = exact_sampler() if noise == "exact" else None
    if exact:  # exact lattice coefficients + DLap(D t), then the float inverse
        src, sample = exact
        num = WE.hn_forward_int(counts, attrs, transformed)
        den = np.ones((), dtype=np.int64)
        for p in WE.hn_denominators(attrs, transformed):
            den = np.multiply.outer(den, p)
        den = np.broadcast_to(den, num.shape)
        t = Fraction(scale).limit_denominator(1 << 20)
        noisy = num.astype(np.float64)
        for d in np.unique(den):
            where = den == d
            noisy[where] = (num[where] + sample(src, t * int(d), int(where.sum()))) / int(d)
        return WB.hn_inverse(noisy, attrs, transformed)
    coef = tuple(W.coefficient_count(a) if t else a.n_cells for a, t in zip(attrs, transformed, strict=True))
    field = WB.hn_inverse(np.random.default_rng(1).laplace(0.0, scale, coef), attrs, transformed)
    field += counts
    return field


# ---------------------------------------------------------------------------- model floor
#: Memory traffic of a wavelet release per cell (bytes): counts in, coefficients through the
#: noise, the outer-axes buffer and the release out, about six read+write passes of float64.
TRAFFIC_PER_CELL = 96


def lattice_draws(attrs, transformed) -> dict[int, int]:
    """Coefficients per lattice factor ``D``: the exact release draws ``DLap(D lambda')`` for
    each coefficient whose numerator has denominator ``D`` (the per-axis factors multiplied)."""
    from polars_dp.kernels.wavelet_exact import hn_denominators
    counts = {1: 1}
    for d in hn_denominators(attrs, transformed):
        values, sizes = np.unique(d, return_counts=True)
        nxt: dict[int, int] = {}
        for factor, n in counts.items():
            for v, k in zip(values.tolist(), sizes.tolist(), strict=True):
                nxt[factor * v] = nxt.get(factor * v, 0) + n * k
        counts = nxt
    return counts


def _draw_rate(sample, src, scale: Fraction, n: int = 1 << 22) -> float:
    """Seconds per draw at ``scale``: the best of three runs of ``n`` draws."""
    sample(src, scale, 1000)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        sample(src, scale, n)
        best = min(best, time.perf_counter() - t0)
    return best / n


def model_floor(attrs, transformed, scale: float) -> dict:
    """Issue 26's floor of an exact wavelet release: every coefficient drawn at the sampler's
    measured rate at the scale it is drawn at (``D lambda'`` per lattice factor ``D``,
    :func:`lattice_draws`), plus :data:`TRAFFIC_PER_CELL` bytes per cell at the measured copy
    bandwidth (a pre-touched 256 MB buffer).  ``seconds_at_base`` prices every draw at the
    base scale ``lambda'`` instead (the definition used before the split sampler, whose cost
    grows with the scale)."""
    from polars_dp.kernels import wavelets as W
    coef = int(np.prod([W.coefficient_count(a) if t else a.n_cells for a, t in zip(attrs, transformed,
                                                                                    strict=True)]))
    cells = int(np.prod([a.n_cells for a in attrs]))
    draws = lattice_draws(attrs, transformed)
    assert sum(draws.values()) == coef
    exact = exact_sampler()
    t = Fraction(scale).limit_denominator(1 << 20)
    if exact:
        src, sample = exact
        at_base = _draw_rate(sample, src, t)
        rates = {factor: _draw_rate(sample, src, t * factor) for factor in draws}
        per_draw = sum(draws[f] * rates[f] for f in draws) / coef
    else:
        at_base = per_draw = float("nan")
    a, b = np.ones(1 << 25), np.ones(1 << 25)
    t0 = time.perf_counter()
    for _ in range(3):
        np.copyto(b, a)
    bandwidth = 3 * 2 * a.nbytes / (time.perf_counter() - t0)  # read + write
    traffic = TRAFFIC_PER_CELL * cells / bandwidth
    return {"seconds": coef * per_draw + traffic, "ns_per_draw": per_draw * 1e9,
            "seconds_at_base": coef * at_base + traffic, "ns_per_draw_at_base": at_base * 1e9,
            "gb_per_s": bandwidth / 1e9, "coefficients": coef,
            "draws_by_factor": {str(f): n for f, n in sorted(draws.items())}}


# ---------------------------------------------------------------------------- grid cases
def grid_case(case: str, quick: bool, rows: int, repeats: int, noise: str) -> dict:
    import polars_dp as pdp
    from polars_dp.kernels import wavelet_blocks as WB
    from polars_dp.kernels import wavelets as W
    from polars_dp.kernels.prefix import prefix_sums, streamed_box_sums
    privelet_module = importlib.import_module("polars_dp.mechanisms.wavelet")

    attrs, plus_untransformed = case_attributes(case, quick)
    frame = case_rows(case, attrs, rows)
    columns = [frame[a.column].to_numpy() for a in attrs]
    cells = int(np.prod([a.n_cells for a in attrs]))
    out = {"case": case, "cells": cells, "rows": rows, "noise": noise, "mechanisms": {}, "stages": {},
           "load": load()}
    variants = [("basic", None), ("privelet", [])]
    if plus_untransformed:
        variants.insert(1, ("privelet+", plus_untransformed))
    for name, untransformed in variants:
        fn = pdp.basic if name == "basic" else pdp.privelet
        kwargs = {"epsilon": 1.0, "seed": 1}
        if untransformed is not None:
            kwargs["untransformed"] = untransformed
        used = noise if noise == "float" or accepts_noise(fn) else "float (noise= not accepted)"
        if noise == "exact" and accepts_noise(fn):
            kwargs["noise"] = "exact"
        transformed = [a.column not in (untransformed or []) for a in attrs]
        if name == "basic":
            scale = 2.0
        else:
            scale = privelet_module.privelet_scale(privelet_module.privelet_rho(attrs, transformed), 1.0,
                                                   "replace")
        def release(fn=fn, kwargs=kwargs):
            return fn(frame, attrs, **kwargs)

        def floor(name=name, scale=scale, transformed=transformed):
            if name == "basic":
                return floor_basic(columns, attrs, scale, noise)
            return floor_privelet(columns, attrs, transformed, scale, noise)
        out["mechanisms"][name] = {**pair_ratios(interleaved(release, floor, repeats)), "noise_used": used}
        if noise == "exact" and accepts_noise(fn):  # the same release with float noise, interleaved
            ratios = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                release = fn(frame, attrs, **{**kwargs, "noise": "exact"})
                t_exact = time.perf_counter() - t0
                del release
                t0 = time.perf_counter()
                release = fn(frame, attrs, **{**kwargs, "noise": "float"})
                ratios.append(t_exact / (time.perf_counter() - t0))
                del release
            out["mechanisms"][name]["exact_over_float"] = [min(ratios), max(ratios)]
        if noise == "exact" and name != "basic":  # each release beside its own model floor
            pairs = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                release = fn(frame, attrs, **kwargs)
                seconds = time.perf_counter() - t0
                del release
                pairs.append((seconds, model_floor(attrs, transformed, scale)))
            pairs.sort(key=lambda p: p[0] / p[1]["seconds"])
            seconds, floor = pairs[len(pairs) // 2]
            out["mechanisms"][name]["model_floor"] = {
                **floor, "release_seconds": seconds,
                "ratios": [round(t / f["seconds"], 3) for t, f in pairs]}
        if name != "basic":  # the wavelet stage alone: noise + blocked inverse into zeros
            zeros = np.zeros(tuple(a.n_cells for a in attrs))
            t0 = time.perf_counter()
            privelet_module.add_wavelet_noise(zeros, attrs, transformed, scale, np.random.default_rng(1))
            stage = time.perf_counter() - t0
            coef = tuple(W.coefficient_count(a) if t else a.n_cells
                         for a, t in zip(attrs, transformed, strict=True))
            t0 = time.perf_counter()
            eta = np.random.default_rng(1).laplace(0.0, scale, coef)
            draw = time.perf_counter() - t0
            t0 = time.perf_counter()
            WB.hn_inverse(eta, attrs, transformed)
            inverse = time.perf_counter() - t0
            del eta
            out["stages"][f"{name}: noise + blocked inverse"] = stage
            out["stages"][f"{name}: noise draw alone"] = draw
            out["stages"][f"{name}: hn_inverse alone"] = inverse
            zeros[...] = np.random.default_rng(2).laplace(size=zeros.shape)
            t0 = time.perf_counter()
            prefix_sums(zeros)
            out["stages"]["prefix sums (whole array, cached by GridRelease)"] = time.perf_counter() - t0
            starts = np.zeros((1000, len(attrs)), dtype=np.int64)
            stops = np.tile([a.n_cells for a in attrs], (1000, 1))
            t0 = time.perf_counter()
            streamed_box_sums(zeros, starts, stops)
            out["stages"]["1,000 range counts, prefix streamed (memory tight)"] = time.perf_counter() - t0
            del zeros
    return out


# ---------------------------------------------------------------------------- privtree
def privtree_case(quick: bool, repeats: int) -> dict:
    import polars_dp  # noqa: F401
    from benchmarks.bench_privtree import skewed_frame
    out = {"case": "privtree", "sizes": []}
    for n in ((100_000, 1_000_000) if quick else (1_000_000, 10_000_000)):
        frame = skewed_frame(n, 2)
        cols, bounds = list(frame.columns), [(0.0, 1.0)] * 2
        def privtree(frame=frame, cols=cols, bounds=bounds):
            return frame.dp.privtree(cols, bounds=bounds, epsilon=1.0, seed=1)

        def uniform_grid(frame=frame, cols=cols, bounds=bounds):
            return frame.dp.uniform_grid(cols, bounds=bounds, epsilon=1.0, seed=1)
        runs = interleaved(privtree, uniform_grid, repeats)
        r = pair_ratios(runs)
        out["sizes"].append({"points": n, "ug": r["floor"], "privtree": r["seconds"], "ratio": r["ratio"],
                             "cpu_ratio": r["cpu_ratio"], "pairs": r["pairs"]})
    out["load"] = load()
    return out


# ---------------------------------------------------------------------------- memory
def _rss_bytes() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def memory_child(quick: bool, rows: int, mechanism: str, noise: str) -> dict:
    import polars_dp as pdp
    attrs, plus = case_attributes("census", quick)
    frame = case_rows("census", attrs, rows)
    pdp.basic(frame.head(1000), attrs, epsilon=1.0, seed=1)  # warm-up (imports, caches)
    kwargs = {"epsilon": 1.0, "seed": 1}
    fn = pdp.basic if mechanism == "basic" else pdp.privelet
    if mechanism == "privelet+":
        kwargs["untransformed"] = plus
    if noise == "exact" and accepts_noise(fn):
        kwargs["noise"] = "exact"
    base = _rss_bytes()
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        reset = True
    except OSError:
        reset = False
    release = fn(frame, attrs, **kwargs)
    peak = hwm_bytes()
    return {"mechanism": mechanism, "extra_bytes": peak - base, "count_bytes": release.counts.nbytes,
            "reset": reset}


def memory_case(quick: bool, rows: int, noise: str) -> dict:
    out = {"case": "memory", "runs": []}
    for mech in ("basic", "privelet+", "privelet"):
        out["runs"].append(_child(["--memory-child", mech, "--rows", str(rows), "--noise", noise]
                                  + (["--quick"] if quick else [])))
    return out


# ---------------------------------------------------------------------------- read
def read_attributes():
    import polars_dp as pdp
    occ = pdp.Hierarchy.from_dict({f"g{g}": list(range(g * 64, (g + 1) * 64)) for g in range(8)})
    return [pdp.Ordinal("age", 0, 100), pdp.Nominal("gender", categories=["female", "male"]),
            pdp.Nominal("occupation", occ), pdp.Ordinal("income", 0, 1000, width=23)]


def read_file():
    from pathlib import Path
    return Path(__file__).parent / "out" / "read_4p5m.parquet"


def read_child() -> dict:
    import resource

    import polars_dp as pdp
    path = read_file()
    base = _rss_bytes()
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass
    runs = []
    for _ in range(3):  # the first is cold (fresh process: imports done, pages never touched)
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        t = time.perf_counter()
        release = pdp.read_release(path)
        runs.append({"seconds": time.perf_counter() - t,
                     "minflt": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0})
        if not runs[1:]:
            peak = hwm_bytes()
        del release
    return {"case": "read", "runs": runs, "extra_bytes": peak - base,
            "array_bytes": 8 * int(np.prod([a.n_cells for a in read_attributes()]))}


def read_case() -> dict:
    import polars_dp as pdp
    path = read_file()
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        attrs = read_attributes()
        rng = np.random.default_rng(5)
        import polars as pl
        n = 1_000_000
        frame = pl.DataFrame({"age": rng.integers(0, 101, n), "gender": rng.choice(["female", "male"], n),
                              "occupation": rng.integers(0, 512, n), "income": rng.integers(0, 1001, n)})
        pdp.privelet(frame, attrs, epsilon=1.0, untransformed=["age", "gender"], seed=1).write_parquet(path)
    return _child(["--read-child"])


# ---------------------------------------------------------------------------- rows
def rows_frame(n: int, seed: int = 2010):
    """Two int64 columns: age 0..99 and hours 0..99, uniform."""
    import polars as pl
    rng = np.random.default_rng(seed)
    return pl.DataFrame({"age": rng.integers(0, 100, n), "hours": rng.integers(0, 100, n)})


def rows_calls(frame):
    """``(release, floor)``: Basic (exact noise, the default; scale 2 at epsilon 1 under replace)
    and its numpy floor on views of the same columns (flat cell, ``np.bincount``, the same exact
    sampler at the same scale on every cell)."""
    import polars_dp as pdp
    attrs = [pdp.Ordinal("age", 0, 99), pdp.Ordinal("hours", 0, 99)]
    age, hours = frame["age"].to_numpy(), frame["hours"].to_numpy()
    exact = exact_sampler()
    assert exact is not None
    src, sample = exact

    def release():
        return pdp.basic(frame, attrs, epsilon=1.0, seed=1)

    def floor():
        idx = age * 100
        idx += hours
        counts = np.bincount(idx, minlength=10_000)
        return counts + sample(src, Fraction(2), counts.size)
    return release, floor


#: Rows of the release whose CPU time is the fixed cost per release (plan, noise on the 1e4
#: cells, release object), measured beside the sizes.
FIXED_ROWS = 1000


def size_order(sizes: tuple[int, ...], repeat: int) -> list[int]:
    """The sizes in the order of one repetition: rotated by one every two repetitions and the
    second of each two reversed, so that no size is always measured first, last or after the
    same one."""
    k = repeat // 2 % len(sizes)
    order = list(sizes[k:] + sizes[:k])
    return order[::-1] if repeat % 2 else order


def rows_linear(sizes: tuple[int, ...], repeats: int) -> dict:
    """Every size's release and floor (each built by :func:`rows_frame`, one process), after a
    first call of each: ``repeats`` repetitions, each timing one pair per size (the sizes in
    :func:`size_order`, the pair's order alternating) and the :data:`FIXED_ROWS`-row release,
    so that every size sees the same machine.  Medians per size (wall, CPU, faults)."""
    calls = {n: rows_calls(rows_frame(n)) for n in sizes}
    small, _ = rows_calls(rows_frame(FIXED_ROWS))
    for release, floor in calls.values():
        release()
        floor()
    small()
    pairs: dict[int, list[tuple[dict, dict]]] = {n: [] for n in sizes}
    fixed = []
    load_before = load()
    for r in range(repeats):
        for i, n in enumerate(size_order(sizes, r)):
            release, floor = calls[n]
            if (r + i) % 2:
                b, a = timed(floor), timed(release)
            else:
                a, b = timed(release), timed(floor)
            pairs[n].append((a, b))
        fixed.append(timed(small)["cpu"])
    return {"sizes": {n: pair_ratios(p) for n, p in pairs.items()}, "fixed_cpu": statistics.median(fixed),
            "load_before": load_before, "load_after": load()}


def rows_child(n: int, mode: str) -> dict:
    """``cold-release`` / ``cold-floor``: the first call of this fresh process (its frame built
    first)."""
    frame = rows_frame(n)
    release, floor = rows_calls(frame)
    return {"mode": mode, **timed(release if mode == "cold-release" else floor)}


def rows_case(sizes: tuple[int, ...], repeats: int) -> dict:
    """One process of interleaved warm pairs over every size (:func:`rows_linear`), then, per
    size, ``repeats`` pairs of fresh processes (one at a time, the order alternating) for the
    cold ratio."""
    out: dict = {"case": "rows", "sizes": [], "load_before": load()}
    print(f"  rows case: warm pairs at {', '.join(f'{n:,}' for n in sizes)} rows (load {load()})",
          file=sys.stderr, flush=True)
    warm = _child(["--rows-child", ",".join(str(n) for n in sizes), "--rows-mode", "linear",
                   "--repeats", str(repeats)])
    out["warm_load"] = [warm["load_before"], warm["load_after"]]
    out["fixed_cpu"] = warm["fixed_cpu"]
    for n in sizes:
        print(f"  rows case: cold pairs at {n:,} rows (load {load()})", file=sys.stderr, flush=True)
        cold = []
        for i in range(repeats):
            order = ("cold-release", "cold-floor") if i % 2 == 0 else ("cold-floor", "cold-release")
            got = {mode: _child(["--rows-child", str(n), "--rows-mode", mode]) for mode in order}
            cold.append((got["cold-release"], got["cold-floor"]))
        c = pair_ratios(cold)
        out["sizes"].append({"rows": n, "warm": warm["sizes"][str(n)],
                             "cold": {"ratio": c["ratio"], "cpu_ratio": c["cpu_ratio"],
                                      "seconds": c["seconds"], "floor": c["floor"], "minflt": c["minflt"],
                                      "floor_minflt": c["floor_minflt"], "pairs": c["pairs"]}})
    out["load_after"] = load()
    return out


def fixed_child(repeats: int) -> dict:
    """Median CPU seconds of a :data:`FIXED_ROWS`-row release (:func:`rows_calls`), seeded (its
    ``seed=1``) and unseeded (the cryptographic source), warm and cold (:func:`fixed_case`)."""
    import polars_dp as pdp
    frame = rows_frame(FIXED_ROWS)
    attrs = [pdp.Ordinal("age", 0, 99), pdp.Ordinal("hours", 0, 99)]
    evict = np.ones(4 << 20)  # 32 MB, beyond the last-level cache
    out: dict = {"case": "fixed", "load_before": load(), "calls": repeats}
    for name, seed in (("seeded", 1), ("unseeded", None)):
        def release(seed=seed):
            return pdp.basic(frame, attrs, epsilon=1.0, seed=seed)
        for _ in range(20):
            release()
        warm, cold = [], []
        for _ in range(repeats):
            warm.append(timed(release)["cpu"])
            evict.sum()
            cold.append(timed(release)["cpu"])
        out[name] = {"warm": statistics.median(warm), "cold": statistics.median(cold)}
    out["load_after"] = load()
    return out


def fixed_case(repeats: int) -> dict:
    """:func:`fixed_child` in a fresh process."""
    return _child(["--fixed-child", str(max(200, 40 * repeats))])


def report_fixed(res: dict) -> None:
    print(f"\nfixed cost: CPU of one {FIXED_ROWS:,}-row Basic release (1e4 cells, exact noise), medians of "
          f"{res['calls']} calls (load {res['load_before']} -> {res['load_after']})")
    for name in ("seeded", "unseeded"):
        w, c = res[name]["warm"] * 1e3, res[name]["cold"] * 1e3
        print(f"  {name:<9} warm {w:.3f} ms, cold (after a 32 MB pass) {c:.3f} ms; target warm <= "
              f"{TARGET_FIXED_MS} ms: {'met' if w <= TARGET_FIXED_MS else 'MISSED'}")


def spread_of(values: list[float]) -> float:
    """The largest relative distance of ``values`` from their median."""
    mid = statistics.median(values)
    return max(abs(x / mid - 1) for x in values)


def report_rows(res: dict) -> None:
    print(f"\nrows: Basic from a two-column DataFrame (1e4 cells, exact noise) vs its numpy floor "
          f"(load before {res['load_before']})")
    print(f"  warm: medians of interleaved pairs, every size in each repetition, one process (load "
          f"{res['warm_load'][0]} -> {res['warm_load'][1]}); cold: the first call of a fresh process")
    print("  ns/row: cpu (wall) of the release and of the floor")
    print(f"  {'rows':>12}{'basic s':>9}{'floor s':>9}{'ratio':>7}{'cpu':>6}{'ns/row':>15}{'floor':>15}"
          f"{'minflt':>8}{'floor':>7}{'cold':>6}{'cpu':>6}{'cold minflt':>12}{'floor':>7}")
    per_row, per_row_cpu, floor_cpu = [], [], []
    for s in res["sizes"]:
        w, c, n = s["warm"], s["cold"], s["rows"]
        per_row.append(w["seconds"] / n * 1e9)
        per_row_cpu.append(w["cpu_seconds"] / n * 1e9)
        floor_cpu.append(w["floor_cpu"] / n * 1e9)
        mine = f"{per_row_cpu[-1]:.2f} ({per_row[-1]:.2f})"
        floor = f"{floor_cpu[-1]:.2f} ({w['floor'] / n * 1e9:.2f})"
        print(f"  {n:>12,}{w['seconds']:>9.3f}{w['floor']:>9.3f}{w['ratio']:>7.2f}{w['cpu_ratio']:>6.2f}"
              f"{mine:>15}{floor:>15}{w['minflt']:>8.0f}{w['floor_minflt']:>7.0f}"
              f"{c['ratio']:>6.2f}{c['cpu_ratio']:>6.2f}{c['minflt']:>12.0f}{c['floor_minflt']:>7.0f}")
    big = res["sizes"][-1]
    w, c = big["warm"], big["cold"]
    faults = w["minflt"] / max(w["floor_minflt"], 1.0)
    spread, spread_cpu = spread_of(per_row), spread_of(per_row_cpu)
    fixed = res["fixed_cpu"]
    marginal = [(s["warm"]["cpu_seconds"] - fixed) / s["rows"] * 1e9 for s in res["sizes"]]

    def verdict(ok: bool) -> str:
        return "met" if ok else "MISSED"
    print(f"  at {big['rows']:,} rows (medians of {w['pairs']} warm pairs, {c['pairs']} cold pairs): "
          f"warm {w['ratio']:.2f} (cpu {w['cpu_ratio']:.2f}), target <= {TARGET_ROWS_WARM}: "
          f"{verdict(w['ratio'] <= TARGET_ROWS_WARM)}; cold {c['ratio']:.2f} (cpu {c['cpu_ratio']:.2f}), "
          f"target <= {TARGET_ROWS_COLD}: {verdict(c['ratio'] <= TARGET_ROWS_COLD)}")
    print(f"  minor page faults {w['minflt']:.0f} vs the floor's {w['floor_minflt']:.0f} (warm), target <= "
          f"{TARGET_ROWS_FAULTS}x: {verdict(w['minflt'] <= TARGET_ROWS_FAULTS * max(w['floor_minflt'], 1.0))}"
          f" ({faults:.2f}x)")
    print(f"  linear in rows: CPU ns/row {', '.join(f'{x:.2f}' for x in per_row_cpu)} within "
          f"+-{spread_cpu * 100:.0f} % of their median, target +-{TARGET_ROWS_LINEAR * 100:.0f} %: "
          f"{verdict(spread_cpu <= TARGET_ROWS_LINEAR)} (the floor's CPU ns/row "
          f"{', '.join(f'{x:.2f}' for x in floor_cpu)}: within +-{spread_of(floor_cpu) * 100:.0f} %); "
          f"wall ns/row within +-{spread * 100:.0f} % ({verdict(spread <= TARGET_ROWS_LINEAR)}; other users' "
          f"load moves short runs most); load after {res['load_after']}")
    print(f"  a release of {FIXED_ROWS:,} rows costs {fixed * 1e3:.2f} ms of CPU (plan, noise on 1e4 cells, "
          f"release object): without it, CPU ns/row {', '.join(f'{x:.2f}' for x in marginal)}, within "
          f"+-{spread_of(marginal) * 100:.0f} % (for information; the verdict above counts it)")


# ---------------------------------------------------------------------------- driver
def _child(args: list[str]) -> dict:
    proc = subprocess.run([sys.executable, "-m", "benchmarks.bench_floor", *args], capture_output=True,
                          text=True, check=False)
    if proc.returncode:
        sys.stderr.write(proc.stderr)
        raise SystemExit(proc.returncode)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def report(res: dict) -> None:
    case = res["case"]
    if case == "rows":
        report_rows(res)
        return
    if case == "fixed":
        report_fixed(res)
        return
    if case == "privtree":
        print(f"\nPrivTree vs the uniform grid (2-D clustered points, medians of interleaved pairs; "
              f"load {res['load']})")
        for s in res["sizes"]:
            print(f"  {s['points']:>12,} points: UG {s['ug']:.3f} s, PrivTree {s['privtree']:.3f} s, "
                  f"ratio {s['ratio']:.2f} (cpu {s['cpu_ratio']:.2f}, {s['pairs']} pairs)")
        big, small = res["sizes"][-1], res["sizes"][0]
        ratio = big["ratio"]
        print(f"  target PrivTree <= {TARGET_PRIVTREE}x UG on {big['points']:,} points: "
              f"{'met' if ratio <= TARGET_PRIVTREE else 'MISSED'} ({ratio:.2f}); "
              f"{small['points']:,} points {small['privtree']:.3f} s (target < {TARGET_PRIVTREE_1E6_S} s "
              f"on 1e6: {'met' if small['privtree'] < TARGET_PRIVTREE_1E6_S else 'MISSED'})")
        return
    if case == "read":
        runs = res["runs"]
        ratio = res["extra_bytes"] / res["array_bytes"]
        print(f"\nread_release of {res['array_bytes'] // 8:,} cells (fresh process)")
        for i, r in enumerate(runs):
            print(f"  {'cold' if i == 0 else 'warm'}: {r['seconds']:.3f} s, {r['minflt']:,} minor faults")
        warm = min(r["seconds"] for r in runs[1:])
        cold = runs[0]["seconds"]
        print(f"  target <= {TARGET_READ_S} s: cold {'met' if cold <= TARGET_READ_S else 'MISSED'}, "
              f"warm {'met' if warm <= TARGET_READ_S else 'MISSED'}; peak growth (cold read) "
              f"{res['extra_bytes'] / 2**20:.0f} MiB = {ratio:.2f} x the array "
              f"({res['array_bytes'] / 2**20:.0f} MiB), target <= {TARGET_READ_MEMORY}: "
              f"{'met' if ratio <= TARGET_READ_MEMORY else 'MISSED'}")
        return
    if case == "memory":
        print("\npeak memory on the census shape (fresh process each; growth over the frame)")
        for r in res["runs"]:
            ratio = r["extra_bytes"] / r["count_bytes"]
            print(f"  {r['mechanism']:<10} {r['extra_bytes'] / 2**30:6.2f} GiB = {ratio:.2f} x the count "
                  "array "
                  f"({r['count_bytes'] / 2**30:.2f} GiB); target <= {TARGET_MEMORY}: "
                  f"{'met' if ratio <= TARGET_MEMORY else 'MISSED'}"
                  f"{'' if r['reset'] else ' (peak not resettable: running maximum)'}")
        return
    print(f"\n{case}: {res['cells']:,} cells, {res['rows']:,} rows, noise={res['noise']} "
          f"(load {res['load']})")
    print(f"  {'mechanism':<11}{'seconds':>9}{'floor s':>9}{'ratio':>7}{'cpu ratio':>11}{'target':>8}"
          "  pairs  noise used")
    for name, m in res["mechanisms"].items():
        target = TARGETS[name]
        print(f"  {name:<11}{m['seconds']:>9.2f}{m['floor']:>9.2f}{m['ratio']:>7.2f}{m['cpu_ratio']:>11.2f}"
              f"{target:>7.1f}{'' if m['ratio'] <= target else '!'}  {m['pairs']:>5}  {m['noise_used']}")
    mechs = res["mechanisms"]
    for name, m in mechs.items():
        if "exact_over_float" in m:
            lo, hi = m["exact_over_float"]
            print(f"  {name}: exact / float {lo:.2f}-{hi:.2f} (target <= 1.5)")
        if "model_floor" in m:
            mf = m["model_floor"]
            ratios = mf["ratios"]
            print(f"  {name}: model floor {mf['seconds']:.2f} s ({mf['coefficients']:,} draws x "
                  f"{mf['ns_per_draw']:.1f} ns at their scales + {TRAFFIC_PER_CELL} B/cell at "
                  f"{mf['gb_per_s']:.1f} GB/s), measured right after a release of "
                  f"{mf['release_seconds']:.2f} s; release / model floor "
                  f"{ratios[len(ratios) // 2]:.2f} (median of {len(ratios)} interleaved pairs, "
                  f"{min(ratios):.2f}-{max(ratios):.2f})"
                  + (" (target <= 1.5)" if name == "privelet" and case == "census" else ""))
            print(f"  {name}: every draw priced at the base scale ({mf['ns_per_draw_at_base']:.1f} ns): "
                  f"floor {mf['seconds_at_base']:.2f} s, release / it "
                  f"{mf['release_seconds'] / mf['seconds_at_base']:.2f}")
    if "basic" in mechs and "privelet+" in mechs:
        print(f"  privelet+ / basic {mechs['privelet+']['seconds'] / mechs['basic']['seconds']:.2f} "
              "(target <= 2.5)")
    for stage, seconds in res["stages"].items():
        print(f"    stage {stage}: {seconds:.2f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1e6 rows, smaller domains")
    parser.add_argument("--rows", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=MIN_PAIRS,
                        help=f"interleaved pairs per ratio (at least {MIN_PAIRS})")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--noise", choices=("float", "exact"), default="float")
    parser.add_argument("--contended", action="store_true",
                        help="run one CPU-bound process of the benchmark's own throughout")
    parser.add_argument("--row-sizes", default=None, help="rows of the rows case, e.g. 1e6,1e7,3e7,1e8")
    parser.add_argument("--case-child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--memory-child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--read-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--rows-child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--rows-mode", default="linear", help=argparse.SUPPRESS)
    parser.add_argument("--fixed-child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.read_child:
        print(json.dumps(read_child()))
        return 0
    if args.fixed_child is not None:
        print(json.dumps(fixed_child(args.fixed_child)))
        return 0
    if args.rows_child is not None:
        sizes = tuple(int(x) for x in args.rows_child.split(","))
        got = (rows_linear(sizes, args.repeats) if args.rows_mode == "linear"
               else rows_child(sizes[0], args.rows_mode))
        print(json.dumps(got))
        return 0
    rows = args.rows or (1_000_000 if args.quick else 10_000_000)
    if args.memory_child:
        print(json.dumps(memory_child(args.quick, rows, args.memory_child, args.noise)))
        return 0
    if args.case_child:
        if args.case_child == "privtree":
            res = privtree_case(args.quick, args.repeats)
        else:
            res = grid_case(args.case_child, args.quick, rows, args.repeats, args.noise)
        print(json.dumps(res))
        return 0
    repeats = max(MIN_PAIRS, args.repeats)
    cases = args.cases.split(",")
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        print(f"unknown case {unknown[0]!r}; choose from {', '.join(CASES)}")
        return 2
    sizes = (tuple(int(float(x)) for x in args.row_sizes.split(",")) if args.row_sizes
             else QUICK_ROW_SIZES if args.quick else ROW_SIZES)
    common = ["--rows", str(rows), "--repeats", str(repeats), "--noise", args.noise]
    common += ["--quick"] if args.quick else []
    with Contention(args.contended) as contention:
        print(f"mechanism / numpy floor: medians of {repeats} interleaved pairs, wall and CPU time "
              f"(shared machine: +-30 % on times); load {load()}; {contention.describe()}", flush=True)
        for case in cases:
            if case == "memory":
                report(memory_case(args.quick, rows, args.noise))
            elif case == "read":
                report(read_case())
            elif case == "rows":
                report(rows_case(sizes, repeats))
            elif case == "fixed":
                report(fixed_case(repeats))
            else:
                report(_child(["--case-child", case, *common]))
            sys.stdout.flush()
        print(f"\nload average at the end: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] if sys.argv[0].endswith("bench_floor.py") else []))
