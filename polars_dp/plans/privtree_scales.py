"""PrivTree's decision scales ``lambda`` and ``delta`` (PrivTree paper Sec. 3, Theorem 4.1).

Public calibration only (no randomness): the split rule that draws with them lives in
:mod:`polars_dp.mechanisms.privtree_rule`, whose docstring holds the exact-decision argument
(``lambda`` rounded *up* to the ``2^-GRID_BITS`` grid from the exact rational, ``delta``
rounded up from a rigorous upper bound of ``lambda ln(beta)``, ``theta`` to the nearest grid
point).
"""

from __future__ import annotations

import math
from decimal import Context, Decimal
from fractions import Fraction

from polars_dp.errors import ParameterError
from polars_dp.noise import GRID_BITS, check_epsilon, check_noise, grid_ceil


def privtree_lambda(eps_tree: float | Fraction, fanout: int, *, group: int = 1,
                    noise: str = "float") -> float:
    """Noise scale of the split decisions: ``(2 beta - 1) group / ((beta - 1) eps_tree)`` (PrivTree Sec. 3;
    ``group`` is the group-privacy factor).  ``noise="exact"``: the exact rational rounded up to
    the ``2^-GRID_BITS`` grid, returned as the (exactly representable) float."""
    if not isinstance(eps_tree, Fraction):
        check_epsilon(eps_tree, "eps_tree")
    if check_noise(noise) == "exact":
        return _float_up(grid_ceil(Fraction(2 * fanout - 1) * group / ((fanout - 1) * Fraction(eps_tree))))
    return (2 * fanout - 1) / ((fanout - 1) * (float(eps_tree) / group))


def _float_up(value: Fraction) -> float:
    """The least float ``>= value``: a grid point itself below ``2^(53 - GRID_BITS)``; above, a
    float whose ulp is a multiple of the grid step, so still on the grid (never rounded down)."""
    out = float(value)
    return out if Fraction(out) >= value else math.nextafter(out, math.inf)


def _ln_bound(fanout: int, side: int) -> Fraction:
    """A rational ``>= ln(fanout)`` (``side`` 1) or ``<= ln(fanout)`` (``side`` -1): the correctly
    rounded 40-digit ``ln`` plus or minus one unit of its last digit."""
    return Fraction(Context(prec=40).ln(Decimal(fanout))) + side * Fraction(1, 10**38)


def privtree_delta(lam: float, fanout: int, *, noise: str = "float") -> float:
    """Depth bias per level: ``delta = lambda * ln(beta)`` (gamma = ln beta, PrivTree Sec. 3).
    ``noise="exact"``: rounded up to the grid from an upper bound of ``ln(beta)``."""
    if check_noise(noise) == "exact":
        return _float_up(grid_ceil(Fraction(lam) * _ln_bound(fanout, 1)))
    return lam * math.log(fanout)


def check_theta(theta: float) -> float:
    """The split threshold: a finite number >= 0.

    Any threshold keeps the privacy guarantee, but below 0 even empty nodes split with
    probability above 1/2 at every depth, so the tree grows exponentially until the
    resolution limit; such thresholds are refused.
    """
    try:
        value = float(theta)
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise ParameterError(f"theta must be a finite number >= 0 (the paper uses 0), got {theta!r}")
    return value


#: Relative shortfall of ``delta`` below ``lambda ln(beta)`` allowed to the float sampler's
#: ``lambda * math.log(beta)`` (float rounding; exact noise rounds ``delta`` up and gets none).
FLOAT_DELTA_SLACK = Fraction(1, 10**12)


def check_decisions(lam: float, delta: float, fanout: int, noise: str) -> None:
    """The decisions' privacy condition: ``lambda > 0`` and ``delta >= lambda ln(beta)`` (PrivTree
    Thm. 3.1 with ``gamma = delta / lambda >= ln beta``).  A plan that breaks it is a calibration
    bug, never an outcome of the data: refused before any data is read (with ``delta`` too small
    the tree also stops shrinking the split probability with depth and grows without bound)."""
    bound = Fraction(lam) * _ln_bound(fanout, -1)
    if check_noise(noise) == "float":
        bound *= 1 - FLOAT_DELTA_SLACK
    if not (lam > 0 and Fraction(delta) >= bound):
        raise AssertionError(f"PrivTree decisions need lambda > 0 and delta >= lambda ln({fanout}); "
                             f"got lambda={lam!r}, delta={delta!r}")


def grid_theta(theta: float) -> float:
    """``theta`` rounded to the nearest point of the ``2^-GRID_BITS`` grid (exact decisions)."""
    return float(Fraction(round(Fraction(theta) * (1 << GRID_BITS)), 1 << GRID_BITS))


def privtree_sequence_params(alphabet_size: int, max_length: int, eps_tree: float | Fraction,
                             noise: str = "float", per_unit: int = 1) -> tuple[float, float]:
    """``(lambda, delta)`` of the sequence PrivTree (PrivTree paper Theorem 4.1, Sec. 4).

    ``beta = |I| + 1``, ``l_top = max_length + 1`` (end marker included):
    ``lambda = (2 beta - 1) / (beta - 1) * l_top / eps_tree`` and ``delta = lambda * ln(beta)``.
    The ``l_top`` factor is group privacy: adding/removing one sequence adds/removes at most
    ``l_top`` (context, symbol) pairs, each changing the scores of one root-to-leaf path by
    at most 1 (PrivTree Sec. 3, monotone scores).  ``per_unit`` sequences per individual (the
    privacy unit's ``max_per``) make the group ``per_unit l_top``.  ``noise="exact"``: both on
    the ``2^-20`` grid, rounded safely (see above).
    """
    beta = alphabet_size + 1
    lam = privtree_lambda(eps_tree, beta, group=(max_length + 1) * per_unit, noise=noise)
    delta = privtree_delta(lam, beta, noise=noise)
    check_decisions(lam, delta, beta, noise)
    return lam, delta


def decisions_epsilon(lam: float, fanout: int, group: int = 1) -> Fraction:
    """What PrivTree's split decisions spend with scale ``lam``: ``(2 beta - 1) group / ((beta -
    1) lam)`` exactly (the privacy theorem solved for epsilon; valid because ``delta >= lam
    ln(beta)``, see :func:`privtree_delta`).  At most ``eps_tree`` since ``lam`` is rounded up."""
    return Fraction(2 * fanout - 1) * group / ((fanout - 1) * Fraction(lam))


__all__ = ["check_decisions", "check_theta", "decisions_epsilon", "grid_theta", "privtree_delta",
           "privtree_lambda", "privtree_sequence_params"]
