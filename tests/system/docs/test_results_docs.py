"""What ``docs/results/`` says about the library's defaults is the code's (the results are
generated once and checked in; a default may change after)."""

from __future__ import annotations

import inspect

import numpy as np
import polars as pl

import polars_dp as pdp
from benchmarks.evaluation import spatial_experiment
from benchmarks.evaluation.data import Points
from polars_dp.kernels.subgrid import TREE_SHARE, TREE_SHARE_WIDE, default_tree_share
from tests.helpers import REPO


def test_spatial_results_state_privtree_levels_default_of_the_code():
    default = inspect.signature(pdp.privtree).parameters["levels"].default
    text = (REPO / "docs" / "results" / "spatial.md").read_text()
    assert f"PrivTree is `levels={default}`, the paper's release and the library's default" in text
    assert "default counted top levels" not in text and "`privtree(..., levels=None)`" in text


def test_privtree_levels_in_the_evaluation_asks_for_the_counted_levels():
    """The "PrivTree+levels" column is ``levels=None``, not the default (the "PrivTree" column):
    the two columns compare different releases."""
    rng = np.random.default_rng(1)
    points = Points("p", pl.DataFrame({"x": rng.random(500), "y": rng.random(500)}),
                    {"x": (0.0, 1.0), "y": (0.0, 1.0)})
    built = {name: spatial_experiment.mechanisms()[name](points, 1.0, 1) for name in ("PrivTree+levels",
                                                                                       "PrivTree")}
    assert built["PrivTree+levels"].params["levels"] == 2 and "levels" not in built["PrivTree"].params


def test_spatial_results_state_privtree_subgrid_defaults_of_the_code():
    """The privtree_subgrid column is the release with its defaults: the note says which."""
    defaults = {k: p.default for k, p in inspect.signature(pdp.privtree_subgrid).parameters.items()}
    text = (REPO / "docs" / "results" / "spatial.md").read_text()
    assert defaults["tree_share"] is None  # chosen by dimension
    shares = {d: default_tree_share(d) for d in (2, 3, 4, 5)}
    assert shares == {2: TREE_SHARE, 3: TREE_SHARE, 4: TREE_SHARE_WIDE, 5: TREE_SHARE_WIDE}
    stated = (f"its defaults (tree_share {TREE_SHARE:g} up to 3-D and {TREE_SHARE_WIDE:g} from 4-D, "
              f"leaf_share {defaults['leaf_share']:g}, c2 {defaults['c2']:g}, fanout 4,")
    assert stated in text
    assert defaults["fanout"] is None and defaults["max_subcell_bits"] is None  # min(4, 2^d), min(8, d * res)
    assert "## privtree_subgrid against min(PrivTree, AG)" in text
