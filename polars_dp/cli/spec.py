"""The domain file: a TOML declaration of one release (read with the standard library's tomllib).

It states everything public about a release, so that no choice is made by looking at the
data: the mechanism, ``epsilon``, the neighbour relation, the input columns and their public
domain, and the mechanism's options.  Three shapes, by mechanism::

    mechanism = "privelet"          # basic | privelet                 (grid releases)
    epsilon = 1.0
    neighbours = "replace"          # optional: "replace" or "add_remove"
    [options]                       # optional keyword arguments of the mechanism
    untransformed = ["age"]
    [[attributes]]                  # one table per column, in order
    column = "age"
    kind = "ordinal"
    lo = 0
    hi = 100
    width = 1                       # optional
    [[attributes]]
    column = "occupation"
    kind = "nominal"
    categories = ["clerk", "driver"]     # or hierarchy = {office = ["clerk"], ...}
                                         # or hierarchy = "occupations.json" / ".csv" (child,parent)

    mechanism = "privtree"          # privtree | uniform_grid | adaptive_grid | privelet_grid
    epsilon = 1.0
    bounds = {lon = [-180, 180], lat = [-90, 90]}    # or columns = [...] and bounds = [[lo, hi], ...]

    mechanism = "privtree_sequences"     # privtree_sequences | ngram_sequences
    epsilon = 1.0
    column = "pages"
    alphabet = {lo = 1, hi = 17}    # or a list of symbols, or a string of one-character symbols
    max_length = 20
    separator = " "                 # optional: a text column "3 1 4" holds symbols joined by " "

Any grid or points file may declare the privacy unit (default: one row is one individual)::

    [privacy_unit]                  # each person keeps at most 3 rows; sensitivities times 3
    id_column = "person"
    max_per = 3

Errors are :class:`SpecError` (a :class:`~polars_dp.cli.common.BadInput`) whose message
starts ``file:line:`` and names the key (tables of ``[[attributes]]`` count from 1).  The
line comes from tomllib for syntax errors and from :class:`_KeyLines` for the rest.
"""

from __future__ import annotations

import functools
import inspect
import json
import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

import polars_dp as pdp
from polars_dp.cli.common import BadInput
from polars_dp.plans import REGISTRY

#: Mechanism -> shape of its domain declaration (from the mechanism registry).
MECHANISMS = {name: entry.shape for name, entry in REGISTRY.items()}
SHAPE_KEYS = {"grid": ("attributes",), "points": ("columns", "bounds"),
              "sequences": ("column", "alphabet", "max_length", "separator")}
COMMON_KEYS = ("mechanism", "epsilon", "neighbours", "options", "description", "privacy_unit")
#: Arguments the command line sets itself (never from ``[options]``).
RESERVED = {"frame", "attributes", "columns", "column", "bounds", "alphabet", "max_length", "epsilon",
            "neighbours", "seed", "progress", "privacy_unit"}
NEIGHBOURS = ("replace", "add_remove")

Path_ = tuple[str | int, ...]
_KEY = r'(?:[A-Za-z0-9_-]+|"[^"]*"|\'[^\']*\')'
_KEY_LINE = re.compile(rf"^\s*({_KEY}(?:\s*\.\s*{_KEY})*)\s*=")
_HEADER = re.compile(rf"^\s*(\[\[?)\s*({_KEY}(?:\s*\.\s*{_KEY})*)\s*\]\]?\s*(?:#.*)?$")


def _split_key(dotted: str) -> list[str]:
    return [k.strip().strip("\"'") for k in re.findall(rf"{_KEY}", dotted)]


