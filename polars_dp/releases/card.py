"""A release card: what a publisher puts next to the numbers, as one JSON-ready dict.

``release.card(alpha=0.05)`` states, from the release alone (its public metadata and its
noise model, never the private data): the mechanism and its paper; the privacy unit and the
neighbour relation; epsilon as stated and as the exact noise spends it (``effective``; per
part where a release records its parts only); the noise family and random source; the
public domain and every public parameter; the pre-processing rules when recorded; the
accuracy at ``alpha`` for the documented default workload below; the library version,
whether the noise was seeded, whether a checksum verified the values, and the checksum.
``opendp_registry`` maps the same facts onto the field names of the OpenDP deployments
registry (``dp_flavor``, ``privacy_loss``, ``model``, ``accounting``, ``implementation``).

A seeded, unverified or float-noise release has a card too, marked
``"not_for_publication": true`` with the reasons.

Default workload (``accuracy``), every figure a noise half-width ``a`` with
``P(|noise| > a) <= alpha`` (the release's own tail bounds) beside its standard deviation:

* grid: one cell (the cell of largest noise variance; it factorises over the axes), the
  whole domain, and per attribute the range of that attribute (every value of the others)
  with the largest noise variance: over every range when the attribute has at most
  ``RANGE_ENDS - 1`` cells, else over the ranges whose ends lie on ``RANGE_ENDS`` evenly
  spaced cell boundaries;
* spatial: one leaf (its count's i.i.d. noise) and the whole domain (leaf noise only, as
  ``range_counts``; the uniformity error inside leaves is not included);
* sequences: one bin of one leaf's next-symbol histogram (one noise draw) and one bin of the
  root's (PrivTree: the sum of the leaves' draws below it).

Where the release states no exact error bar (post-processed, AG, Privelet*), the figure is
``None`` with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from polars_dp.domains.expressions import NUMPY
from polars_dp.kernels.tail_bounds import chernoff_accuracy, single_term_accuracy
from polars_dp.plans.base import paper_of, recorded_epsilons, recorded_inputs, recorded_rules
from polars_dp.plans.grid import check_alpha
from polars_dp.releases.grid_format import cell_label_values
from polars_dp.releases.integrity import CHECKSUM_KEY
from polars_dp.releases.postprocess import postprocessing_steps

if TYPE_CHECKING:
    import polars as pl

    from polars_dp.domains.attributes import Attribute
    from polars_dp.plans.noise_model import NoiseModel


class Header(Protocol):
    """A release's header, views of its plan (:class:`polars_dp.Release`), and its metadata."""

    @property
    def mechanism(self) -> str: ...
    @property
    def epsilon(self) -> float: ...
    @property
    def neighbours(self) -> str: ...
    @property
    def noise(self) -> str: ...
    def export_metadata(self) -> dict[str, str]: ...


class Carded(Header, Protocol):
    """What the card reads of a release (:class:`polars_dp.Release`, which sits above this module
    and hands itself to :func:`release_card`): its header and record, and what its type says of
    itself (:meth:`~polars_dp.Release.card_domain`, ``card_accuracy``, ``exact_spend``)."""

    seeded: bool
    verified: bool
    library_version: str

    @property
    def created(self) -> str: ...
    @property
    def params(self) -> Mapping[str, Any]: ...
    def card_domain(self) -> dict[str, Any]: ...
    def card_accuracy(self, alpha: float) -> dict[str, Any]: ...
    def exact_spend(self) -> Fraction | None: ...


class GridLike(Protocol):
    """What the grid workload and the report's figures read of a :class:`polars_dp.GridRelease`."""

    @property
    def counts(self) -> np.ndarray: ...
    @property
    def noise_model(self) -> NoiseModel: ...
    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def columns(self) -> list[str]: ...
    @property
    def attributes(self) -> tuple[Attribute, ...]: ...
    def axis_variance(self, axis: int, starts: np.ndarray, stops: np.ndarray) -> np.ndarray: ...
    def range_variance(self, starts: np.ndarray, stops: np.ndarray) -> np.ndarray: ...
    def range_accuracy(self, starts: np.ndarray, stops: np.ndarray, alpha: float) -> np.ndarray: ...


class SpatialLike(Protocol):
    """What the spatial workload and the report's leaf map read of a :class:`polars_dp.SpatialRelease`."""

    @property
    def noise(self) -> str: ...
    @property
    def error_model(self) -> Any: ...
    @property
    def columns(self) -> list[str]: ...
    @property
    def n_leaves(self) -> int: ...
    @property
    def lo(self) -> np.ndarray: ...
    @property
    def hi(self) -> np.ndarray: ...
    @property
    def count(self) -> np.ndarray: ...
    def metadata(self) -> dict[str, Any]: ...
    def range_std(self) -> float | None: ...
    def range_noise_interval(self, alpha: float) -> tuple[float | None, float | None]: ...


