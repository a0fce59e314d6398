from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import polars_dp as pdp
from polars_dp.domains.hierarchy import Hierarchy
from polars_dp.errors import HierarchyError

OCCUPATION = {
    "Sales": ["clerk", "agent"],
    "Tech": {"Engineering": ["civil", "software", "chemical"], "Science": ["physics", "biology"]},
    "military": ["Armed-Forces"],
}


def test_dfs_leaf_order_and_contiguous_ranges():
    h = Hierarchy.from_dict(OCCUPATION)
    assert h.leaves == ("clerk", "agent", "civil", "software", "chemical", "physics", "biology",
                        "Armed-Forces")
    for label, members in [("Sales", ["clerk", "agent"]), ("Engineering", ["civil", "software", "chemical"]),
                           ("Tech", ["civil", "software", "chemical", "physics", "biology"]),
                           ("*", list(h.leaves))]:
        start, stop = h.leaf_range(label)
        assert list(h.leaves[start:stop]) == members
    assert h.leaf_range("software") == (3, 4)


def test_height_counts_levels_including_root_and_handles_uneven_depths():
    assert Hierarchy.flat(["a", "b", "c"]).height == 2
    h = Hierarchy.from_dict(OCCUPATION)
    # root -> Tech -> Engineering -> civil: 4 levels; Sales leaves sit at level 3
    assert h.height == 4
    assert h.level_names == ("level1", "level2")


def test_single_child_group_is_collapsed_but_keeps_its_label():
    h = Hierarchy.from_dict(OCCUPATION)
    assert h.leaf_range("military") == h.leaf_range("Armed-Forces")
    # the collapsed tree has no node with exactly one child
    assert not np.any(h.fanouts == 1)
    # nodes: root, 3 top nodes (Sales, Tech, Armed-Forces), 2 subgroups, 7 leaves below them
    assert h.n_nodes == 1 + 3 + 2 + 2 + 5


def test_collapsed_arrays_describe_a_consistent_tree():
    h = Hierarchy.from_dict(OCCUPATION)
    for node in range(1, h.n_nodes):
        parent = h.node_parent[node]
        assert h.node_depth[node] == h.node_depth[parent] + 1
        assert h.node_start[parent] <= h.node_start[node] < h.node_stop[node] <= h.node_stop[parent]
    # the children of every internal node partition its leaf range
    for node in np.flatnonzero(h.fanouts):
        kids = np.flatnonzero(h.node_parent == node)
        assert h.node_stop[kids].sum() - h.node_start[kids].sum() == h.node_stop[node] - h.node_start[node]


def test_same_label_for_group_and_its_only_member_is_allowed():
    h = Hierarchy.from_dict({"known": {"white": ["white"], "asian/pacific": ["asian", "p/i"]},
                             "unknown": ["unk"]})
    assert h.leaves == ("white", "asian", "p/i", "unk")
    assert h.leaf_range("white") == (0, 1)


def test_duplicate_label_for_different_members_is_rejected():
    with pytest.raises(pdp.HierarchyError, match="'clerk' appears twice"):
        Hierarchy.from_dict({"Sales": ["clerk", "agent"], "Office": ["clerk", "typist"]})
    with pytest.raises(pdp.HierarchyError, match="listed twice"):
        Hierarchy.flat(["a", "b", "a"])


def test_empty_group_and_bad_labels_are_rejected():
    with pytest.raises(pdp.HierarchyError, match="no members"):
        Hierarchy.from_dict({"Sales": []})
    with pytest.raises(pdp.HierarchyError, match="not a string, int or bool"):
        Hierarchy.from_dict({"Sales": [1.5]})


def test_from_parent_map_matches_from_dict_and_detects_cycles():
    parents = {"clerk": "Sales", "agent": "Sales", "civil": "Engineering", "Engineering": "Tech",
               "physics": "Tech"}
    h = Hierarchy.from_parent_map(parents)
    assert h == Hierarchy.from_dict({"Sales": ["clerk", "agent"],
                                     "Tech": [{"Engineering": ["civil"]}, "physics"]})
    with pytest.raises(pdp.HierarchyError, match="cycle"):
        Hierarchy.from_parent_map({"a": "b", "b": "a"})
    with pytest.raises(pdp.HierarchyError, match="cycle"):
        Hierarchy.from_parent_map({"a": "a"})
    with pytest.raises(pdp.HierarchyError, match="cycle"):
        Hierarchy.from_parent_map({"x": "top", "a": "b", "b": "c", "c": "a"})


def test_from_levels_is_order_independent_and_checks_single_parents():
    table = pl.DataFrame({"group": ["B", "A", "A", "B"], "code": [20, 11, 10, 21]})
    h = Hierarchy.from_levels(table, ["group", "code"])
    assert h.leaves == (10, 11, 20, 21)
    assert h.level_names == ("group",)
    assert h == Hierarchy.from_levels(table.reverse().lazy(), ["group", "code"])
    bad = pl.DataFrame({"group": ["A", "B"], "code": [1, 1]})
    with pytest.raises(pdp.HierarchyError, match="several parents"):
        Hierarchy.from_levels(bad, ["group", "code"])
    with pytest.raises(pdp.HierarchyError, match="nulls"):
        Hierarchy.from_levels(pl.DataFrame({"g": ["A", None], "c": [1, 2]}), ["g", "c"])


def test_json_round_trip_keeps_leaf_types_and_level_names():
    h = Hierarchy.from_dict({"low": [1, 2], "high": [3]}, level_names=["band"])
    back = Hierarchy.from_json(h.to_json())
    assert back == h and back.leaves == (1, 2, 3) and back.level_names == ("band",)


def test_level_labels_repeat_shallow_leaves():
    h = Hierarchy.from_dict(OCCUPATION, level_names=["sector", "field"])
    labels = h.level_labels()
    assert labels["sector"] == ["Sales"] * 2 + ["Tech"] * 5 + ["military"]
    assert labels["field"] == ["clerk", "agent"] + ["Engineering"] * 3 + ["Science"] * 2 + ["Armed-Forces"]


def test_unknown_label_error_suggests_case_fix():
    h = Hierarchy.from_dict(OCCUPATION)
    with pytest.raises(pdp.QueryError, match="did you mean 'Sales'"):
        h.leaf_range("sales")


@pytest.mark.parametrize("tree", [{"_note": "text"}, {"group": "leaf"}, {"a": ["x"], "b": 3}])
def test_a_group_given_as_a_scalar_is_refused(tree):
    key = list(tree)[-1]
    with pytest.raises(HierarchyError, match=f"group {key!r}"):
        Hierarchy.from_dict(tree)
