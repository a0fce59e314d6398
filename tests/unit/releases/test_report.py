"""The HTML release report (:mod:`polars_dp.releases.report`): self-contained, its figures read
from the release, every release type, atomic."""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser

import numpy as np
import polars as pl
import pytest

import polars_dp as pdp

SECTORS = {"public": ["teacher", "nurse", "clerk"], "private": ["driver", "engineer", "cook", "farmer"]}


def census(n: int) -> tuple[pl.DataFrame, list[pdp.Attribute]]:
    """The census demo's table and domain (examples/census_privelet.py), generated."""
    rng = np.random.default_rng(0)
    jobs = [job for group in SECTORS.values() for job in group]
    frame = pl.DataFrame({"age": rng.integers(18, 90, n), "gender": rng.choice(["female", "male"], n),
                          "occupation": rng.choice(jobs, n),
                          "income": np.minimum(rng.lognormal(10.5, 0.6, n), 199_999).astype(np.int64)})
    attrs = [pdp.Ordinal("age", 0, 99, width=5), pdp.Nominal("gender", categories=["female", "male"]),
             pdp.Nominal("occupation", pdp.Hierarchy.from_dict(SECTORS, level_names=["sector"])),
             pdp.Ordinal("income", 0, 199_999, width=5_000)]
    return frame, attrs


class Tags(HTMLParser):
    """Every start tag and attribute of a page (to check it loads nothing)."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def parse(text: str) -> Tags:
    tags = Tags()
    tags.feed(text)
    return tags


def test_the_census_release_report_is_self_contained_and_small(tmp_path):
    frame, attrs = census(20_000)
    release = frame.dp.privelet(attrs, epsilon=1.0, untransformed=["gender"])
    path = release.report(tmp_path / "census.html")
    text = path.read_text()
    assert path.stat().st_size <= 2_000_000
    tags = parse(text)
    names = {t for t, _ in tags.tags}
    assert "script" not in names and "link" not in names and "img" not in names and "iframe" not in names
    assert all("src" not in a and "href" not in a for _, a in tags.tags)
    assert sum(t == "svg" for t, _ in tags.tags) == len(attrs)  # one marginal per attribute
    words = " ".join(tags.text)
    assert "Xiao, Wang, Gehrke" in words and release.card()["checksum"] in words
    assert "Not for publication" not in words


def test_grid_bars_are_the_marginals_with_their_noise_bounds(tmp_path):
    frame = pl.DataFrame({"a": [1, 2, 3, 9, 9], "b": ["x", "y", "x", "y", "x"]})
    release = pdp.privelet(frame, [pdp.Ordinal("a", 0, 9), pdp.Nominal("b", ["x", "y"])], epsilon=1.0, seed=3)
    text = release.report(tmp_path / "r.html", alpha=0.1).read_text()
    bars = re.findall(r"<rect [^>]*><title>([^<:]+): ([-0-9.e+]+) ± ([0-9.e+]+)</title>", text)
    assert len(bars) == 10 + 2
    counts = np.asarray(release.counts)
    for i, (label, value, bound) in enumerate(bars[:10]):
        assert label == str(i) and float(value) == pytest.approx(counts[i].sum(), rel=1e-5)
        expected = release.range_accuracy(np.array([[i, 0]]), np.array([[i + 1, 2]]), 0.1)[0]
        assert float(bound) == pytest.approx(expected, rel=1e-3)
    assert "Not for publication" in text


def test_a_long_attribute_is_grouped_into_at_most_60_bars(tmp_path):
    release = pdp.basic(pl.DataFrame({"a": [5]}), [pdp.Ordinal("a", 0, 999)], epsilon=1.0, seed=1)
    text = release.report(tmp_path / "r.html").read_text()
    bars = re.findall(r"<rect [^>]*><title>([^<:]+): ([-0-9.e+]+) ±", text)
    assert len(bars) <= 60 and sum(float(v) for _, v in bars) == pytest.approx(release.counts.sum())


def test_spatial_report_draws_every_leaf(tmp_path):
    points = pl.DataFrame({"x": np.random.default_rng(0).uniform(0, 1, 3000),
                          "y": np.random.default_rng(1).uniform(0, 1, 3000)})
    release = pdp.privtree(points, ["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=1.0, seed=2)
    text = release.report(tmp_path / "t.html").read_text()
    assert text.count("<rect ") == release.n_leaves > 1 and "leaves, shaded by noisy density" in text


def test_sequence_report_lists_top_strings_with_error_bars(tmp_path):
    words = pl.DataFrame({"s": ["abc", "ab", "ba", "c", "cab", "bb"] * 40})
    release = pdp.ngram_sequences(words, "s", alphabet=list("abc"), max_length=4, epsilon=2.0, seed=1)
    text = release.report(tmp_path / "s.html").read_text()
    top = release.top_k(20)["string"].to_list()
    _, std = release.frequencies(top, std=True)
    bars = re.findall(r"<title>([^<:]+): ([-0-9.e+]+) ± ([0-9.e+]+)</title>", text)
    assert len(bars) == len(top) and [float(e) for *_, e in bars] == pytest.approx(list(std), rel=1e-3)


def test_an_unwritable_report_leaves_nothing(tmp_path):
    release = pdp.basic(pl.DataFrame({"a": [5]}), [pdp.Ordinal("a", 0, 9)], epsilon=1.0, seed=1)
    with pytest.raises(pdp.ParameterError, match="does not exist"):
        release.report(tmp_path / "missing" / "r.html")
    with pytest.raises(pdp.ParameterError, match="alpha"):
        release.report(tmp_path / "r.html", alpha=2)
    assert list(tmp_path.iterdir()) == []


def test_a_report_is_written_only_under_an_html_name(tmp_path):
    release = pdp.basic(pl.DataFrame({"a": [5]}), [pdp.Ordinal("a", 0, 9)], epsilon=1.0, seed=1)
    kept = release.write_parquet(tmp_path / "r.parquet")
    before = kept.read_bytes()
    for name in ("r.parquet", "r.pdf", "r"):
        with pytest.raises(pdp.ParameterError, match="the report is HTML; use a .html name") as info:
            release.report(tmp_path / name)
        assert info.value.parameter == "path"
    assert kept.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["r.parquet"]
    assert release.report(tmp_path / "R.HTM").read_text().startswith("<!DOCTYPE html>")


BROWSERS = ("chromium", "chromium-browser", "google-chrome")
BROWSER = next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)


@pytest.mark.skipif(BROWSER is None, reason="no Chromium on this machine")
def test_a_headless_browser_renders_the_report(tmp_path):
    release = pdp.basic(pl.DataFrame({"a": [5]}), [pdp.Ordinal("a", 0, 9)], epsilon=1.0, seed=1)
    path = release.report(tmp_path / "r.html")
    dom = subprocess.run([str(BROWSER), "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
                          path.as_uri()], capture_output=True, text=True, timeout=120).stdout
    assert "Release card" in dom and "<svg" in dom
