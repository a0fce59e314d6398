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
* :class:`LevelLaplace`: least squares over noisy block counts of nested levels (the
  hierarchical mechanism); a range count's variance is a sum over level tuples of per-axis
  detail traces.
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
    #: Whether the SQL macros compute :meth:`variance` once per query in a projection of its own
    #: (its ``ops.let`` values columns; for a long expression), not inline.
    staged_variance: ClassVar[bool] = False
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
        return np.full(axes[0].starts.shape[0], self.variance(NUMPY, axes), dtype=np.float64)

    def range_accuracy(self, axes: Sequence[AxisRanges], alpha: float, noise: str) -> np.ndarray:
        """:meth:`half_width` on numpy, one value per range."""
        width = self.half_width(NUMPY, axes, np.float64(alpha), noise)
        return np.full(axes[0].starts.shape[0], width, dtype=np.float64)

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

    def _factor(self, ops: Ops, ax: Any) -> Any:
        """The axis's variance factor, computed once (:meth:`variance` and :meth:`half_width`
        read the same column in SQL)."""
        return ops.let(ax.factor(self.transforms(ax.column)))

    def variance(self, ops: Ops, axes: Sequence[Any]) -> Any:
        """``2 scale^2 prod_axes f_axis``, ``f`` from :meth:`RangeAxis.factor`."""
        var: Any = self.unit_variance()
        for ax in axes:
            var = var * self._factor(ops, ax)
        return var

    def _terms(self, ops: Ops, axes: Sequence[Any]) -> tuple[list[tuple[Any, Any]], bool]:
        """The axes' terms in the form of
        :func:`~polars_dp.kernels.tail_bounds.laplace_sum_half_width`: along an axis the model
        does not transform, weight 1 on each of the range's cells (``factor(False)`` of them);
        along a transformed one its :class:`~polars_dp.kernels.tail_bounds.AxisWeights`, one
        coefficient each (the axis's ``weights``: its variance factor the sum of squares, its
        list only where listed; one weight when the axis has a single term); and whether the
        product set is listed."""
        widths = [ax.width(self.transforms(ax.column)) for ax in axes]
        listed = lists_terms(widths)
        terms: list[tuple[Any, Any]] = []
        for ax, width in zip(axes, widths, strict=True):
            if not self.transforms(ax.column):
                terms.append((1.0, ax.factor(False)))
            elif width == 1:
                terms.append((ops.item(ax.terms(True)[0], 0), 1.0))
            else:
                terms.append((ax.weights(ops, self._factor(ops, ax), listed), None))
        return terms, listed

    def half_width(self, ops: Ops, axes: Sequence[Any], alpha: Any, noise: str) -> Any:
        """:func:`~polars_dp.kernels.tail_bounds.laplace_sum_half_width` over the axes' terms."""
        terms, listed = self._terms(ops, axes)
        return laplace_sum_half_width(ops, terms, self.scale, alpha, noise, listed)

    def range_accuracy(self, axes: Sequence[AxisRanges], alpha: float, noise: str,
                       chunk: int = 1 << 20) -> np.ndarray:
        """:meth:`half_width` on numpy, in chunks of queries (at most about ``chunk`` terms)."""
        n = axes[0].starts.shape[0]
        widths = [ax.width(self.transforms(ax.column)) for ax in axes]
        step = max(1, chunk // (int(np.prod(widths)) if lists_terms(widths) else sum(widths)))
        out = np.empty(n)
        with np.errstate(divide="ignore", invalid="ignore"):
            for i in range(0, n, step):
                part = slice(i, i + step)
                out[part] = self.half_width(NUMPY, [ax.sliced(part) for ax in axes], np.float64(alpha), noise)
        return out


@dataclass(frozen=True)
class WaveletLaplace(LaplaceModel):
    """Laplace noise of magnitude ``scale / W(c)`` on the wavelet coefficients."""

    kind = "wavelet_laplace"
    #: The variance factors of transformed axes are long expressions the half-width reads too.
    staged_variance = True
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
        ``V = scale^2 sum w^2`` and every term's magnitude at most ``scale``, or Chebyshev's
        ``sqrt(2 V / alpha)`` where smaller (a box over slivers of leaves)."""
        return chernoff_half_width(ops, self.scale**2 * weight_squares, self.scale, ops.ln(2.0 / alpha))


def _axis_details(ops: Ops, start: Any, stop: Any, cells: int, sizes: Sequence[int]) -> tuple[list[Any], Any]:
    """``(q_iᵀ P_l q_i per level, q_iᵀ q_i)`` of the intervals ``[start, stop)`` on an axis of
    ``cells`` real cells with nested block ``sizes`` (``sizes[0]`` the padded length): the
    level-``l`` trace is ``Σ_blocks (cells of the block in the interval)² / s_l`` (head block,
    tail block and the whole blocks between), its detail the difference with the level above
    (:func:`polars_dp.kernels.level_inference.interval_detail_traces`, written over ops).  An
    interval reaching the last real cell covers the padding (known zeros)."""
    length = sizes[0]
    t = ops.where(stop >= cells, length, stop) if length > cells else stop
    traces = []
    for size in sizes:
        first, last = ops.floor(start / size), ops.floor((t - 1) / size)
        head, tail, width = (first + 1.0) * size - start, t - last * size, t - start
        inner = (last - first - 1.0) * float(size) * float(size)
        squares = ops.where(first == last, width * width, head * head + tail * tail + inner)
        traces.append(squares / float(size))
    return [traces[0]] + [traces[j] - traces[j - 1] for j in range(1, len(traces))], traces[-1]


def _contract(tensor: np.ndarray, factors: Sequence[Sequence[Any]]) -> Any:
    """``Σ_a tensor[a] Π_i factors[i][a_i]`` (zero entries skipped), nested axis by axis: the same
    operations in the same order on numpy and in SQL."""
    out: Any = 0.0
    for j, f in enumerate(factors[0]):
        if tensor.ndim == 1:
            if tensor[j] != 0.0:
                out = out + float(tensor[j]) * f
        elif np.any(tensor[j] != 0.0):
            out = out + f * _contract(tensor[j], factors[1:])
    return out


@dataclass(frozen=True)
class LevelLaplace(NoiseModel):
    """Least squares over independent (discrete) Laplace counts of nested block levels (the
    hierarchical mechanism; :mod:`polars_dp.kernels.level_inference`): per axis the block
    ``sizes`` of its levels over ``cells`` real cells; per level tuple ``a`` (C order)
    ``nu_a = 1 / μ_a`` (0: that detail space is not measured) and ``kappa_a = nu_a² Σ_{t ≥ a}
    w_t² b_t² S_t`` (``b_t`` the scale of tuple ``t``'s noise, ``w_t`` its precision);
    ``bound = max_t b_t w_t √S_t`` over the measured tuples.

    A box ``q = ⊗ q_i`` has noise variance ``Σ_a nu_a Π_i q_iᵀ P_{a_i} q_i`` (``inf`` when it
    reaches a detail space with ``nu = 0``).  Its noise is ``Σ_{t, B} c_{t,B} Z_{t,B}``, ``Z_{t,B}``
    of scale ``b_t``, and ``Σ_B c_{t,B}² = w_t² S_t Σ_{a ≤ t} nu_a² q P_a q``: the Laplace
    magnitudes ``β = |c| b_t`` have ``V = Σ β² = Σ_a kappa_a Π_i q_iᵀ P_{a_i} q_i`` and
    ``max β <= min(√V, bound √R)`` with ``R = Σ_a nu_a² Π_i q_iᵀ P_{a_i} q_i``, so the Chernoff
    bound of :func:`~polars_dp.kernels.tail_bounds.chernoff_half_width` (steps 1-3: valid for any
    bound on the largest magnitude, discrete or continuous noise) gives the half-width."""

    kind = "level_laplace"
    staged_variance = True
    sizes: tuple[tuple[int, ...], ...]
    cells: tuple[int, ...]
    nu: tuple[float, ...]
    kappa: tuple[float, ...]
    bound: float

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(s) for s in self.sizes)

    def to_json(self) -> dict[str, Any]:
        """The JSON object (the nested per-axis sizes as lists too)."""
        return {**super().to_json(), "sizes": [list(s) for s in self.sizes]}

    def tensor(self, values: tuple[float, ...]) -> np.ndarray:
        """``nu`` or ``kappa`` in the shape of the level tuples."""
        return np.asarray(values, dtype=np.float64).reshape(self.shape)

    def _details(self, ops: Ops, axes: Sequence[Any], let: bool) -> tuple[list[list[Any]], list[Any]]:
        # the variance and the half-width rendered in one SQL stage share its columns
        stage = getattr(ops, "stages", None)
        memo = self.__dict__.get("_rendered")
        if stage is not None and memo is not None and memo[0] is stage and memo[1] is axes:
            return memo[2]
        out, widths = [], []
        for ax, cells, sizes in zip(axes, self.cells, self.sizes, strict=True):
            start, stop = ax.bounds()
            detail, width = _axis_details(ops, start, stop, cells, sizes)
            out.append([ops.let(x) for x in detail] if let else detail)
            widths.append(width)
        if stage is not None and let:
            self.__dict__["_rendered"] = (stage, axes, (out, widths))
        return out, widths

    def _unidentified(self, ops: Ops, details: list[list[Any]], widths: list[Any]) -> Any:
        """Positive where the box has a component on a detail space with ``nu = 0``."""
        missing = (self.tensor(self.nu) == 0.0).astype(np.float64)
        if not missing.any():
            return None
        hits = [[ops.where(ops.abs(x) > 1e-11 * w, 1.0, 0.0) for x in d]
                for d, w in zip(details, widths, strict=True)]
        return _contract(missing, hits)

    def variance(self, ops: Ops, axes: Sequence[Any]) -> Any:
        """``Σ_a nu_a Π_i q_iᵀ P_{a_i} q_i`` (``inf`` off the measured span)."""
        details, widths = self._details(ops, axes, let=True)
        var = _contract(self.tensor(self.nu), details)
        missing = self._unidentified(ops, details, widths)
        return var if missing is None else ops.where(missing > 0.5, ops.inf, var)

    def half_width(self, ops: Ops, axes: Sequence[Any], alpha: Any, noise: str) -> Any:
        """The Chernoff half-width from ``V`` and the bound on the largest magnitude (class doc)."""
        details, widths = self._details(ops, axes, let=True)
        v = ops.let(ops.greatest(_contract(self.tensor(self.kappa), details), 0.0))
        r = ops.let(ops.greatest(_contract(self.tensor(self.nu) ** 2, details), 0.0))
        top = ops.let(ops.least(ops.power(v, 0.5), self.bound * ops.power(r, 0.5)))
        safe: Any = ops.let(ops.where(top > 0.0, top, 1.0))
        units = ops.let(ops.where(top > 0.0, v, 0.0))
        width = chernoff_half_width(ops, units, safe, ops.let(ops.ln(2.0 / alpha)))
        missing = self._unidentified(ops, details, widths)
        return width if missing is None else ops.where(missing > 0.5, ops.inf, width)


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
_READ: dict[str, Callable[[Any], Any]] = {
    "scale": _positive, "reason": str, "transformed": lambda v: tuple(str(c) for c in v),
    "sizes": lambda v: tuple(tuple(int(x) for x in s) for s in v),
    "cells": lambda v: tuple(int(x) for x in v), "nu": lambda v: tuple(float(x) for x in v),
    "kappa": lambda v: tuple(float(x) for x in v), "bound": float}

__all__ = ["Correlated", "IndependentLaplace", "LaplaceModel", "LevelLaplace", "NoiseModel", "WaveletLaplace",
           "noise_model_from_json", "noise_model_to_json"]
