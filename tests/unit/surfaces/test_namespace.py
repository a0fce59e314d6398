"""``df.dp.*`` methods are the mechanisms themselves: same parameters, defaults and docs (less
the data argument they are bound to)."""

from __future__ import annotations

import inspect

import polars as pl
import pytest

import polars_dp as pdp
from polars_dp import mechanisms
from polars_dp.namespace import DPNamespace

NAMES = ["basic", "privelet", "privtree", "uniform_grid", "adaptive_grid", "privelet_grid",
         "privtree_sequences", "ngram_sequences", "privtree_subgrid", "hierarchical"]


@pytest.mark.parametrize("name", NAMES)
def test_method_signature_is_the_mechanism_less_its_data(name):
    fn = getattr(mechanisms, name)
    method = getattr(DPNamespace, name)
    want = list(inspect.signature(fn).parameters.values())[1:]
    got = list(inspect.signature(method).parameters.values())[1:]
    assert got == want
    assert "\nframe : " in fn.__doc__ and "\nframe : " not in method.__doc__
    fn_lines = fn.__doc__.split("\n")
    start = fn_lines.index(next(x for x in fn_lines if x.startswith("frame : ")))
    end = next(i for i in range(start + 1, len(fn_lines)) if not fn_lines[i].startswith("    "))
    assert method.__doc__ == "\n".join(fn_lines[:start] + fn_lines[end:])  # the rest unchanged


def test_every_mechanism_has_a_method():
    public = {n for n in mechanisms.__all__}
    assert public == set(NAMES)


def test_method_passes_the_frame_and_arguments():
    df = pl.DataFrame({"a": [0, 1, 1, 2]})
    lazy = df.lazy()
    attrs = [pdp.Ordinal("a", 0, 2)]
    r1 = df.dp.basic(attrs, epsilon=1.0, seed=3)
    r2 = lazy.dp.basic(attrs, epsilon=1.0, seed=3)
    r3 = pdp.basic(df, attrs, epsilon=1.0, seed=3)
    assert (r1.counts == r3.counts).all() and (r2.counts == r3.counts).all()


def test_without_entries_drops_whole_entries_and_keeps_the_blank_line_after():
    from polars_dp.mechanisms.options import without_entries
    head = "Intro.\n\nParameters\n----------\n"
    doc = head + "frame : the rows\n    more\nepsilon : e\nseed : s\n    x\n\n>>> 1\n"
    assert without_entries(doc, ("frame", "seed")) == head + "epsilon : e\n\n>>> 1\n"
