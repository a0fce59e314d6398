"""A fourth release type meets the command line: what ``info`` shows comes from the release's
own description, and what a type does not describe is refused, naming what is missing (before,
anything not a grid or spatial release was taken for a sequence model)."""

from __future__ import annotations

import json

import duckdb
import pytest

import polars_dp as pdp
import polars_dp.duckdb as pdd
from polars_dp.cli import info, plot, query, sql
from polars_dp.releases.base import ReleaseParams
from tests.helpers.cli import run_cli


class BareRelease(pdp.Release):
    """A release type that says nothing of itself: only the header every release has."""

    release_type = "toy_total"
    mechanism, epsilon, neighbours, noise, seeded = "toy_total", 0.5, "add_remove", "exact", False
    created, library_version = "2026-01-01T00:00:00+00:00", "0.0.0"
    params = ReleaseParams({"noise_scale": 2.0})


class TotalRelease(BareRelease):
    """One noisy total, describing itself."""

    def domain_summary(self):
        return {"rows": "all", "groups": 1}

    def domain_lines(self):
        return ["every row of the table", "one group"]

    def size_summary(self):
        return {"values": 1}

    def size_text(self):
        return "1 value"

    def stated_noise_scale(self):  # no registered plan declares a toy_total record
        return 2.0


@pytest.fixture
def opened(monkeypatch, tmp_path):
    """``opened(release)``: a file path that the commands open as ``release``."""
    path = tmp_path / "toy.parquet"
    path.write_bytes(b"a toy release")

    def use(release):
        for module in (info, query, plot, sql):
            monkeypatch.setattr(module, "open_release", lambda *_: release)
        return str(path)
    return use


def test_info_asks_the_release(capsys, opened):
    release = TotalRelease()
    path = opened(release)
    code, out, err = run_cli(capsys, "info", path)
    assert code == 0, err
    lines = out.splitlines()
    first, second = release.domain_lines()
    assert f"  {'domain':<12} {first}" in lines and f"  {'':<12} {second}" in lines
    assert f"  {'size':<12} {release.size_text()}" in lines
    assert f"  {'noise scale':<12} {release.noise_text()}" in lines and release.noise_text() == "2 (Laplace)"
    assert out.splitlines()[0].startswith(f"{path}: TotalRelease, ")
    code, out, err = run_cli(capsys, "info", path, "--json")
    shown = json.loads(out)
    assert (shown["domain"], shown["size"], shown["noise_scale"]) == (
        release.domain_summary(), release.size_summary(), 2.0)


def test_a_type_stating_no_domain_line_shows_none(capsys, opened, monkeypatch):
    monkeypatch.setattr(TotalRelease, "domain_lines", lambda self: [])
    code, out, err = run_cli(capsys, "info", opened(TotalRelease()))
    assert code == 0, err
    assert f"  {'domain':<12} (not stated)" in out.splitlines()


def test_what_a_type_does_not_describe_is_refused(capsys, opened):
    path = opened(BareRelease())
    code, _, err = run_cli(capsys, "info", path)
    assert code == 1 and "NotImplementedError" in err and "BareRelease" in err and "domain_summary()" in err
    code, _, err = run_cli(capsys, "query", path, "--where", "x=1..2")
    assert code == 2 and "a BareRelease answers neither range counts nor frequencies" in err
    code, _, err = run_cli(capsys, "sql", path, "SELECT 1")
    assert code == 1 and "to_duckdb" in err and "BareRelease" in err
    pytest.importorskip("matplotlib")
    code, _, err = run_cli(capsys, "plot", path, "-o", str(path) + ".png")
    assert code == 2 and "draws no figure of a BareRelease" in err


def test_duckdb_register_asks_the_release():
    with pytest.raises(NotImplementedError, match=r"BareRelease .* to_duckdb"):
        pdd.register(duckdb.connect(), "toy", BareRelease())
