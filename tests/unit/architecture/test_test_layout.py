"""The test suite's own layout: test files grouped by layer (``tests/unit/<layer>/``) or by
surface (``tests/system/<area>/``), shared code in ``tests/helpers/``, no test module importing
another (a test file reads on its own; what two files share lives in a helper or a fixture).
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers import REPO

TESTS = REPO / "tests"
GROUPS = ("unit", "system")


def _python_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "data" not in p.relative_to(root).parts)


def misplaced_test_files(root: Path) -> list[str]:
    """Test files not at ``<root>/unit/<layer>/`` or ``<root>/system/<area>/``."""
    out = []
    for path in sorted(root.rglob("test_*.py")):
        parts = path.relative_to(root).parts
        if len(parts) != 3 or parts[0] not in GROUPS:
            out.append("/".join(parts))
    return out


def folders_without_init(root: Path) -> list[str]:
    """Folders holding Python files but no ``__init__.py`` (two test files of one basename in
    different folders then collide on import)."""
    folders = {p.parent for p in _python_files(root)}
    return sorted(str(f.relative_to(root.parent)) for f in folders if not (f / "__init__.py").is_file())


def imports_of_test_modules(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` for every import of a test module (or of a conftest) in a file, at any
    depth, absolute or relative."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            candidates = [module]
            if node.level or module.split(".")[0] == "tests":
                candidates += [f"{module.rstrip('.')}.{a.name}" for a in node.names]
        else:
            continue
        for name in candidates:
            last = name.rstrip(".").rsplit(".", 1)[-1]
            if last.startswith("test_") or last == "conftest":
                out.append((node.lineno, name))
    return out


def test_no_test_file_directly_in_tests():
    """Every test file sits in ``tests/unit/<layer>/`` or ``tests/system/<area>/``."""
    wrong = misplaced_test_files(TESTS)
    assert not wrong, (f"test files outside tests/unit/<layer>/ and tests/system/<area>/: {wrong}; "
                       "move them with `git mv` into the folder of the layer they test")


def test_every_test_folder_is_a_package():
    missing = folders_without_init(TESTS)
    assert not missing, f"add an empty __init__.py to {missing}"


def test_no_test_module_imports_another():
    """Shared code goes to ``tests/helpers/`` (or a conftest fixture), not into a test file."""
    found = {str(p.relative_to(TESTS)): hits for p in _python_files(TESTS)
             if (hits := imports_of_test_modules(p))}
    assert not found, (
        f"test modules imported (move the shared code to tests/helpers/): {found}")


def test_the_layout_checks_see_a_violation(tmp_path):
    """Each check finds what it should on a small tree with one violation of each kind."""
    root = tmp_path / "tests"
    (root / "unit" / "noise").mkdir(parents=True)
    (root / "system").mkdir()
    for folder in (root, root / "unit", root / "unit" / "noise"):
        (folder / "__init__.py").write_text("")
    (root / "test_flat.py").write_text("")
    (root / "unit" / "test_shallow.py").write_text("")
    (root / "unit" / "noise" / "test_ok.py").write_text(
        "import test_flat\nfrom tests.unit.noise.test_ok import X\nfrom tests.unit.noise import test_ok\n"
        "from . import test_ok as t\nfrom .test_ok import Y\nfrom tests.helpers.noise import ALPHA\n"
        "def f():\n    from tests.conftest import SHARED_DATA\n")
    (root / "system" / "test_sql.py").write_text("import polars_dp.cli\nfrom polars_dp import params\n")
    assert misplaced_test_files(root) == ["system/test_sql.py", "test_flat.py", "unit/test_shallow.py"]
    assert folders_without_init(root) == ["tests/system"]
    assert [m for _, m in imports_of_test_modules(root / "unit" / "noise" / "test_ok.py")] == [
        "test_flat", "tests.unit.noise.test_ok", "tests.unit.noise.test_ok", ".test_ok", ".test_ok",
        "tests.conftest"]
    assert imports_of_test_modules(root / "system" / "test_sql.py") == []
