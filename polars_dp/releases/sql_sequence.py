"""A :class:`~polars_dp.SequenceRelease` in DuckDB: node tables and substring-frequency table macros.

``register_sequences(con, name, model)`` (or ``model.to_duckdb(con, name)``) creates, in one
transaction:

* ``name``: a view with one row per (node, next symbol), the columns of ``model.to_arrow()``,
  over the internal table ``__pdp_name_cells`` that the macros read (which adds ``cell``,
  ``node * beta + next_code``, the release order); read-only, so an ``UPDATE`` cannot make the
  table and the macros disagree;
* ``name_nodes``: a view of the internal ``__pdp_name_nodes``, one row per node (``node``,
  ``depth``, ``context`` oldest first without ``#``, ``starts_with_start``, ``total`` of the
  bins clipped at 0, ``noise_var`` of a bin, ``reach``: usable at the default back-off, and so
  are its ancestors);
* ``name_meta(key, value)``: the release metadata (the view ``name`` carries the comment);
* ``name_frequency(string)``: one row (``count``, ``std``, ``extrapolated``) for a list of
  symbols (or, where the alphabet holds text, a text of one-character symbols: ``'ab'``);
* ``name_frequencies(queries_table)``: ``id``, ``count``, ``std``, ``extrapolated`` for a
  table with an ``id`` and a column ``string`` as above (any other column, a NULL id and a
  repeated id are refused).

The macros compute what ``model.frequency_table(strings)`` does at the default back-off
(see :mod:`polars_dp.releases.sequence`), with a recursive CTE over the positions of each
string (``sql/sequence_answers.sql``): ``std`` is the noise only, ``extrapolated`` marks the
estimates that rest on the Markov assumption (whose error ``std`` does not cover), and a string
longer than ``max_length`` has count 0 and std 0.  An empty string or a symbol outside the
alphabet raises a DuckDB error naming it.  Existing objects are refused unless ``replace=True``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from polars_dp.domains.alphabet import alphabet_text
from polars_dp.releases.sql import (
    BATCH_WHERE,
    Registration,
    check_identifier,
    comment,
    ident,
    internal,
    literal,
    metadata_table,
    query_checks,
    register,
    render,
    view,
)


def object_names(name: str) -> tuple[list[str], list[str]]:
    """Tables (and views) and macros that :func:`register_sequences` creates for ``name``."""
    return ([name, internal(name), f"{name}_nodes", internal(name, "nodes"), f"{name}_meta"],
            [f"{name}_frequency", f"{name}_frequencies"])


def _nodes_table(model: Any) -> pa.Table:
    starts_with_start, context = model.node_contexts()
    usable = model.usable()
    reach = usable.copy()
    for d in range(1, model.height + 1):
        nodes = np.flatnonzero(model.depth == d)
        reach[nodes] &= reach[model.parent[nodes]]
    return pa.table({
        "node": pa.array(np.arange(model.n_nodes), pa.int32()),
        "depth": pa.array(model.depth, pa.int32()),
        "context": context,
        "starts_with_start": pa.array(starts_with_start),
        "total": pa.array(np.maximum(model.hist, 0.0).sum(axis=1), pa.float64()),
        "noise_var": pa.array(np.nan_to_num(model.bin_noise_variance(), nan=0.0), pa.float64()),
        "reach": pa.array(reach),
    })


def _answers(model: Any, name: str, queries: str, where: str) -> str:
    is_text = isinstance(model.alphabet[0], str)
    alphabet = "[" + ", ".join(literal(s) if is_text else str(int(s)) for s in model.alphabet) + "]"
    # a text alphabet also takes a text of one-character symbols, as Python's str; an integer
    # alphabet refuses a text ('12' would be ambiguous)
    text = ("string_split(CAST(string AS VARCHAR), '')" if is_text else
            "error('the alphabet holds integers; give each query string as a list of symbols, e.g. "
            f"[{', '.join(str(int(x)) for x in model.alphabet[:2])}], not a text' || {where})")
    as_list = (f"(CASE WHEN typeof(string) = 'VARCHAR' THEN {text} "
               f"ELSE CAST(string AS {'VARCHAR[]' if is_text else 'BIGINT[]'}) END)")
    return render("sequence_answers.sql", queries=queries, where=where,
                  checks=query_checks(queries, "src", ["string"], batch=where == BATCH_WHERE),
                  as_list=as_list, max_length=model.max_length, alphabet=alphabet,
                  alphabet_text=literal(alphabet_text(model.alphabet)),
                  symbol_text="'''' || x || ''''" if is_text else "CAST(x AS VARCHAR)",  # as Python's repr
                  height=model.height, beta=model.alphabet_size + 1,
                  table=ident(internal(name)), nodes_table=ident(internal(name, "nodes")))


def register_sequences(con: Any, name: str, model: Any, *, replace: bool = False) -> Any:
    """Register ``model`` in ``con`` (see the module doc); returns the relation of table ``name``."""
    return register(con, name, sequence_registration(name, model), replace=replace)


def sequence_registration(name: str, model: Any) -> Registration:
    """What :func:`register_sequences` creates (:class:`~polars_dp.releases.sql.Registration`)."""
    check_identifier(name)
    tables, macros = object_names(name)
    source, nodes_source, meta_source = (f"__pdp_{kind}_{name}" for kind in ("source", "nodes", "meta"))
    table = model._table()
    beta = model.alphabet_size + 1
    cell = table.column("node").to_numpy().astype(np.int64) * beta + table.column("next_code").to_numpy()
    table = table.append_column("cell", pa.array(cell, pa.int64()))
    single = "(SELECT 0 AS id, string AS string)"
    statements = [
        render("sequence_register.sql", cells=ident(internal(name)), view=ident(name), source=ident(source),
               nodes_table=ident(internal(name, "nodes")), nodes_view=ident(f"{name}_nodes"),
               nodes_source=ident(nodes_source), meta_table=ident(f"{name}_meta"),
               meta_source=ident(meta_source)),
        view(name, internal(name), comment(model, name), model.internal_columns),
        view(f"{name}_nodes", internal(name, "nodes"), literal(f"nodes of the sequence model {name}")),
        render("sequence_macros.sql", name=name,
               single_macro=ident(f"{name}_frequency"), batch_macro=ident(f"{name}_frequencies"),
               single_answers=_answers(model, name, single, "''"),
               batch_answers=_answers(model, name, "query_table(queries)", BATCH_WHERE)),
    ]
    sources = {source: table, nodes_source: _nodes_table(model), meta_source: metadata_table(model)}
    return Registration(tables, macros, sources, statements)


__all__ = ["object_names", "register_sequences", "sequence_registration"]
