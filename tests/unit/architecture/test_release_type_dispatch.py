"""The command line, :mod:`polars_dp.duckdb` and the release card and report ask a release what it
is (its self-description, :class:`polars_dp.Release`), never test its type: no ``isinstance`` /
``issubclass`` / ``cast`` / ``type(x) is`` on a release type, no comparison of ``release_type``, no
``case GridRelease()``."""

from __future__ import annotations

import ast
from pathlib import Path

import polars_dp as pdp
from tests.helpers import REPO

PACKAGE = REPO / "polars_dp"
SCANNED = sorted((PACKAGE / "cli").rglob("*.py")) + [PACKAGE / "duckdb.py"] + [
    PACKAGE / "releases" / f"{name}.py" for name in ("card", "report")]

#: Every release type (and alias of one) the package exports; the base class ``Release`` (what
#: any release is) is not a type to dispatch on.
RELEASE_TYPES = {name for name in dir(pdp) if isinstance(getattr(pdp, name), type)
                 and issubclass(getattr(pdp, name), pdp.Release) and getattr(pdp, name) is not pdp.Release}


def _names(node: ast.AST) -> set[str]:
    """Names a type expression mentions: ``GridRelease``, ``pdp.GridRelease``, ``"GridRelease"``,
    tuples and ``A | B`` unions of them."""
    out = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            out.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            out.add(sub.attr)
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            out.update(sub.value.replace("|", " ").replace(".", " ").split())
    return out


def type_dispatch(path: Path) -> list[tuple[int, str]]:
    """``(line, source)`` of every place in ``path`` that branches on a release's type."""
    text = path.read_text()
    tree = ast.parse(text)
    found = []
    for node in ast.walk(tree):
        hit = False
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else (
                func.attr if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                and func.value.id == "typing" else None)
            if name in ("isinstance", "issubclass") and len(node.args) == 2:
                hit = bool(_names(node.args[1]) & RELEASE_TYPES)
            elif name == "cast" and node.args:
                hit = bool(_names(node.args[0]) & RELEASE_TYPES)
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            hit = any(isinstance(s, ast.Attribute) and s.attr == "release_type" for s in sides) or (
                any(isinstance(s, ast.Call) and isinstance(s.func, ast.Name) and s.func.id == "type"
                    for s in sides) and any(_names(s) & RELEASE_TYPES for s in sides))
        elif isinstance(node, ast.MatchClass):
            hit = bool(_names(node.cls) & RELEASE_TYPES)
        if hit:
            found.append((node.lineno, str(ast.get_source_segment(text, node))))
    return found


def test_the_release_types_are_known():
    assert {"GridRelease", "SpatialRelease", "SequenceRelease"} <= RELEASE_TYPES
    assert "Release" not in RELEASE_TYPES


def test_cli_duckdb_card_and_report_hold_no_dispatch_on_release_types():
    """A fourth release type is then served by what it says of itself (``query_kinds``,
    ``plot_kind``, ``domain_summary``, ``to_duckdb``, ...) instead of falling into the branch of
    another type."""
    found = [f"{path.relative_to(REPO)}:{line}: {source}" for path in SCANNED
             for line, source in type_dispatch(path)]
    assert not found, "branches on a release type (ask the release instead):\n" + "\n".join(found)


def test_the_scan_sees_each_form(tmp_path):
    """The walker finds every form of type dispatch it forbids (and leaves other casts alone)."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "if isinstance(r, pdp.GridRelease): pass\n"
        "if isinstance(r, (GridRelease, SpatialRelease)): pass\n"
        "r = cast(pdp.SequenceRelease, r)  # the third release type\n"
        "r = typing.cast('GridRelease | SpatialRelease', r)\n"
        "if type(r) is pdp.SpatialRelease: pass\n"
        "if r.release_type == 'grid': pass\n"
        "match r:\n    case pdp.GridRelease(): pass\n"
        "if isinstance(r, pdp.Release) and isinstance(a, pdp.Nominal): pass\n"
        "x = pl.col('a').cast(pl.Int64)\n"
        "y = cast(pl.DataFrame, z)\n")
    assert [line for line, _ in type_dispatch(sample)] == [1, 2, 3, 4, 5, 6, 8]
