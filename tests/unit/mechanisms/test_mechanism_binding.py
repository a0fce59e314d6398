"""A mechanism function binds its arguments as its signature does, without ``Signature.bind``
on the common call (a fixed cost of every release), and with its errors on any other call."""

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
       ((FRAME, ATTRS), {}),  # epsilon missing
       ((), {"attributes": ATTRS, "epsilon": 1.0}),  # frame missing
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
    for args, kwargs in BAD:
        with pytest.raises(TypeError) as expected:
            sig.bind(*args, **kwargs)
        with pytest.raises(TypeError) as got:
            bind(args, kwargs)
        assert str(got.value) == str(expected.value)


def test_a_release_binds_without_signature_bind(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("Signature.bind on the common call")

    want = pdp.basic(FRAME, ATTRS, epsilon=1.0, seed=4)
    monkeypatch.setattr(inspect.Signature, "bind", refuse)
    for args, kwargs in GOOD[:3]:
        got = pdp.basic(*args, **{**kwargs, "epsilon": 1.0, "seed": 4, "neighbours": "replace"})
        assert np.array_equal(got.counts, want.counts)
    with pytest.raises(AssertionError, match="Signature.bind"):  # an unusual call still takes it
        pdp.basic(FRAME, ATTRS, 1.0)


def test_binding_errors_are_unchanged():
    with pytest.raises(TypeError, match="multiple values for argument 'attributes'"):
        pdp.basic(FRAME, ATTRS, attributes=ATTRS, epsilon=1.0)
    with pytest.raises(TypeError, match="missing a required argument: 'epsilon'"):
        pdp.basic(FRAME, ATTRS)
    with pytest.raises(pdp.ParameterError, match="basic has no option 'epsilonn'"):
        pdp.basic(FRAME, ATTRS, epsilonn=1.0)
