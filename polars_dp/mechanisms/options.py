"""A mechanism function from its plan: ``function(frame, ...) = plan(...).run(frame, seed, progress)``.

The one way of wiring a mechanism: :func:`mechanism` turns a typed stub into the public function.
Its signature (names, order, kinds, defaults, annotations) and the parameter part of its
docstring come from the plan's option table (:mod:`polars_dp.plans.options`, their one home);
the stub's own signature, there for type checkers and IDEs, must match the table and write every
default as ``...`` (checked at import).  A call binds its arguments to that signature (a keyword
the mechanism does not take is a :class:`~polars_dp.ParameterError` naming it), builds the plan
once and runs it; the runner is registered with the function, so ``df.dp.*``, the ``Session``
methods and the command line follow.
"""

from __future__ import annotations

import functools
import inspect
import textwrap
import typing
from collections.abc import Callable
from typing import Any, TypeVar

from polars_dp.errors import ParameterError
from polars_dp.plans.base import Plan, register_runner
from polars_dp.plans.options import parameters_doc, signature

F = TypeVar("F", bound=Callable[..., Any])


def check_stub(stub: Callable[..., Any], generated: inspect.Signature) -> None:
    """Refuse a stub whose parameters differ from the table's (names, order, kinds, annotations,
    whether required) or that writes a default of its own instead of ``...``."""
    hints, empty = typing.get_type_hints(stub), inspect.Parameter.empty
    written = inspect.signature(stub).parameters.values()
    for p in written:
        if p.default not in (empty, ...):
            raise TypeError(f"{stub.__name__}: parameter {p.name} writes the default {p.default!r}; its "
                            "default lives in the plan's option table: write '= ...'")
    mine = [(p.name, p.kind, p.default is empty, hints.get(p.name, Any)) for p in written]
    table = [(p.name, p.kind, p.default is empty, p.annotation) for p in generated.parameters.values()]
    if mine != table:
        wrong = next((m, t) for m, t in zip([*mine, None], [*table, None], strict=False) if m != t)
        raise TypeError(f"{stub.__name__}: the stub's parameter {wrong[0]} differs from its plan's table "
                        f"{wrong[1]} (name, kind, required, type); write the table's")


def docstring(head: str | None, plan_class: type[Plan]) -> str:
    """``head`` (the stub's docstring), what the function is, then the ``Parameters`` section
    generated from the table, before the head's examples (its first ``>>>`` line) if any."""
    before, marker, examples = inspect.cleandoc(head or "").partition("\n>>>")
    call = f'pdp.plan("{plan_class.name}", {", ".join(plan_class.positional)}, ...)'
    wiring = textwrap.fill(
        f"Exactly ``{call}.run(frame, seed=seed, progress=progress)``: the plan "
        f"(:class:`polars_dp.plans.{plan_class.__name__}`) holds every scale.",
        width=96, break_long_words=False, break_on_hyphens=False)
    return (f"{before.rstrip()}\n\n{wiring}\n\n{parameters_doc(plan_class.options_table)}\n"
            + (f"\n>>>{examples}" if marker else ""))


