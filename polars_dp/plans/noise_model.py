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

Each model owns its error bars, written once over an ops namespace
(:mod:`polars_dp.domains.expressions`): numpy evaluates them for the Python answers (plans
before data, releases after), ``SQL`` renders them for the DuckDB macros, so a new model states
its Python and its SQL error bar in one place.  A grid range is given per axis by its pieces
(``column``, ``factor(transformed)``, ``terms(transformed)``, ``width(transformed)``:
:class:`~polars_dp.kernels.wavelet_variance.AxisRanges` on numpy, the macros' axes in SQL):
:meth:`NoiseModel.variance` and :meth:`NoiseModel.half_width`; a spatial answer by the sum of
its leaf weights' squares: :meth:`NoiseModel.leaf_variance` and :meth:`NoiseModel.leaf_half_width`.
A model without an exact error bar answers ``ops.null`` (NaN in Python, NULL in SQL).

The models are serialised into the ``polars_dp.noise_model`` metadata entry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar

import numpy as np

from polars_dp.domains.expressions import NUMPY, Ops
from polars_dp.errors import ReleaseFormatError
from polars_dp.kernels.tail_bounds import (
    chernoff_half_width,
    laplace_sum_accuracy,
    laplace_sum_half_width,
    lists_terms,
)
from polars_dp.kernels.wavelet_variance import AxisRanges


class NoiseModel:
    """How the noise entered a release's values, and the error bars that follow (module doc)."""

    kind: ClassVar[str]
    kinds: ClassVar[dict[str, type[NoiseModel]]] = {}
    #: Whether the model states an exact error bar (else :attr:`reason` says why not).
    exact: ClassVar[bool] = True
    reason = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "kind" in cls.__dict__:  # a stored kind (not an intermediate class)
            NoiseModel.kinds[cls.kind] = cls

    # ------------------------------------------------------------------ storage
    def to_json(self) -> dict[str, Any]:
        """The JSON object stored as ``polars_dp.noise_model``."""
        fields = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}  # type: ignore[call-overload]
        return {"kind": self.kind, **fields}

    @classmethod
    def from_fields(cls, obj: Mapping[str, Any]) -> NoiseModel:
        """Inverse of :meth:`to_json` (a malformed field raises KeyError or TypeError)."""
        return cls(**{f.name: _READ[f.name](obj[f.name]) for f in fields(cls)})  # type: ignore[arg-type]

    # ------------------------------------------------------------------ grid ranges
    def transforms(self, column: str) -> bool:
        """Whether the noise was added to wavelet coefficients along ``column``."""
        return False

    def variance(self, ops: Ops, axes: Sequence[Any]) -> Any:
        """Noise variance of grid ranges given per axis (``ops.null`` without an exact bar)."""
        return ops.null

    def half_width(self, ops: Ops, axes: Sequence[Any], alpha: Any, noise: str) -> Any:
        """Half-width ``a`` with ``P(|noise| > a) <= alpha`` of grid ranges given per axis."""
        return ops.null

    def range_variance(self, axes: Sequence[AxisRanges]) -> np.ndarray:
        """:meth:`variance` on numpy, one value per range."""
        n = axes[0].starts.shape[0]
        return np.broadcast_to(np.asarray(self.variance(NUMPY, axes), dtype=np.float64), (n,)).copy()

    def range_accuracy(self, axes: Sequence[AxisRanges], alpha: float, noise: str) -> np.ndarray:
        """:meth:`half_width` on numpy, one value per range."""
        return np.full(axes[0].starts.shape[0], np.nan)

    # ------------------------------------------------------------------ spatial leaves
    @property
    def leaf_scale(self) -> float | None:
        """The Laplace scale of every leaf count when leaves carry i.i.d. noise, else None."""
        return None

    def leaf_variance(self, ops: Ops, weight_squares: Any) -> Any:
        """Noise variance of a sum of leaf counts with weights ``w``, ``sum w^2 = weight_squares``."""
        return ops.null

    def leaf_half_width(self, ops: Ops, weight_squares: Any, alpha: Any) -> Any:
        """Half-width at ``alpha`` of that sum, for weights ``w <= 1``."""
        return ops.null


