"""Typed noise models: how the noise entered a release's published values.

The error bars of a release (Python ``std`` columns and the SQL macros) are computed from its
noise model, never from the mechanism's name:

* :class:`IndependentLaplace`: every published value (cell or leaf count) carries its own
  Laplace noise of magnitude ``scale``; a weighted sum ``sum w_i x_i`` has noise variance
  ``2 scale^2 sum w_i^2`` (Basic, PrivTree leaves, UG).
* :class:`WaveletLaplace`: wavelet coefficient ``c`` carries Laplace noise of magnitude
  ``scale / W(c)`` along the ``transformed`` axes (Privelet, Privelet+; Xiao et al. 2010,
  Theorem 3); a range count's variance factorises over axes.  With no transformed axis this
  is :class:`IndependentLaplace` on the cells.
* :class:`Correlated`: the published values are a post-processed combination whose error
  the release cannot state exactly (AG's constrained inference, Privelet* leaves).

The models are serialised into the ``polars_dp.noise_model`` metadata entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from polars_dp.errors import ReleaseFormatError


@dataclass(frozen=True)
class IndependentLaplace:
    """I.i.d. Laplace noise of magnitude ``scale`` on every published value."""

    scale: float

    def unit_variance(self) -> float:
        """Variance of one value's noise: ``2 scale^2``."""
        return 2.0 * self.scale**2


@dataclass(frozen=True)
class WaveletLaplace:
    """Laplace noise of magnitude ``scale / W(c)`` on the wavelet coefficients."""

    scale: float
    transformed: tuple[str, ...] = ()

    def unit_variance(self) -> float:
        """``2 scale^2``: multiply by the per-axis variance factors of a range."""
        return 2.0 * self.scale**2


@dataclass(frozen=True)
class Correlated:
    """No exact error bar: ``reason`` says why (shown when a std is asked for)."""

    reason: str


NoiseModel = IndependentLaplace | WaveletLaplace | Correlated


def noise_model_to_json(model: NoiseModel) -> dict[str, Any]:
    """The JSON object stored as ``polars_dp.noise_model``."""
    if isinstance(model, IndependentLaplace):
        return {"kind": "independent_laplace", "scale": model.scale}
    if isinstance(model, WaveletLaplace):
        return {"kind": "wavelet_laplace", "scale": model.scale, "transformed": list(model.transformed)}
    return {"kind": "correlated", "reason": model.reason}


def noise_model_from_json(obj: Mapping[str, Any]) -> NoiseModel:
    """Inverse of :func:`noise_model_to_json`; a malformed entry is a ReleaseFormatError."""
    try:
        kind = obj["kind"]
        if kind == "independent_laplace":
            return IndependentLaplace(_positive(obj["scale"]))
        if kind == "wavelet_laplace":
            return WaveletLaplace(_positive(obj["scale"]), tuple(str(c) for c in obj["transformed"]))
        if kind == "correlated":
            return Correlated(str(obj["reason"]))
    except (KeyError, TypeError) as exc:
        raise ReleaseFormatError(f"noise_model metadata is malformed: {exc!r}") from None
    raise ReleaseFormatError(f"noise_model metadata has an unknown kind {obj.get('kind')!r}")


def _positive(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ReleaseFormatError(f"noise_model scale must be a number > 0, got {value!r}")
    return float(value)


__all__ = ["Correlated", "IndependentLaplace", "NoiseModel", "WaveletLaplace", "noise_model_from_json",
           "noise_model_to_json"]
