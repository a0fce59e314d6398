"""Every code block of README.md runs as written (issue 12, case 9).

Python blocks run in order in one namespace (a later block uses the names of earlier ones), in
a temporary folder holding small generated stand-ins for the files the snippets read.  A
top-level expression is evaluated and, when it is a lazy DuckDB relation or Polars LazyFrame,
materialised, so a broken SQL string fails here.  Blocks tagged ``bash`` are shell commands,
not Python: their ``make`` targets must exist in the Makefile; ``toml`` blocks (domain files)
must parse.  Every block must be tagged.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tests.helpers import REPO

ROOT = REPO
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def blocks() -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in FENCE.finditer((ROOT / "README.md").read_text())]


def write_inputs(folder: Path) -> None:
    """Small public stand-ins for the README's input files (random, not real data)."""
    rng = np.random.default_rng(0)
    n = 2_000
    pl.DataFrame({
        "age": rng.integers(0, 101, n),
        "gender": rng.choice(["female", "male"], n),
        "occupation": rng.choice(["clerk", "manager", "driver", "farmer"], n),
        "income": rng.integers(0, 1001, n),
    }).write_parquet(folder / "people.parquet")
    pl.DataFrame({"longitude": rng.uniform(-180, 180, n),
                  "latitude": rng.uniform(-90, 90, n)}).write_parquet(folder / "cities.parquet")
    lengths = rng.integers(1, 8, 500)
    pages = [rng.integers(1, 18, k).tolist() for k in lengths]
    pl.DataFrame({"pages": pages}).write_parquet(folder / "seq_msnbc.parquet")


def materialise(value: object) -> object:
    if hasattr(value, "fetchall"):        # a lazy duckdb relation: run it
        return value.fetchall()
    if isinstance(value, pl.LazyFrame):
        return value.collect()
    return value


def run_python(source: str, namespace: dict) -> None:
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.Expr):
            expr = ast.Expression(node.value)
            materialise(eval(compile(expr, "README.md", "eval"), namespace))
        else:
            exec(compile(ast.Module([node], type_ignores=[]), "README.md", "exec"), namespace)


def test_every_block_is_tagged_and_toml_blocks_parse():
    found = blocks()
    assert found, "README.md has no code blocks"
    assert {lang for lang, _ in found} <= {"python", "bash", "toml"}, [lang for lang, _ in found]
    for lang, code in found:
        if lang == "toml":
            tomllib.loads(code)


def test_bash_blocks_name_make_targets_that_exist():
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([\w-]+):", makefile, re.M))
    for lang, code in blocks():
        if lang != "bash":
            continue
        for line in code.splitlines():
            command = line.split("#")[0].split()
            if command[:1] == ["make"]:
                assert command[1] in targets, line


def test_python_blocks_run_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_inputs(tmp_path)
    namespace: dict = {"__name__": "readme"}
    python = [code for lang, code in blocks() if lang == "python"]
    assert len(python) >= 5
    for i, code in enumerate(python):
        try:
            run_python(code, namespace)
        except Exception as exc:  # name the block that failed
            pytest.fail(f"README python block {i + 1} failed: {type(exc).__name__}: {exc}\n{code}")


#: A test named in the README: ``tests/<path>.py::<name>`` or, after one, ``::<name>`` in the same file.
NAMED_TEST = re.compile(r"(tests/[\w/]+\.py)?(?:::(\w+))|(tests/[\w/]+(?:\.py|/))")


def test_every_test_the_readme_names_exists():
    """The privacy contract names the tests that hold each line: each must exist (a renamed or
    removed test must take its README line with it)."""
    text = (ROOT / "README.md").read_text()
    current, named = None, 0
    for m in NAMED_TEST.finditer(text):
        path, name, bare = m.group(1), m.group(2), m.group(3)
        if bare:
            assert (ROOT / bare).exists(), f"README names {bare}, which does not exist"
            current = bare if bare.endswith(".py") else current
            named += 1
            continue
        current = path or current
        assert current is not None, f"README names ::{name} before any test file"
        source = (ROOT / current).read_text()
        assert re.search(rf"^def {name}\(", source, re.M), f"README names {current}::{name}: no such test"
        named += 1
    assert named >= 30, named