class SequenceLike(Protocol):
    """What the sequence workload and the report's top strings read of a
    :class:`polars_dp.SequenceRelease`."""

    @property
    def noise(self) -> str: ...
    def stated_noise_scale(self) -> float | None: ...
    def bin_noise_variance(self) -> np.ndarray: ...
    def top_k(self, k: int) -> pl.DataFrame: ...
    def frequencies(self, strings: Any, *, std: bool = False) -> Any: ...

#: The default ``alpha`` of the accuracy statements.
ALPHA = 0.05
#: How many evenly spaced cell boundaries the worst single-attribute range is searched over.
RANGE_ENDS = 1024

NEIGHBOURS = {
    "replace": ("change-one distance", "two tables are neighbours when one row is replaced by another "
                                       "(same number of rows)"),
    "add_remove": ("symmetric distance", "two tables are neighbours when one row is added or removed"),
}

NOISE_FAMILY = {
    "exact": "discrete Laplace, sampled exactly on integers at an exact rational scale",
    "float": "Laplace in floating point (numpy): not exactly epsilon-DP (Mironov, CCS 2012)",
}

RANDOM_SOURCE = {
    False: "ChaCha20 keystream keyed from the operating system's entropy (os.urandom directly when the "
           "cryptography package is absent)",
    True: "seeded PCG64: reproducible by anyone who knows the seed (tests only)",
}


def _number(value: Any) -> float | None:
    """A finite float, or None (NaN: no error bar)."""
    x = float(value)
    return x if math.isfinite(x) else None


def _py(value: Any) -> Any:
    """A numpy scalar as its Python value (JSON-ready)."""
    return value.item() if isinstance(value, np.generic) else value


def _figure(std: Any, accuracy: Any, **extra: Any) -> dict[str, Any]:
    return {**extra, "std": _number(std), "accuracy": _number(accuracy)}


# ---------------------------------------------------------------------------- accuracy
def _grid_box(release: GridLike, starts: list[int], stops: list[int], alpha: float) -> tuple[float, float]:
    lo, hi = np.array([starts]), np.array([stops])
    return (math.sqrt(float(release.range_variance(lo, hi)[0])),
            float(release.range_accuracy(lo, hi, alpha)[0]))


def grid_accuracy(release: GridLike, alpha: float) -> dict[str, Any]:
    """The grid's default workload (module docstring)."""
    workload = ("one cell; the whole domain; per attribute, its range of largest noise variance (every "
                "value of the others)")
    model = release.noise_model
    if not model.exact:
        return {"alpha": alpha, "workload": workload, "available": False, "reason": model.reason}
    shape = list(release.shape)
    worst_cell = [int(np.argmax(release.axis_variance(j, np.arange(n), np.arange(n) + 1)))
                  for j, n in enumerate(shape)]
    std, acc = _grid_box(release, worst_cell, [c + 1 for c in worst_cell], alpha)
    out: dict[str, Any] = {"alpha": alpha, "workload": workload, "available": True}
    out["cell"] = _figure(std, acc, cell=dict(zip(release.columns, worst_cell, strict=True)))
    out["total"] = _figure(*_grid_box(release, [0] * len(shape), shape, alpha))
    ranges = []
    for j, (attribute, n) in enumerate(zip(release.attributes, shape, strict=True)):
        ends = np.unique(np.linspace(0, n, min(n + 1, RANGE_ENDS)).round().astype(np.int64))
        first, last = np.triu_indices(len(ends), 1)
        k = int(np.argmax(release.axis_variance(j, ends[first], ends[last])))
        start, stop = int(ends[first[k]]), int(ends[last[k]])
        starts, stops = [0] * len(shape), list(shape)
        starts[j], stops[j] = start, stop
        labels = cell_label_values(attribute)  # a binned axis: its bins' first and last values
        ranges.append(_figure(*_grid_box(release, starts, stops, alpha), column=attribute.column,
                              cells=[start, stop], first=_py(labels[0][start]),
                              last=_py(labels[-1][stop - 1]),
                              exhaustive=n < RANGE_ENDS))
    out["worst_single_attribute_range"] = ranges
    return out


def spatial_accuracy(release: SpatialLike, alpha: float) -> dict[str, Any]:
    """The spatial default workload (module docstring)."""
    workload = "one leaf's count; the whole domain (leaf noise only, not the uniformity error in leaves)"
    out: dict[str, Any] = {"alpha": alpha, "workload": workload}
    model = release.error_model
    if model.leaf_scale is not None:
        leaf_acc = single_term_accuracy(np.array([1.0]), model.leaf_scale, alpha, release.noise)[0]
        out.update(available=True, leaf=_figure(math.sqrt(model.leaf_variance(NUMPY, 1.0)), leaf_acc))
    else:
        out.update(available=False, reason=model.reason or "no exact error bar",
                   leaf=_figure(math.nan, math.nan))
    total = release.range_std()
    lo, hi = release.range_noise_interval(alpha)
    out["total"] = _figure(math.nan if total is None else total,
                           math.nan if lo is None or hi is None else (hi - lo) / 2)
    return out


