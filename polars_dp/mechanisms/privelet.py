"""Privelet and Privelet+ (Xiao, Wang, Gehrke, ICDE 2010, Sec. III-VI).

Privacy
-------
The HN transform (:mod:`polars_dp.kernels.wavelets`) of the frequency matrix ``M`` gets i.i.d.
``Lap(lambda)`` on every unnormalised coefficient ``W_HN(c) * c`` (the paper's
``Lap(lambda / W_HN(c))`` on ``c``).  Its generalised sensitivity is
``rho = prod over transformed axes of P(A)`` with ``P(A) = 1 + ceil(log2 |A|)`` (ordinal,
padded, Lemma 2) and ``P(A) = height`` (nominal, Lemma 4); Theorem 2 gives the product and
an untransformed axis (Privelet+, Sec. VI) contributes weight 1 and factor 1 (Corollary 1).
A unit change of one cell changes the coefficients by at most ``rho`` in weighted L1, so

* ``neighbours="replace"`` (one row modified: two cells change): ``lambda = 2 rho / epsilon``
  (Lemma 1);
* ``neighbours="add_remove"`` (one cell changes): ``lambda = rho / epsilon``.

Implementation
--------------
The release is ``inverse(forward(M) + eta)``.  The inverse is linear and inverts the
forward transform exactly (mean subtraction is a no-op on exact coefficients), so this
equals ``M + inverse(eta)``: the counts never need the forward transform, and the noise
field ``inverse(eta)`` is built by the blocked kernel
:func:`polars_dp.kernels.wavelets.hn_inverse_blocked` (i.i.d. Laplace drawn block by block
in the C order of the full coefficient array, so a seed gives the same release as the
direct formula; about two passes over the cube whatever the number of transformed axes).
Peak memory is the count matrix plus, when the first axis is transformed, one buffer of its
coefficient length times the other axes' cells.  The exact-noise pipeline (integer
coefficients, noise, float inverse) is :func:`polars_dp.kernels.wavelets.hn_lattice_inverse`.

Utility: every range count has noise variance ``2 lambda^2 prod_axes f_axis``, exposed by
:meth:`GridRelease.range_variance`; ``f <= H(A)`` on transformed axes (Theorem 3, Eq. 7).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from polars_dp.counting.frequency import frequency_matrix
from polars_dp.domains.attributes import Attribute, Nominal, as_attributes
from polars_dp.errors import HierarchyError, ParameterError
from polars_dp.kernels import wavelets as transforms
from polars_dp.noise import SeedLike, check_epsilon, histogram_sensitivity, laplace, make_rng
from polars_dp.progress import Progress, rows_hint
from polars_dp.releases.grid import GridRelease

#: Target size (cells) of one slab of the noise field.
SLAB_CELLS = 1 << 21


def auto_untransformed(attribute: Attribute) -> bool:
    """The paper's Privelet+ rule (Sec. VI): leave ``A`` untransformed iff ``|A| <= P(A)^2 H(A)``."""
    p = transforms.generalized_sensitivity(attribute)
    return attribute.n_cells <= p * p * transforms.variance_factor_bound(attribute)


def resolve_untransformed(attributes: tuple[Attribute, ...],
                          untransformed: str | Attribute | Iterable[str | Attribute]
                          ) -> tuple[list[bool], bool]:
    """Per attribute: transformed or not; and whether the "auto" rule chose it."""
    if isinstance(untransformed, str) and untransformed == "auto":
        return [not auto_untransformed(a) for a in attributes], True
    if isinstance(untransformed, (str, Attribute)):
        untransformed = [untransformed]
    try:
        names = [u.column if isinstance(u, Attribute) else u for u in untransformed]
    except TypeError:
        raise ParameterError(
            f"untransformed must be 'auto' or a list of column names, got {untransformed!r}"
        ) from None
    columns = [a.column for a in attributes]
    for name in names:
        if name not in columns:
            raise ParameterError(
                f"untransformed names {name!r}, which is not a declared attribute; declared: {columns}"
            )
    return [a.column not in names for a in attributes], False


def privelet_rho(attributes: Sequence[Attribute], transformed: Sequence[bool]) -> int:
    """Generalised sensitivity ``prod over transformed axes of P(A)`` (Theorem 2, Corollary 1)."""
    rho = 1
    for a, t in zip(attributes, transformed, strict=True):
        if t:
            if isinstance(a, Nominal) and a.hierarchy.n_leaves < 2:
                raise HierarchyError(
                    f"{a.column!r}: its hierarchy has a single leaf, so it cannot be transformed; "
                    "list it in untransformed=[...]"
                )
            rho *= transforms.generalized_sensitivity(a)
    return rho


def mechanism_name(transformed: Sequence[bool]) -> str:
    """``"privelet"`` when every attribute is transformed, else ``"privelet+"``."""
    return "privelet" if all(transformed) else "privelet+"


def privelet_scale(rho: int, epsilon: float, neighbours: str) -> float:
    """``lambda = 2 rho / epsilon`` (replace, Lemma 1) or ``rho / epsilon`` (add_remove)."""
    return histogram_sensitivity(neighbours) * rho / check_epsilon(epsilon)


