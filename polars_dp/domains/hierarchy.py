"""Public generalisation hierarchies for nominal attributes.

A hierarchy is a tree whose leaves are the attribute's values (the Privelet paper,
Xiao et al. 2010, Sec. IV-B).  Leaves are ordered depth-first, so every node covers a
contiguous range of leaves ``[start, stop)``: a nominal range query (all leaves under one
node) is then a slice, and the nominal wavelet transform works on segment sums.

Conventions
-----------
* The root is implicit (label ``"*"`` unless given).
* ``height`` counts levels *including* the root: a flat hierarchy (root + leaves) has
  height 2.  Privelet's nominal generalised sensitivity is ``height`` (Lemma 4); leaves at
  different depths are allowed and the height is then the deepest leaf's level.
* A node with a single child is *collapsed* into that child for the transform (its
  coefficient would be identically zero).  Its label stays valid in queries and names the
  same leaves as the child; it still appears in the level columns of a release.
* A label that names two different sets of leaves (a duplicate), a cycle, an empty group or
  a non-string group label raises :class:`~polars_dp.errors.HierarchyError`.

A hierarchy is a *public* input.  Build it from domain knowledge or a public lookup
table, never from the private data: the set of leaves itself is part of the release.
"""

from __future__ import annotations

import functools
import itertools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import polars as pl

from polars_dp.errors import HierarchyError, QueryError

Label = str | int | bool


@dataclass
class _Node:
    label: Any
    children: list[_Node] = field(default_factory=list)

    @property
    def is_leaf(self) -> bool:
        return not self.children


def _parse(obj: Any, path: str) -> list[_Node]:
    """Nested dict / list / scalar -> list of nodes (children of an implicit parent)."""
    if isinstance(obj, Mapping):
        nodes = []
        for key, value in obj.items():
            if not isinstance(key, str):
                raise HierarchyError(f"group labels must be strings; got {key!r} under {path}")
            if not isinstance(value, (Mapping, list, tuple)):
                raise HierarchyError(
                    f"group {key!r} (under {path}) has {value!r} as its members; give a list of members "
                    f"(e.g. {{{key!r}: [{value!r}]}}) or a dict of sub-groups"
                )
            children = _parse(value, f"{path}/{key}")
            if not children:
                raise HierarchyError(f"group {key!r} (under {path}) has no members; remove it")
            nodes.append(_Node(key, children))
        return nodes
    if isinstance(obj, (list, tuple)):
        nodes = []
        for item in obj:
            if isinstance(item, Mapping):
                nodes.extend(_parse(item, path))
            elif isinstance(item, (list, tuple)):
                raise HierarchyError(
                    f"nested list under {path}: give a group a name, e.g. {{'group': [...]}}"
                )
            else:
                nodes.append(_Node(_check_leaf(item, path)))
        return nodes
    return [_Node(_check_leaf(obj, path))]


def _check_leaf(value: Any, path: str) -> Label:
    if isinstance(value, (str, bool, int, np.integer)) and value is not None:
        return value.item() if isinstance(value, np.integer) else value
    raise HierarchyError(
        f"leaf {value!r} under {path} is not a string, int or bool; nominal values must be one of these"
    )


def _unparse(nodes: list[_Node]) -> Any:
    """Inverse of :func:`_parse` (JSON-friendly)."""
    if all(n.is_leaf for n in nodes):
        return [n.label for n in nodes]
    if all(not n.is_leaf for n in nodes):
        return {n.label: _unparse(n.children) for n in nodes}
    return [n.label if n.is_leaf else {n.label: _unparse(n.children)} for n in nodes]


def _collapse(node: _Node) -> _Node:
    """Replace every single-child chain by its bottom node (the root keeps its place)."""
    children = []
    for child in node.children:
        while len(child.children) == 1:
            child = child.children[0]
        children.append(_collapse(child))
    if len(children) == 1 and not children[0].is_leaf:  # root with a single group
        return _collapse(_Node(node.label, children[0].children))
    return _Node(node.label, children)


