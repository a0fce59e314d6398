"""SequenceModel: a released prediction suffix tree (variable-order Markov model) and its queries.

Everything here is post-processing of a differentially private release: the model holds the
public tree (built by a public rule or by PrivTree's private decisions) and noisy, clipped
histograms; it never sees the input data.

Queries (PrivTree paper Sec. 4; spec §2.10)
-------------------------------------------
* frequency of ``q = q1 … qk`` (estimated number of occurrences as a substring):
  ``f(q) = h(root)[q1] * prod_{j=2..k} h(u_j)[q_j] / |h(u_j)|_1`` with ``u_j`` the deepest node
  whose predictor string is a suffix of ``q1 … q_{j-1}``;
* top-k frequent strings: ``f`` is anti-monotone under extension, so the search keeps only
  strings whose ``f`` reaches the current k-th best and extends them all at once per length;
* sampling: from context ``#``, draw the next symbol from the histogram of the deepest node
  matching the context until ``&`` (or ``max_length`` symbols).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from polars_dp.errors import ParameterError, QueryError, ReleaseFormatError
from polars_dp.noise import SeedLike, make_rng
from polars_dp.pst import deepest_nodes
from polars_dp.release import Release, read_metadata, register_release_type
from polars_dp.sequence_counts import check_alphabet, check_max_length


def _padded(values: np.ndarray, lengths: np.ndarray, fill: int = -1) -> np.ndarray:
    """Rows of a flat ragged array as a ``(rows, max length)`` matrix padded with ``fill``."""
    n = lengths.size
    width = int(lengths.max()) if n else 0
    out = np.full((n, width), fill, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    row = np.repeat(np.arange(n), lengths)
    col = np.arange(values.size) - np.repeat(starts, lengths)
    out[row, col] = values
    return out


def _list_array(values: pa.Array, lengths: np.ndarray) -> pa.Array:
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), values)


def _reversed_contexts(strings: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """``ctx[i, j] = strings[i, ends[i] - 1 - j]`` (``-1`` once past the start)."""
    col = ends[:, None] - 1 - np.arange(strings.shape[1])[None, :]
    ok = col >= 0
    return np.where(ok, np.take_along_axis(strings, np.where(ok, col, 0), axis=1), -1)


def symbol_array(alphabet: Sequence[Any], codes: np.ndarray) -> pa.Array:
    """Alphabet values of symbol codes as an Arrow array."""
    if isinstance(alphabet[0], str):
        return pa.array(np.asarray(alphabet, dtype=object)[codes].tolist(), pa.string())
    return pa.array(np.asarray(alphabet, dtype=np.int64)[codes], pa.int64())


def strings_frame(alphabet: Sequence[Any], strings: np.ndarray, counts: np.ndarray) -> pl.DataFrame:
    """Polars frame of strings (rows of codes, ``-1`` padded) with column ``string`` (List of
    symbols) and ``count``."""
    strings = np.asarray(strings, dtype=np.int64).reshape(len(counts), -1)
    valid = strings >= 0
    table = pa.table({"string": _list_array(symbol_array(alphabet, strings[valid]), valid.sum(axis=1)),
                      "count": pa.array(np.asarray(counts, dtype=np.float64), pa.float64())})
    return pl.from_arrow(table)


@register_release_type
class SequenceModel(Release):
    """A released PST: node structure (BFS order) and one noisy histogram per node.

    ``hist[v, y]`` estimates how often symbol ``y`` (``y = |I|`` is the end marker ``&``)
    follows an occurrence of ``str(v)``.  ``prepended[v]`` is the code of the symbol
    prepended to the parent's string (``|I|`` is the start marker ``#``; ``-1`` at the root).
    """

    release_type: ClassVar[str] = "sequence_model"

    def __init__(self, *, alphabet: Sequence[Any], max_length: int, parent: np.ndarray,
                 prepended: np.ndarray, hist: np.ndarray, mechanism: str, epsilon: float,
                 neighbours: str = "add_remove", params: dict[str, Any] | None = None,
                 created: str | None = None, library_version: str | None = None, noise: str = "float",
                 seeded: bool = False):
        self.alphabet = check_alphabet(alphabet)
        self.max_length = check_max_length(max_length)
        self.parent = np.asarray(parent, dtype=np.int64)
        self.prepended = np.asarray(prepended, dtype=np.int64)
        self.hist = np.asarray(hist, dtype=np.float64)
        n, beta = self.parent.size, len(self.alphabet) + 1
        if self.hist.shape != (n, beta) or self.prepended.shape != (n,) or n == 0:
            raise ReleaseFormatError(f"sequence model arrays disagree: {n} nodes, histogram shape "
                                     f"{self.hist.shape}, expected ({n}, {beta})")
        if self.parent[0] != -1 or np.any(self.parent[1:] < 0) or np.any(self.parent[1:] >= np.arange(1, n)):
            raise ReleaseFormatError("sequence model nodes must be in BFS order with the root first")
        self.first_child = np.full(n, -1, dtype=np.int64)
        firsts = np.flatnonzero(self.prepended == 0)
        self.first_child[self.parent[firsts]] = firsts
        self.depth = np.zeros(n, dtype=np.int64)
        for v_range in self._levels_from_parents():
            self.depth[v_range] = self.depth[self.parent[v_range]] + 1
        self._init_common(mechanism=mechanism, epsilon=epsilon, neighbours=neighbours, params=params,
                          created=created, library_version=library_version, noise=noise, seeded=seeded)

    def _levels_from_parents(self) -> Iterable[np.ndarray]:
        """Non-root nodes grouped by depth (parents precede children in BFS order)."""
        known = np.zeros(self.parent.size, dtype=bool)
        known[0] = True
        while not known.all():
            level = np.flatnonzero(~known & known[np.maximum(self.parent, 0)])
            if level.size == 0:
                raise ReleaseFormatError("sequence model tree is disconnected")
            known[level] = True
            yield level

    # ------------------------------------------------------------------ basics
    @property
    def alphabet_size(self) -> int:
        return len(self.alphabet)

    @property
    def n_nodes(self) -> int:
        return int(self.parent.size)

    @property
    def is_leaf(self) -> np.ndarray:
        return self.first_child < 0

    @property
    def height(self) -> int:
        return int(self.depth.max())

    def metadata(self) -> dict[str, Any]:
        meta = super().metadata()
        meta.update({"alphabet": list(self.alphabet), "max_length": self.max_length,
                     "n_nodes": self.n_nodes})
        for key in ("lambda", "delta", "tree_share", "theta", "leaf_noise_scale", "l_top", "height",
                    "noise_scale"):
            if key in self.params:
                meta[key] = self.params[key]
        return meta

    def _symbols(self, codes: np.ndarray) -> pa.Array:
        return symbol_array(self.alphabet, codes)

    def _encode(self, strings: Iterable[Any]) -> tuple[np.ndarray, np.ndarray]:
        """Query strings (a str: one symbol per character; else a list of symbols) as codes."""
        items = list(strings)
        if isinstance(self.alphabet[0], str):
            items = [list(s) if isinstance(s, str) else s for s in items]
        try:
            series = pl.Series("q", items, dtype=pl.List(pl.String if isinstance(self.alphabet[0], str)
                                                         else pl.Int64), strict=False)
        except (TypeError, ValueError, pl.exceptions.PolarsError) as exc:
            raise QueryError(f"query strings must be lists of alphabet symbols: {exc}") from None
        if series.null_count():
            raise QueryError("a query string is None; give a list of symbols")
        codes = series.list.eval(pl.element().replace_strict(list(self.alphabet),
                                                             list(range(self.alphabet_size)),
                                                             default=None, return_dtype=pl.Int64))
        arr = codes.to_arrow()
        arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
        lengths = np.diff(arr.offsets.to_numpy())
        flat = arr.flatten()
        if flat.null_count:
            raise QueryError(f"query strings contain symbols outside the alphabet {list(self.alphabet)[:20]}")
        if lengths.size and lengths.min() == 0:
            raise QueryError("the empty string has no frequency; give at least one symbol")
        return _padded(flat.to_numpy(zero_copy_only=False), lengths), lengths

    def _conditional(self, nodes: np.ndarray) -> np.ndarray:
        """Normalised histograms ``h(v) / |h(v)|_1`` (all zero where the histogram is empty)."""
        h = self.hist[nodes]
        total = h.sum(axis=1, keepdims=True)
        return np.divide(h, total, out=np.zeros_like(h), where=total > 0)

    # ------------------------------------------------------------------ queries
    def frequencies(self, strings: Iterable[Any]) -> np.ndarray:
        """Estimated occurrence counts of many strings at once (spec §2.10 formula)."""
        q, lengths = self._encode(strings)
        if q.shape[0] == 0:
            return np.zeros(0)
        freq = self.hist[0, q[:, 0]].copy()
        rows, cols = np.nonzero(np.arange(q.shape[1])[None, :] < lengths[:, None])
        later = cols >= 1
        rows, cols = rows[later], cols[later]
        if rows.size:
            nodes = deepest_nodes(self.first_child, _reversed_contexts(q[rows], cols))
            prob = self._conditional(nodes)[np.arange(rows.size), q[rows, cols]]
            np.multiply.at(freq, rows, prob)
        return freq

    def frequency(self, string: Any) -> float:
        """Estimated number of occurrences of ``string`` (a str or a list of symbols)."""
        return float(self.frequencies([string])[0])

    def top_k(self, k: int, max_len: int | None = None) -> pl.DataFrame:
        """The ``k`` strings of highest estimated frequency, most frequent first.

        Best-first search in batches: per length, every string whose frequency reaches the
        current k-th best is extended by all symbols at once; extensions can only lose
        frequency, so nothing below that bar can reach the top ``k``.  ``max_len`` defaults to
        ``max_length`` (no substring of a truncated sequence is longer).
        """
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ParameterError(f"k must be an integer >= 1, got {k!r}")
        max_len = self.max_length if max_len is None else check_max_length(max_len)
        a = self.alphabet_size
        strings = np.arange(a, dtype=np.int64)[:, None]
        freq = self.hist[0, :a].copy()
        found_s: list[np.ndarray] = []
        found_f: list[np.ndarray] = []
        for length in range(1, max_len + 1):
            found_s.append(strings)
            found_f.append(freq)
            seen = np.concatenate(found_f)
            bar = np.partition(seen, seen.size - k)[seen.size - k] if seen.size >= k else 0.0
            keep = np.flatnonzero((freq >= bar) & (freq > 0))
            if keep.size > k:
                keep = keep[np.argsort(-freq[keep], kind="stable")[:k]]
            if keep.size == 0 or length == max_len:
                break
            parents = strings[keep]
            nodes = deepest_nodes(self.first_child,
                                  _reversed_contexts(parents, np.full(keep.size, length)))
            probs = self._conditional(nodes)[:, :a]
            freq = (freq[keep][:, None] * probs).reshape(-1)
            strings = np.concatenate([np.repeat(parents, a, axis=0),
                                      np.tile(np.arange(a), keep.size)[:, None]], axis=1)
        width = found_s[-1].shape[1]
        padded = np.concatenate([np.pad(m, ((0, 0), (0, width - m.shape[1])), constant_values=-1)
                                 for m in found_s])
        flat_f = np.concatenate(found_f)
        order = np.argsort(-flat_f, kind="stable")[:k]
        order = order[flat_f[order] > 0]  # strings of estimated frequency 0 are not listed
        return strings_frame(self.alphabet, padded[order], flat_f[order])

    def sample(self, n: int, seed: SeedLike = None) -> pl.DataFrame:
        """``n`` synthetic sequences (List column ``sequence``), all advancing one symbol per step.

        Each step finds, for every unfinished sequence, the deepest node matching ``# s1 … st``
        and draws the next symbol from its histogram; ``&`` (or an all-zero histogram) ends the
        sequence, and none grows past ``max_length`` symbols.
        """
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ParameterError(f"n must be an integer >= 0, got {n!r}")
        rng = make_rng(seed)
        a = self.alphabet_size
        generated = np.full((n, self.max_length), -1, dtype=np.int64)
        lengths = np.zeros(n, dtype=np.int64)
        alive = np.arange(n)
        for t in range(self.max_length):
            if alive.size == 0:
                break
            ctx = np.concatenate([generated[alive, :t][:, ::-1], np.full((alive.size, 1), a)], axis=1)
            cdf = np.cumsum(self._conditional(deepest_nodes(self.first_child, ctx)), axis=1)
            draw = (cdf < rng.random(alive.size)[:, None] * cdf[:, -1:]).sum(axis=1)
            draw = np.where(cdf[:, -1] > 0, np.minimum(draw, a), a)
            cont = draw < a
            generated[alive[cont], t] = draw[cont]
            lengths[alive[cont]] += 1
            alive = alive[cont]
        codes = generated[generated >= 0]
        return pl.from_arrow(pa.table({"sequence": _list_array(self._symbols(codes), lengths)}))

    # ------------------------------------------------------------------ Arrow
    def predictor_strings(self) -> tuple[np.ndarray, np.ndarray]:
        """``str(v)`` of every node as a ``(nodes, height)`` code matrix, oldest symbol first
        (``-1`` padding on the right), and the lengths (= depths)."""
        n, height = self.n_nodes, self.height
        out = np.full((n, max(height, 1)), -1, dtype=np.int64)
        node = np.arange(n)
        for j in range(height):
            live = self.depth > j
            out[live, j] = self.prepended[node[live]]
            node = np.where(live, self.parent[node], node)
        return out[:, :height], self.depth.copy()

    def _table(self) -> pa.Table:
        beta = self.alphabet_size + 1
        strings, depth = self.predictor_strings()
        hashed = np.zeros(self.n_nodes, dtype=bool)
        hashed[depth > 0] = strings[depth > 0, 0] == self.alphabet_size
        mask = (np.arange(strings.shape[1])[None, :] < depth[:, None]) & (strings != self.alphabet_size)
        context = _list_array(self._symbols(strings[mask]), mask.sum(axis=1))
        node = np.repeat(np.arange(self.n_nodes), beta)
        nxt = np.tile(np.arange(beta), self.n_nodes)
        end = nxt == self.alphabet_size
        next_symbol = self._symbols(np.where(end, 0, nxt))
        return pa.table({
            "node": pa.array(node, pa.int32()),
            "parent": pa.array(self.parent[node], pa.int32()),
            "depth": pa.array(depth[node], pa.int16()),
            "is_leaf": pa.array(self.is_leaf[node]),
            "prepended_code": pa.array(self.prepended[node], pa.int16()),
            "starts_with_start": pa.array(hashed[node]),
            "context": context.take(pa.array(node)),
            "next_code": pa.array(nxt, pa.int16()),
            "next_symbol": pc.if_else(pa.array(end), pa.nulls(node.size, next_symbol.type), next_symbol),
            "is_end": pa.array(end),
            "count": pa.array(self.hist.reshape(-1), pa.float64()),
        })

    @classmethod
    def from_arrow(cls, table: pa.Table) -> SequenceModel:
        meta = read_metadata(table)
        try:
            common = cls._common_from_metadata(meta)
            alphabet = json.loads(meta["alphabet"])
            max_length = json.loads(meta["max_length"])
            beta = len(alphabet) + 1
            node = table.column("node").to_numpy()
            first = np.flatnonzero(table.column("next_code").to_numpy() == 0)
            parent = table.column("parent").to_numpy()[first]
            prepended = table.column("prepended_code").to_numpy()[first]
            hist = table.column("count").to_numpy().reshape(-1, beta)
        except (KeyError, ValueError, TypeError) as exc:
            raise ReleaseFormatError(f"sequence model table is incomplete or corrupt: {exc}") from None
        if not np.array_equal(node[first], np.arange(first.size)) or hist.shape[0] != first.size:
            raise ReleaseFormatError("sequence model rows must list nodes 0..n-1, each with all symbols")
        return cls(alphabet=alphabet, max_length=max_length, parent=parent, prepended=prepended,
                   hist=hist, **common)

    def _payload_equal(self, other: Release) -> bool:
        return (isinstance(other, SequenceModel) and np.array_equal(self.parent, other.parent)
                and np.array_equal(self.prepended, other.prepended) and np.array_equal(self.hist, other.hist))

    def __repr__(self) -> str:
        return (f"SequenceModel(mechanism={self.mechanism!r}, epsilon={self.epsilon}, "
                f"noise={self.noise!r}{self._seeded_repr()}, alphabet_size={self.alphabet_size}, "
                f"max_length={self.max_length}, nodes={self.n_nodes:,}, height={self.height})")


__all__ = ["SequenceModel", "strings_frame", "symbol_array"]
