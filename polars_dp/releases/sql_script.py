"""A release as a SQL script that any DuckDB client runs, straight from the release's Parquet file.

``release.sql_script("release.parquet", "people")`` (and ``polars-dp sql --script release.parquet
people > people.sql``) returns a self-contained script; ``duckdb my.duckdb -c ".read people.sql"``
(or ``duckdb my.duckdb < people.sql``) then creates what ``release.to_duckdb(con, "people")``
creates (the views, the internal tables the macros read, ``people_meta`` and the table macros),
read from the Parquet file by DuckDB itself: no Python runs.

The script is the registration of :mod:`polars_dp.releases.sql` with its transient Arrow sources
replaced by SQL (:func:`source_sql`); every other statement is the one ``to_duckdb`` runs:

* the rows (``__pdp_source_<name>``): ``read_parquet(path, file_row_number = true)``, the file's
  rows in release order (the writer's canonical order), plus the internal columns: a spatial
  leaf's ``leaf`` (the row number), a sequence row's ``cell = node * beta + next_code``;
* a grid's cell table has no source: the script creates it empty and appends it slab by slab
  of whole planes of the first axis (about :data:`SLAB_CELLS` cells, one ``INSERT`` each, in
  cell order; :func:`_grid_slab`): ``cell`` the row number, ``count``, and ``prefix``, the
  inclusive d-dimensional prefix sum of ``count``: inside the slab along every other axis by
  doubling (:func:`_doubling`: ``p + lag(p, j * stride) + lag(p, 2 j * stride) + ...`` for
  j = 1, 4, 16, ...; a window over one slab, streaming where the lags are below 2048 rows), then
  along the first axis with the previous plane's prefix (read back from the table) as its
  position 0.  The same sums as :func:`polars_dp.kernels.prefix.prefix_sums` added in another
  order: equal to rounding, and equal when the counts are integers whose absolute sum is below
  2^53.  No window holds more than a slab plus a plane, and nothing is sorted (a window
  ``OVER ()`` reads its input in order under ``preserve_insertion_order``, which the script
  sets, and a ``UNION ALL`` feeding it keeps its branches' order);
* the metadata table: the file's ``polars_dp.*`` entries (``parquet_kv_metadata``);
* a grid's nominal label tables (label, leaf range, variance factor, Haar weights): public
  domain facts, written into the script as literal ``VALUES``;
* a sequence model's node table: ``depth``, ``context``, ``starts_with_start`` and ``total``
  (the bins clipped at 0, summed) from the file; the two columns Python derives from the whole
  tree (``noise_var``: the scale and the leaves below a node; ``reach``: the node and its
  ancestors pass the back-off test) as literal ``VALUES`` per node.

What the script checks before it creates anything (everything in one transaction: a failed
check is an ``error()`` naming the file and the release's checksum, and nothing is created):

1. the file's ``polars_dp.*`` key-value metadata equals the release's entry for entry (release
   type, mechanism, epsilon, neighbours, noise, parameters, domain, scales, version, the
   library's ``checksum`` value); a ``polars_dp.signature`` entry is neither required nor
   checked;
2. the file's rows: their number, and a SHA-256 fingerprint of every value of the release's
   columns in file order as DuckDB reads them (:func:`fingerprint_sql`: a double as the text of
   :func:`double_text`, integer digits for an integral one, else 17 significant digits, which
   identify a double exactly; other values as DuckDB's text, NULL as ``\\N``; per chunk of 2^18
   rows, then over the chunks' digests), equal to the fingerprint of the release the script was
   written from (computed by DuckDB over the release's own rows, in the same SQL, when the
   script is written).  A grid's labels are public (a function of the cell number): each row's
   labels are compared with those of its cell (the script's axis tables, as the view derives
   them), and only its ``count`` column is fingerprinted (:func:`grid_fingerprint_sql`), a slab
   of :data:`FINGERPRINT_SLAB` chunks per statement (their digests gathered in a session
   variable, :func:`_grid_fingerprint_steps`); its rows are counted from the file's metadata.
   The labels and the counts are checked in scans of their own (two scans cost less than one
   carrying both), and no statement holds more than a slab.

What it does not check: the library's own ``checksum`` is ``sha256`` over the metadata text and
the payload's little-endian bytes (:func:`polars_dp.releases.integrity.payload_checksum`), and
DuckDB has no way to produce a double's bytes, so the script compares the recorded checksum
*value* (check 1) but cannot recompute it from the rows; check 2 stands in for it (any edited,
added, removed or reordered value of a release column is refused).  Columns the release does not
read (a GeoParquet ``geometry`` or ``bbox``) are not fingerprinted, the signature is not
verified (that needs the key: ``read_release(path, verify_key=...)``), and a fingerprint is not a
signature: whoever edits the file can also edit the script.  The script is written only from a
verified release whose checksum equals the one the file records, so a file it accepts holds this
release's values (as DuckDB reads them) under this release's metadata.

The client needs what the macros need (tested: the DuckDB 1.5 command-line client and the 2.0
Python module); the checks use ``SET VARIABLE``.  The prefix sums read the file's rows in order:
the script sets ``preserve_insertion_order`` while it runs and restores the client's value.
Every statement runs in the one transaction: a failure part way (a refused check, a full disk,
an interrupted client) leaves nothing (the transaction is rolled back, or never committed).
``.read`` stops at the first error; ``duckdb < script`` goes on, and the statements after a
refusal fail on the aborted transaction (the first error is the refusal; the exit code is 1
either way, and nothing is created).

A PrivTree with counted top levels (``levels=``) carries the public tables of its inference
(``__pdp_<name>_nodes``, ``__pdp_<name>_up``, computed from the verified release) as literal
``VALUES``, as a grid carries its label tables.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, cast

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from polars_dp._version import __version__
from polars_dp.errors import ParameterError, ReleaseFormatError
from polars_dp.releases import sql_grid, sql_sequence, sql_tree
from polars_dp.releases.base import Release
from polars_dp.releases.integrity import CHECKSUM_KEY, SIGNATURE_KEY
from polars_dp.releases.metadata import META_PREFIX
from polars_dp.releases.sql import Registration, check_identifier, ident, internal, literal

if TYPE_CHECKING:
    from polars_dp.releases.grid import GridRelease
    from polars_dp.releases.sequence import SequenceRelease
    from polars_dp.releases.spatial import SpatialRelease

#: Rows per chunk of the fingerprint (one digest per chunk, then one over the digests).
FINGERPRINT_ROWS = 1 << 18
#: The session variable the script's checks set (reset at its end).
_CHECK = "__pdp_script_check"
#: The session variable holding a grid's chunk digests while the script computes them.
_DIGESTS = "__pdp_script_digests"
#: Chunks of :data:`FINGERPRINT_ROWS` rows per statement of a grid's fingerprint in its script.
FINGERPRINT_SLAB = 4
#: The session variable keeping the client's ``preserve_insertion_order`` while the script runs.
_ORDER = "__pdp_script_order"


#: Below this magnitude every integer is a double: an integral double is identified by its digits.
_EXACT_INTEGERS = 1 << 53


def _integer_digits(value: str) -> str:
    """SQL true when the DOUBLE ``value`` is written as its integer digits by :func:`double_text`:
    integral, not zero, below 2^53 in magnitude."""
    return f"{value} <> 0 AND {value} = trunc({value}) AND abs({value}) < {_EXACT_INTEGERS}"


def double_text(value: str) -> str:
    """SQL text of the DOUBLE ``value`` that identifies it exactly: an integral value other than
    zero below 2^53 as its integer digits, any other (a fraction, a zero, so that -0 stays apart,
    a larger value, an infinity, NaN) printed to 17 significant digits.  No two doubles share a
    text: digits name one integer, which is a double; a 17-digit text reads back to its double
    only (a pure-digits one to the same integer, thus the same double); NULL has no text."""
    return (f"CASE WHEN {_integer_digits(value)} "
            f"THEN CAST(CAST({value} AS BIGINT) AS VARCHAR) ELSE printf('%.17g', {value}) END")


def fingerprint_sql(relation: str, row: str, columns: Mapping[str, str]) -> str:
    """SQL of one row ``(fingerprint, n)`` over ``relation``: ``n`` its rows and ``fingerprint``
    the SHA-256 of the chunk digests of its ``columns`` (name -> DuckDB type) in the order of
    the column ``row``; each value as text (doubles by :func:`double_text`, NULL as ``\\N``),
    values separated by ``chr(31)``, rows by ``chr(30)``.  The script and its writer run it alike
    (a tree's or a sequence model's rows; a grid's: :func:`grid_fingerprint_sql`)."""
    texts = [double_text(ident(c)) if k in ("DOUBLE", "FLOAT") else f"CAST({ident(c)} AS VARCHAR)"
             for c, k in columns.items()]
    line = " || chr(31) || ".join(f"coalesce({text}, '\\N')" for text in texts)
    return _over_chunks(f"SELECT {ident(row)} // {FINGERPRINT_ROWS} AS chunk, count(*) AS n, "
                        f"sha256(string_agg({line}, chr(30) ORDER BY {ident(row)})) AS digest\n"
                        f"  FROM {relation} GROUP BY chunk")


def _over_chunks(digests: str) -> str:
    """SQL of one row ``(fingerprint, n)`` from the rows ``(chunk, n, digest)`` of ``digests``: the
    SHA-256 of the digests in chunk order, and the rows of all the chunks."""
    return (f"SELECT sha256(string_agg(digest, '' ORDER BY chunk)) AS fingerprint, "
            f"CAST(coalesce(sum(n), 0) AS BIGINT) AS n FROM (\n  {digests})")


def _grid_digests_sql(relation: str, row: str, kind: str) -> str:
    """SQL of the rows ``(chunk, n, digest)`` of :func:`grid_fingerprint_sql`: per chunk of
    :data:`FINGERPRINT_ROWS` rows of ``relation`` (by the column ``row``), its rows and the
    SHA-256 of its counts' texts."""
    value = ident("count")
    if kind in ("DOUBLE", "FLOAT"):
        digits = _integer_digits(value)
        each = f"coalesce({double_text('x')}, '\\N')"
        text = (f"CASE WHEN others = 0 THEN array_to_string(CAST(__v AS BIGINT[]), ',') ELSE "
                f"array_to_string(list_transform(__v, lambda x: {each}), ',') END")
    else:
        digits = "false"
        text = "array_to_string(list_transform(__v, lambda x: coalesce(CAST(x AS VARCHAR), '\\N')), ',')"
    return (f"SELECT chunk, n, sha256({text}) AS digest FROM (\n"
            f"  SELECT {ident(row)} // {FINGERPRINT_ROWS} AS chunk, count(*) AS n, "
            f"count(*) FILTER (WHERE NOT coalesce({digits}, false)) AS others, "
            f"list({value} ORDER BY {ident(row)}) AS __v\n"
            f"  FROM {relation} GROUP BY chunk)")


def grid_fingerprint_sql(relation: str, row: str, kind: str) -> str:
    """SQL of one row ``(fingerprint, n)`` over a grid's rows ``relation``: ``n`` its rows and
    ``fingerprint`` the SHA-256 of the chunk digests of its ``count`` column (of DuckDB type
    ``kind``) in the order of the column ``row``: per chunk of :data:`FINGERPRINT_ROWS` rows,
    the SHA-256 of its values' texts (:func:`double_text`; NULL as ``\\N``) joined by commas.  A
    chunk whose values all have integer digits (the common case of integral noise) is joined as
    a list of BIGINT, the same text without a text per value.  (The labels of a grid's rows are
    checked apart: :func:`_grid_in_place`.)"""
    return _over_chunks(_grid_digests_sql(relation, row, kind))


def _grid_fingerprint_steps(path: str, kind: str, rows: int) -> list[str]:
    """The statements computing :func:`grid_fingerprint_sql` of the file's ``rows`` rows a slab
    of :data:`FINGERPRINT_SLAB` chunks at a time (the file rows of the slab, ``file_row_number``
    in range): each appends its chunks' digests, in chunk order, to the session variable
    :data:`_DIGESTS` (the concatenation of all the chunks' digests, over which the fingerprint is
    the SHA-256), so no statement holds more than a slab."""
    step = FINGERPRINT_SLAB * FINGERPRINT_ROWS
    out = [f"SET VARIABLE {_DIGESTS} = '';"]
    for lo in range(0, rows, step):
        relation = f"{_read(path)} WHERE file_row_number BETWEEN {lo} AND {lo + step - 1}"
        digests = _grid_digests_sql(relation, "file_row_number", kind)
        out.append(f"SET VARIABLE {_DIGESTS} = getvariable({literal(_DIGESTS)}) || (SELECT "
                   f"coalesce(string_agg(digest, '' ORDER BY chunk), '') FROM (\n  {digests}));")
    return out


def _duckdb_types(con: Any, schema: pa.Schema) -> dict[str, str]:
    """DuckDB's type of each column of ``schema`` (as ``to_duckdb`` registers it)."""
    con.register("__pdp_types", pa.table({f.name: pa.array([], f.type) for f in schema}))
    try:
        return {row[0]: row[1] for row in con.execute("DESCRIBE SELECT * FROM __pdp_types").fetchall()}
    finally:
        con.unregister("__pdp_types")


def _numbered(reader: pa.RecordBatchReader) -> pa.RecordBatchReader:
    """``reader``'s batches plus the column ``__pdp_row`` (0, 1, ... in stream order)."""
    fields = [pa.field(f.name, f.type) for f in reader.schema]
    schema = pa.schema([*fields, pa.field("__pdp_row", pa.int64())])

    def batches() -> Iterator[pa.RecordBatch]:
        start = 0
        for batch in reader:
            rows = pa.array(np.arange(start, start + batch.num_rows, dtype=np.int64))
            start += batch.num_rows
            yield pa.RecordBatch.from_arrays([*batch.columns, rows], schema=schema)

    return pa.RecordBatchReader.from_batches(schema, batches())


def release_fingerprint(release: Release) -> tuple[dict[str, str], str, int]:
    """``(columns, fingerprint, rows)`` of the release's own rows: its columns with their DuckDB
    types and :func:`fingerprint_sql` over them (a grid's: :func:`grid_fingerprint_sql` over its
    ``count`` column), run by DuckDB on the release's record batches (a grid's counts in cell
    order, as its file holds them)."""
    with duckdb.connect() as con:
        reader = release.to_batches()
        columns = _duckdb_types(con, reader.schema)
        if release.release_type == "grid":
            reader.close()
            flat = cast("GridRelease", release).counts.reshape(-1)
            rows_of = np.arange(flat.size, dtype=np.int64)
            con.register("__pdp_rows", pa.table({"count": flat, "__pdp_row": rows_of}))
            fingerprint, rows = con.execute(
                grid_fingerprint_sql("__pdp_rows", "__pdp_row", columns["count"])).fetchall()[0]
        else:
            con.register("__pdp_rows", _numbered(reader))
            fingerprint, rows = con.execute(fingerprint_sql("__pdp_rows", "__pdp_row", columns)).fetchall()[0]
    return columns, str(fingerprint), int(rows)


def values_sql(table: pa.Table, types: Mapping[str, str]) -> str:
    """``table`` as a literal relation: ``VALUES`` of text literals (formatted by Polars, column
    by column), each column cast back to its DuckDB type (a double's shortest text reads back
    exactly).  Numbers, booleans, text and lists of numbers."""
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    names = [f"__c{k}" for k in range(frame.width)]

    def cell(name: str) -> pl.Expr:
        column = pl.col(name)
        dtype = frame.schema[name]
        if isinstance(dtype, pl.List):
            column = "[" + column.list.eval(pl.element().cast(pl.String)).list.join(", ") + "]"
        elif dtype != pl.String:
            column = column.cast(pl.String)
        return pl.when(pl.col(name).is_null()).then(pl.lit("NULL")).otherwise(
            "'" + column.str.replace_all("'", "''", literal=True) + "'")

    rows = frame.select(pl.concat_str([cell(c) for c in frame.columns], separator=", ")
                        .alias("row"))["row"]
    body = ",\n  ".join(("(" + rows + ")").to_list())
    select = ", ".join(f"CAST({n} AS {types[c]}) AS {ident(c)}"
                       for n, c in zip(names, frame.columns, strict=True))
    return f"SELECT {select} FROM (VALUES\n  {body}) AS __v({', '.join(names)})"


def _read(path: str) -> str:
    return f"read_parquet({literal(path)}, file_row_number = true)"


#: Cells per statement of a grid's cell table (about; whole planes of the first axis).
SLAB_CELLS = 1 << 20


def _strides(release: GridRelease) -> list[int]:
    shape = release.shape
    return [int(np.prod(shape[k + 1:], dtype=np.int64)) for k in range(len(shape))]


#: The radix of the doubling steps of a grid's prefix sums (:func:`_doubling`): fewer window
#: passes, more lags per pass (4: measured fastest on the census shape against 2, 8 and 16).
RADIX = 4


def _doubling(steps: list[str], at: str, n: int, stride: int) -> None:
    """Append to ``steps`` (CTE bodies, each reading the one before) the prefix sum of ``__p``
    along an axis of ``n`` positions ``at`` and stride ``stride``, by doubling in radix
    :data:`RADIX` = r: for j = 1, r, r^2, ... < n, ``__p`` plus ``lag(__p, m * j * stride)``
    for m = 1 .. r - 1 where the position is at least m * j.  Once the step for
    j has run, ``__p`` at position x is the sum of the values at positions max(0, x - r j + 1)
    .. x; after the last, at 0 .. x."""
    j = 1
    while j < n:
        terms = " + ".join(f"CASE WHEN {at} >= {m * j} THEN lag(__p, {m * j * stride}, 0) OVER () "
                           "ELSE 0 END" for m in range(1, RADIX) if m * j < n)
        steps.append(f"SELECT * EXCLUDE (__p), __p + {terms} AS __p FROM __s{len(steps) - 1}")
        j *= RADIX


def _grid_slab(release: GridRelease, cells: str, path: str, kind: str, first: int, stop: int) -> str:
    """The statement appending the cells of the planes ``first`` .. ``stop - 1`` of the first axis
    to the cell table ``cells``: the file's rows of those planes in order (``file_row_number``
    in range), ``prefix`` their inclusive d-dimensional prefix sum: along every other axis by
    :func:`_doubling` inside each plane, then the previous plane's prefix (read back from
    ``cells``, placed before the slab) as position 0 of the first axis and doubling along it."""
    strides, shape = _strides(release), release.shape
    s0 = strides[0]
    user = ident("count")
    steps = [f"SELECT file_row_number AS cell, {user}, CAST({user} AS DOUBLE) AS __p FROM {_read(path)} "
             f"WHERE file_row_number BETWEEN {first * s0} AND {stop * s0 - 1}"]
    for n, s in reversed(list(zip(shape[1:], strides[1:], strict=True))):
        _doubling(steps, f"((cell // {s}) % {n})", n, s)
    base = first
    if first > 0:  # the previous plane's prefix first, then the slab's rows (UNION ALL keeps the order)
        base = first - 1
        steps.append(f"SELECT cell, CAST(NULL AS {kind}) AS {user}, prefix AS __p FROM {cells} "
                     f"WHERE cell BETWEEN {base * s0} AND {first * s0 - 1} UNION ALL "
                     f"SELECT cell, {user}, __p FROM __s{len(steps) - 1}")
    _doubling(steps, f"(cell // {s0} - {base})", stop - base, s0)
    body = ",\n  ".join(f"__s{k} AS ({text})" for k, text in enumerate(steps))
    return (f"INSERT INTO {cells}\nWITH {body}\n"
            f"SELECT cell, {user}, __p AS prefix FROM __s{len(steps) - 1} WHERE cell >= {first * s0}")


def _grid_build(release: GridRelease, name: str, path: str, kind: str) -> str:
    """The statements creating a grid's cell table (``cell``, ``count`` of DuckDB type ``kind``,
    ``prefix``) from the file, slab by slab of whole planes of the first axis (about
    :data:`SLAB_CELLS` cells each, in cell order; :func:`_grid_slab`): every window reads one
    slab, so none holds more than a slab."""
    cells = ident(internal(name))
    planes = max(1, min(release.shape[0], SLAB_CELLS // max(_strides(release)[0], 1)))
    slabs = [_grid_slab(release, cells, path, kind, a, min(a + planes, release.shape[0]))
             for a in range(0, release.shape[0], planes)]
    create = f"CREATE TABLE {cells} (cell BIGINT, {ident('count')} {kind}, prefix DOUBLE)"
    return ";\n\n".join([create, *slabs])


def _grid_in_place(release: GridRelease) -> str:
    """SQL true when a file row's labels are those of its cell (``file_row_number``): per axis
    the labels listed once (the axis source of the script, one row per position) indexed by
    ``(row // stride) % n``, as the view derives them."""
    tests = []
    for k, (n, s) in enumerate(zip(release.shape, _strides(release), strict=True)):
        source = ident(f"__pdp_axis_{k}")
        for c in release._axis_table(k).column_names[1:]:
            listed = f"(SELECT list({ident(c)} ORDER BY __i) FROM {source})"
            tests.append(f"{ident(c)} IS NOT DISTINCT FROM {listed}[((file_row_number // {s}) % {n}) + 1]")
    return " AND ".join(tests) or "true"


def _sequence_nodes(nodes: pa.Table, path: str, types: Mapping[str, str]) -> str:
    """The node table of a sequence model: what the file holds per node, joined with the
    per-node ``noise_var`` and ``reach`` that Python derived from the tree (literal values)."""
    derived = values_sql(nodes.select(["node", "noise_var", "reach"]), types)
    return ("SELECT f.node, CAST(f.depth AS INTEGER) AS depth, f.context, f.starts_with_start, f.total, "
            "d.noise_var, d.reach FROM (SELECT node, any_value(depth) AS depth, any_value(context) AS "
            "context, any_value(starts_with_start) AS starts_with_start, sum(greatest(count, 0.0)) AS total "
            f"FROM read_parquet({literal(path)}) GROUP BY node) AS f JOIN ({derived}) AS d "
            "ON d.node = f.node ORDER BY f.node")


def _meta(path: str, keys: list[str]) -> str:
    listed = "[" + ", ".join(literal(META_PREFIX + k) for k in keys) + "]"
    return (f"SELECT substr(decode(key), {len(META_PREFIX) + 1}) AS key, decode(value) AS value "
            f"FROM parquet_kv_metadata({literal(path)}) WHERE list_contains({listed}, decode(key)) "
            f"ORDER BY list_position({listed}, decode(key))")


def registration(release: Release, name: str, path: str, columns: Mapping[str, str]) -> Registration:
    """What ``release.to_duckdb(con, name)`` creates (its statements and Arrow sources; a grid's
    cell table built from the file ``path`` by :func:`_grid_build`)."""
    kind = release.release_type
    if kind == "grid":
        grid = cast("GridRelease", release)
        return sql_grid.grid_registration(name, grid, preserve=False,
                                          build=_grid_build(grid, name, path, columns["count"]))
    if kind == "tree":
        return sql_tree.tree_registration(name, cast("SpatialRelease", release))
    if kind == "sequence_model":
        return sql_sequence.sequence_registration(name, release)
    raise ParameterError(f"a {type(release).__name__} has no SQL script (grid, spatial and sequence "
                         "releases have one)")


def _cells(release: Release, path: str, columns: Mapping[str, str]) -> str:
    """The SQL of the rows source of ``release`` (the file's rows plus the internal columns; a
    grid has none: :func:`_grid_build`)."""
    listed = ", ".join(map(ident, columns))
    if release.release_type == "tree":
        return f"SELECT {listed}, file_row_number AS leaf FROM {_read(path)} ORDER BY leaf"
    beta = cast("SequenceRelease", release).alphabet_size + 1
    return (f"SELECT {listed}, CAST(node AS BIGINT) * {beta} + next_code AS cell FROM {_read(path)} "
            "ORDER BY file_row_number")


def source_sql(release: Release, name: str, path: str, parts: Registration,
               columns: Mapping[str, str], meta_keys: list[str]) -> dict[str, str]:
    """Per transient source of ``parts``: the SQL the script reads instead (module doc)."""
    out = {}
    with duckdb.connect() as con:
        for source, data in parts.sources.items():
            if source == f"__pdp_meta_{name}":
                out[source] = _meta(path, meta_keys)
            elif source == f"__pdp_source_{name}":
                out[source] = _cells(release, path, columns)
            elif source == f"__pdp_nodes_{name}":
                out[source] = _sequence_nodes(data, path, _duckdb_types(con, data.schema))
            else:  # label tables (public domain facts), the inference tables of counted levels
                out[source] = values_sql(data, _duckdb_types(con, data.schema))
    return out


def file_metadata(path: str) -> dict[str, str]:
    """The ``polars_dp.*`` entries of the Parquet file ``path`` (prefix removed); a
    :class:`ReleaseFormatError` naming it when it is no readable Parquet file or holds none."""
    try:
        schema = pq.read_schema(path)
    except (OSError, pa.ArrowInvalid) as exc:
        raise ReleaseFormatError(f"{path!r} is not a readable Parquet file ({exc}); give the path of the "
                                 "release's Parquet file (release.write_parquet)") from None
    meta = {k.decode(errors="replace"): v.decode(errors="replace")
            for k, v in (schema.metadata or {}).items()}
    found = {k[len(META_PREFIX):]: v for k, v in meta.items() if k.startswith(META_PREFIX)}
    if not found:
        raise ReleaseFormatError(f"{path!r} is not a polars-dp release (its Parquet metadata holds no "
                                 "polars_dp entries); give the file release.write_parquet wrote")
    return found


def _check_sql(path: str, expected: Mapping[str, str], columns: Mapping[str, str], fingerprint: str,
               rows: int, in_place: str | None = None) -> list[str]:
    """The script's checks (module doc), each a ``SET VARIABLE`` that raises on a mismatch; a
    grid's (``in_place``: its label test, :func:`_grid_in_place`) by :func:`grid_fingerprint_sql`."""
    checksum = expected[CHECKSUM_KEY]
    refuse = f"{path} is not the release this script was written for (checksum {checksum}): "
    again = "; write the script again from the file (release.sql_script or polars-dp sql --script)"
    pairs = ",\n    ".join(f"({literal(META_PREFIX + k)}, {literal(v)})" for k, v in expected.items())
    meta = (f"SET VARIABLE {_CHECK} = (\n  WITH expected(key, value) AS (VALUES\n    {pairs}),\n"
            f"  found AS (SELECT decode(key) AS key, decode(value) AS value FROM parquet_kv_metadata("
            f"{literal(path)}) WHERE starts_with(decode(key), {literal(META_PREFIX)}) AND decode(key) <> "
            f"{literal(META_PREFIX + SIGNATURE_KEY)})\n"
            "  SELECT CASE WHEN (SELECT count(*) FROM (FROM expected EXCEPT FROM found)) + "
            "(SELECT count(*) FROM (FROM found EXCEPT FROM expected)) > 0 "
            f"THEN error({literal(refuse + 'its polars_dp metadata differs' + again)}) END);")
    wrong_rows = (f"WHEN n <> {rows} THEN error({literal(refuse)} || n || "
                  f"{literal(f' rows where the release has {rows}' + again)})")

    def differ(what: str) -> str:
        """The refusal of a fingerprint other than the release's (``what``: of which values)."""
        return (f"error({literal(refuse + f'its values differ (SHA-256 fingerprint {what}')} || "
                f"fingerprint || {literal(f', expected {fingerprint})' + again)})")

    if in_place is None:
        values = fingerprint_sql(_read(path), "file_row_number", columns)
        return [meta, f"SET VARIABLE {_CHECK} = (SELECT CASE {wrong_rows} "
                f"WHEN fingerprint <> {literal(fingerprint)} THEN {differ('')} END FROM (\n{values}));"]
    # a grid: its rows' number (from the file's metadata), their labels, their counts slab by slab
    count = (f"SET VARIABLE {_CHECK} = (SELECT CASE {wrong_rows} END FROM (SELECT count(*) AS n "
             f"FROM read_parquet({literal(path)})));")
    tail = literal(" rows without their cell's labels)" + again)
    misplaced = f"error({literal(refuse + 'its values differ (')} || misplaced || {tail})"
    labels = (f"SET VARIABLE {_CHECK} = (SELECT CASE WHEN misplaced > 0 THEN {misplaced} END FROM (\n"
              f"SELECT count(*) FILTER (WHERE NOT coalesce({in_place}, false)) AS misplaced "
              f"FROM {_read(path)}));")
    content = (f"SET VARIABLE {_CHECK} = (SELECT CASE WHEN fingerprint <> {literal(fingerprint)} THEN "
               f"{differ('of count ')} END FROM (SELECT sha256(getvariable({literal(_DIGESTS)})) "
               "AS fingerprint));")
    return [meta, count, labels, *_grid_fingerprint_steps(path, columns["count"], rows), content,
            f"RESET VARIABLE {_DIGESTS};"]


def sql_script(release: Release, parquet_path: str | os.PathLike, name: str) -> str:
    """The SQL script registering ``release`` as ``name`` from its Parquet file ``parquet_path``
    (module doc); the path is written into the script as given (a relative path is read from the
    DuckDB client's working directory).

    Refuses a ``name`` that is not a plain SQL identifier (:class:`ParameterError`), a path that
    is not a polars-dp release file or holds another release than ``release`` (its checksum
    differs), and an unverified release (:class:`ReleaseFormatError`, naming the path)."""
    check_identifier(name)
    if not isinstance(parquet_path, (str, os.PathLike)):
        raise ParameterError(f"parquet_path must be the path of the release's Parquet file, got "
                             f"{parquet_path!r}")
    path = str(parquet_path)
    if not release.verified:
        raise ReleaseFormatError("an unverified release has no SQL script (no checksum vouches for its "
                                 "values); give a verified release and its file")
    expected = release.export_metadata()
    found = file_metadata(path)
    if found.get(CHECKSUM_KEY) != expected[CHECKSUM_KEY]:
        raise ReleaseFormatError(
            f"{path!r} holds another release (checksum {found.get(CHECKSUM_KEY)}) than this one "
            f"({expected[CHECKSUM_KEY]}); give the file this release was written to or read from")
    columns, fingerprint, rows = release_fingerprint(release)
    parts = registration(release, name, path, columns)
    sources = source_sql(release, name, path, parts, columns, list(expected))
    header = [
        f"-- polars-dp {__version__}: the {release.release_type} release {name} "
        f"(mechanism {release.mechanism}, epsilon {release.epsilon}, checksum {expected[CHECKSUM_KEY]}),",
        f"-- read from {path} by DuckDB; what release.to_duckdb(con, {name!r}) creates.",
        f"-- Run it in a DuckDB client:  duckdb my.duckdb -c \".read {name}.sql\"  (or < {name}.sql).",
        "-- The file's polars_dp metadata and a fingerprint of its values are checked first: a different",
        "-- or edited file is refused with an error() and nothing is created (one transaction).",
        f"-- Creates: {', '.join(parts.tables)}; macros {', '.join(parts.macros)}.",
    ]
    views = [f"CREATE TEMP VIEW {ident(source)} AS\n{text};" for source, text in sources.items()]
    drops = [f"DROP VIEW {ident(source)};" for source in sources]
    statements = [s.strip().rstrip(";") + ";" for s in parts.statements]
    in_place = _grid_in_place(cast("GridRelease", release)) if release.release_type == "grid" else None
    checks = _check_sql(path, expected, columns, fingerprint, rows, in_place)
    # the order of the file's rows is the release's: the prefix scans read them in that order
    order = [f"SET VARIABLE {_ORDER} = current_setting('preserve_insertion_order');",
             "SET preserve_insertion_order = true;"]
    body = ["BEGIN TRANSACTION;", *views, *checks, f"RESET VARIABLE {_CHECK};", *order, *statements, *drops,
            f"SET preserve_insertion_order = getvariable({literal(_ORDER)});", f"RESET VARIABLE {_ORDER};",
            "COMMIT;"]
    return "\n".join(header) + "\n\n" + "\n\n".join(body) + "\n"


Release.script_writer = sql_script

__all__ = ["FINGERPRINT_ROWS", "double_text", "file_metadata", "fingerprint_sql", "grid_fingerprint_sql",
           "registration", "release_fingerprint", "source_sql", "sql_script", "values_sql"]