class Hierarchy:
    """A public tree over the values of a nominal attribute.

    Build it with :meth:`from_dict`, :meth:`from_parent_map`, :meth:`from_levels` or
    :meth:`flat`.  Attributes used by the mechanisms:

    ``leaves``
        leaf labels in depth-first order (the order of the attribute's cells);
    ``height``
        levels including the root, after collapsing single-child nodes;
    ``node_start``, ``node_stop``, ``node_parent``, ``node_depth``
        per node of the collapsed tree in level (BFS) order, node 0 being the root: the
        leaf range it covers, its parent's index (-1 for the root) and its depth.

    >>> import polars_dp as pdp
    >>> h = pdp.Hierarchy.from_dict({"europe": ["fr", "de"], "asia": ["jp"]})
    >>> h.leaves, h.height
    (('fr', 'de', 'jp'), 3)
    """

    def __init__(self, tree: Any, *, root: str = "*", level_names: Sequence[str] | None = None):
        nodes = _parse(tree, root)
        if not nodes:
            raise HierarchyError("a hierarchy needs at least one leaf")
        self._root = _Node(root, nodes)
        self.root: str = root
        self._index_original()
        self._index_collapsed()
        depth_orig = self._orig_height - 2
        if level_names is None:
            level_names = [f"level{k}" for k in range(1, depth_orig + 1)]
        level_names = list(level_names)
        if len(level_names) != depth_orig:
            raise HierarchyError(
                f"level_names has {len(level_names)} names but the hierarchy has {depth_orig} "
                "group levels between the root and the leaves"
            )
        self.level_names: tuple[str, ...] = tuple(level_names)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_dict(cls, tree: Mapping | Sequence, *, root: str = "*",
                  level_names: Sequence[str] | None = None) -> Hierarchy:
        """From nested groups, e.g. ``{"Sales": ["clerk", "agent"], "Tech": {...}}``.

        A value is a list of members (leaf labels or ``{group: members}`` dicts) or a dict
        of sub-groups.  The root is implicit.
        """
        return cls(tree, root=root, level_names=level_names)

    @classmethod
    def flat(cls, categories: Iterable[Label], *, root: str = "*") -> Hierarchy:
        """Root plus leaves: the hierarchy of a plain categorical attribute (height 2)."""
        cats = list(categories)
        if len(set(map(_key, cats))) != len(cats):
            dup = next(c for c in cats if sum(_key(x) == _key(c) for x in cats) > 1)
            raise HierarchyError(f"category {dup!r} is listed twice")
        return cls(cats, root=root)

    @classmethod
    def from_parent_map(cls, parents: Mapping[Label, str | None], *, root: str = "*") -> Hierarchy:
        """From a ``child -> parent`` mapping.

        Parents that are not themselves children (or whose parent is ``None`` / the root
        label) hang under the root; nodes that are never parents are leaves.
        """
        children: dict[Any, list[Any]] = {}
        tops: list[Any] = []
        for child, parent in parents.items():
            if child == parent:
                raise HierarchyError(f"cycle: {child!r} is its own parent")
            if parent is None or parent == root:
                tops.append(child)
            else:
                children.setdefault(parent, []).append(child)
        for parent in children:
            if parent not in parents and parent not in tops:
                tops.append(parent)
        if not tops:
            raise HierarchyError("cycle: every node has a parent, so there is no top level")

        seen: set = set()

        def build(label: Any, trail: tuple) -> Any:
            if label in trail:
                raise HierarchyError(f"cycle: {' -> '.join(map(repr, (*trail, label)))}")
            seen.add(label)
            if label not in children:
                return label
            return {label: [build(c, (*trail, label)) for c in children[label]]}

        tree = [build(t, ()) for t in tops]
        unreached = [c for c in parents if c not in seen]
        if unreached:
            raise HierarchyError(f"cycle: {unreached[0]!r} cannot be reached from the top level")
        return cls(tree, root=root)

    @classmethod
    def from_levels(cls, frame: pl.DataFrame | pl.LazyFrame, columns: Sequence[str], *,
                    root: str = "*") -> Hierarchy:
        """From a *public* lookup table with one column per level, top level first.

        The last column holds the leaves.  Labels within a group are sorted, so the result
        does not depend on row order.  Each label must have exactly one parent.
        """
        columns = list(columns)
        if not columns:
            raise HierarchyError("from_levels needs at least one column (the leaves)")
        df = frame.lazy().select(columns).unique().collect()
        for c in columns:
            if df[c].null_count():
                raise HierarchyError(f"column {c!r} of the level table has nulls; fill or drop them")
        df = df.with_columns(pl.col(c).cast(pl.String) for c in columns[:-1])
        for upper, lower in itertools.pairwise(columns):
            bad = df.group_by(lower).agg(pl.col(upper).n_unique().alias("n"), pl.col(upper).unique()
                                         .sort().alias("parents")).filter(pl.col("n") > 1)
            if bad.height:
                row = bad.row(0, named=True)
                raise HierarchyError(
                    f"{lower}={row[lower]!r} has several parents in {upper!r}: {row['parents']}"
                )

        def build(sub: pl.DataFrame, level: int) -> Any:
            col = columns[level]
            if level == len(columns) - 1:
                return sorted(sub[col].unique().to_list(), key=_key)
            return {g: build(part, level + 1)
                    for (g,), part in sorted(sub.group_by(col), key=lambda kv: kv[0][0])}

        return cls(build(df, 0), root=root, level_names=columns[:-1])

    # ------------------------------------------------------------------ indexing
    def _index_original(self) -> None:
        leaves: list[Any] = []
        ranges: dict[Any, tuple[int, int]] = {}
        ancestors: list[list[Any]] = []  # per leaf: labels at depth 1..d
        height = 1

        def visit(node: _Node, depth: int, trail: list[Any]) -> None:
            nonlocal height
            start = len(leaves)
            if node.is_leaf:
                leaves.append(node.label)
                ancestors.append(trail[1:] + [node.label])
                height = max(height, depth + 1)
            for child in node.children:
                visit(child, depth + 1, trail + [node.label])
            rng = (start, len(leaves))
            key = _key(node.label)
            if key in ranges and ranges[key] != rng:
                raise HierarchyError(
                    f"label {node.label!r} appears twice for different members; labels must be unique"
                )
            ranges[key] = rng

        visit(self._root, 0, [])
        self.leaves: tuple[Label, ...] = tuple(leaves)
        self._ranges = ranges
        self._orig_height = height
        self._ancestors = ancestors

    def _index_collapsed(self) -> None:
        tree = _collapse(self._root)
        rows: list[tuple[int, int, int, int]] = []  # per node: start, stop, parent, depth
        queue: list[tuple[_Node, int, int]] = [(tree, -1, 0)]
        # collapsing keeps every surviving node's label and leaf range: reuse the original ranges
        while queue:
            node, parent, depth = queue.pop(0)
            start, stop = self._ranges[_key(node.label)] if node is not tree else (0, len(self.leaves))
            queue.extend((child, len(rows), depth + 1) for child in node.children)
            rows.append((start, stop, parent, depth))
        columns = np.array(rows, dtype=np.int64).T
        self.node_start, self.node_stop, self.node_parent, self.node_depth = (c.copy() for c in columns)
        self.height: int = int(self.node_depth.max()) + 1

    # ------------------------------------------------------------------ public API
    @property
    def n_leaves(self) -> int:
        return len(self.leaves)

    @property
    def n_nodes(self) -> int:
        """Nodes of the collapsed tree (root included)."""
        return len(self.node_start)

    @property
    def fanouts(self) -> np.ndarray:
        """Number of children of every node of the collapsed tree (0 for leaves)."""
        return np.bincount(self.node_parent[1:], minlength=self.n_nodes)

    @property
    def labels(self) -> list[Label]:
        """Every label a query may use: root, groups (collapsed ones too) and leaves."""
        return [self.root, *(k[1] for k in self._ranges if k[1] != self.root)]

    def leaf_range(self, label: Label) -> tuple[int, int]:
        """``[start, stop)`` of the leaves under ``label`` (a leaf, a group or the root)."""
        try:
            return self._ranges[_key(label)]
        except (KeyError, TypeError):
            close = [str(x) for x in self.labels if str(x).lower() == str(label).lower()]
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise QueryError(f"{label!r} is not a label of this hierarchy{hint}") from None

    def level_labels(self) -> dict[str, list[Label]]:
        """For each group level (top first), the label of every leaf's ancestor at that level.

        A leaf shallower than a level repeats its deepest label, so filtering a level column
        by a label always selects exactly that label's leaves.
        """
        return {name: [a[min(k, len(a) - 1)] for a in self._ancestors]
                for k, name in enumerate(self.level_names)}

    def to_dict(self) -> Any:
        """The nested form accepted by :meth:`from_dict` (before collapsing)."""
        return _unparse(self._root.children)

    def to_json(self) -> dict:
        return {"root": self.root, "tree": self.to_dict(), "level_names": list(self.level_names)}

    @classmethod
    def from_json(cls, obj: Mapping | str) -> Hierarchy:
        if isinstance(obj, str):
            obj = cast(Mapping, json.loads(obj))
        return cls(obj["tree"], root=obj["root"], level_names=obj.get("level_names"))

    @functools.cached_property
    def _json_key(self) -> str:
        """The canonical JSON of :meth:`to_json`, computed once (a hierarchy is not changed after
        it is built): equality and hashing, which the kernels' caches do per block."""
        return json.dumps(self.to_json(), sort_keys=True, default=str)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Hierarchy) and (self is other or self._json_key == other._json_key)

    def __hash__(self) -> int:
        return hash(self._json_key)

    def __repr__(self) -> str:
        return (f"Hierarchy(leaves={self.n_leaves}, height={self.height}, "
                f"groups={self.n_nodes - self.n_leaves - 1})")


def _key(label: Any) -> tuple[str, Any]:
    """Dictionary key that keeps 1, True and '1' apart."""
    return (type(label).__name__, label)


__all__ = ["Hierarchy"]
