"""A release's ``params`` (its plan's record) are read by name only in ``plans/``: each entry is
declared once by its plan class (:class:`polars_dp.plans.base.Field`), and what a release,
the command line or the SQL layer needs of it is a typed method of the plan class or plan."""

from __future__ import annotations

import ast
from pathlib import Path

import polars_dp  # noqa: F401  (registers every plan)
from polars_dp.plans.base import ANNOTATIONS, REGISTRY
from tests.helpers import REPO

PACKAGE = REPO / "polars_dp"

#: Every entry a registered plan records (the annotations any release may carry are not a plan's).
RECORD_KEYS = {k for e in REGISTRY.values() for k in e.plan_class.record_keys()} - set(ANNOTATIONS)


def _is_params(node: ast.expr) -> bool:
    """``params``, ``release.params``, ``self.params``, ``old_params``, ..."""
    return ((isinstance(node, ast.Name) and node.id.endswith("params"))
            or (isinstance(node, ast.Attribute) and node.attr == "params"))


def _strings(node: ast.AST | None) -> set[str]:
    """The string constants an expression may evaluate to (literals, tuples of them, ``a if c else b``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return {s for e in node.elts for s in _strings(e)}
    if isinstance(node, ast.IfExp):
        return _strings(node.body) | _strings(node.orelse)
    return set()


def _bindings(tree: ast.Module) -> dict[str, set[str]]:
    """Per name, the strings anything in the module binds it to: ``x = "a"``, ``for x in ("a", "b")``,
    ``[... for x in NAMES]`` with ``NAMES`` a tuple of strings."""
    out: dict[str, set[str]] = {}
    pairs: list[tuple[ast.AST, ast.AST]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            pairs.extend((t, node.value) for t in node.targets)
        elif isinstance(node, ast.AnnAssign):
            pairs.append((node.target, node.value))  # type: ignore[arg-type]
        elif isinstance(node, (ast.For, ast.comprehension)):
            pairs.append((node.target, node.iter))
    for _ in range(2):  # a loop over a module constant: its strings once the constant is known
        for target, value in pairs:
            if isinstance(target, ast.Name):
                found = _strings(value) | (out.get(value.id, set()) if isinstance(value, ast.Name) else set())
                out.setdefault(target.id, set()).update(found)
    return out


def params_reads(path: Path) -> list[tuple[int, str]]:
    """``(line, key)`` of every record entry ``path`` reads from a params mapping by name:
    ``params["k"]``, ``params.get("k")``, ``"k" in params``, or through a name bound to ``"k"``."""
    tree = ast.parse(path.read_text())
    bound = _bindings(tree)

    def keys(node: ast.expr) -> set[str]:
        names = bound.get(node.id, set()) if isinstance(node, ast.Name) else set()
        return (_strings(node) | names) & RECORD_KEYS

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and _is_params(node.value):
            found += [(node.lineno, k) for k in keys(node.slice)]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("get", "pop") and _is_params(node.func.value) and node.args):
            found += [(node.lineno, k) for k in keys(node.args[0])]
        elif isinstance(node, ast.Compare) and isinstance(node.ops[0], (ast.In, ast.NotIn)) \
                and _is_params(node.comparators[0]):
            found += [(node.lineno, k) for k in keys(node.left)]
    return sorted(found)


def test_no_record_entry_is_read_by_name_outside_plans():
    found = [f"{path.relative_to(REPO)}:{line}: {key!r}" for path in sorted(PACKAGE.rglob("*.py"))
             if "plans" not in path.relative_to(PACKAGE).parts for line, key in params_reads(path)]
    assert not found, "params entries read by name outside plans/ (ask the plan):\n" + "\n".join(found)


def test_the_scan_sees_each_form(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        'KEYS = ("nulls", "rho")\n'
        'a = release.params["transformed"]\n'
        'b = self.params.get("length_counts")\n'
        'c = "note" in params\n'
        'key = "leaf_noise_scale" if x else "noise_scale"\n'
        'd = release.params[key]\n'
        'e = {k: params.get(k) for k in KEYS}\n'
        'f = other["transformed"], params["ledger"], options.get("rho")\n')
    assert params_reads(sample) == [(2, "transformed"), (3, "length_counts"), (4, "note"),
                                    (6, "leaf_noise_scale"), (6, "noise_scale"), (7, "nulls"), (7, "rho")]
