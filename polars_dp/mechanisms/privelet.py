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
:func:`polars_dp.kernels.wavelet_blocks.hn_inverse_blocked` (i.i.d. Laplace drawn block by block
in the C order of the full coefficient array, so a seed gives the same release as the
direct formula; about two passes over the cube whatever the number of transformed axes).
Peak memory is the count matrix plus, when the first axis is transformed, one buffer of its
coefficient length times the other axes' cells.

Exact noise (``noise="exact"``, the default; note §5b)
-----------------------------------------------------
Every noisy value that depends on the data lives on an integer lattice:

* Haar: the unnormalised coefficients of integer counts are integers (sums and differences of
  cell sums); lattice factor ``d = 1``.
* Nominal: ``u_N = (f L_N - L_parent) / (2 (f - 1))`` (``f`` the parent's fanout, ``L`` leaf
  sums), so ``d_N u_N`` is an integer for ``d_N = 2 (f - 1)``; the root has ``d = 1``.
* HN: the factors multiply across transformed axes, ``D(c) = prod_axes d``; untransformed
  axes have ``d = 1``.

Each integer ``D(c) u(c)`` gets discrete Laplace noise of scale ``D(c) lambda'``, with
``lambda' = t/s`` the Privelet scale rounded up to the ``2^-20`` grid.  The pmf ratio of
neighbouring outputs is ``exp(sum_c |D(c) (u(c) - u'(c))| / (D(c) lambda')) =
exp(||u - u'||_1 / lambda') <= exp(Delta rho / lambda')``, so the release is
``epsilon_effective = Delta rho / lambda' <= epsilon``-DP, the same calibration as above.
The noisy coefficients ``(D u + Z) / D`` are then inverted in floating point: post-processing
of the noisy coefficients alone (the float shortcut ``M + inverse(eta)`` is not used, since
its rounding would depend on ``M``).  The slabs along leading untransformed axes keep the
memory bounded as above; when the first axis is a transformed nominal axis the whole
coefficient array is built at once.  ``noise="float"`` keeps the float path described above.

Utility: every range count has noise variance ``2 lambda^2 prod_axes f_axis``, exposed by
:meth:`GridRelease.range_variance`; ``f <= H(A)`` on transformed axes (Theorem 3, Eq. 7).
(Exact noise has variance ``2 q / (1 - q)^2 < 2 lambda'^2`` per unit, so the formula is an
upper bound there.)
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from polars_dp.counting.frequency import frequency_matrix
from polars_dp.domains.attributes import Attribute, Nominal, as_attributes
from polars_dp.domains.hierarchy import Hierarchy
from polars_dp.errors import HierarchyError, ParameterError
from polars_dp.kernels import wavelet_blocks
from polars_dp.kernels import wavelets as transforms
from polars_dp.noise import (
    Neighbours,
    NoiseKind,
    NoiseSource,
    SeedLike,
    check_epsilon,
    check_noise,
    discrete_laplace,
    histogram_sensitivity,
    laplace,
    laplace_scale,
    noise_params,
    noise_source,
)
from polars_dp.params import Nulls, OnOutOfDomain
from polars_dp.progress import Progress, rows_hint
from polars_dp.releases.grid import GridRelease

#: Target size (cells) of one slab of the noise field.
SLAB_CELLS = 1 << 21
#: Exact float64 range of the Haar shortcut of the exact path: |values| * prod(P) below it.
EXACT_HAAR_ROOM = 2.0**52


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


def privelet_scale(rho: int, epsilon: float, neighbours: str, noise: str = "float") -> float | Fraction:
    """``lambda = 2 rho / epsilon`` (replace, Lemma 1) or ``rho / epsilon`` (add_remove); for
    ``noise="exact"`` the exact rational rounded up to the ``2^-20`` grid."""
    return laplace_scale(histogram_sensitivity(neighbours) * rho, check_epsilon(epsilon), noise)


def add_wavelet_noise(counts: np.ndarray, attributes: Sequence[Attribute], transformed: Sequence[bool],
                      scale: float, rng: NoiseSource | np.random.Generator,
                      advance: Callable[[int], None] | None = None) -> None:
    """``counts += inverse_HN(eta)`` in place, ``eta`` i.i.d. ``Lap(scale)`` per coefficient.

    The noise is drawn block by block in the C order of the full coefficient array (so a seed
    gives the same release as the direct formula) and inverted by the blocked kernel
    :func:`polars_dp.kernels.wavelet_blocks.hn_inverse_blocked` (about two passes over the cube
    whatever the number of transformed axes; a buffer of the outer coefficients only when
    the first axis is transformed and a batch item does not fit one block).
    """
    wavelet_blocks.hn_inverse_blocked(lambda i, j: laplace(rng, scale, j - i), attributes, transformed,
                                  counts, add=True, slab_cells=SLAB_CELLS, advance=advance)


# ---------------------------------------------------------------------------- exact path
def nominal_lattice(x: np.ndarray, hierarchy: Hierarchy, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Integer nominal coefficients ``d_N u_N`` along ``axis`` (BFS node order) and ``d_N``:
    the root's leaf sum (``d = 1``) and ``f L_N - L_parent`` (``d_N = 2 (f - 1)``) elsewhere."""
    v, shape, axis = transforms._as3d(np.asarray(x, dtype=np.int64), axis)
    cum = np.zeros((v.shape[0], v.shape[1] + 1, v.shape[2]), dtype=np.int64)
    np.cumsum(v, axis=1, out=cum[:, 1:])
    leafsum = cum[:, hierarchy.node_stop] - cum[:, hierarchy.node_start]
    del cum
    parent = hierarchy.node_parent[1:]
    f = hierarchy.fanouts[parent]
    out = np.empty_like(leafsum)
    out[:, 0] = leafsum[:, 0]
    np.multiply(leafsum[:, 1:], f[:, None], out=out[:, 1:])
    out[:, 1:] -= leafsum[:, parent]
    n = hierarchy.n_nodes
    return out.reshape(*shape[:axis], n, *shape[axis + 1:]), np.r_[1, 2 * (f - 1)].astype(np.int64)


def lattice_forward(x: np.ndarray, attributes: Sequence[Attribute], transformed: Sequence[bool],
                    first_axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``D u`` (int64) of the integer array ``x`` whose axis ``first_axis + k`` is
    ``attributes[k]``, and ``D`` broadcastable to it (product of the per-axis factors)."""
    x = np.asarray(x, dtype=np.int64)
    d = np.ones([1] * x.ndim, dtype=np.int64)
    for k, (a, t) in enumerate(zip(attributes, transformed, strict=True)):
        if not t:
            continue
        axis = first_axis + k
        if isinstance(a, Nominal):
            x, dk = nominal_lattice(x, a.hierarchy, axis)
            shape = [1] * x.ndim
            shape[axis] = dk.size
            d = d * dk.reshape(shape)
        else:  # integer sums and differences: exact in float64 below 2^53 (checked by the caller)
            x = transforms.haar_forward(x.astype(np.float64), axis).astype(np.int64)
    return x, d


def _lattice_bound(attributes: Sequence[Attribute], transformed: Sequence[bool]) -> int:
    """``max |D u| / total``: the nominal lattice multiplies leaf sums by at most ``2 f_max``."""
    bound = 1
    for a, t in zip(attributes, transformed, strict=True):
        if t and isinstance(a, Nominal):
            bound *= 2 * int(a.hierarchy.fanouts.max())
    return bound


def _runs(values: np.ndarray) -> list[slice]:
    """Maximal runs of equal values of a 1-D array, as slices."""
    cuts = np.flatnonzero(np.diff(values)) + 1
    edges = [0, *cuts.tolist(), values.size]
    return [slice(a, b) for a, b in itertools.pairwise(edges)]


def _lattice_boxes(d: np.ndarray) -> list[tuple[tuple[slice, ...], int]]:
    """Boxes of constant ``D = broadcast(d)`` (an outer product of per-axis factors): one per
    combination of per-axis runs of equal factors, with that ``D``."""
    runs = []
    for k, n in enumerate(d.shape):
        line = np.moveaxis(d, k, -1)[(0,) * (d.ndim - 1)]
        runs.append(_runs(line) if n > 1 else [slice(None)])
    boxes = []
    for box in itertools.product(*runs):
        corner = tuple(slice(b.start, b.start + 1) if b.start is not None else b for b in box)
        boxes.append((box, int(d[corner].item())))
    return boxes


def _add_lattice_noise(coef: np.ndarray, d: np.ndarray, scale: Fraction, src: NoiseSource) -> None:
    """``coef += DLap(D scale)`` per entry, box by box of constant ``D`` (:func:`_lattice_boxes`),
    in bounded row blocks, C order within a block."""
    for box, value in _lattice_boxes(d):
        view = coef[box]
        rows = max(1, SLAB_CELLS // max(1, view[0].size if view.ndim else 1))
        for i in range(0, view.shape[0], rows):
            part = view[i:i + rows]
            part += discrete_laplace(src, value * scale.numerator, scale.denominator, part.shape)


def add_wavelet_noise_exact(counts: np.ndarray, attributes: Sequence[Attribute], transformed: Sequence[bool],
                            scale: Fraction, src: NoiseSource) -> None:
    """``counts <- inverse_HN((D u + Z) / D)`` in place, ``Z ~ DLap(D lambda')`` per coefficient.

    Slabs run along the leading untransformed axes (one slab when the first axis is
    transformed); within a slab the noise is drawn box by box of constant ``D`` (the product
    of per-axis runs of equal ``d``), in C order within each box.  The inverse runs the Haar
    axes first on the integer noisy coefficients (exact in float64 under the guard
    ``|values| prod P < 2^52``, so it is computed as ``D u_nom + H^-1(Z)`` without the Haar
    forward transform), then divides by ``D`` and runs the nominal inverses: a deterministic
    function of the noisy coefficients alone.
    """
    scale = Fraction(scale)
    total = float(counts.sum())  # counts are >= 0
    if total * _lattice_bound(attributes, transformed) >= 2.0**52:
        raise ParameterError("the counts are too large for exact lattice noise (total x lattice factor "
                             ">= 2^52); use noise='float'")
    lead = 0
    while lead < counts.ndim and not transformed[lead]:
        lead += 1
    outer = int(np.prod(counts.shape[:lead], dtype=np.int64))
    flat = counts.reshape(outer, *counts.shape[lead:])
    if lead == counts.ndim:
        step = max(1, SLAB_CELLS)
        plain = flat.reshape(-1)
        for i in range(0, plain.size, step):
            plain[i:i + step] += discrete_laplace(src, scale.numerator, scale.denominator,
                                                  min(step, plain.size - i))
        return
    if lead == 0 and not isinstance(attributes[0], Nominal):
        _exact_haar_first(counts, attributes, transformed, scale, src, total * _lattice_bound(attributes,
                                                                                               transformed))
        return
    inner = int(np.prod(counts.shape[lead:], dtype=np.int64))
    step = max(1, SLAB_CELLS // inner) if lead > 0 else outer
    attrs, trans = attributes[lead:], transformed[lead:]
    nominal = [t and isinstance(a, Nominal) for a, t in zip(attrs, trans, strict=True)]
    haar = [(k + 1, a) for k, (a, t) in enumerate(zip(attrs, trans, strict=True)) if t and not nominal[k]]
    # inverse Haar of integer coefficients is exact in float64 while |values| * prod(P) < 2^52
    room = EXACT_HAAR_ROOM / np.prod([float(transforms.haar_padded_length(a.n_cells)) for _, a in haar])
    growth = np.prod([float(1 + transforms.haar_levels(a.n_cells)) for _, a in haar])
    lattice_max = total * _lattice_bound(attributes, transformed)
    for i in range(0, outer, step):
        slab = flat[i:i + step]
        du, d = lattice_forward(slab.astype(np.int64), attrs, nominal, 1)  # nominal axes only
        shape = list(du.shape)
        for axis, a in haar:
            shape[axis] = transforms.haar_padded_length(a.n_cells)
        z = np.zeros(shape)  # integer draws, held exactly in float64
        _add_lattice_noise(z, d, scale, src)
        if lattice_max + float(np.abs(z).max(initial=0.0)) * growth < room:
            # H^-1(H(D u) + Z) = D u + H^-1(Z), every float operation exact (note §5b)
            for axis, a in haar:
                z = transforms.haar_inverse(z, a.n_cells, axis)
            x = du + z
        else:  # the noisy coefficients themselves, then their (rounded) inverse
            c = du.astype(np.float64)
            for axis, _ in haar:
                c = transforms.haar_forward(c, axis)
            x = c + z
            for axis, a in haar:
                x = transforms.haar_inverse(x, a.n_cells, axis)
        del du, z
        # post-processing of H^-1(noisy coefficients): divide by D, then the nominal inverses
        for box, value in _lattice_boxes(d):
            if value != 1:
                x[box] /= value
        for k in reversed(range(len(attrs))):
            if nominal[k]:
                x = transforms.inverse(x, attrs[k], k + 1)
        slab[...] = x


def _finish_rows(x: np.ndarray, du: np.ndarray, d: np.ndarray, attributes: Sequence[Attribute],
                 nominal: Sequence[bool]) -> np.ndarray:
    """``(D u + H^-1(Z)) / D``, then the nominal inverses (post-processing)."""
    x = du + x
    for box, value in _lattice_boxes(d):
        if value != 1:
            x[box] /= value
    for k in reversed(range(len(attributes))):
        if nominal[k]:
            x = transforms.inverse(x, attributes[k], k)
    return x


def _exact_haar_first(counts: np.ndarray, attributes: Sequence[Attribute], transformed: Sequence[bool],
                      scale: Fraction, src: NoiseSource, lattice_max: float) -> None:
    """The exact path when the first axis is a transformed ordinal (no slabs along it).

    Memory stays at the count matrix plus one noise array: ``Z`` is drawn in full (float64
    holding integers), inverted along axis 0 in column blocks in place, then row blocks get
    the other Haar inverses, ``D u`` (computed from the same count rows), ``/D`` and the
    nominal inverses.  Under the guard every Haar step is exact, so the result is the same
    function of the noisy coefficients as in :func:`add_wavelet_noise_exact`.
    """
    nominal = [t and isinstance(a, Nominal) for a, t in zip(attributes, transformed, strict=True)]
    haar = [k for k, t in enumerate(transformed) if t and not nominal[k]]
    _, d = lattice_forward(np.zeros((1, *counts.shape[1:]), dtype=np.int64), attributes, nominal, 0)
    shape = [a.n_cells for a in attributes]
    for k, a in enumerate(attributes):
        if nominal[k]:
            shape[k] = a.hierarchy.n_nodes
        elif k in haar:
            shape[k] = transforms.haar_padded_length(a.n_cells)
    z = np.zeros(shape)  # integer draws, held exactly in float64
    _add_lattice_noise(z, d, scale, src)
    room = EXACT_HAAR_ROOM / np.prod([float(shape[k]) for k in haar])
    growth = np.prod([float(1 + transforms.haar_levels(attributes[k].n_cells)) for k in haar])
    if lattice_max + float(np.abs(z).max(initial=0.0)) * growth >= room:  # rounded inverse of C + Z
        c, _ = lattice_forward(counts.astype(np.int64), attributes, nominal, 0)
        c = c.astype(np.float64)
        for k in haar:
            c = transforms.haar_forward(c, k)
        c += z
        for k in haar:
            c = transforms.haar_inverse(c, attributes[k].n_cells, k)
        counts[...] = _finish_rows(c, np.zeros(1), d, attributes, nominal)
        return
    n0, p0 = attributes[0].n_cells, shape[0]
    cols = int(np.prod(shape[1:], dtype=np.int64))
    flat = z.reshape(p0, cols)
    step = max(1, SLAB_CELLS // p0)
    for j in range(0, cols, step):  # axis-0 inverse in place: rows [0, n0) of each column block
        flat[:n0, j:j + step] = transforms.haar_inverse(flat[:, j:j + step], n0, 0)
    y = z[:n0]
    rows = max(1, SLAB_CELLS // cols)
    for i in range(0, n0, rows):
        x = y[i:i + rows]
        for k in haar[1:]:
            x = transforms.haar_inverse(x, attributes[k].n_cells, k)
        du, _ = lattice_forward(counts[i:i + rows].astype(np.int64), attributes, nominal, 0)
        counts[i:i + rows] = _finish_rows(x, du, d, attributes, nominal)


def privelet(frame: Any, attributes: Attribute | Iterable[Attribute], *, epsilon: float,
             untransformed: str | Iterable[str] = (), neighbours: Neighbours = "replace",
             seed: SeedLike = None, on_out_of_domain: OnOutOfDomain = "raise", nulls: Nulls = "raise",
             count_column: str | None = None, noise: NoiseKind = "exact",
             progress: bool | None = None) -> GridRelease:
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
    seed : ``None`` draws cryptographic randomness; an int makes the release reproducible (tests
        only; the release is marked ``seeded``).
    on_out_of_domain, nulls : see :mod:`polars_dp.domains.attributes`.
    count_column : a column of non-negative integer counts when each row is a group of
        individuals already counted (pre-aggregated input); the guarantee holds when each
        individual contributes to exactly one row with weight 1 (see
        :mod:`polars_dp.counting.spec`).
    noise : ``"exact"`` (lattice coefficients + discrete Laplace, default) or ``"float"``.
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
    noise = check_noise(noise)
    scale = privelet_scale(rho, epsilon, neighbours, noise)
    src = noise_source(seed)
    coefficients = int(np.prod([transforms.coefficient_count(a) if t else a.n_cells
                                for a, t in zip(attrs, transformed, strict=True)], dtype=np.float64))
    bar = Progress(mechanism_name(transformed), progress, max(coefficients, rows_hint(frame) or 0))
    bar.step("counting")
    counts = frequency_matrix(frame, attrs, on_out_of_domain=on_out_of_domain, nulls=nulls,
                              bytes_per_cell=24, count_column=count_column)
    advance = bar.step("noise + inverse transform", coefficients, "coef")
    if noise == "exact":
        add_wavelet_noise_exact(counts, attrs, transformed, scale, src)
    else:
        add_wavelet_noise(counts, attrs, transformed, scale, src, advance=advance)
    bar.close()
    params = {
        "rho": rho,
        "sensitivity": histogram_sensitivity(neighbours),
        "transformed": [a.column for a, t in zip(attrs, transformed, strict=True) if t],
        "untransformed": [a.column for a, t in zip(attrs, transformed, strict=True) if not t],
        "untransformed_auto": auto,
        "coefficients": ("unnormalised (W*c) with i.i.d. Lap(noise_scale)" if noise == "float" else
                         "lattice D*W*c (D = prod 2(f-1) over nominal axes) with DLap(D*noise_scale)"),
        **noise_params(histogram_sensitivity(neighbours) * rho, scale, noise),
    }
    mechanism = mechanism_name(transformed)
    if not any(transformed):  # the rule kept every axis as is: exactly Basic, so say so
        mechanism = "basic"
        params["note"] = f"untransformed={untransformed!r} left every attribute untransformed: this is Basic"
    return GridRelease(counts, attrs, mechanism=mechanism, epsilon=epsilon, neighbours=neighbours,
                       noise_scale=float(scale), params=params, noise=noise, seeded=src.seeded)


__all__ = ["add_wavelet_noise", "add_wavelet_noise_exact", "auto_untransformed", "lattice_forward",
           "mechanism_name", "nominal_lattice", "privelet", "privelet_rho", "privelet_scale",
           "resolve_untransformed"]