class _KeyLines:
    """Line number of every key of a TOML text, by key path (arrays of tables indexed from 0).

    Only headers (``[a]``, ``[[a]]``, ``[a.b]``) and ``key = value`` lines are read: enough to
    point at the line of a key whose value fails validation.
    """

    def __init__(self, text: str):
        self.lines: dict[Path_, int] = {}
        arrays: dict[Path_, int] = {}
        table: Path_ = ()
        in_string = False
        for no, line in enumerate(text.splitlines(), 1):
            was_in_string = in_string
            if line.count('"""') % 2 or line.count("'''") % 2:
                in_string = not in_string
            if was_in_string:
                continue
            header = _HEADER.match(line)
            if header:
                parts = _split_key(header.group(2))
                table = (*self._resolve(parts[:-1], arrays), parts[-1])
                if header.group(1) == "[[":
                    arrays[table] = arrays.get(table, -1) + 1
                    table = (*table, arrays[table])
                self.lines.setdefault(table, no)
                continue
            key = _KEY_LINE.match(line)
            if key:
                self.lines.setdefault((*table, *_split_key(key.group(1))), no)

    @staticmethod
    def _resolve(parts: list[str], arrays: dict[Path_, int]) -> Path_:
        path: Path_ = ()
        for part in parts:
            path = (*path, part)
            if path in arrays:  # a sub-table of the latest element of an array of tables
                path = (*path, arrays[path])
        return path

    def line(self, path: Path_) -> int | None:
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return None


def key_name(path: Path_) -> str:
    """``("attributes", 1, "hi")`` -> ``attributes[2].hi`` (tables counted from 1)."""
    out = ""
    for part in path:
        out += f"[{part + 1}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def _at(file: Path, lines: _KeyLines | None, path: Path_) -> str:
    """``file:line`` of the key at ``path`` (the file alone when its line is unknown)."""
    line = lines.line(path) if lines else None
    return f"{file}:{line}" if line else str(file)


class SpecError(BadInput):
    """A domain file that cannot be used: the message names the file, line and key."""


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


