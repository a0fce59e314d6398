"""Every option is written once, in its plan's table: the mechanism functions, ``df.dp.*``, the
``Session`` methods and their docs are generated from it, and a default written anywhere else is
refused."""

from __future__ import annotations

import ast
import inspect
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

import polars_dp as pdp
from polars_dp.domains.attributes import Attribute
from polars_dp.domains.privacy_unit import Rows
from polars_dp.errors import ParameterError
from polars_dp.mechanisms.laplace_histogram import run_basic
from polars_dp.mechanisms.options import check_stub, mechanism
from polars_dp.namespace import DPNamespace
from polars_dp.noise import Neighbours, NoiseKind, SeedLike
from polars_dp.params import Nulls, OnOutOfDomain
from polars_dp.plans import REGISTRY, BasicPlan
from polars_dp.plans.options import REQUIRED, signature
from polars_dp.releases.grid import GridRelease

PACKAGE = Path(pdp.__file__).parent
NAMES = list(REGISTRY)
EMPTY = inspect.Parameter.empty


def table_view(name: str) -> list[tuple[str, inspect._ParameterKind, Any, Any]]:
    """``(name, kind, default, annotation)`` of every parameter after the data, read off the table."""
    cls = REGISTRY[name].plan_class
    kinds = inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY
    return [(o.name, kinds[o.name not in cls.positional],
             EMPTY if o.default is REQUIRED else o.default, o.type)
            for o in cls.options_table]


def view(params: Iterable[inspect.Parameter]) -> list[tuple[str, inspect._ParameterKind, Any, Any]]:
    return [(p.name, p.kind, p.default, p.annotation) for p in params]


@pytest.mark.parametrize("name", NAMES)
def test_function_signature_is_its_table(name):
    params = list(inspect.signature(getattr(pdp, name)).parameters.values())
    assert params[0].name == "frame" and params[0].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert view(params[1:]) == table_view(name)


@pytest.mark.parametrize("name", NAMES)
def test_namespace_and_session_signatures_are_the_table(name):
    method = list(inspect.signature(getattr(DPNamespace, name)).parameters.values())
    assert method[0].name == "self" and view(method[1:]) == table_view(name)
    session = list(inspect.signature(getattr(pdp.Session, name)).parameters.values())
    want = [p for p in table_view(name) if p[0] not in ("seed", "neighbours")]
    assert session[0].name == "self" and view(session[1:-1]) == want and session[-1].name == "label"


@pytest.mark.parametrize("name", NAMES)
def test_docstring_parameters_come_from_the_table(name):
    doc = getattr(pdp, name).__doc__
    section = doc[doc.index("Parameters\n----------\n"):]
    for option in REGISTRY[name].plan_class.options_table:
        assert f"\n{option.name} : " in section, option.name
        assert option.doc.split()[0] in section.split(f"\n{option.name} : ")[1]


@pytest.mark.parametrize("name", NAMES)
def test_every_option_is_typed_and_its_type_enforced(name):
    for option in REGISTRY[name].plan_class.options_table:
        assert option.type is not Any, option.name
        with pytest.raises(ParameterError) as caught:
            option.validate(object())
        assert caught.value.parameter == option.name


ROWS = "on_out_of_domain='raise', nulls='raise', count_column=None, noise='exact', progress=None"
UNIT = "privacy_unit=None"
POINTS = "frame, columns, *, bounds, epsilon"
SEQUENCES = "frame, column, *, alphabet, max_length, epsilon"
SEQUENCE_ROWS = ("nulls='raise', on_out_of_domain='raise', neighbours='add_remove', seed=None, "
                 "noise='exact', progress=None")
