"""SequenceRelease: a released prediction suffix tree (variable-order Markov model) and its queries.

Everything here is post-processing of a differentially private release: the model holds the
public tree (built by a public rule or by PrivTree's private decisions) and the noisy
histograms (unclipped sums of the noisy leaves for the PST, one noisy count per bin for the
n-gram baseline); it never sees the input data.  Queries clip bins at 0 when they use them.

The model (PrivTree paper Sec. 4)
---------------------------------------------
A sequence ``s1 … sn`` is written ``# s1 … sn &`` and truncated to ``max_length`` symbols.
``h(v)[y]`` counts the positions ``j`` whose context ``# s1 … s_{j-1}`` ends with ``str(v)``
and whose symbol is ``y`` (``s_{n+1} = &``).  ``str(child) = x · str(parent)``: a node is
reached by reading its context *backwards*; ``#`` is a context symbol only (nodes whose string
starts with ``#`` are leaves and match only a whole context, i.e. the position since the start
is then known), ``&`` a predicted symbol only (the last bin).

Sampling draws, at step ``t = 0, 1, …``, the next symbol of ``c_t = # s1 … st`` from
``h+(u) / |h+(u)|_1`` (``h+ = max(h, 0)``), where ``u`` is the deepest node whose string is a
suffix of ``c_t``, walking down from the root through *usable* nodes only (:meth:`usable`).
``&`` ends the sequence: ``P(stop after t symbols | c_t) = h+(u)[&] / |h+(u)|_1``; after
``max_length`` symbols it always stops (the truncated data do).  This is the paper's procedure
(start from ``#``, match the longest suffix, sample, stop at ``&``) plus the cap, the back-off
and, when the model released a length law, a per-step calibration of the stop probabilities
(:meth:`sample`).  With exact counts and no back-off it is the maximum-likelihood variable-order chain
of the truncated data: wherever the tree resolves the context down to ``#`` the empirical law
of the prefix is reproduced; a node PrivTree left unsplit has at most ``depth * delta``
positions off its majority symbol (``delta -> 0`` as epsilon grows, leaving only pure nodes
unsplit, whose law every longer context shares).  tests/unit/mechanisms/test_sequence_markov.py checks the
length law against known variable-order sources, one with a position-dependent stop.

Two rules keep sampled lengths right (``docs/sequences.md`` has the measurements): a context
whose node total is not significant against its noise is answered from its deepest significant
ancestor (the back-off of :meth:`usable`), and PrivTree sequence models release a noisy length
law (``length_share``) to which :meth:`sample` calibrates its stop probabilities, since a
suffix tree knows the position since the start only where it resolves contexts down to ``#``.

Estimators
----------
* ``frequency(q)``, ``q = q1 … qk`` (occurrences as a substring): ``f(q1) = h+(root)[q1]``; then
  for ``j = 2..k`` with ``u_j`` the deepest usable suffix node of ``q1 … q_{j-1}``:
  ``f(q1 … qj) = min(f(q1 … q_{j-1}), h+(u_j)[qj])`` when ``str(u_j) = q1 … q_{j-1}`` (the node
  *holds* the string: its bin counts the occurrences directly, one linear estimate instead of
  a product of ratios of many noisy sums; the ``min`` keeps ``f`` anti-monotone like true
  counts), else the paper's extrapolation ``f(q1 … q_{j-1}) * h+(u_j)[qj] / |h+(u_j)|_1``.  With
  exact counts both branches give the paper's value (the chain telescopes).  Bias: the clip at
  0 (upward, only for bins within a few noise sds of 0) and, for strings longer than the tree
  resolves, the Markov assumption of the extrapolation.
* Direct or extrapolated: an estimate is *extrapolated* when it rests on the Markov
  assumption (some step's ``u_j`` does not hold the whole prefix, and the value was not
  replaced by a direct count since); otherwise it is *direct*, read from one node's noisy bin.
  ``frequency_table``, ``top_k``, the SQL macros and the command line say which
  (``extrapolated``), computed from the release alone like the estimate.
* ``frequencies(..., std=True)``: the noise sd of each bin is public (:meth:`bin_noise_variance`).
  For a directly counted string it is exact (``sqrt(2 b^2 L(u))``; ``sqrt(2) s`` for the n-gram);
  for an extrapolated one, a first-order (delta-method) approximation that treats the factors
  as independent: ``Var f ~ f^2 (Var f_prev / f_prev^2 + Var r / r^2)`` with, for
  ``r = a / t`` from one node (``Var a = v, Var t = beta v, Cov = v``),
  ``Var r ~ v (1 - 2 r + beta r^2) / t^2``.  Checked against seeded repetitions in the tests.
  The std is the noise only: it does not cover the bias of the Markov assumption, which on
  real data can be many noise sds (``tests/unit/mechanisms/test_sequence_extrapolation.py``).
* A string longer than ``max_length`` has frequency 0 exactly (std 0): the release describes
  the sequences truncated to ``max_length`` symbols, in which it cannot occur.
* ``top_k``: best-first batches over the same estimator (anti-monotone, so the search is exact).

Every array of the model (``parent``, ``prepended``, ``hist``, ``first_child``, ``depth``,
``is_leaf``) is read-only and cannot be rebound: the answers always agree with the written
file, the DuckDB tables and the checksum.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar, cast

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from polars_dp.counting.sequences import check_max_length
from polars_dp.domains.alphabet import check_alphabet, outside_alphabet_text, query_symbol, refused_examples
from polars_dp.domains.expressions import NUMPY
from polars_dp.errors import ParameterError, QueryError, ReleaseFormatError
from polars_dp.kernels.pst import deepest_nodes
from polars_dp.kernels.topk import best_k, best_order, frontier
from polars_dp.noise import SeedLike, make_rng
from polars_dp.params import check_int
from polars_dp.plans.base import Plan
from polars_dp.plans.spatial import SequencesPlan
from polars_dp.releases import sql_sequence
from polars_dp.releases.base import Release, Sealed
from polars_dp.releases.card import sequence_accuracy
from polars_dp.releases.integrity import predates_checksums
from polars_dp.releases.reading import register_release_type
from polars_dp.releases.report import top_strings
from polars_dp.releases.sampling import check_rows_fit
from polars_dp.releases.sequence_format import check_sequence_structure

#: Default significance (in noise standard deviations) a node's total needs to be used.
BACKOFF_Z = 3.0


def _padded(values: np.ndarray, lengths: np.ndarray, fill: int = -1) -> np.ndarray:
    """Rows of a flat ragged array as a ``(rows, max length)`` matrix padded with ``fill``."""
    n = lengths.size
    width = int(lengths.max()) if n else 0
    out = np.full((n, width), fill, dtype=np.int64)
    starts = (np.cumsum(lengths) - lengths).astype(np.int64)
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


def calibrated_stops(stop_p: np.ndarray, free: np.ndarray, target: float, iterations: int = 60) -> np.ndarray:
    """Stop probabilities with one common log-odds shift on the ``free`` rows so that their mean
    over all rows equals ``target`` (as nearly as the fixed rows allow); others unchanged."""
    out = np.asarray(stop_p, dtype=np.float64).copy()
    if not free.any():
        return out
    p = np.clip(out[free], 1e-12, 1 - 1e-12)
    logit = np.log(p) - np.log1p(-p)
    fixed_sum = out[~free].sum()
    want = target * out.size - fixed_sum  # what the free rows must add up to
    lo, hi = -60.0, 60.0
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        if (1.0 / (1.0 + np.exp(-(logit + mid)))).sum() < want:
            lo = mid
        else:
            hi = mid
    out[free] = 1.0 / (1.0 + np.exp(-(logit + 0.5 * (lo + hi))))
    return out


def _check_estimator(estimator: str) -> None:
    if estimator not in ("direct", "chain"):
        raise ParameterError(
            f"estimator={estimator!r}; use 'direct' (default) or 'chain' (the paper's formula)")


def symbol_array(alphabet: Sequence[Any], codes: np.ndarray) -> pa.Array:
    """Alphabet values of symbol codes as an Arrow array."""
    if isinstance(alphabet[0], str):
        return pa.array(np.asarray(alphabet, dtype=object)[codes].tolist(), pa.string())
    return pa.array(np.asarray(alphabet, dtype=np.int64)[codes], pa.int64())


def strings_frame(alphabet: Sequence[Any], strings: np.ndarray, counts: np.ndarray,
                  **columns: pa.Array) -> pl.DataFrame:
    """Polars frame of strings (rows of codes, ``-1`` padded) with column ``string`` (List of
    symbols), ``count`` and then ``columns`` (one value per string)."""
    strings = np.asarray(strings, dtype=np.int64)
    strings = strings.reshape(len(counts), strings.size // max(len(counts), 1))
    valid = strings >= 0
    table = pa.table({"string": _list_array(symbol_array(alphabet, strings[valid]), valid.sum(axis=1)),
                      "count": pa.array(np.asarray(counts, dtype=np.float64), pa.float64()), **columns})
    return cast(pl.DataFrame, pl.from_arrow(table))


@register_release_type
class SequenceRelease(Release):
    """A released PST: node structure (BFS order) and one noisy histogram per node.

    ``hist[v, y]`` estimates how often symbol ``y`` (``y = |I|`` is the end marker ``&``)
    follows an occurrence of ``str(v)``.  ``prepended[v]`` is the code of the symbol
    prepended to the parent's string (``|I|`` is the start marker ``#``; ``-1`` at the root).
    """

    release_type: ClassVar[str] = "sequence_model"
    internal_columns: ClassVar[tuple[str, ...]] = ("cell",)  # node * beta + next_code
    metadata_entries = ("alphabet", "max_length", "n_nodes")

    #: The public symbols (a tuple of ints or of strings).
    alphabet: Sealed[tuple] = Sealed()
    #: The public truncation length: only the first ``max_length`` symbols of a sequence count.
    max_length: Sealed[int] = Sealed()
    #: Parent of each node (``-1`` at the root), BFS order.
    parent: Sealed[np.ndarray] = Sealed()
    #: Code of the symbol each node prepends to its parent's string (``|I|``: ``#``).
    prepended: Sealed[np.ndarray] = Sealed()
    #: The released noisy histograms, ``(nodes, |I| + 1)``.
    hist: Sealed[np.ndarray] = Sealed()
    #: First of each split node's ``|I| + 1`` contiguous children (``-1``: a leaf).
    first_child: Sealed[np.ndarray] = Sealed()
    #: Depth of each node (the length of its string).
    depth: Sealed[np.ndarray] = Sealed()
    #: Whether each node is a leaf.
    is_leaf: Sealed[np.ndarray] = Sealed()

    def __init__(self, *, alphabet: Sequence[Any], max_length: int, parent: np.ndarray,
                 prepended: np.ndarray, hist: np.ndarray, mechanism: str | None = None,
                 epsilon: float | None = None, neighbours: str = "add_remove",
                 params: dict[str, Any] | None = None, created: str | None = None,
                 library_version: str | None = None, noise: str | None = None,
                 seeded: bool = False, plan: Plan | None = None):
        self.alphabet = check_alphabet(alphabet)
        self.max_length = check_max_length(max_length)
        self.parent = np.asarray(parent, dtype=np.int64)
        self.prepended = np.asarray(prepended, dtype=np.int64)
        self.hist = np.asarray(hist, dtype=np.float64)
        n, beta = self.parent.size, len(self.alphabet) + 1
        if self.hist.shape != (n, beta) or self.prepended.shape != (n,) or n == 0:
            raise ReleaseFormatError(f"sequence model arrays disagree: {n} nodes, histogram shape "
                                     f"{self.hist.shape}, expected ({n}, {beta})")
        parent = self.parent
        if parent[0] != -1 or np.any(parent[1:] < 0) or np.any(parent[1:] >= np.arange(1, n)):
            raise ReleaseFormatError("sequence model nodes must be in BFS order with the root first")
        first_child = np.full(n, -1, dtype=np.int64)
        firsts = np.flatnonzero(self.prepended == 0)
        first_child[parent[firsts]] = firsts
        depth = np.zeros(n, dtype=np.int64)
        known = np.zeros(n, dtype=bool)  # the nodes whose depth is known, level by level from the root
        known[0] = True
        while not known.all():
            level = np.flatnonzero(~known & known[np.maximum(parent, 0)])
            if level.size == 0:
                raise ReleaseFormatError("sequence model tree is disconnected")
            known[level] = True
            depth[level] = depth[parent[level]] + 1
        self.first_child, self.depth = first_child, depth
        self.is_leaf = first_child < 0
        self._init_common(mechanism=mechanism, epsilon=epsilon, neighbours=neighbours, params=params,
                          created=created, library_version=library_version, noise=noise, seeded=seeded,
                          plan=plan)

    def _domain(self) -> dict[str, Any]:
        return {"column": "", "alphabet": list(self.alphabet), "max_length": self.max_length}

    @property
    def _sequences_class(self) -> type[SequencesPlan]:
        """The sequences plan class that declares this release's record (:class:`SequencesPlan`
        itself when none does)."""
        cls = self._record_class
        return cls if issubclass(cls, SequencesPlan) else SequencesPlan

    # ------------------------------------------------------------------ basics
    # The arrays are read-only (``flags.writeable`` is False) and, with the public domain,
    # cannot be rebound: an edit in place would change the answers while the file, the DuckDB
    # tables and the checksum keep the released values.  A release is changed only by building
    # a new one.
    @property
    def alphabet_size(self) -> int:
        return len(self.alphabet)

    @property
    def n_nodes(self) -> int:
        return int(self.parent.size)

    @property
    def height(self) -> int:
        return int(self.depth.max())

    def _metadata_entries(self) -> dict[str, Any]:
        return {"alphabet": list(self.alphabet), "max_length": self.max_length, "n_nodes": self.n_nodes}

    def _encode(self, strings: Iterable[Any]) -> tuple[np.ndarray, np.ndarray]:
        """Query strings as codes: lists (or tuples, 1-D numpy arrays, Polars Series) of symbols,
        or, where the alphabet holds strings, a str of one symbol per character (an integer
        alphabet refuses a str: ``"12"`` would be ambiguous).

        Every query path (:meth:`frequencies`, :meth:`frequency_table`, :meth:`frequency`) reads
        its strings here, and each symbol follows one rule,
        :func:`~polars_dp.domains.alphabet.query_symbol` (the SQL macros render the same): a value
        of the alphabet's kind (``2.0`` is ``2``), never one converted to it (``1.5``, ``True`` and
        ``'2'`` are refused, not rounded, truncated or parsed), looked up in the alphabet.
        """
        text = isinstance(self.alphabet[0], str)
        items: list[Any] = []
        for s in strings:
            if isinstance(s, (np.ndarray, pl.Series)):
                s = s.tolist() if isinstance(s, np.ndarray) else s.to_list()
            elif isinstance(s, str):
                if not text:
                    raise QueryError(f"the alphabet holds integers; give each query string as a list of "
                                     f"symbols, e.g. {list(self.alphabet[:2])!r}, not a str")
                s = list(s)
            elif s is None:
                raise QueryError("a query string is None; give a list of symbols")
            try:
                items.append(list(s))
            except TypeError:
                raise QueryError(f"query strings must be lists of alphabet symbols, got {s!r}") from None
        lengths = np.fromiter(map(len, items), dtype=np.int64, count=len(items))
        if lengths.size and lengths.min() == 0:
            raise QueryError("the empty string has no frequency; give at least one symbol")
        values = [x for s in items for x in s]
        index = {symbol: code for code, symbol in enumerate(self.alphabet)}
        plain = str if text else int
        if all(type(x) is plain for x in values):  # the common case: no value to read as a symbol
            codes = [index.get(x, -1) for x in values]
        else:
            codes = [index.get(query_symbol(x, text), -1) for x in values]
        flat = np.fromiter(codes, dtype=np.int64, count=len(codes))
        if (flat < 0).any():
            bad = [values[i] for i in np.flatnonzero(flat < 0)]
            raise QueryError(outside_alphabet_text(NUMPY, self.alphabet, refused_examples(bad)))
        return _padded(flat, lengths), lengths

    def bin_noise_variance(self) -> np.ndarray:
        """Variance of the noise in each bin of each node's histogram (public: tree + scales).

        PrivTree PST (leaf scale ``b``): leaves carry ``Lap(b)`` per bin and a node's histogram
        is the sum of the ``L(v)`` leaves below it, so ``2 b^2 L(v)``.  N-gram (scale ``s`` on
        every node): ``2 s^2``.  NaN when the release states no scale (:meth:`stated_noise_scale`).
        """
        scale = self.stated_noise_scale()
        if scale is None:
            return np.full(self.n_nodes, np.nan)
        if not self._sequences_class.internal_sums:
            return np.full(self.n_nodes, 2.0 * scale**2)
        n_leaves = self.is_leaf.astype(np.float64)
        for d in range(self.height, 0, -1):
            nodes = np.flatnonzero(self.depth == d)
            np.add.at(n_leaves, self.parent[nodes], n_leaves[nodes])
        return 2.0 * scale**2 * n_leaves

    def usable(self, backoff: float | None = BACKOFF_Z) -> np.ndarray:
        """Nodes whose noisy total is significant: ``|h(v)|_1 >= backoff * sd(|h(v)|_1)``.

        ``sd(|h(v)|_1) = sqrt(beta * bin_noise_variance)`` (independent bins).  A node without
        data passes with probability about ``1 - Phi(backoff)`` (0.13% at the default 3), so
        contexts backed off this way are never answered from a histogram that is mostly noise
        (whose clipped bins would spread ``~0.4 sd`` of spurious mass over every empty bin).
        The root is always usable; ``backoff=0`` uses every node with a non-negative total and
        ``backoff=None`` every node (the paper's procedure).
        """
        if backoff is None:
            return np.ones(self.n_nodes, dtype=bool)
        var = self.bin_noise_variance()
        sd = np.sqrt(np.nan_to_num(var, nan=0.0) * (self.alphabet_size + 1))
        ok = self.hist.sum(axis=1) >= float(backoff) * sd
        ok[0] = True
        return ok

    # ------------------------------------------------------------------ queries
    def _extend(self, freq: np.ndarray, var: np.ndarray, extrapolated: np.ndarray, prefixes: np.ndarray,
                length: np.ndarray, symbols: np.ndarray, usable: np.ndarray, noise_var: np.ndarray,
                estimator: str = "direct") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Estimates, noise variances and extrapolation flags of ``prefix + symbol`` from those
        of ``prefix``.

        ``u`` is the deepest usable node whose string is a suffix of the prefix.  If ``str(u)``
        is the whole prefix, ``h(u)[symbol]`` counts the extension's occurrences directly:
        ``f = min(f(prefix), max(h(u)[symbol], 0))`` (linear in the noisy leaves; the ``min``
        keeps ``f`` anti-monotone as true counts are).  Otherwise the Markov extrapolation of
        the paper: ``f = f(prefix) * h+(u)[symbol] / |h+(u)|_1``.  The result is extrapolated
        when it rests on that Markov assumption: this step's ``u`` does not hold the whole
        prefix, or the value kept or multiplied is an extrapolated prefix estimate.
        """
        nodes = deepest_nodes(self.first_child, _reversed_contexts(prefixes, length), usable)
        holds = self.depth[nodes] == length
        direct = holds & (estimator == "direct")
        count = np.maximum(self.hist[nodes, symbols], 0.0)
        total = np.maximum(self.hist[nodes], 0.0).sum(axis=1)
        ratio = np.divide(count, total, out=np.zeros_like(count), where=total > 0)
        out = np.where(direct, np.minimum(freq, count), freq * ratio)
        # delta method for the ratio a / t of one node: Var a = v, Var t = beta v, Cov = v
        v = noise_var[nodes]
        beta = self.alphabet_size + 1
        safe = np.where(total > 0, total, 1.0)
        rel_ratio = np.divide(v * (1 - 2 * ratio + beta * ratio**2), (ratio * safe) ** 2,
                              out=np.zeros_like(v), where=(ratio > 0) & (total > 0))
        rel_prev = np.divide(var, freq**2, out=np.zeros_like(var), where=freq > 0)
        chained = out**2 * (rel_prev + rel_ratio)
        capped = direct & (freq < count)
        new_var = np.where(direct, np.where(capped, var, v), chained)
        return out, new_var, np.where(direct, capped & extrapolated, extrapolated | ~holds)

    def _estimates(self, q: np.ndarray, lengths: np.ndarray, backoff: float | None, estimator: str
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(estimates, noise variances, extrapolated)`` of encoded strings (:meth:`_encode`)."""
        _check_estimator(estimator)
        n = lengths.size
        if n == 0:
            return np.zeros(0), np.zeros(0), np.zeros(0, dtype=bool)
        usable = self.usable(backoff)
        noise_var = self.bin_noise_variance()
        freq = np.maximum(self.hist[0, q[:, 0]], 0.0)
        var = np.full(n, noise_var[0])
        extrapolated = np.zeros(n, dtype=bool)
        for j in range(1, min(q.shape[1], self.max_length)):
            rows = np.flatnonzero(lengths > j)
            freq[rows], var[rows], extrapolated[rows] = self._extend(
                freq[rows], var[rows], extrapolated[rows], q[rows], np.full(rows.size, j), q[rows, j],
                usable, noise_var, estimator)
        too_long = lengths > self.max_length  # no substring of a truncated sequence is longer
        freq[too_long], var[too_long], extrapolated[too_long] = 0.0, 0.0, False
        return freq, var, extrapolated

    def frequencies(self, strings: Iterable[Any], *, std: bool = False, backoff: float | None = BACKOFF_Z,
                    estimator: str = "direct") -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        """Estimated occurrence counts (as substrings) of many strings at once.

        Estimator (see the module docstring): the longest prefix ``q1 … qm`` whose first
        ``m - 1`` symbols are a (usable) node ``u`` of the tree is counted directly,
        ``h(u)[qm]``; the rest of the string is extrapolated with the conditionals of the
        deepest usable suffix nodes (the paper's formula).  With exact counts both agree.
        A string longer than ``max_length`` has frequency 0 exactly (std 0): the release
        describes the sequences truncated to ``max_length`` symbols, in which it cannot occur.

        ``std=True`` also returns the standard deviation of the *noise* in each estimate:
        exact (before the clip at 0) when the estimate is one node's bin,
        ``sqrt(bin_noise_variance(u))``; otherwise a first-order (delta-method) approximation
        that treats the factors as independent.  Returns ``(estimates, std)`` then.  The std
        does not cover the error of the Markov assumption of an extrapolated estimate, which
        can be many times larger: :meth:`frequency_table` says which estimates are extrapolated.

        ``estimator="chain"`` is the paper's formula throughout (``h+(root)[q1]`` times the
        conditionals), for comparison; ``backoff`` is explained at :meth:`usable`.
        """
        freq, var, _ = self._estimates(*self._encode(strings), backoff, estimator)
        return (freq, np.sqrt(var)) if std else freq

    def frequency_table(self, strings: Iterable[Any], *, backoff: float | None = BACKOFF_Z,
                        estimator: str = "direct") -> pl.DataFrame:
        """:meth:`frequencies` as a Polars frame, one row per string in order: ``string`` (List
        of symbols), ``count``, ``std`` (the noise standard deviation only; null where the
        release states no noise scale) and ``extrapolated``.

        ``extrapolated`` is False for a *direct* estimate, read from the noisy bin of a node
        that holds the string's prefix (its ``std`` is its whole error, but for the clip at
        0), and True for one computed with the Markov assumption beyond the measured nodes
        (``f(prefix) * h+(u)[y] / |h+(u)|_1`` with ``str(u)`` shorter than the prefix): its
        error includes the model's bias, which ``std`` does not cover (±1.96 std intervals of
        extrapolated strings can cover the truth far less often than 95%).  With
        ``estimator="chain"`` an estimate whose every node holds its prefix is not extrapolated
        either (a product of ratios, exact without noise).
        """
        q, lengths = self._encode(strings)
        freq, var, extrapolated = self._estimates(q, lengths, backoff, estimator)
        return strings_frame(self.alphabet, q, freq, std=pa.array(np.sqrt(var), from_pandas=True),
                             extrapolated=pa.array(extrapolated))

    def frequency(self, string: Any, *, backoff: float | None = BACKOFF_Z,
                  estimator: str = "direct") -> float:
        """Estimated number of occurrences of ``string`` (a str of one-character symbols when the
        alphabet holds strings, or a list of symbols); 0 for a string longer than ``max_length``
        (:meth:`frequencies`)."""
        return float(self.frequencies([string], backoff=backoff, estimator=estimator)[0])

    def top_k(self, k: int, max_len: int | None = None, *, backoff: float | None = BACKOFF_Z,
              estimator: str = "direct") -> pl.DataFrame:
        """The ``k`` strings of highest estimated frequency (:meth:`frequencies`), most frequent
        first: columns ``string``, ``count`` and ``extrapolated`` (:meth:`frequency_table`).

        Best-first search in batches: per length, every string whose frequency reaches the
        current k-th best is extended by all symbols at once; the estimate is anti-monotone
        (an extension never exceeds its prefix), so nothing below that bar can reach the top
        ``k``.  ``max_len`` is at most ``max_length`` (no substring of a truncated sequence is
        longer), its default.
        """
        k = check_int(k, "k", lo=1)
        _check_estimator(estimator)
        max_len = self.max_length if max_len is None else min(check_max_length(max_len), self.max_length)
        usable = self.usable(backoff)
        noise_var = self.bin_noise_variance()
        a = self.alphabet_size
        strings = np.arange(a, dtype=np.int64)[:, None]
        freq = np.maximum(self.hist[0, :a], 0.0)
        var = np.zeros(a)
        extrapolated = np.zeros(a, dtype=bool)
        found_s: list[np.ndarray] = []
        found_f: list[np.ndarray] = []
        found_x: list[np.ndarray] = []
        for length in range(1, max_len + 1):
            found_s.append(strings)
            found_f.append(freq)
            found_x.append(extrapolated)
            keep = frontier(found_f, freq, k)
            if keep.size == 0 or length == max_len:
                break
            parents = np.repeat(strings[keep], a, axis=0)
            symbols = np.tile(np.arange(a), keep.size)
            freq, var, extrapolated = self._extend(
                np.repeat(freq[keep], a), np.repeat(var[keep], a), np.repeat(extrapolated[keep], a), parents,
                np.full(parents.shape[0], length), symbols, usable, noise_var, estimator)
            strings = np.concatenate([parents, symbols[:, None]], axis=1)
        strings, freq = best_k(found_s, found_f, k)
        extrapolated = np.concatenate(found_x)[best_order(found_f, k)]
        listed = freq > 0  # strings of estimated frequency 0 are not listed
        return strings_frame(self.alphabet, strings[listed], freq[listed],
                             extrapolated=pa.array(extrapolated[listed]))

    def length_law(self) -> np.ndarray | None:
        """The released noisy counts of the truncated lengths ``0 .. max_length`` (clipped at 0),
        or ``None`` when the model has none (``length_share=0``, the n-gram baseline)."""
        counts = self._sequences_class.length_counts(self.params)
        if counts is None:
            return None
        law = np.maximum(np.asarray(counts, dtype=np.float64), 0.0)
        return law if law.size == self.max_length + 1 and law.sum() > 0 else None

    def sample(self, n: int, *, seed: SeedLike = None, backoff: float | None = BACKOFF_Z,
               calibrate: bool = True) -> pl.DataFrame:
        """``n`` synthetic sequences (List column ``sequence``), all advancing one symbol per step.

        Each step finds, for every unfinished sequence, the deepest usable node (see
        :meth:`usable`) whose string is a suffix of ``# s1 … st`` and takes its clipped histogram:
        stop probability ``p = h+[&] / |h+|``, next symbol from the other bins.  ``&`` (or an
        all-zero histogram) ends the sequence, and none grows past ``max_length`` symbols.

        ``calibrate`` (when the model released a length law, :meth:`length_law`): at step ``t``
        every unfinished sequence's stop probability is moved by one common shift ``c_t`` of its
        log-odds, ``p' = 1 / (1 + exp(-(logit p + c_t)))``, chosen (by bisection) so that the
        mean of ``p'`` over the unfinished sequences equals the released hazard
        ``n_t / sum_{u >= t} n_u``.  The sampled lengths then follow the released law (up to
        sampling error), while the contexts keep their relative stop odds.
        """
        n = check_int(n, "n", lo=0)
        # generated symbols and one step's reversed contexts, then per row a few histograms
        check_rows_fit(n, 8 * (2 * self.max_length + 4 * (self.alphabet_size + 1) + 8), "synthetic sequences")
        rng = make_rng(seed)
        usable = self.usable(backoff)
        law = self.length_law() if calibrate else None
        a = self.alphabet_size
        generated = np.full((n, self.max_length), -1, dtype=np.int64)
        lengths = np.zeros(n, dtype=np.int64)
        alive = np.arange(n)
        for t in range(self.max_length):
            if alive.size == 0:
                break
            ctx = np.concatenate([generated[alive, :t][:, ::-1], np.full((alive.size, 1), a)], axis=1)
            h = np.maximum(self.hist[deepest_nodes(self.first_child, ctx, usable)], 0.0)
            mass = h.sum(axis=1, keepdims=True)
            probs = np.divide(h, mass, out=np.zeros_like(h), where=mass > 0)  # h+(u) / |h+(u)|_1
            can_go = probs[:, :a].sum(axis=1) > 0
            stop_p = np.where(can_go, probs[:, a], 1.0)
            if law is not None:
                rest = law[t:].sum()
                stop_p = calibrated_stops(stop_p, can_go, law[t] / rest if rest > 0 else 1.0)
            stop = rng.random(alive.size) < stop_p
            cdf = np.cumsum(probs[:, :a], axis=1)
            total = np.where(cdf[:, -1] > 0, cdf[:, -1], 1.0)
            draw = np.minimum((cdf < rng.random(alive.size)[:, None] * total[:, None]).sum(axis=1), a - 1)
            cont = ~stop & can_go
            generated[alive[cont], t] = draw[cont]
            lengths[alive[cont]] += 1
            alive = alive[cont]
        codes = generated[generated >= 0]
        table = pa.table({"sequence": _list_array(symbol_array(self.alphabet, codes), lengths)})
        return cast(pl.DataFrame, pl.from_arrow(table))

    # ------------------------------------------------------------------ DuckDB
    def to_duckdb(self, con: Any, name: str, *, replace: bool = False) -> Any:
        """Register the model in a DuckDB connection: tables ``name`` (one row per node and
        next symbol), ``name_nodes``, ``name_meta`` and the table macros ``name_frequency(string)``
        and ``name_frequencies(queries_table)``; see :mod:`polars_dp.releases.sql_sequence`.  Existing
        objects of those names are refused unless ``replace=True``."""
        return sql_sequence.register_sequences(con, name, self, replace=replace)

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

    def node_contexts(self) -> tuple[np.ndarray, pa.Array]:
        """Per node: whether its predictor string starts with the start marker ``#``, and the
        string's symbols oldest first without ``#`` (a list array)."""
        strings, depth = self.predictor_strings()
        starts_with_start = np.zeros(self.n_nodes, dtype=bool)
        if strings.shape[1]:  # a model of the root alone has no symbol to look at
            starts_with_start[depth > 0] = strings[depth > 0, 0] == self.alphabet_size
        mask = (np.arange(strings.shape[1])[None, :] < depth[:, None]) & (strings != self.alphabet_size)
        return starts_with_start, _list_array(symbol_array(self.alphabet, strings[mask]), mask.sum(axis=1))

    def _table(self) -> pa.Table:
        beta = self.alphabet_size + 1
        starts_with_start, context = self.node_contexts()
        node = np.repeat(np.arange(self.n_nodes), beta)
        nxt = np.tile(np.arange(beta), self.n_nodes)
        end = nxt == self.alphabet_size
        next_symbol = symbol_array(self.alphabet, np.where(end, 0, nxt))
        return pa.table({
            "node": pa.array(node, pa.int32()),
            "parent": pa.array(self.parent[node], pa.int32()),
            "depth": pa.array(self.depth[node], pa.int16()),
            "is_leaf": pa.array(self.is_leaf[node]),
            "prepended_code": pa.array(self.prepended[node], pa.int16()),
            "starts_with_start": pa.array(starts_with_start[node]),
            "context": context.take(pa.array(node)),
            "next_code": pa.array(nxt, pa.int16()),
            "next_symbol": pc.if_else(pa.array(end), pa.nulls(node.size, next_symbol.type), next_symbol),
            "is_end": pa.array(end),
            "count": pa.array(self.hist.reshape(-1), pa.float64()),
        })

    @classmethod
    def from_arrow(cls, table: pa.Table, *, unverified: bool = False) -> SequenceRelease:
        """The release of a table written by :meth:`to_arrow`, verified before it answers
        (:mod:`polars_dp.releases.sequence_format`): metadata types, the tree structure, the
        noise parameters recomputed from epsilon and the shares, and the checksum (required
        unless ``unverified=True``)."""
        try:
            meta = cls._read_metadata(table)
            common = meta.common
            alphabet = json.loads(meta.entries["alphabet"])
            max_length = json.loads(meta.entries["max_length"])
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
        if not np.array_equal(table.column("next_code").to_numpy(), np.tile(np.arange(beta), first.size)):
            raise ReleaseFormatError("sequence model rows must list each node's symbols in code order")
        n_nodes = meta.entry("n_nodes", int, default=first.size)
        if n_nodes != first.size:
            raise ReleaseFormatError(f"sequence model has {first.size} nodes but its metadata declares "
                                     f"{n_nodes}: rows were removed or added")
        plan = cls._replan(meta, {"column": "", "alphabet": alphabet, "max_length": max_length})
        release = cls(alphabet=alphabet, max_length=max_length, parent=parent, prepended=prepended,
                      hist=hist, plan=plan, **common)
        check_sequence_structure(release.parent, release.prepended, release.hist, release.first_child,
                                 release.height, release.params, cast(SequencesPlan, plan),
                                 sums=not predates_checksums(meta.text))
        return release._checked(meta, unverified)

    def _payload_equal(self, other: Release) -> bool:
        return (isinstance(other, SequenceRelease) and np.array_equal(self.parent, other.parent)
                and np.array_equal(self.prepended, other.prepended) and np.array_equal(self.hist, other.hist))

    def __repr__(self) -> str:
        return (f"SequenceRelease(mechanism={self.mechanism!r}, epsilon={self.epsilon}, "
                f"alphabet_size={self.alphabet_size}, max_length={self.max_length}, nodes={self.n_nodes:,}, "
                f"height={self.height}{self._repr_flags()})")

    # ------------------------------------------------------------------ self-description
    query_kinds = ("frequency",)
    plot_kind = "top_strings"

    def domain_summary(self) -> dict[str, Any]:
        return {"alphabet": list(self.alphabet), "max_length": self.max_length}

    def domain_lines(self) -> list[str]:
        shown = " ".join(map(str, self.alphabet[:30])) + (" ..." if len(self.alphabet) > 30 else "")
        return [f"alphabet of {len(self.alphabet)}: {shown}", f"max_length {self.max_length}"]

    def size_summary(self) -> dict[str, Any]:
        return {"nodes": self.n_nodes, "height": self.height}

    def size_text(self) -> str:
        return f"{self.n_nodes:,} nodes (height {self.height})"

    def card_accuracy(self, alpha: float) -> dict[str, Any]:
        return sequence_accuracy(self, alpha)

    def report_figures(self, alpha: float) -> list[str]:
        return top_strings(self)

    def sql_names(self, name: str) -> list[str]:
        return [name, f"{name}_nodes", f"{name}_meta", f"{name}_frequency([...])",
                f"{name}_frequencies('queries')"]


__all__ = ["SequenceRelease", "strings_frame", "symbol_array"]
