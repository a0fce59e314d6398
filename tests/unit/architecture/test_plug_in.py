"""``docs/architecture.md`` "Where things plug in" stays true: the registries discover the modules
of ``plans/``, ``mechanisms/`` and ``releases/`` themselves (no package ``__init__`` is edited to
add a mechanism or a release type), every registered mechanism function is ``pdp.<name>``, and
every module, file and dotted name the section points to exists."""

from __future__ import annotations

import ast
import importlib
import re
import sys

import pytest

import polars_dp as pdp
from polars_dp import mechanisms
from polars_dp.plans import REGISTRY
from polars_dp.plans.base import discover
from tests.helpers import REPO

PACKAGE = REPO / "polars_dp"
DISCOVERED = ("plans", "mechanisms", "releases")


def plug_in_section() -> str:
    text = (REPO / "docs" / "architecture.md").read_text()
    return text.split("## Where things plug in", 1)[1].split("\n## ", 1)[0]


def test_discover_imports_every_module(tmp_path, monkeypatch):
    package = tmp_path / "toy_registry"
    package.mkdir()
    (package / "__init__.py").write_text("SEEN = []\n")
    for name in ("alpha", "beta"):
        (package / f"{name}.py").write_text(f"from toy_registry import SEEN\nSEEN.append({name!r})\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    toy = importlib.import_module("toy_registry")
    try:
        discover(toy.__name__, toy.__path__)
        assert sorted(toy.SEEN) == ["alpha", "beta"]
    finally:
        for name in [m for m in sys.modules if m.split(".")[0] == "toy_registry"]:
            del sys.modules[name]


@pytest.mark.parametrize("package", DISCOVERED)
def test_the_registry_packages_import_every_module(package):
    tree = ast.parse((PACKAGE / package / "__init__.py").read_text())
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
             and n.func.id == "discover"]
    assert calls, f"polars_dp/{package}/__init__.py does not import its modules (discover)"
    for path in (PACKAGE / package).glob("*.py"):
        assert f"polars_dp.{package}.{path.stem}" in sys.modules or path.stem == "__init__"


def test_every_registered_function_is_public():
    for name, entry in REGISTRY.items():
        assert entry.function is not None, name
        assert getattr(pdp, name) is entry.function and getattr(mechanisms, name) is entry.function
        assert name in pdp.__all__ and name in mechanisms.__all__
    assert pdp.__all__ == sorted(pdp.__all__)


def test_no_package_init_is_named_for_editing():
    section = plug_in_section()
    for init in ("plans/__init__.py", "releases/__init__.py"):
        assert init not in section
    assert "Two package files" in section and "Three package files" in section


def test_every_name_the_section_points_to_exists():
    section = plug_in_section()
    spans = set(re.findall(r"`([A-Za-z_][\w./]*)`", section))
    checked = 0
    for span in spans:
        if span.endswith(".py") and "/" in span:  # a package file
            root = REPO if span.startswith(("tests/", "docs/", "examples/", "polars_dp/")) else PACKAGE
            assert (root / span).exists(), span
            checked += 1
            continue
        parts = span.removeprefix("polars_dp.").split(".")
        if parts[0] not in {"plans", "mechanisms", "releases", "counting", "domains"} or len(parts) < 3:
            continue
        module = importlib.import_module("polars_dp." + ".".join(parts[:-1]))
        assert hasattr(module, parts[-1]), span
        checked += 1
    assert checked >= 10
