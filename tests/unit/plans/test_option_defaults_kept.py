"""A plan checks each option's default once per option (a constant of its table), keeps it only
when it cannot change, and never takes one table's options for another's."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from polars_dp.errors import ParameterError
from polars_dp.plans.options import Option, bind_options, immutable


@dataclass(frozen=True)
class Frozen:
    a: int = 1
    b: tuple = ("x",)


@dataclass
class Loose:
    a: int = 1


def counting(calls: list, result=None):
    def check(value):
        calls.append(value)
        return value if result is None else result()
    return check


def test_immutable_values():
    assert all(immutable(v) for v in (None, "s", 1, 1.5, True, (), (1, ("a", None)), Frozen()))
    assert not any(immutable(v) for v in ([], {}, (1, []), Loose(), Frozen(b=([],)), {1}))


def test_an_immutable_default_is_checked_once_and_shared():
    calls: list = []
    table = (Option("n", int, 3, check=counting(calls)), Option("name", str, "x", check=counting(calls)))
    first = bind_options("m", table, {})
    second = bind_options("m", table, {"name": "y"})
    assert first == {"n": 3, "name": "x"} and second == {"n": 3, "name": "y"}
    assert calls == [3, "x", "y"]  # the defaults once, a given value every time


def test_a_mutable_checked_default_is_checked_for_every_plan():
    calls: list = []
    table = (Option("items", tuple, (), check=counting(calls, list)),)
    first, second = bind_options("m", table, {})["items"], bind_options("m", table, {})["items"]
    assert first == second == [] and first is not second
    assert len(calls) == 3  # once to decide whether it can be kept, then once per plan


def test_tables_do_not_share_their_options():
    one = (Option("a", int, 1), Option("b", int, 2))
    two = (Option("a", int, 5), Option("c", int, 6))
    for _ in range(2):
        assert bind_options("one", one, {}) == {"a": 1, "b": 2}
        assert bind_options("two", two, {}) == {"a": 5, "c": 6}
    with pytest.raises(ParameterError, match="two has no option 'b'; its options are a, c"):
        bind_options("two", two, {"b": 1})
    listed = [Option("a", int, 7)]  # a list (not a class constant): read afresh every time
    assert bind_options("l", listed, {}) == {"a": 7}
    listed.append(Option("d", int, 8))
    assert bind_options("l", listed, {}) == {"a": 7, "d": 8}


def test_a_wrong_default_is_still_refused_every_time():
    table = (Option("k", int, "no", check=lambda v: v if isinstance(v, int) else int("x")),)
    for _ in range(2):
        with pytest.raises(ValueError):
            bind_options("m", table, {})
