"""One small release per registered mechanism, and the sampler stand-ins the privacy tests use.

``CASES`` holds one or more tiny set-ups per entry of the mechanism registry
(:data:`polars_dp.plans.REGISTRY`); :func:`check_cases_cover_registry` fails when a mechanism
has none, so a new mechanism cannot skip the generic privacy tests.  ``Draws`` replaces the
exact discrete Laplace sampler everywhere the mechanisms reach it (a known value per draw,
every scale recorded); ``Decisions`` does the same for PrivTree's noisy comparisons.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Context, Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

import polars_dp as pdp
import polars_dp.mechanisms.privtree_rule as privtree_rule
import polars_dp.mechanisms.wavelet_lattice as wavelet_lattice
from polars_dp import noise as N
from polars_dp.noise import discrete
from polars_dp.plans import REGISTRY
from polars_dp.releases.integrity import CHECKSUM_KEY, payload_checksum
from polars_dp.releases.metadata import META_PREFIX, read_metadata
from tests.helpers.samplers import with_out

GRID_ATTRS = [pdp.Ordinal("a", 0, 7), pdp.Nominal("b", pdp.Hierarchy.flat(["p", "q", "r"]))]
BOX = [(0.0, 1.0), (0.0, 1.0)]
ALPHABET = [1, 2, 3]


def grid_frame(neighbour: bool = False) -> pl.DataFrame:
    """Five rows; the neighbour has one more (``a = 5, b = r``): add/remove neighbours, and
    under ``replace`` a neighbour of the five rows with its first row changed to that one."""
    a, b = [0, 1, 1, 7, 3], ["p", "q", "q", "r", "p"]
    if neighbour:
        a, b = [*a, 5], [*b, "r"]
    return pl.DataFrame({"a": a, "b": b})


def point_frame(neighbour: bool = False, n: int = 40) -> pl.DataFrame:
    rng = np.random.default_rng(7)
    x, y = rng.random(n), rng.random(n)
    if neighbour:
        x, y = np.r_[x, 0.3], np.r_[y, 0.8]
    return pl.DataFrame({"x": x, "y": y})


def sequence_frame(neighbour: bool = False) -> pl.DataFrame:
    seqs = [[1, 2, 3], [2, 2], [3], [1, 1, 2, 3]] * 5
    return pl.DataFrame({"s": [*seqs, [3, 3, 1]] if neighbour else seqs})


FRAMES: dict[str, Callable[[bool], pl.DataFrame]] = {
    "grid": grid_frame, "points": point_frame, "sequences": sequence_frame}


@dataclass(frozen=True)
class Case:
    """A mechanism with small public options; ``plan`` and ``run`` add epsilon and neighbours."""

    id: str
    mechanism: str
    args: tuple[Any, ...]
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def shape(self) -> str:
        return REGISTRY[self.mechanism].shape

    def neighbour_relations(self) -> tuple[str, ...]:
        """Sequence models are defined under add/remove-one-sequence only."""
        return ("add_remove",) if self.shape == "sequences" else ("replace", "add_remove")

    def plan(self, epsilon: float = 1.0, neighbours: str = "add_remove", **over: Any) -> Any:
        options = {**self.options, "epsilon": epsilon, **over}
        if self.shape != "sequences":
            options["neighbours"] = neighbours
        return pdp.plan(self.mechanism, *self.args, **options)

    def run(self, *, neighbour: bool = False, seed: int = 1, epsilon: float = 1.0,
            neighbours: str = "add_remove", **over: Any) -> Any:
        return self.plan(epsilon, neighbours, **over).run(FRAMES[self.shape](neighbour), seed=seed)


CASES = [
    Case("basic", "basic", (GRID_ATTRS,)),
    Case("privelet", "privelet", (GRID_ATTRS,)),
    Case("hierarchical", "hierarchical", (GRID_ATTRS,)),
    Case("privtree", "privtree", (["x", "y"],), {"bounds": BOX, "resolution": 5}),
    Case("privtree_levels", "privtree", (["x", "y"],), {"bounds": BOX, "resolution": 5, "levels": 2}),
    Case("privtree_subgrid", "privtree_subgrid", (["x", "y"],), {"bounds": BOX, "resolution": 5}),
    Case("uniform_grid", "uniform_grid", (["x", "y"],), {"bounds": BOX}),
    Case("adaptive_grid", "adaptive_grid", (["x", "y"],), {"bounds": BOX}),
    Case("privelet_grid", "privelet_grid", (["x", "y"],), {"bounds": BOX, "bits": 3}),
    Case("privtree_sequences", "privtree_sequences", ("s",), {"alphabet": ALPHABET, "max_length": 5}),
    Case("ngram_sequences", "ngram_sequences", ("s",), {"alphabet": ALPHABET, "max_length": 5, "height": 3}),
]
CASE_IDS = [c.id for c in CASES]


def check_cases_cover_registry() -> None:
    missing = set(REGISTRY) - {c.mechanism for c in CASES}
    assert not missing, f"no privacy test case for the registered mechanism(s) {sorted(missing)}"


# ---------------------------------------------------------------------------- sampler stand-ins
class Draws:
    """Every exact discrete Laplace draw replaced by ``value(scale)`` (a known number; the
    default draws the real noise), every scale recorded as an exact rational, in call order."""

    def __init__(self, monkeypatch: Any,
                 value: Callable[[Fraction, tuple[int, ...]], np.ndarray] | None = None):
        self.scales: list[Fraction] = []
        real = discrete.draw_discrete_laplace  # the same draws as a direct call, without its size rule

        def draw(src: Any, t: int, s: int, size: Any) -> np.ndarray:
            scale = Fraction(int(t), int(s))
            self.scales.append(scale)
            if value is None:
                return real(src, t, s, size)
            shape = (size,) if isinstance(size, (int, np.integer)) else tuple(size)
            return np.broadcast_to(np.asarray(value(scale, shape), dtype=np.int64), shape).copy()

        for module in (discrete, N, wavelet_lattice):  # a direct call, and a mechanism's draws
            for name in ("discrete_laplace", "draw_discrete_laplace"):
                if hasattr(module, name):
                    monkeypatch.setattr(module, name, with_out(draw))


def constant_draws(monkeypatch: Any, c: int) -> Draws:
    """Every draw is ``c``."""
    return Draws(monkeypatch, lambda scale, shape: np.full(shape, c, dtype=np.int64))


class Decisions:
    """PrivTree's noisy comparison ``Lap(lambda) > x``: recorded (``lambda`` in grid units) and,
    with ``forced``, answered ``forced`` for every node whatever its count."""

    def __init__(self, monkeypatch: Any, forced: bool | None = None):
        self.lambdas: list[int] = []
        real = privtree_rule.privtree_decision

        def decide(src: Any, x: np.ndarray, lam: int) -> np.ndarray:
            self.lambdas.append(int(lam))
            if forced is None:
                return real(src, x, lam)
            return np.full(np.shape(x), forced, dtype=bool)

        monkeypatch.setattr(privtree_rule, "privtree_decision", decide)


def ln_below(beta: int) -> Fraction:
    """``ln(beta)`` to 50 digits, minus a margin: a rational just below the true value."""
    return Fraction(Context(prec=50).ln(Decimal(beta))) - Fraction(1, 10**45)


# ---------------------------------------------------------------------------- edited records
def edited_table(release: Any, edit: Callable[[dict[str, Any]], None]) -> pa.Table:
    """``release.to_arrow()`` with its metadata decoded, changed by ``edit`` (in place, on the
    decoded JSON values) and re-encoded, the checksum recomputed over the edited metadata: what
    someone who edits a file and fixes its checksum produces."""
    table = release.to_arrow()
    text = read_metadata(table)
    decoded = {k: (v if k == CHECKSUM_KEY else _decode(v)) for k, v in text.items()}
    edit(decoded)
    new = {k: v if isinstance(v, str) else json.dumps(v) for k, v in decoded.items()}
    new[CHECKSUM_KEY] = payload_checksum(new, release._payload_arrays())
    meta = {k: v for k, v in (table.schema.metadata or {}).items() if not k.startswith(META_PREFIX.encode())}
    meta.update({(META_PREFIX + k).encode(): v.encode() for k, v in new.items()})
    return table.replace_schema_metadata(meta)


def _decode(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


__all__ = ["ALPHABET", "BOX", "CASES", "CASE_IDS", "FRAMES", "GRID_ATTRS", "Case", "Decisions", "Draws",
           "check_cases_cover_registry", "constant_draws", "edited_table", "grid_frame", "ln_below",
           "point_frame", "sequence_frame"]