PUBLIC = {
    "basic": ["frame, attributes, *, epsilon, workload=None, strategy=None, neighbours='replace'",
              "seed=None", ROWS, UNIT],
    "privelet": ["frame, attributes, *, epsilon, untransformed=(), workload=None, strategy=None",
                 "neighbours='replace'",
                 "seed=None", ROWS, UNIT],
    "privtree": [POINTS, "fanout=None, theta=0.0, tree_share=0.5, neighbours='add_remove', seed=None",
                 "on_out_of_domain='raise', nulls='raise', resolution=None, count_column=None, noise='exact'",
                 "progress=None, levels=0", UNIT],
    "privtree_subgrid": [POINTS, "fanout=None, theta=0.0, tree_share=None, leaf_share=0.5, c2=3.0",
                         "max_subcell_bits=None, neighbours='add_remove', seed=None",
                         "on_out_of_domain='raise', nulls='raise', resolution=None, count_column=None",
                         "noise='exact', progress=None", UNIT],
    "uniform_grid": [POINTS, "n=None, n_share=0.05, c=10.0, neighbours='add_remove', seed=None", ROWS, UNIT],
    "adaptive_grid": [POINTS, "n=None, n_share=0.05, alpha=0.5, c=10.0, c2=5.0, neighbours='add_remove'",
                      "seed=None", ROWS, UNIT],
    "privelet_grid": [POINTS, "bits=None, neighbours='add_remove', seed=None", ROWS, UNIT],
    "privtree_sequences": [SEQUENCES, "tree_share=0.25, theta=0.0, postprocess='sum_then_clip'",
                           "max_nodes=None, length_share=0.05", SEQUENCE_ROWS, UNIT],
    "ngram_sequences": [SEQUENCES, "height=5", SEQUENCE_ROWS, UNIT],
    "hierarchical": ["frame, attributes, *, epsilon, neighbours='replace', levels=None, workload=None",
                     "seed=None", ROWS, UNIT],
}


@pytest.mark.parametrize("name", NAMES)
def test_public_signatures_are_unchanged(name):
    """The public signatures as released (names, positional order, defaults) are kept."""
    sig = inspect.signature(getattr(pdp, name))
    bare = sig.replace(parameters=[p.replace(annotation=EMPTY) for p in sig.parameters.values()],
                       return_annotation=EMPTY)
    assert str(bare)[1:-1] == ", ".join(PUBLIC[name])


def _stub(frame: Any, attributes: Attribute | Iterable[Attribute], *, epsilon: float,
          neighbours: Neighbours = "replace", seed: SeedLike = ..., on_out_of_domain: OnOutOfDomain = ...,
          nulls: Nulls = ..., count_column: str | None = ..., noise: NoiseKind = ...,
          progress: bool | None = ..., privacy_unit: Rows | None = ...) -> GridRelease:
    """A stub of basic that writes a default of its own."""


def test_a_default_written_in_the_stub_is_refused():
    with pytest.raises(TypeError, match="neighbours writes the default 'replace'"):
        mechanism(BasicPlan, run_basic)(_stub)
    assert REGISTRY["basic"].function is pdp.basic  # refused before anything was registered


def test_a_stub_that_drifts_from_its_table_is_refused():
    generated = signature(BasicPlan.options_table, BasicPlan.positional, GridRelease)

    def reordered(frame: Any, attributes: Attribute | Iterable[Attribute], *, neighbours: Neighbours = ...,
                  epsilon: float) -> GridRelease:
        """Two parameters swapped, the others left out."""

    def retyped(frame: Any, attributes: Attribute | Iterable[Attribute], *, epsilon: int,
                neighbours: Neighbours = ..., seed: SeedLike = ..., on_out_of_domain: OnOutOfDomain = ...,
                nulls: Nulls = ..., count_column: str | None = ..., noise: NoiseKind = ...,
                progress: bool | None = ..., privacy_unit: Rows | None = ...) -> GridRelease:
        """epsilon annotated int, the table says float."""

    with pytest.raises(TypeError, match=r"\('neighbours'.* differs from its plan's table \('epsilon'"):
        check_stub(reordered, generated)
    with pytest.raises(TypeError, match=r"parameter \('epsilon', .*<class 'int'>\) differs"):
        check_stub(retyped, generated)


def _option_names() -> set[str]:
    return {o.name for e in REGISTRY.values() for o in e.plan_class.options_table}


