"""The privacy unit: what one individual is in the private table (a public declaration).

``Rows()`` (the default): one row is one individual, every neighbour relation is on rows.
``Rows(max_per=k, id_column="person")``: the rows of one value of ``id_column`` are one
individual (an *identifier*).  Before anything is counted each identifier keeps at most ``k``
of its rows (*contribution bounding*), and the neighbour relations are on identifiers:

* ``add_remove``: add or remove all rows of one identifier;
* ``replace``: replace all rows of one identifier by the rows of another.

Truncation rule (public, the same for every dataset).  A 64-bit key ``K`` is drawn per release
from the release's random source (cryptographic; the seeded stream under ``seed=``, so tests
reproduce).  Each row gets the keyed hash ``h_K(row)`` of the columns the release reads (the
identifier included), and an identifier keeps its ``k`` rows of smallest hash.  Rows equal in
those columns hash alike and are interchangeable (which copy is kept changes no count); two
different rows of one identifier that collide (probability about ``k^2 / 2^64``) are ordered by
the engine.  The rows kept for one identifier are a function of that identifier's rows and
``K`` alone: they do not depend on any other identifier's rows.  So for neighbours ``D, D'``
(both truncated with the same ``K``, drawn independently of the data), ``T(D)`` and ``T(D')``
differ only in the ``<= k`` kept rows of the one identifier that changed.  The hash is an order,
not a secret: Polars' ``hash(seed=K)``, DuckDB's ``hash(K, ...)``, Spark's ``xxhash64(K, ...)``
(not cryptographic MACs); nothing is claimed of them beyond that independence, and the engines
need not keep the same rows as each other.

Sensitivities (what each plan multiplies by ``k``, :attr:`Rows.factor`):

* a count vector (frequency matrix, grid or tree counts): ``||M(T(D)) - M(T(D'))||_1 <= k``
  under ``add_remove`` (``<= k`` rows enter or leave, each moves one cell by one), ``<= 2k``
  under ``replace`` (``<= k`` rows leave and ``<= k`` enter): ``Delta = k * Delta_row``;
* Privelet: the coefficients change by at most ``rho`` per unit of L1 change of the frequency
  matrix (Xiao et al. Theorem 2), so ``rho * Delta_row * k``;
* PrivTree: the leaf counts as above, and the split decisions by group privacy with group
  ``k * Delta_row`` (the ``group`` of :func:`~polars_dp.plans.privtree_scales.privtree_lambda`);
* sequences: a row is a sequence; ``Rows(id_column=...)`` keeps one sequence per identifier
  (``max_per=1``), ``max_per=k`` keeps ``k``; one sequence contributes at most ``l_top`` pairs,
  so ``k`` sequences at most ``k l_top`` (the sequence plans' group factor ``k l_top``; the
  length histogram ``k``).

Rows with a null identifier are refused (:class:`~polars_dp.errors.DomainError`), or dropped
under ``nulls="drop"`` (a rule on one row alone).  ``max_per`` with pre-aggregated rows
(``count_column``) is refused: a row there stands for several individuals.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from polars_dp.errors import ParameterError


@dataclass(frozen=True)
class Rows:
    """The privacy unit: one row (``Rows()``), or the rows of one ``id_column`` value, at most
    ``max_per`` of which are kept (module docstring)."""

    max_per: int = 1
    id_column: str | None = None

    def __post_init__(self) -> None:
        k = self.max_per
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ParameterError(f"privacy_unit max_per must be an integer >= 1 (rows kept per "
                                 f"identifier), got {k!r}", parameter="privacy_unit")
        if self.id_column is not None and (not isinstance(self.id_column, str) or not self.id_column):
            raise ParameterError(f"privacy_unit id_column must be a column name, got {self.id_column!r}",
                                 parameter="privacy_unit")
        if self.id_column is None and k != 1:
            raise ParameterError(f"privacy_unit max_per={k} needs id_column= (the column naming each "
                                 "individual)", parameter="privacy_unit")

    @property
    def truncates(self) -> bool:
        """Whether an identifier is declared (the rows are truncated per identifier)."""
        return self.id_column is not None

    @property
    def factor(self) -> int:
        """The sensitivity factor ``k`` (1 for one row per individual)."""
        return self.max_per if self.truncates else 1

    @property
    def individual(self) -> str:
        """Who one individual is, for messages: ``"one row"`` or ``"the rows of one 'person'"``."""
        return "one row" if self.id_column is None else f"the rows of one {self.id_column!r}"

    def record(self) -> dict[str, Any]:
        """What a release records in ``params["privacy_unit"]``."""
        return {"max_per": self.max_per, "id_column": self.id_column}

    def __repr__(self) -> str:
        if not self.truncates:
            return "Rows()"
        return f"Rows(max_per={self.max_per}, id_column={self.id_column!r})"


def as_privacy_unit(value: Any) -> Rows:
    """A :class:`Rows` from ``Rows``, ``None`` (one row) or a mapping with ``max_per`` /
    ``id_column`` (a release's record, the command line's ``[privacy_unit]`` table)."""
    if value is None:
        return Rows()
    if isinstance(value, Rows):
        return value
    if isinstance(value, Mapping):
        unknown = [k for k in value if k not in ("max_per", "id_column")]
        if unknown:
            raise ParameterError(f"privacy_unit has no entry {unknown[0]!r}; use max_per and id_column",
                                 parameter="privacy_unit")
        return Rows(max_per=value.get("max_per", 1), id_column=value.get("id_column"))
    raise ParameterError(f"privacy_unit must be pdp.Rows() or pdp.Rows(max_per=k, id_column=...), "
                         f"got {value!r}", parameter="privacy_unit")


__all__ = ["Rows", "as_privacy_unit"]