def binder(generated: inspect.Signature, name: str = "mechanism"
           ) -> Callable[[tuple[Any, ...], dict[str, Any]], dict[str, Any]]:
    """``bind(args, kwargs)``: the arguments a call gives, by name (defaults not filled in), as
    ``generated.bind_partial(*args, **kwargs).arguments`` holds them.  Only the data (the first
    parameter) is required here: a missing option is the plan's to refuse
    (:func:`~polars_dp.plans.options.bind_options`: a ParameterError naming the mechanism and the
    option, as ``pdp.plan`` gives), and a call without its data is a ``TypeError`` naming
    ``name``.  The signature's parameters are positional-or-keyword then keyword-only, none
    variadic, so a call whose positional arguments fit and whose keywords are parameters that
    name none of them again binds by zipping (the names in call order); any other call goes
    through :meth:`inspect.Signature.bind_partial`, which raises its usual ``TypeError``.
    Decided once per function from the signature (public), not per call."""
    params = list(generated.parameters.values())
    data = params[0].name
    kinds = {p.kind for p in params}
    positional = tuple(p.name for p in params if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD)
    names = frozenset(generated.parameters)
    zipped = kinds <= {inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY}

    def bind(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        given: dict[str, Any] | None = None
        if zipped and len(args) <= len(positional) and names.issuperset(kwargs):
            given = dict(zip(positional, args, strict=False))
            if any(k in given for k in kwargs):
                given = None
            else:
                given.update(kwargs)
        if given is None:
            try:
                given = dict(generated.bind_partial(*args, **kwargs).arguments)
            except TypeError as exc:
                raise TypeError(f"{name}(): {exc}") from None
        if data not in given:
            raise TypeError(f"{name}() missing its data, the required argument {data!r}")
        return given

    return bind


def mechanism(plan_class: type[Plan], runner: Callable[..., Any]) -> Callable[[F], F]:
    """Decorator: the public function of ``plan_class`` (its signature and docs from the
    plan's table, its body ``plan_class.make(...).run(frame, seed=..., progress=...)``), with
    ``runner(plan, frame, *, seed, progress)`` registered as the plan's runner."""

    def wrap(stub: F) -> F:
        table = plan_class.options_table
        generated = signature(table, plan_class.positional,
                              typing.get_type_hints(stub).get("return", inspect.Signature.empty))
        check_stub(stub, generated)
        name = plan_class.name
        run_keywords = [o.name for o in table if o.run]
        accepted = list(generated.parameters)[1:]
        bind = binder(generated, name)

        def function(*args: Any, **kwargs: Any) -> Any:
            unknown = [k for k in kwargs if k not in generated.parameters]
            if unknown:
                raise ParameterError(f"{name} has no option {unknown[0]!r}; its options are "
                                     f"{', '.join(accepted)}", parameter=unknown[0])
            given = bind(args, kwargs)
            frame = given.pop("frame")
            run = {k: given.pop(k) for k in run_keywords if k in given}
            return plan_class.make(**given).run(frame, **run)

        function.__name__ = stub.__name__
        function.__qualname__ = stub.__qualname__
        function.__module__ = stub.__module__
        function.__doc__ = docstring(stub.__doc__, plan_class)
        function.__signature__ = generated  # type: ignore[attr-defined]  # inspect reads a function's __signature__
        register_runner(name, runner, function)
        return function  # type: ignore[return-value]

    return wrap


def without_entries(doc: str, names: tuple[str, ...]) -> str:
    """``doc`` without the numpydoc ``Parameters`` entries of ``names`` (an entry is its
    ``name : ...`` line and the indented lines under it)."""
    out: list[str] = []
    skipping = False
    for line in doc.split("\n"):
        if not line or not line[0].isspace():  # an entry ends at the next unindented or empty line
            skipping = " : " in line and line.split(" : ", 1)[0] in names
        if not skipping:
            out.append(line)
    return "\n".join(out)


def as_method(function: Callable[..., Any], method: F, *, hidden: tuple[str, ...] = (),
              extra: tuple[inspect.Parameter, ...] = ()) -> F:
    """``method`` shown as ``function`` with its data bound (``df.dp.*``, ``Session``): the name,
    docs and signature of ``function`` less its data argument and ``hidden``, with ``self``
    first and ``extra`` last."""
    functools.update_wrapper(method, function)
    del method.__wrapped__  # type: ignore[attr-defined]  # help() and inspect use __signature__
    sig = inspect.signature(function)
    data = next(iter(sig.parameters))
    method.__doc__ = without_entries(function.__doc__ or "", (data, *hidden))
    params = [p for p in list(sig.parameters.values())[1:] if p.name not in hidden]
    self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    method.__signature__ = sig.replace(parameters=[self_param, *params, *extra])  # type: ignore[attr-defined]
    return method


__all__ = ["as_method", "binder", "check_stub", "docstring", "mechanism", "without_entries"]
