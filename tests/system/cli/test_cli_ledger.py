"""``polars-dp release --ledger FILE --dataset NAME`` and ``polars-dp ledger FILE``."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

import polars_dp as pdp
from polars_dp.cli.spec import load_spec
from polars_dp.ledger import exact_text
from tests.helpers.cli import SPECS, data_for, run_cli, run_subprocess


@pytest.fixture
def people(tmp_path) -> Path:
    path = tmp_path / "people.parquet"
    data_for(load_spec(SPECS / "basic.toml"), 500, seed=3).write_parquet(path)
    return path


def release(capsys, people: Path, out: Path, *extra: str) -> tuple[int, str, str]:
    return run_cli(capsys, "release", people, "--spec", SPECS / "basic.toml", "-o", out, "-q", *extra)


def test_release_charges_the_ledger_and_refuses_past_the_total(people, tmp_path, capsys):
    book = tmp_path / "budget.ledger"
    first = tmp_path / "r1.parquet"
    code, _, err = release(capsys, people, first, "--ledger", book, "--dataset", "people", "--total", "1.5")
    assert code == 0, err
    spent = pdp.plan("basic", list(load_spec(SPECS / "basic.toml").attributes), epsilon=1.0,
                     neighbours="replace").epsilon_spent
    budget = pdp.Ledger(book).dataset("people")
    assert budget is not None and budget.total == Fraction(3, 2) and budget.spent == spent
    second = tmp_path / "r2.parquet"
    code, _, err = release(capsys, people, second, "--ledger", book, "--dataset", "people")
    assert code == 2 and "BudgetExceeded" not in err and "of its total 1.5 left" in err
    assert not second.exists()  # refused before reading the data: nothing written
    assert len(pdp.Ledger(book).dataset("people").charges) == 1  # type: ignore[union-attr]
    size = book.stat().st_size
    code, out, _ = run_cli(capsys, "release", people, "--spec", SPECS / "basic.toml", "--check",
                           "--ledger", book, "--dataset", "people")
    assert code == 0 and f"budget: {exact_text(Fraction(3, 2) - spent)} of 1.5 left" in out
    assert book.stat().st_size == size  # --check charges nothing
    code, _, err = release(capsys, people, second, "--ledger", book, "--dataset", "people", "--total", "2")
    assert code == 2 and "fixes the total of dataset 'people' at 3/2" in err
    code, _, err = release(capsys, people, second, "--ledger", book, "--dataset", "new")
    assert code == 2 and "give --total EPS" in err
    code, _, err = release(capsys, people, second, "--ledger", book)
    assert code == 2 and "--dataset NAME together" in err
    code, _, err = release(capsys, people, second, "--ledger", book, "--dataset", "people", "--seed", "1")
    assert code == 2 and "cannot be seeded" in err


def test_ledger_command_shows_the_datasets(people, tmp_path, capsys):
    book = tmp_path / "budget.ledger"
    release(capsys, people, tmp_path / "r.parquet", "--ledger", book, "--dataset", "people", "--total", "3")
    code, out, err = run_cli(capsys, "ledger", book)
    assert code == 0, err
    assert "1 dataset(s), hash chain verified" in out and "people: total 3 (neighbours replace)" in out
    assert "basic" in out
    code, out, _ = run_cli(capsys, "ledger", book, "--json", "--dataset", "people")
    shown = json.loads(out)["people"]
    assert Fraction(shown["spent"]) == pdp.Ledger(book).spent("people") and len(shown["charges"]) == 1
    code, _, err = run_cli(capsys, "ledger", tmp_path / "missing.ledger")
    assert code == 2 and "no ledger file" in err
    code, _, err = run_cli(capsys, "ledger", book, "--dataset", "trips")
    assert code == 2 and "its datasets: people" in err
    book.write_bytes(book.read_bytes().replace(b'"noise":"exact"', b'"noise":"float"'))
    code, _, err = run_cli(capsys, "ledger", book)
    assert code == 2 and "hash does not chain" in err


def test_two_command_line_processes_share_a_ledger(people, tmp_path):
    book = tmp_path / "budget.ledger"
    args = ["release", people, "--spec", SPECS / "basic.toml", "-q", "--ledger", book, "--dataset", "people",
            "--total", "1.5"]
    assert run_subprocess(*args, "-o", tmp_path / "a.parquet").returncode == 0
    refused = run_subprocess(*args, "-o", tmp_path / "b.parquet")
    assert refused.returncode == 2 and "left" in refused.stderr and not (tmp_path / "b.parquet").exists()