def literal_option_defaults(path: Path, names: set[str]) -> list[str]:
    """``function(name=literal)`` in ``path`` for every parameter named like an option whose
    default is written (anything but ``...`` or an option's ``.default``), in the mechanism stubs
    (decorated functions), the registered runners and the surfaces generated from the registry."""
    runners = {e.runner.__name__ for e in REGISTRY.values() if e.runner is not None}
    surface = path.name in ("namespace.py", "session.py")
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.FunctionDef):
            continue
        if not (surface or (node.decorator_list and node.name in REGISTRY) or node.name in runners):
            continue
        args = node.args
        positional = [*args.posonlyargs, *args.args]
        pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults, strict=True))
        pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None]
        for arg, default in pairs:
            stub = isinstance(default, ast.Constant) and default.value is ...
            read = isinstance(default, ast.Attribute) and default.attr == "default"  # OPTION.default
            if arg.arg in names and not stub and not read:
                found.append(f"{path.name}:{node.lineno} {node.name}({arg.arg}={ast.unparse(default)})")
    return found


def test_no_option_default_is_written_outside_its_table():
    names = _option_names()
    files = [*sorted((PACKAGE / "mechanisms").glob("*.py")), PACKAGE / "namespace.py", PACKAGE / "session.py"]
    assert [f for path in files for f in literal_option_defaults(path, names)] == []


def test_the_scan_sees_a_default_written_twice(tmp_path):
    """The scan flags a stub default, a runner default and a surface default."""
    source = tmp_path / "session.py"
    source.write_text("def run_basic(plan, frame, *, seed=None):\n    pass\n"
                      "@mechanism(X, run_basic)\ndef basic(frame, *, noise='exact', nulls=...):\n    pass\n"
                      "def method(self, *, neighbours='replace', progress=PROGRESS.default):\n    pass\n")
    found = literal_option_defaults(source, _option_names())
    assert [f.split(" ", 1)[1] for f in found] == ["run_basic(seed=None)", "basic(noise='exact')",
                                                   "method(neighbours='replace')"]


def test_a_call_builds_the_plan_once(monkeypatch):
    """``function(frame, ...) = plan(...).run(frame)``: one plan per call, for every surface."""
    import polars as pl

    built = []
    original = BasicPlan.__init__

    def counting(self, *args, **kwargs):
        built.append(1)
        original(self, *args, **kwargs)

    monkeypatch.setattr(BasicPlan, "__init__", counting)
    df = pl.DataFrame({"a": [0, 1, 1]})
    attrs = [pdp.Ordinal("a", 0, 2)]
    pdp.basic(df, attrs, epsilon=1.0, seed=1)
    df.dp.basic(attrs, epsilon=1.0, seed=1)
    pdp.Session(df, epsilon=1.0, neighbours="replace").basic(attrs, epsilon=0.5)
    assert len(built) == 3


def test_every_privtree_surface_plans_once(monkeypatch):
    """A PrivTree release is planned once by the function and once by a Session method (the
    runner reads the plan, it never builds another)."""
    import polars as pl

    from polars_dp.plans import PrivTreePlan

    built = []
    original = PrivTreePlan._calibrate

    def counting(self):
        built.append(1)
        original(self)

    monkeypatch.setattr(PrivTreePlan, "_calibrate", counting)
    df = pl.DataFrame({"x": [0.1, 0.7], "y": [0.2, 0.9]})
    pdp.privtree(df, ["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=1.0, seed=1)
    pdp.Session(df, epsilon=1.0, neighbours="add_remove").privtree(["x", "y"], bounds=[(0, 1), (0, 1)],
                                                                   epsilon=0.5)
    assert len(built) == 2


def test_annotations_are_types():
    """The generated signatures hold real types, the return type the stub's."""
    sig = inspect.signature(pdp.privtree)
    assert sig.parameters["levels"].annotation == (int | None)
    assert sig.return_annotation is pdp.SpatialRelease