def sequence_accuracy(release: SequenceLike, alpha: float) -> dict[str, Any]:
    """The sequence default workload (module docstring)."""
    workload = "one bin of a leaf's next-symbol histogram (one draw); one bin of the root's histogram"
    out: dict[str, Any] = {"alpha": alpha, "workload": workload}
    scale = release.stated_noise_scale()
    variance = release.bin_noise_variance()
    if scale is None or not np.isfinite(variance[0]):
        return {**out, "available": False, "reason": "the release records no noise scale"}
    draws = float(variance[0]) / (2.0 * scale**2)  # how many draws the root's bin sums
    leaf_acc = single_term_accuracy(np.array([1.0]), scale, alpha, release.noise)[0]
    root_acc = (leaf_acc if round(draws) == 1
                else chernoff_accuracy(np.array([draws * scale**2]), scale, alpha)[0])
    return {**out, "available": True, "leaf_bin": _figure(math.sqrt(2.0) * scale, leaf_acc),
            "root_bin": _figure(math.sqrt(float(variance[0])), root_acc, draws=round(draws))}


# ---------------------------------------------------------------------------- the card
def release_card(release: Carded, alpha: float = ALPHA) -> dict[str, Any]:
    """The card of ``release`` (module docstring): a JSON-ready dict."""
    alpha = check_alpha(alpha)
    metric, relation = NEIGHBOURS.get(release.neighbours, (release.neighbours, release.neighbours))
    unit = recorded_inputs(release.params)["privacy_unit"] or "one row"  # as recorded (JSON)
    domain = release.card_domain()
    reasons = [reason for flag, reason in (
        (release.seeded, "seeded: anyone who knows the seed can remove the noise"),
        (not release.verified, "unverified: no checksum vouches for the values"),
        (release.noise == "float", "float noise: not exactly epsilon-DP")) if flag]
    params = {k: v for k, v in release.params.items() if k not in ("ledger", "preprocessing")}
    mechanism = {"name": release.mechanism, "paper": paper_of(release.mechanism)}
    noise = {"family": NOISE_FAMILY.get(release.noise, release.noise), "kind": release.noise,
             "random_source": RANDOM_SOURCE[bool(release.seeded)]}
    recorded, parts = recorded_epsilons(release.params)
    exact = release.exact_spend()
    epsilon = {"stated": release.epsilon, "effective": recorded if exact is None else float(exact),
               "effective_exact": None if exact is None else str(exact), "effective_parts": parts,
               "note": "effective: what the exact noise scales spend (at most the stated epsilon), from the "
                       "release's plan rebuilt from its metadata or as recorded"}
    preprocessing = recorded_rules(release.params)  # the row rules chosen (default "raise" unrecorded)
    card: dict[str, Any] = {
        "card_version": 1,
        "release_type": type(release).__name__,
        "not_for_publication": bool(reasons), "not_for_publication_reasons": reasons,
        "mechanism": mechanism,
        "privacy_unit": unit, "neighbours": release.neighbours, "neighbour_relation": relation,
        "epsilon": epsilon, "noise": noise, "domain": domain, "parameters": params,
        "preprocessing": preprocessing, "accuracy": release.card_accuracy(alpha),
        "library": {"name": "polars-dp", "version": release.library_version},
        "created": release.created, "seeded": bool(release.seeded), "verified": bool(release.verified),
        "checksum": release.export_metadata()[CHECKSUM_KEY],
    }
    if "ledger" in release.params:
        card["ledger"] = release.params["ledger"]
    spend_text = (f"epsilon = {release.epsilon:g} stated; exact spend "
                  f"{epsilon['effective'] or epsilon['effective_parts']}")
    implementation = (f"{release.mechanism} ({mechanism['paper']}); noise: {noise['family']}; randomness: "
                      f"{noise['random_source']}; polars-dp {release.library_version}")
    card["opendp_registry"] = {
        "dp_flavor": {"name": "Pure DP", "input_metric": metric, "bound_on_input_distance": 1,
                      "output_measure": "max divergence", "bound_on_output_distance": release.epsilon,
                      "data_domain": domain},
        "privacy_loss": {"privacy_unit": unit, "privacy_unit_description": relation,
                         "privacy_parameters": {"epsilon": release.epsilon},
                         "privacy_parameters_description": spend_text},
        "model": {"model_name": "Central", "release_type": "One release", "data_source_type": "Static",
                  "access_type": "Non-interactive"},
        "accounting": {"composition": "basic sequential composition (Dwork and Roth 2014, Thm. 3.16) over "
                                      "the parts of the release; a budget ledger adds releases of the same "
                                      "data",
                       "post_processing": [s["method"] for s in postprocessing_steps(release.params)]
                       or "none"},
        "implementation": {"mechanisms": implementation,
                           "pre_processing_eda_hyperparameter_tuning": preprocessing},
    }
    return card


__all__ = ["ALPHA", "RANGE_ENDS", "Carded", "GridLike", "Header", "grid_accuracy", "release_card",
           "sequence_accuracy", "spatial_accuracy"]
