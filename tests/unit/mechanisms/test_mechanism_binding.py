"""A mechanism function binds its arguments as its signature does, without ``Signature.bind``
on the common call (a fixed cost of every release), and with its errors, named, on any other
call; a missing option is the plan's ParameterError (as ``pdp.plan`` gives), missing data a
TypeError."""

from __future__ import annotations

import inspect

import numpy as np
import polars as pl
import pytest

import polars_dp as pdp
from polars_dp.mechanisms.options import binder
from polars_dp.plans.base import REGISTRY

FRAME = pl.DataFrame({"age": [1, 2, 3, 3], "sex": [0, 1, 1, 0]})
ATTRS = [pdp.Ordinal("age", 0, 9), pdp.Nominal("sex", categories=[0, 1])]

GOOD = [((FRAME, ATTRS), {"epsilon": 1.0}),
        ((FRAME,), {"attributes": ATTRS, "epsilon": 1.0, "seed": 3}),
        ((), {"frame": FRAME, "attributes": ATTRS, "epsilon": 0.5, "neighbours": "add_remove"}),
        ((FRAME, ATTRS), {"epsilon": 2, "noise": "float", "seed": 1, "progress": False})]
BAD = [((FRAME, ATTRS, 1.0), {}),  # epsilon is keyword-only
       ((FRAME, ATTRS), {"attributes": ATTRS, "epsilon": 1.0}),  # twice
       ((FRAME, ATTRS, 1.0, 2.0), {"epsilon": 1.0}),
       ((FRAME, ATTRS), {"epsilon": 1.0, "bogus": 1})]  # no such parameter


@pytest.mark.parametrize("mechanism", list(REGISTRY))
def test_binder_gives_what_signature_bind_gives(mechanism):
    function = REGISTRY[mechanism].function
    assert function is not None
    sig = inspect.signature(function)
    bind = binder(sig)
    names = list(sig.parameters)
    for args, kwargs in GOOD:
        kwargs = {k: v for k, v in kwargs.items() if k in names}
        try:
            want = dict(sig.bind(*args, **kwargs).arguments)
        except TypeError:
            continue
        assert bind(args, kwargs) == want
    for args, kwargs in BAD:  # the error of Signature.bind_partial (a missing option is the plan's)
        try:
            want = dict(sig.bind_partial(*args, **kwargs).arguments)
        except TypeError as expected:
            with pytest.raises(TypeError) as got:
                bind(args, kwargs)
            assert str(got.value) == f"mechanism(): {expected}"
        else:
            assert bind(args, kwargs) == want
    # an option missing binds (the plan refuses it); the data missing does not
    assert bind((FRAME, ATTRS), {}) == dict(zip(names, (FRAME, ATTRS), strict=False))
    with pytest.raises(TypeError, match=r"^mechanism\(\) missing its data, the required argument 'frame'$"):
        bind((), {names[1]: ATTRS, "epsilon": 1.0})


def test_a_release_binds_without_signature_bind(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("Signature.bind on the common call")

    want = pdp.basic(FRAME, ATTRS, epsilon=1.0, seed=4)
    monkeypatch.setattr(inspect.Signature, "bind", refuse)
    monkeypatch.setattr(inspect.Signature, "bind_partial", refuse)
    for args, kwargs in GOOD[:3]:
        got = pdp.basic(*args, **{**kwargs, "epsilon": 1.0, "seed": 4, "neighbours": "replace"})
        assert np.array_equal(got.counts, want.counts)
    with pytest.raises(AssertionError, match="Signature.bind"):  # an unusual call still takes it
        pdp.basic(FRAME, ATTRS, 1.0)


def test_binding_errors_name_the_mechanism():
    with pytest.raises(TypeError, match=r"^basic\(\): multiple values for argument 'attributes'$"):
        pdp.basic(FRAME, ATTRS, attributes=ATTRS, epsilon=1.0)
    with pytest.raises(TypeError, match=r"^basic\(\) missing its data"):
        pdp.basic(attributes=ATTRS, epsilon=1.0)
    for call in (lambda: pdp.basic(FRAME, ATTRS), lambda: FRAME.dp.basic(ATTRS),
                 lambda: pdp.plan("basic", ATTRS)):  # the plan's refusal, whichever way
        with pytest.raises(pdp.ParameterError, match=r"^basic needs epsilon= ") as err:
            call()
        assert err.value.parameter == "epsilon"
    with pytest.raises(pdp.ParameterError, match="basic has no option 'epsilonn'"):
        pdp.basic(FRAME, ATTRS, epsilonn=1.0)