@dataclass
class Spec:
    """A validated domain file; :meth:`run` makes the release."""

    path: Path
    mechanism: str
    shape: str
    epsilon: float
    neighbours: str | None
    options: dict[str, Any]
    description: str = ""
    attributes: tuple[pdp.Attribute, ...] = ()
    columns: tuple[str, ...] = ()
    bounds: tuple[tuple[float, float], ...] = ()
    column: str = ""
    alphabet: tuple[Any, ...] = ()
    max_length: int = 0
    separator: str | None = None
    privacy_unit: pdp.Rows | None = None
    key_lines: _KeyLines | None = field(default=None, repr=False)

    # ------------------------------------------------------------------ facts
    @property
    def input_columns(self) -> list[str]:
        unit = self.privacy_unit
        ident = [unit.id_column] if unit is not None and unit.id_column else []
        if self.shape == "grid":
            return [a.column for a in self.attributes] + ident
        return (list(self.columns) if self.shape == "points" else [self.column]) + ident

    @property
    def effective_neighbours(self) -> str:
        """The neighbour relation the release will state (the mechanism's default if unset)."""
        if self.neighbours:
            return self.neighbours
        param = inspect.signature(getattr(pdp, self.mechanism)).parameters.get("neighbours")
        return param.default if param is not None else "add_remove"

    def where(self, column: str) -> str:
        """``file:line`` of the declaration of ``column`` (for errors about the data)."""
        if self.privacy_unit is not None and column == self.privacy_unit.id_column:
            path: Path_ = ("privacy_unit", "id_column")
        elif self.shape == "grid":
            index = [a.column for a in self.attributes].index(column)
            path = ("attributes", index, "column")
        elif self.shape == "points":
            path = ("bounds", column) if self.key_lines and ("bounds", column) in self.key_lines.lines \
                else ("columns",)
        else:
            path = ("column",)
        return _at(self.path, self.key_lines, path)

    def split_expr(self) -> pl.Expr:
        """A text column of symbols joined by ``separator`` as a List column (a row-wise rule)."""
        symbols = (pl.col(self.column).str.split(self.separator)
                   .list.eval(pl.element().str.strip_chars())
                   .list.eval(pl.element().filter(pl.element() != "")))
        if isinstance(self.alphabet[0], int):
            symbols = symbols.list.eval(pl.element().cast(pl.Int64, strict=False))
        return symbols.alias(self.column)

    def locate(self, message: str, parameter: str | None = None) -> str:
        """Prefix a mechanism's error about one of the ``[options]`` with its file, line and key
        (the key the error names in ``ParameterError.parameter``, else the one its text names)."""
        if parameter is None or parameter not in self.options:
            parameter = next((key for key in self.options
                              if re.search(rf"(?<![\w.]){re.escape(key)}(?![\w])", message)), None)
        if parameter is None:
            return message
        return f"{_at(self.path, self.key_lines, ('options', parameter))}: options.{parameter}: {message}"

    def size_text(self) -> str:
        """A short account of the domain: cells, the box, or the alphabet."""
        if self.shape == "grid":
            return f"{math.prod(a.n_cells for a in self.attributes):,} cells"
        if self.shape == "points":
            return f"the box {' x '.join(self.columns)}"
        return f"an alphabet of {len(self.alphabet)} symbols, max_length {self.max_length}"

    def domain_text(self) -> str:
        if self.shape == "grid":
            dims = " x ".join(f"{a.column} {a.domain_text()}" for a in self.attributes)
            return f"{dims}: {self.size_text()}"
        if self.shape == "points":
            return " x ".join(f"{c} [{lo:g}, {hi:g}]" for c, (lo, hi) in zip(self.columns, self.bounds,
                                                                          strict=True))
        shown = " ".join(map(str, self.alphabet[:20])) + (" ..." if len(self.alphabet) > 20 else "")
        return f"{self.column}: alphabet of {len(self.alphabet)} ({shown}), max_length {self.max_length}"

    # ------------------------------------------------------------------ running
    def run(self, frame: pl.LazyFrame, *, seed: int | None = None, progress: bool = False,
            accountant: pdp.Accountant | None = None) -> pdp.Release:
        """Release ``frame`` with the declared mechanism (reads the private data once);
        ``accountant``: charged the release's plan first (:meth:`polars_dp.Accountant.run`)."""
        mechanism = getattr(pdp, self.mechanism)
        func = mechanism if accountant is None else functools.partial(accountant.run, mechanism)
        kwargs: dict[str, Any] = dict(self.options, epsilon=self.epsilon, seed=seed)
        if self.neighbours:
            kwargs["neighbours"] = self.neighbours
        if self.privacy_unit is not None:
            kwargs["privacy_unit"] = self.privacy_unit
        if "progress" in inspect.signature(mechanism).parameters:
            kwargs["progress"] = progress
        if self.shape == "grid":
            return func(frame, list(self.attributes), **kwargs)
        if self.shape == "points":
            return func(frame, list(self.columns), bounds=list(self.bounds), **kwargs)
        if self.separator is not None:
            frame = frame.with_columns(self.split_expr())
        return func(frame, self.column, alphabet=list(self.alphabet), max_length=self.max_length, **kwargs)


