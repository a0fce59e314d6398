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
longer than ``max_length`` has count 0 and std 0.  An empty string, or an element that is no
symbol of the alphabet (``1.5``, ``true`` or ``'2'`` where it holds integers: refused as Python
refuses it, :func:`~polars_dp.domains.alphabet.query_symbol`, never rounded or cast), raises a
DuckDB error naming it, with Python's sentence.  Existing objects are refused unless ``replace=True``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from polars_dp.domains.alphabet import outside_alphabet_text
from polars_dp.domains.expressions import SQL, Sql
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


#: DuckDB's integer types: their values are the integer symbols they hold.
_INTEGER_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT",
                  "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT")


def _symbol_sql(is_text: bool, alphabet: str) -> tuple[str, str]:
    """``(symbols, examples)``: SQL of a query string's symbols (NULL where an element is no
    symbol) and of its elements refused by ``alphabet`` (a SQL list) as
    :func:`~polars_dp.domains.alphabet.refused_examples` lists them.

    The rule of :func:`~polars_dp.domains.alphabet.query_symbol`, on the element type ``kind``
    of the query (one per macro call): a text alphabet takes VARCHAR; an integer alphabet an
    integer type, or a FLOAT, DOUBLE or DECIMAL element equal to an integer (``2.0``; ``1.5`` is
    refused, never rounded); BOOLEAN, VARCHAR and the rest are refused.  Both read the CTE
    columns ``texts`` (the elements as text) and ``kind``; ``examples`` also ``s`` (the
    symbols).  An example is shown as Python's ``repr`` of the value: ``True``, ``'2'``, ``1.5``.
    """
    floats = "(kind IN ('FLOAT', 'DOUBLE') OR starts_with(kind, 'DECIMAL('))"
    integers = f"kind IN ({', '.join(literal(t) for t in _INTEGER_TYPES)})"
    none = "list_transform(texts, lambda t: NULL::{})"
    if is_text:
        symbols = f"CASE WHEN kind = 'VARCHAR' THEN texts ELSE {none.format('VARCHAR')} END"
    else:
        doubles = "list_transform(texts, lambda t: TRY_CAST(t AS DOUBLE))"
        symbols = (f"CASE WHEN {integers} THEN list_transform(texts, lambda t: TRY_CAST(t AS BIGINT)) "
                   f"WHEN {floats} THEN list_transform({doubles}, lambda x: CASE WHEN isfinite(x) "
                   "AND x = trunc(x) AND abs(x) < 9e18 THEN CAST(x AS BIGINT) END) "
                   f"ELSE {none.format('BIGINT')} END")
    shown = ("CASE WHEN t IS NULL THEN 'None' "
             "WHEN kind = 'BOOLEAN' THEN (CASE WHEN t = 'true' THEN 'True' ELSE 'False' END) "
             "WHEN kind = 'VARCHAR' THEN '''' || t || '''' "
             f"WHEN {floats} THEN CAST(TRY_CAST(t AS DOUBLE) AS VARCHAR) ELSE t END")
    order = f"CASE WHEN {integers} OR {floats} THEN TRY_CAST(t AS DOUBLE) END"
    examples = ("array_to_string(list_transform(list_sort(list_distinct(list_filter(list_transform(texts, "
                f"lambda t, i: {{'none': t IS NULL, 'k': coalesce({order}, 0), 'raw': t, 'shown': {shown}, "
                f"'bad': s[i] IS NULL OR NOT list_contains({alphabet}, s[i])}}), lambda e: e.bad)))[1:5], "
                "lambda e: e.shown), ', ')")
    return symbols, examples


def _answers(model: Any, name: str, queries: str, where: str) -> str:
    is_text = isinstance(model.alphabet[0], str)
    alphabet = "[" + ", ".join(literal(s) if is_text else str(int(s)) for s in model.alphabet) + "]"
    # a text alphabet also takes a text of one-character symbols, as Python's str; an integer
    # alphabet refuses a text ('12' would be ambiguous)
    text = ("string_split(CAST(string AS VARCHAR), '')" if is_text else
            "error('the alphabet holds integers; give each query string as a list of symbols, e.g. "
            f"[{', '.join(str(int(x)) for x in model.alphabet[:2])}], not a text' || {where})")
    texts = f"(CASE WHEN typeof(string) = 'VARCHAR' THEN {text} ELSE TRY_CAST(string AS VARCHAR[]) END)"
    symbols, examples = _symbol_sql(is_text, alphabet)
    outside = outside_alphabet_text(SQL, model.alphabet, Sql(examples))
    return render("sequence_answers.sql", queries=queries, where=where,
                  checks=query_checks(queries, "src", ["string"], batch=where == BATCH_WHERE),
                  texts=texts, symbols=symbols, outside=outside, max_length=model.max_length,
                  alphabet=alphabet, height=model.height, beta=model.alphabet_size + 1,
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
