"""Privelet's exact-noise path: integer lattice coefficients plus discrete Laplace (note §5b).

The privacy argument is in :mod:`polars_dp.mechanisms.privelet` ("Exact noise"): every
coefficient's integer numerator ``D(c) u(c)`` gets discrete Laplace noise of scale
``D(c) lambda'``, so the release spends ``Delta rho / lambda' <= epsilon``; everything after the
noisy numerators (the Haar inverse, division by ``D``, the nominal inverses) is post-processing
in floating point of the noisy coefficients alone.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from polars_dp.domains.attributes import Attribute, Nominal
from polars_dp.domains.hierarchy import Hierarchy
from polars_dp.errors import ParameterError
from polars_dp.kernels import wavelets as transforms
from polars_dp.noise import NoiseSource, discrete_laplace

#: Target size (cells) of one slab of the noise field.
SLAB_CELLS = 1 << 21
#: Exact float64 range of the Haar shortcut: |values| * prod(P) below it.
EXACT_HAAR_ROOM = 2.0**52


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



__all__ = ["add_wavelet_noise_exact", "lattice_forward", "nominal_lattice"]