class _Reader:
    """Validation of one parsed domain file, with errors located by :class:`_KeyLines`."""

    def __init__(self, path: Path, text: str, doc: dict[str, Any]):
        self.path = path
        self.doc = doc
        self.lines = _KeyLines(text)

    def fail(self, path: Path_, message: str) -> SpecError:
        where = _at(self.path, self.lines, path)
        return SpecError(f"{where}: {key_name(path)}: {message}" if path else f"{where}: {message}")

    def get(self, table: Mapping[str, Any], path: Path_, *, required: bool = True,
            kind: type | tuple = object, what: str = "") -> Any:
        key = path[-1]
        if key not in table:
            if required:
                parent = key_name(path[:-1])
                hint = f" ({what})" if what else ""
                if len(path) == 1:  # a top-level key written after a [table] header belongs to that table
                    lost = [p for p in self.lines.lines if len(p) > 1 and p[-1] == key]
                    if lost:
                        hint = (f"; line {self.lines.lines[lost[0]]} puts it in {key_name(lost[0][:-1])}: "
                                "write top-level keys before the first [table]")
                where = f" in {parent}" if parent else ""
                raise self.fail(path[:-1], f"missing key {key!r}{where}{hint}")
            return None
        value = table[str(key)]  # TOML keys are strings
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise self.fail(path, f"expected {what or _type_name(kind)}, got {value!r}")
        return value

    def check_keys(self, table: Mapping[str, Any], path: Path_, allowed: tuple[str, ...] | set[str]) -> None:
        for key in table:
            if key not in allowed:
                raise self.fail((*path, key), f"unknown key; allowed here: {', '.join(sorted(allowed))}")

    # ------------------------------------------------------------------ top level
    def read(self) -> Spec:
        doc = self.doc
        mechanism = self.get(doc, ("mechanism",), kind=str, what=f"one of {', '.join(MECHANISMS)}")
        if mechanism not in MECHANISMS:
            raise self.fail(("mechanism",), f"unknown mechanism {mechanism!r}; use one of "
                                            f"{', '.join(MECHANISMS)}")
        shape = MECHANISMS[mechanism]
        others = {k for s, keys in SHAPE_KEYS.items() if s != shape for k in keys} - set(SHAPE_KEYS[shape])
        for key in doc:
            if key in others:
                raise self.fail((key,), f"not used by mechanism {mechanism!r} (it declares "
                                        f"{', '.join(SHAPE_KEYS[shape])})")
        self.check_keys(doc, (), (*COMMON_KEYS, *SHAPE_KEYS[shape]))
        epsilon = self.get(doc, ("epsilon",), kind=(int, float), what="a number > 0 (the privacy budget)")
        if not (_is_number(epsilon) and epsilon > 0):
            raise self.fail(("epsilon",), f"must be a finite number > 0, got {epsilon!r}")
        neighbours = self.get(doc, ("neighbours",), required=False, kind=str,
                              what="'replace' or 'add_remove'")
        if neighbours is not None and neighbours not in NEIGHBOURS:
            raise self.fail(("neighbours",), f"{neighbours!r}: use 'replace' (modify one row) or "
                                             "'add_remove' (add or remove one row)")
        if neighbours is not None:  # the relations the mechanism takes: its option's own check
            option = next(o for o in REGISTRY[mechanism].plan_class.options_table if o.name == "neighbours")
            try:
                option.validate(neighbours)
            except pdp.ParameterError as exc:
                raise self.fail(("neighbours",), str(exc)) from None
        description = self.get(doc, ("description",), required=False, kind=str) or ""
        spec = Spec(path=self.path, mechanism=mechanism, shape=shape, epsilon=float(epsilon),
                    neighbours=neighbours, options=self.options(mechanism), description=description,
                    key_lines=self.lines, privacy_unit=self.privacy_unit(mechanism))
        getattr(self, f"read_{shape}")(spec)
        return spec

    def privacy_unit(self, mechanism: str) -> pdp.Rows | None:
        """The ``[privacy_unit]`` table (``id_column``, ``max_per``) as ``pdp.Rows``, or None."""
        table = self.get(self.doc, ("privacy_unit",), required=False, kind=dict,
                         what="a table [privacy_unit] with id_column and max_per")
        if table is None:
            return None
        if "privacy_unit" not in {o.name for o in REGISTRY[mechanism].options}:
            raise self.fail(("privacy_unit",), f"{mechanism} takes no privacy unit; remove the table")
        self.check_keys(table, ("privacy_unit",), ("id_column", "max_per"))
        ident = self.get(table, ("privacy_unit", "id_column"), kind=str,
                         what="the column naming each individual")
        max_per = self.get(table, ("privacy_unit", "max_per"), required=False, kind=int,
                           what="an integer >= 1 (rows kept per individual)")
        try:
            return pdp.Rows(max_per=1 if max_per is None else max_per, id_column=ident)
        except pdp.ParameterError as exc:
            raise self.fail(("privacy_unit", "max_per"), str(exc)) from None

    def options(self, mechanism: str) -> dict[str, Any]:
        options = self.get(self.doc, ("options",), required=False, kind=dict, what="a table [options]")
        if not options:
            return {}
        allowed = [o.name for o in REGISTRY[mechanism].options if o.name not in RESERVED]
        for key in options:
            if key == "seed":
                raise self.fail(("options", key), "a seed makes the noise removable; it is not accepted in "
                                                  "a domain file (use --seed for tests only)")
            if key in RESERVED:
                raise self.fail(("options", key), "set it at the top level of the file, not in [options]")
            if key == "levels" and key not in allowed:
                raise self.fail(("options", key), f"levels counts the top levels of a tree, and {mechanism} "
                                                  "has no tree; use mechanism = \"privtree\" or drop levels")
            if key not in allowed:
                raise self.fail(("options", key), f"{mechanism} has no option {key!r}; its options: "
                                                  f"{', '.join(allowed) or 'none'}")
        table = {o.name: o for o in REGISTRY[mechanism].options}
        for key, value in options.items():  # the registry's checks, before any row is read
            try:
                table[key].validate(value)
            except pdp.ParameterError as exc:
                raise self.fail(("options", exc.parameter or key), str(exc)) from None
        return dict(options)

    # ------------------------------------------------------------------ grid
    def read_grid(self, spec: Spec) -> None:
        attrs = self.get(self.doc, ("attributes",), kind=list,
                         what="one [[attributes]] table per column")
        if not attrs:
            raise self.fail(("attributes",), "declare at least one [[attributes]] table")
        seen: dict[str, int] = {}
        out: list[pdp.Attribute] = []
        for i, table in enumerate(attrs):
            path: Path_ = ("attributes", i)
            if not isinstance(table, dict):
                raise self.fail(path, f"expected a table (column = ..., kind = ...), got {table!r}")
            column = self.get(table, (*path, "column"), kind=str, what="the column name")
            if not column:
                raise self.fail((*path, "column"), "must not be empty")
            if column in seen:
                raise self.fail((*path, "column"), f"column {column!r} is already declared in "
                                                   f"attributes[{seen[column] + 1}]")
            seen[column] = i
            kind = self.get(table, (*path, "kind"), kind=str, what="'ordinal' or 'nominal'")
            if kind == "ordinal":
                out.append(self.ordinal(table, path, column))
            elif kind == "nominal":
                out.append(self.nominal(table, path, column))
            else:
                raise self.fail((*path, "kind"), f"{kind!r}: use 'ordinal' (lo, hi, width) or 'nominal' "
                                                 "(categories or hierarchy)")
        spec.attributes = tuple(out)

    def ordinal(self, table: dict, path: Path_, column: str) -> pdp.Ordinal:
        self.check_keys(table, path, ("column", "kind", "lo", "hi", "width"))
        lo = self.get(table, (*path, "lo"), kind=(int, float), what="a number (the public lower bound)")
        hi = self.get(table, (*path, "hi"), kind=(int, float), what="a number (the public upper bound)")
        width = self.get(table, (*path, "width"), required=False, kind=(int, float), what="a number > 0")
        for key, value in (("lo", lo), ("hi", hi), ("width", width)):
            if value is not None and not _is_number(value):
                raise self.fail((*path, key), f"must be finite, got {value!r}")
        if hi < lo:
            raise self.fail((*path, "hi"), f"hi = {hi!r} is below lo = {lo!r}; swap them")
        if width is not None and width <= 0:
            raise self.fail((*path, "width"), f"must be > 0, got {width!r}")
        try:
            return pdp.Ordinal(column, lo, hi, 1 if width is None else width)
        except pdp.PolarsDPError as exc:
            raise self.fail(path, str(exc)) from None

    def nominal(self, table: dict, path: Path_, column: str) -> pdp.Nominal:
        self.check_keys(table, path, ("column", "kind", "categories", "hierarchy", "hierarchy_key", "levels"))
        has_cats, has_tree = "categories" in table, "hierarchy" in table
        if has_cats == has_tree:
            raise self.fail(path, f"nominal {column!r} needs exactly one of categories = [...] or "
                                  "hierarchy = {...} / \"file.json\" / \"file.csv\"")
        levels = self.get(table, (*path, "levels"), required=False, kind=list, what="a list of level names")
        if has_cats:
            if levels is not None:
                raise self.fail((*path, "levels"), "a flat list of categories has no levels; use a hierarchy")
            cats = self.get(table, (*path, "categories"), kind=list, what="a list of category labels")
            if not cats:
                raise self.fail((*path, "categories"), "must list at least one category")
            try:
                return pdp.Nominal(column, categories=cats)
            except pdp.PolarsDPError as exc:
                raise self.fail((*path, "categories"), str(exc)) from None
        tree = self.get(table, (*path, "hierarchy"), kind=(dict, list, str),
                        what="a table of groups, or the path of a JSON / CSV file")
        try:
            if isinstance(tree, str):
                hierarchy = self.hierarchy_file(tree, table, path)
            else:
                if "hierarchy_key" in table:
                    raise self.fail((*path, "hierarchy_key"), "only used with a hierarchy file")
                hierarchy = pdp.Hierarchy.from_dict(tree)
            if levels is not None:
                hierarchy = pdp.Hierarchy.from_dict(hierarchy.to_dict(), level_names=levels)
            return pdp.Nominal(column, hierarchy)
        except pdp.PolarsDPError as exc:
            raise self.fail((*path, "hierarchy"), str(exc)) from None

    def hierarchy_file(self, name: str, table: dict, path: Path_) -> pdp.Hierarchy:
        """A hierarchy from JSON (nested groups, or a child -> parent map) or CSV (child,parent)."""
        file = (self.path.parent / name) if not Path(name).is_absolute() else Path(name)
        hpath = (*path, "hierarchy")
        if not file.is_file():
            raise self.fail(hpath, f"hierarchy file {str(file)!r} does not exist (paths are relative to "
                                   "the domain file)")
        key = self.get(table, (*path, "hierarchy_key"), required=False, kind=(str, list),
                       what="a key (or list of keys) inside the JSON file")
        suffix = file.suffix.lower()
        if suffix == ".json":
            try:
                obj = json.loads(file.read_text())
            except (ValueError, UnicodeDecodeError) as exc:
                raise self.fail(hpath, f"{file.name} is not valid JSON: {exc}") from None
            for k in [key] if isinstance(key, str) else (key or []):
                if not isinstance(obj, dict) or k not in obj:
                    raise self.fail((*path, "hierarchy_key"), f"{file.name} has no key {k!r}")
                obj = obj[k]
            if isinstance(obj, dict) and obj and all(v is None or isinstance(v, str) for v in obj.values()):
                return pdp.Hierarchy.from_parent_map(obj)
            if not isinstance(obj, (dict, list)):
                raise self.fail(hpath, f"{file.name}: expected nested groups or a child -> parent map, "
                                       f"got {type(obj).__name__}")
            return pdp.Hierarchy.from_dict(obj)
        if suffix == ".csv":
            if key is not None:
                raise self.fail((*path, "hierarchy_key"), "only used with a JSON hierarchy file")
            try:
                frame = pl.read_csv(file, infer_schema=False)
            except pl.exceptions.PolarsError as exc:
                raise self.fail(hpath, f"{file.name} is not a readable CSV file: {exc}") from None
            if frame.columns[:2] != ["child", "parent"]:
                raise self.fail(hpath, f"{file.name} must have the header 'child,parent' (one row per "
                                       f"node; an empty parent means the top level), got {frame.columns}")
            return pdp.Hierarchy.from_parent_map(dict(zip(frame["child"], frame["parent"], strict=True)))
        raise self.fail(hpath, f"hierarchy file {file.name!r}: use a .json or .csv file")

    # ------------------------------------------------------------------ points
    def read_points(self, spec: Spec) -> None:
        doc = self.doc
        bounds = self.get(doc, ("bounds",), kind=(dict, list),
                          what="{column = [lo, hi], ...} or a list of [lo, hi] pairs")
        columns = self.get(doc, ("columns",), required=isinstance(bounds, list), kind=list,
                           what="the list of coordinate columns")
        pairs: list[tuple[Path_, Any]]
        if isinstance(bounds, dict):
            if columns is not None and list(columns) != list(bounds):
                raise self.fail(("columns",), f"lists {columns} but bounds declares {list(bounds)}; "
                                              "give only bounds = {column = [lo, hi], ...}")
            columns, pairs = list(bounds), [(("bounds", c), bounds[c]) for c in bounds]
        else:
            if len(bounds) != len(columns):
                raise self.fail(("bounds",), f"has {len(bounds)} pair(s) for {len(columns)} columns "
                                             f"{columns}; give one [lo, hi] per column, in order")
            pairs = [(("bounds",), b) for b in bounds]
        if not columns:
            raise self.fail(("bounds",), "declare at least one column")
        for c in columns:
            if not isinstance(c, str) or not c:
                raise self.fail(("columns",), f"column names must be non-empty strings, got {c!r}")
        if len(set(columns)) != len(columns):
            raise self.fail(("columns",), f"{columns} repeats a column")
        out = []
        for (path, pair), c in zip(pairs, columns, strict=True):
            if not (isinstance(pair, list) and len(pair) == 2 and all(_is_number(v) for v in pair)):
                raise self.fail(path, f"bounds of {c!r} must be [lo, hi] with two finite numbers, "
                                      f"got {pair!r}")
            if not pair[0] < pair[1]:
                raise self.fail(path, f"bounds of {c!r} are [{pair[0]}, {pair[1]}]: lo must be < hi")
            out.append((float(pair[0]), float(pair[1])))
        spec.columns, spec.bounds = tuple(columns), tuple(out)

    # ------------------------------------------------------------------ sequences
    def read_sequences(self, spec: Spec) -> None:
        doc = self.doc
        spec.column = self.get(doc, ("column",), kind=str, what="the sequence column")
        alphabet = self.get(doc, ("alphabet",), kind=(list, str, dict),
                            what="a list of symbols, a string of one-character symbols or {lo = 1, hi = 17}")
        if isinstance(alphabet, dict):
            self.check_keys(alphabet, ("alphabet",), ("lo", "hi"))
            lo = self.get(alphabet, ("alphabet", "lo"), kind=int, what="an integer")
            hi = self.get(alphabet, ("alphabet", "hi"), kind=int, what="an integer")
            if hi < lo:
                raise self.fail(("alphabet", "hi"), f"hi = {hi} is below lo = {lo}")
            alphabet = list(range(lo, hi + 1))
        elif isinstance(alphabet, str):
            alphabet = list(alphabet)
        if not alphabet:
            raise self.fail(("alphabet",), "is empty; declare the public list of symbols")
        kinds = {type(s) for s in alphabet}
        if not (kinds <= {str} or kinds <= {int}):
            raise self.fail(("alphabet",), "symbols must be all integers or all strings")
        if len(set(alphabet)) != len(alphabet):
            raise self.fail(("alphabet",), "lists a symbol twice")
        max_length = self.get(doc, ("max_length",), kind=int,
                              what="an integer >= 1 (public truncation length)")
        if max_length < 1:
            raise self.fail(("max_length",), f"must be >= 1, got {max_length}")
        separator = self.get(doc, ("separator",), required=False, kind=str,
                             what='the text between symbols of a text column, e.g. " "')
        if separator == "":
            raise self.fail(("separator",), "must not be empty (leave it out for one-character symbols)")
        spec.alphabet, spec.max_length, spec.separator = tuple(alphabet), max_length, separator


def _type_name(kind: type | tuple) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {int: "an integer", float: "a number", str: "a string", list: "a list", dict: "a table",
             bool: "true or false"}
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def load_spec(path: str | Path) -> Spec:
    """Read and validate a domain file; every problem is a :class:`SpecError`."""
    path = Path(path)
    if path.is_dir():
        raise SpecError(f"domain file {str(path)!r} is a directory")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"domain file {str(path)!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"domain file {str(path)!r} cannot be read: {exc}") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"at line (\d+)", str(exc))
        where = f"{path}:{match.group(1)}" if match else str(path)
        raise SpecError(f"{where}: not valid TOML: {exc}") from None
    return _Reader(path, text, doc).read()


__all__ = ["MECHANISMS", "Spec", "SpecError", "key_name", "load_spec"]
