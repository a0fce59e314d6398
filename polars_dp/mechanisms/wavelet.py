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

Exact noise (``noise="exact"``, the default; Mironov, CCS 2012)
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
Everything after ``X = D u + Z`` is post-processing of ``X`` alone.  When the last axis is a
Haar axis (and the lattice is narrow), its forward is skipped: ``P H^-1(X)`` along that axis
(``P`` its padded length) is the exact integer ``N = P Y + P H^-1(Z)``, ``Y`` the numerators
along the other axes, so the counts enter only through exact integers and ``N / P`` is
rounded once (a float shortcut ``M + inverse(eta)`` would round according to ``M``, which is
why it is not used).  The rest of the inverse runs in floating point on those values.  A
coefficient whose Haar node covers padding cells only (``u(c) = 0`` for every dataset) reaches
no cell of the release, so on the outer Haar axis its noise is not drawn at all: the release is
the same function of the noisy coefficients it depends on, with the same law.  The
whole pipeline runs block by block over the counts (:mod:`polars_dp.mechanisms.wavelet_lattice`).
``noise="float"`` keeps the float path described above.

Utility: every range count has noise variance ``2 lambda^2 prod_axes f_axis``, exposed by
:meth:`GridRelease.range_variance`; ``f <= H(A)`` on transformed axes (Theorem 3, Eq. 7).
(Exact noise has variance ``2 q / (1 - q)^2 < 2 lambda'^2`` per unit, so the formula is an
upper bound there.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from fractions import Fraction
from typing import Any, Literal

import numpy as np

from polars_dp import compiled
from polars_dp.counting.frequency import frequency_matrix
from polars_dp.domains.attributes import Attribute
from polars_dp.domains.privacy_unit import Rows
from polars_dp.kernels import wavelet_blocks
from polars_dp.mechanisms.options import mechanism
from polars_dp.mechanisms.privacy_unit import bounded
from polars_dp.mechanisms.wavelet_lattice import add_wavelet_noise_exact, warm_up_in_background
from polars_dp.noise import (
    Neighbours,
    NoiseKind,
    NoiseSource,
    SeedLike,
    laplace,
    noise_source,
)
from polars_dp.params import Nulls, OnOutOfDomain
from polars_dp.plans import PriveletPlan
from polars_dp.plans.grid import (  # re-exported: the calibration lives in the plan
    Workload,
    auto_untransformed,
    mechanism_name,
    privelet_rho,
    privelet_scale,
    resolve_untransformed,
)
from polars_dp.progress import Progress
from polars_dp.releases.grid import GridRelease

#: Target size (cells) of one slab of the noise field.
SLAB_CELLS = 1 << 21


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


def run_privelet(plan: PriveletPlan, frame: Any, *, seed: SeedLike, progress: bool | None
                 ) -> GridRelease:
    """Count ``frame`` over the plan's attributes, add the plan's wavelet noise, release."""
    src = noise_source(seed)
    attrs, opts, transformed = plan.attributes, plan.options, plan.transformed_mask
    bar = Progress(mechanism_name(transformed) if any(transformed) else "privelet+", progress,
                   plan.coefficients)  # public work: the coefficients
    bar.step("counting")
    frame = bounded(frame, plan, src, [a.column for a in attrs])
    warming = warm_up_in_background() if plan.noise == "exact" else None  # kernels load while counting
    try:
        counts = frequency_matrix(frame, attrs, on_out_of_domain=opts["on_out_of_domain"],
                                  nulls=opts["nulls"], bytes_per_cell=plan.bytes_per_cell,
                                  count_column=opts["count_column"],
                                  integer=plan.noise == "exact")  # the exact pipeline works on int64
    finally:
        if warming is not None:
            warming.join()
    release = privelet_counts(plan, counts, src, advance=bar.step("noise + inverse transform",
                                                                  plan.coefficients, "coef"))
    bar.close()
    return release


def privelet_counts(plan: PriveletPlan, counts: np.ndarray, src: NoiseSource,
                    advance: Callable[[int], None] | None = None) -> GridRelease:
    """The plan's wavelet noise on ``counts`` (the exact counts shaped as the plan's attributes:
    float64, or int64 for exact noise; consumed) -> the release.  No data is read here.  The
    compiled kernels run only if the plan says so (:attr:`~polars_dp.plans.Plan.compiled_kernels`)."""
    attrs, transformed = plan.attributes, plan.transformed_mask
    with compiled.numpy_only(not plan.compiled_kernels):
        if plan.noise == "exact":
            counts = add_wavelet_noise_exact(counts, attrs, transformed, Fraction(plan.scale), src,
                                             advance=advance)
        else:
            add_wavelet_noise(counts, attrs, transformed, plan.noise_scale, src, advance=advance)
    return GridRelease(counts, attrs, noise_scale=plan.noise_scale, seeded=src.seeded, plan=plan)


@mechanism(PriveletPlan, run_privelet)
def privelet(frame: Any, attributes: Attribute | Iterable[Attribute], *, epsilon: float,
             untransformed: str | Attribute | Iterable[str | Attribute] = ...,
             workload: Workload = ..., strategy: Literal["workload"] | None = ...,
             neighbours: Neighbours = ..., seed: SeedLike = ..., on_out_of_domain: OnOutOfDomain = ...,
             nulls: Nulls = ..., count_column: str | None = ..., noise: NoiseKind = ...,
             progress: bool | None = ..., privacy_unit: Rows | None = ...) -> GridRelease:
    """Release the frequency matrix of ``attributes`` with Privelet (or Privelet+) noise:
    ``Lap(lambda)`` per HN coefficient, ``lambda = 2 rho / epsilon`` under ``replace``, ``rho /
    epsilon`` under ``add_remove`` (``k`` times that with a privacy unit of ``k`` rows).

    With ``noise="exact"``: lattice coefficients + discrete Laplace (module docstring).

    The release's ``noise_scale`` is ``lambda``; ``params`` records ``rho``, the
    ``transformed`` and ``untransformed`` columns and ``untransformed_auto``.  Its mechanism
    is ``"privelet"``, or ``"privelet+"`` when some attribute is untransformed, or ``"basic"``
    when none is transformed (then the release is exactly :func:`polars_dp.basic`'s, and
    ``params["note"]`` says why).

    >>> import polars as pl, polars_dp as pdp
    >>> df = pl.DataFrame({"age": [23, 35, 35, 61]})
    >>> release = pdp.privelet(df, [pdp.Ordinal("age", 0, 99, width=10)], epsilon=1.0)
    >>> release.params["rho"], release.noise_scale   # rho = 1 + log2(16): 10 cells padded to 16
    (5, 10.0)
    """


__all__ = ["add_wavelet_noise", "auto_untransformed", "mechanism_name", "privelet", "privelet_rho",
           "privelet_counts", "privelet_scale", "resolve_untransformed", "run_privelet"]
