"""The benchmarks' measuring helpers: interleaved pairs with CPU time, the contending process,
and the one line for optional peers that are not installed."""

from __future__ import annotations

import os
import time

import pytest

from benchmarks import bench_cold_start, bench_floor, bench_noise, peers


def test_pairs_alternate_their_order_and_the_ratio_is_the_median_of_pairs():
    calls = []

    def first():
        calls.append("a")
        time.sleep(0.002)

    def second():
        calls.append("b")
        time.sleep(0.001)
    runs = bench_floor.interleaved(first, second, 5)
    assert calls == ["a", "b", "b", "a", "a", "b", "b", "a", "a", "b"]
    got = bench_floor.pair_ratios(runs)
    wall = sorted(a["wall"] / b["wall"] for a, b in runs)
    assert got["pairs"] == 5 and got["ratio"] == wall[2]
    assert {"cpu_ratio", "minflt", "floor_minflt", "cpu_seconds", "floor_cpu"} <= set(got)


def test_cpu_time_of_a_sleep_is_small_beside_its_wall_time():
    t = bench_floor.timed(time.sleep, 0.05)
    assert t["wall"] >= 0.05 and t["cpu"] < 0.02


def test_contended_mode_runs_one_busy_process_and_stops_it():
    with bench_floor.Contention(True) as c:
        pid = c.proc.pid
        with open(f"/proc/{pid}/stat") as fh:
            before = sum(int(x) for x in fh.read().split()[13:15])
        time.sleep(0.5)
        with open(f"/proc/{pid}/stat") as fh:
            after = sum(int(x) for x in fh.read().split()[13:15])
        assert after > before  # it computes (clock ticks of user + system time)
        assert str(pid) in c.describe()
    assert c.proc.poll() is not None
    with bench_floor.Contention(False) as idle:
        assert idle.proc is None


def test_load_names_the_averages_and_the_cores():
    assert bench_floor.load().endswith(f"on {os.cpu_count()} cores")


def test_rows_floor_and_release_count_the_same_rows():
    frame = bench_floor.rows_frame(5000)
    release, floor = bench_floor.rows_calls(frame)
    assert release().counts.sum() == pytest.approx(floor().sum(), abs=2000)


def privmap_checkout(root):
    """A directory holding the file that makes it a privmap checkout."""
    peer = next(p for p in peers.PEERS if p.module == "privmap")
    (root / peer.marker).parent.mkdir(parents=True)
    (root / peer.marker).write_text("")
    return peer


def test_a_missing_peer_is_skipped_with_one_line_naming_it(monkeypatch, capsys):
    monkeypatch.setattr(peers, "installed", lambda module: False)
    monkeypatch.delenv("POLARS_DP_PRIVMAP", raising=False)
    assert [p.module for p in peers.missing("bench_noise")] == ["opendp"]
    assert [p.module for p in peers.missing()] == [p.module for p in peers.PEERS]
    bench_noise.opendp_benchmark(16)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert len(lines) == 1 and "opendp" in lines[0] and "pip install opendp" in lines[0]
    line = peers.skip_line(peers.missing())
    assert line is not None and "\n" not in line and all(p.module in line for p in peers.PEERS)


def test_no_line_when_every_peer_is_installed(monkeypatch, tmp_path):
    monkeypatch.setattr(peers, "installed", lambda module: True)
    privmap_checkout(tmp_path)
    monkeypatch.setenv("POLARS_DP_PRIVMAP", str(tmp_path))
    assert peers.missing() == [] and peers.skip_line(peers.missing()) is None


def test_privmap_is_a_checkout_found_by_its_variable_or_a_path(monkeypatch, tmp_path):
    monkeypatch.setattr(peers, "installed", lambda module: True)  # not looked up as a module
    monkeypatch.delenv("POLARS_DP_PRIVMAP", raising=False)
    peer = privmap_checkout(tmp_path / "privmap")
    assert peers.missing("bench_cold_start") == [peer] and peers.checkout(peer) is None
    line = peers.skip_line(peers.missing("bench_cold_start"))
    assert line is not None and "\n" not in line and "git clone https://github.com/enesunal-m/privmap" in line
    assert peers.checkout(peer, tmp_path / "privmap") == (tmp_path / "privmap").resolve()
    assert peers.checkout(peer, tmp_path) is None  # no privtree.py there
    monkeypatch.setenv("POLARS_DP_PRIVMAP", str(tmp_path / "privmap"))
    assert peers.missing("bench_cold_start") == []
    assert peers.checkout(peer) == (tmp_path / "privmap").resolve()


def test_cold_start_without_privmap_prints_one_line(monkeypatch, capsys):
    monkeypatch.delenv("POLARS_DP_PRIVMAP", raising=False)
    bench_cold_start.privmap_case({"this": bench_cold_start.HERE}, 5, None)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert len(lines) == 1 and "privmap" in lines[0] and "git clone" in lines[0]


def test_both_cold_start_children_build_the_same_points():
    """The privmap child and ours share the points' code, and the epsilon."""
    assert bench_cold_start.POINTS.replace("\n    ", "\n") in bench_cold_start.PRIVMAP
    assert bench_cold_start.POINTS in bench_cold_start.CHILD
    assert f"epsilon={bench_cold_start.EPSILON!r}" in bench_cold_start.CHILD
    assert f"PrivTree({bench_cold_start.EPSILON!r}," in bench_cold_start.PRIVMAP


def test_every_size_is_timed_once_per_repetition_in_a_rotating_order():
    sizes = (10, 20, 30, 40)
    orders = [bench_floor.size_order(sizes, r) for r in range(6)]
    assert all(sorted(o) == list(sizes) for o in orders)
    assert len({o[0] for o in orders}) == len(sizes) and len({o[-1] for o in orders}) == len(sizes)
    got = bench_floor.rows_linear((2000, 4000), 5)
    assert set(got["sizes"]) == {2000, 4000} and all(s["pairs"] == 5 for s in got["sizes"].values())
    assert got["fixed_cpu"] > 0 and "cores" in got["load_before"]


def test_installed_looks_a_module_up():
    assert peers.installed("numpy")
    assert not peers.installed("no_such_module_for_polars_dp")