@dataclass(frozen=True)
class LaplaceModel(NoiseModel):
    """Independent Laplace noise of magnitude ``scale / W(c)`` on coefficients (``W = 1`` along
    an axis the model does not transform): the grid error bars of Privelet, Theorem 3."""

    scale: float

    def unit_variance(self) -> float:
        """``2 scale^2``: multiply by the per-axis variance factors of a range."""
        return 2.0 * self.scale**2

    def variance(self, ops: Ops, axes: Sequence[Any]) -> Any:
        """``2 scale^2 prod_axes f_axis``, ``f`` from :meth:`RangeAxis.factor`."""
        var: Any = self.unit_variance()
        for ax in axes:
            var = var * ax.factor(self.transforms(ax.column))
        return var

    def _terms(self, ops: Ops, axes: Sequence[Any]) -> tuple[list[tuple[Any, Any]], bool]:
        """The axes' terms in the form of
        :func:`~polars_dp.kernels.tail_bounds.laplace_sum_half_width`: along an axis the model
        does not transform, weight 1 on each of the range's cells (``factor(False)`` of them);
        along a transformed one its list of weights, one coefficient each (one weight when the
        axis has a single term); and whether the product set is listed."""
        widths = [ax.width(self.transforms(ax.column)) for ax in axes]
        terms: list[tuple[Any, Any]] = []
        for ax, width in zip(axes, widths, strict=True):
            if not self.transforms(ax.column):
                terms.append((1.0, ax.factor(False)))
            elif width == 1:
                terms.append((ops.item(ax.terms(True)[0], 0), 1.0))
            else:
                terms.append((ax.terms(True)[0], None))
        return terms, lists_terms(widths)

    def half_width(self, ops: Ops, axes: Sequence[Any], alpha: Any, noise: str) -> Any:
        """:func:`~polars_dp.kernels.tail_bounds.laplace_sum_half_width` over the axes' terms."""
        terms, listed = self._terms(ops, axes)
        return laplace_sum_half_width(ops, terms, self.scale, alpha, noise, listed)

    def range_accuracy(self, axes: Sequence[AxisRanges], alpha: float, noise: str) -> np.ndarray:
        """:meth:`half_width` on numpy (:func:`~polars_dp.kernels.tail_bounds.laplace_sum_accuracy`:
        the same function, in chunks of queries)."""
        return laplace_sum_accuracy(self._terms(NUMPY, axes)[0], self.scale, alpha, noise)


@dataclass(frozen=True)
class WaveletLaplace(LaplaceModel):
    """Laplace noise of magnitude ``scale / W(c)`` on the wavelet coefficients."""

    kind = "wavelet_laplace"
    transformed: tuple[str, ...] = ()

    def transforms(self, column: str) -> bool:
        return column in self.transformed


@dataclass(frozen=True)
class IndependentLaplace(LaplaceModel):
    """I.i.d. Laplace noise of magnitude ``scale`` on every published value (grid cells or
    spatial leaves)."""

    kind = "independent_laplace"

    @property
    def leaf_scale(self) -> float | None:
        return self.scale

    def leaf_variance(self, ops: Ops, weight_squares: Any) -> Any:
        """``2 scale^2 sum w^2``."""
        return self.unit_variance() * weight_squares

    def leaf_half_width(self, ops: Ops, weight_squares: Any, alpha: Any) -> Any:
        """The Chernoff bound :func:`~polars_dp.kernels.tail_bounds.chernoff_half_width` with
        ``V = scale^2 sum w^2`` and every term's magnitude at most ``scale``."""
        return chernoff_half_width(ops, self.scale**2 * weight_squares, self.scale, ops.ln(2.0 / alpha))


@dataclass(frozen=True)
class Correlated(NoiseModel):
    """No exact error bar: ``reason`` says why (shown when a std is asked for)."""

    kind = "correlated"
    exact = False
    reason: str


def noise_model_to_json(model: NoiseModel) -> dict[str, Any]:
    """The JSON object stored as ``polars_dp.noise_model``."""
    return model.to_json()


def noise_model_from_json(obj: Mapping[str, Any]) -> NoiseModel:
    """Inverse of :func:`noise_model_to_json`; a malformed entry is a ReleaseFormatError."""
    try:
        kind = obj["kind"]
        if kind in NoiseModel.kinds:
            return NoiseModel.kinds[kind].from_fields(obj)
    except (KeyError, TypeError) as exc:
        raise ReleaseFormatError(f"noise_model metadata is malformed: {exc!r}") from None
    raise ReleaseFormatError(f"noise_model metadata has an unknown kind {obj.get('kind')!r}")


def _positive(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ReleaseFormatError(f"noise_model scale must be a number > 0, got {value!r}")
    return float(value)


#: How each stored field is read back.
_READ: dict[str, Callable[[Any], Any]] = {"scale": _positive, "reason": str,
                                          "transformed": lambda v: tuple(str(c) for c in v)}

__all__ = ["Correlated", "IndependentLaplace", "LaplaceModel", "NoiseModel", "WaveletLaplace",
           "noise_model_from_json", "noise_model_to_json"]