def add_wavelet_noise(counts: np.ndarray, attributes: Sequence[Attribute], transformed: Sequence[bool],
                      scale: float, rng: np.random.Generator,
                      advance: Callable[[int], None] | None = None) -> None:
    """``counts += inverse_HN(eta)`` in place, ``eta`` i.i.d. ``Lap(scale)`` per coefficient.

    The noise is drawn block by block in the C order of the full coefficient array (so a seed
    gives the same release as the direct formula) and inverted by the blocked kernel
    :func:`polars_dp.kernels.wavelets.hn_inverse_blocked` (about two passes over the cube
    whatever the number of transformed axes; a buffer of the outer coefficients only when
    the first axis is transformed and a batch item does not fit one block).
    """
    transforms.hn_inverse_blocked(lambda i, j: laplace(rng, scale, j - i), attributes, transformed,
                                  counts, add=True, slab_cells=SLAB_CELLS, advance=advance)


def privelet(frame: Any, attributes: Attribute | Iterable[Attribute], *, epsilon: float,
             untransformed: str | Iterable[str] = (), neighbours: str = "replace",
             seed: SeedLike = None, on_out_of_domain: str = "raise", nulls: str = "raise",
             count_column: str | None = None, progress: bool | None = None) -> GridRelease:
    """Release the frequency matrix of ``attributes`` with Privelet (or Privelet+) noise.

    Parameters
    ----------
    frame : private rows: a Polars DataFrame / LazyFrame, pyarrow Table or Arrow stream
        (``__arrow_c_stream__``), a DuckDB relation or a Spark DataFrame; counted in that
        engine, read once.
    attributes : public declarations; ordinal axes get the Haar transform (zero padded to a
        power of two), nominal axes the nominal transform over their hierarchy.
    epsilon : privacy budget, > 0.
    untransformed : columns left untransformed (Privelet+, Sec. VI), or ``"auto"`` for the
        paper's rule ``|A| <= P(A)^2 H(A)``.  A single string other than ``"auto"`` names one
        column.  The choice depends on the public domain only.
    neighbours : ``"replace"`` (``lambda = 2 rho / epsilon``) or ``"add_remove"``
        (``lambda = rho / epsilon``).
    seed : ``None`` draws OS entropy; an int makes the release reproducible (tests only).
    on_out_of_domain, nulls : see :mod:`polars_dp.domains.attributes`.
    count_column : a column of non-negative integer counts when each row is a group of
        individuals already counted (pre-aggregated input); the guarantee holds when each
        individual contributes to exactly one row with weight 1 (see
        :mod:`polars_dp.counting.spec`).
    progress : stage bars on stderr (counting, noise + inverse transform); ``None``: on a
        terminal for large domains.

    The release's ``noise_scale`` is ``lambda``; ``params`` records ``rho``, the
    ``transformed`` and ``untransformed`` columns and ``untransformed_auto``.  Its mechanism
    is ``"privelet"``, or ``"privelet+"`` when some attribute is untransformed, or ``"basic"``
    when none is transformed (then the release is exactly :func:`polars_dp.basic`'s, and
    ``params["note"]`` says why).
    """
    attrs = as_attributes(attributes)
    epsilon = check_epsilon(epsilon)
    transformed, auto = resolve_untransformed(attrs, untransformed)
    rho = privelet_rho(attrs, transformed)
    scale = privelet_scale(rho, epsilon, neighbours)
    rng = make_rng(seed)
    coefficients = int(np.prod([transforms.coefficient_count(a) if t else a.n_cells
                                for a, t in zip(attrs, transformed, strict=True)], dtype=np.float64))
    bar = Progress(mechanism_name(transformed), progress, max(coefficients, rows_hint(frame) or 0))
    bar.step("counting")
    counts = frequency_matrix(frame, attrs, on_out_of_domain=on_out_of_domain, nulls=nulls,
                              bytes_per_cell=24, count_column=count_column)
    add_wavelet_noise(counts, attrs, transformed, scale, rng,
                      advance=bar.step("noise + inverse transform", coefficients, "coef"))
    bar.close()
    params = {
        "rho": rho,
        "sensitivity": histogram_sensitivity(neighbours),
        "transformed": [a.column for a, t in zip(attrs, transformed, strict=True) if t],
        "untransformed": [a.column for a, t in zip(attrs, transformed, strict=True) if not t],
        "untransformed_auto": auto,
        "coefficients": "unnormalised (W*c) with i.i.d. Lap(noise_scale)",
    }
    mechanism = "privelet" if all(transformed) else "privelet+"
    if not any(transformed):  # the rule kept every axis as is: exactly Basic, so say so
        mechanism = "basic"
        params["note"] = f"untransformed={untransformed!r} left every attribute untransformed: this is Basic"
    return GridRelease(counts, attrs, mechanism=mechanism, epsilon=epsilon, neighbours=neighbours,
                       noise_scale=scale, params=params)


__all__ = ["add_wavelet_noise", "auto_untransformed", "privelet", "privelet_rho", "privelet_scale",
           "resolve_untransformed"]
