"""``polars-dp card RELEASE.parquet``: the release card as text, JSON and YAML."""

from __future__ import annotations

import json

import polars as pl

import polars_dp as pdp
from polars_dp.cli.card import to_yaml
from tests.helpers.cli import run_cli

ATTRS = [pdp.Ordinal("a", 0, 9), pdp.Nominal("b", ["x", "y"])]


def test_card_json_is_the_cards_dict_and_text_marks_seeded_releases(tmp_path, capsys):
    frame = pl.DataFrame({"a": [1, 2, 9], "b": ["x", "y", "x"]})
    path = pdp.privelet(frame, ATTRS, epsilon=1.0, seed=4).write_parquet(tmp_path / "r.parquet")
    code, out, err = run_cli(capsys, "card", path, "--json", "--alpha", "0.1")
    assert code == 0, err
    assert json.loads(out) == json.loads(json.dumps(pdp.read_release(path).card(alpha=0.1), default=str))
    code, out, _ = run_cli(capsys, "card", path)
    assert code == 0 and "NOT FOR PUBLICATION: seeded" in out and "worst range of a" in out
    # the domain as `info` words it, one line per attribute (it was the JSON of the record)
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.lstrip().startswith("domain "))
    shown = [lines[at].split("domain", 1)[1].strip(), lines[at + 1].strip()]
    assert shown == pdp.read_release(path).domain_lines() and "{" not in lines[at]
    assert "preprocessing  nulls = raise, on_out_of_domain = raise" in out
    code, _, err = run_cli(capsys, "card", path, "--alpha", "2")
    assert code == 2 and "alpha must lie strictly between 0 and 1" in err
    unseeded = pdp.uniform_grid(pl.DataFrame({"x": [0.1, 0.5], "y": [0.2, 0.9]}), ["x", "y"],
                                bounds=[(0, 1), (0, 1)], epsilon=1.0).write_parquet(tmp_path / "u.parquet")
    code, out, _ = run_cli(capsys, "card", unseeded)
    assert code == 0 and "fit for publication" in out and "leaf: std" in out


def test_report_writes_an_html_page(tmp_path, capsys):
    frame = pl.DataFrame({"a": [1, 2, 9], "b": ["x", "y", "x"]})
    path = pdp.basic(frame, ATTRS, epsilon=1.0).write_parquet(tmp_path / "r.parquet")
    code, out, err = run_cli(capsys, "report", path, "-o", tmp_path / "r.html")
    assert code == 0, err
    assert "wrote" in out and (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    code, _, err = run_cli(capsys, "report", path, "-o", tmp_path / "r.txt")
    assert code == 2 and "use a .html name" in err and not (tmp_path / "r.txt").exists()


def test_card_yaml_is_block_style_yaml_of_the_card(tmp_path, capsys):
    """YAML 1.2 without a YAML library: JSON-spelled scalars, block-style mappings and sequences."""
    assert to_yaml({"a": 1, "b": [1, {"c": "x", "d": []}, [2, 3]], "e": {"f": None, "g": 1.5}, "h": {}}) == [
        '"a": 1', '"b":', "  - 1", '  - "c": "x"', '    "d": []', "  - - 2", "    - 3",
        '"e":', '  "f": null', '  "g": 1.5', '"h": {}']
    frame = pl.DataFrame({"a": [1, 2, 9], "b": ["x", "y", "x"]})
    path = pdp.basic(frame, ATTRS, epsilon=1.0).write_parquet(tmp_path / "r.parquet")
    code, out, err = run_cli(capsys, "card", path, "--yaml")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[:2] == ["%YAML 1.2", "---"]
    top = [line.split(":")[0] for line in lines[2:] if not line.startswith(" ")]
    assert top == [json.dumps(k) for k in pdp.read_release(path).card()]
    code, _, err = run_cli(capsys, "card", path, "--yaml", "--json")
    assert code == 2 and "not allowed with argument" in err
