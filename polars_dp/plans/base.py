"""The ``Plan`` base and the mechanism registry: one entry per mechanism.

A plan is everything a release is decided by *before* the data is read: the public domain,
``epsilon``, the neighbour relation and the validated options, with the exact scales and
budget split computed from them.  Building one reads no data and draws no noise.  Running it
(``plan.run(frame)``) counts and releases through the mechanism's runner, which the
mechanism module registers (:func:`register_runner`): plans sit below releases and
mechanisms in the layering, so a release file is verified by rebuilding its plan
(:func:`rebuild`) without any mechanism code.

One registry entry per mechanism (:data:`REGISTRY`) holds its plan class, its option table
(:mod:`polars_dp.plans.options`), the mechanism names its releases record, the shape of its
domain declaration (for the command line) and its runner; ``df.dp.*``, ``Session`` methods,
the command line's mechanism list and option checks and the known-mechanism list of release
files are generated from it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar

from polars_dp import compiled
from polars_dp.domains.privacy_unit import Rows
from polars_dp.errors import ParameterError
from polars_dp.noise import Neighbours, NoiseKind, SeedLike, check_scale, histogram_sensitivity
from polars_dp.plans.noise_model import NoiseModel
from polars_dp.plans.options import PROGRESS, SEED, Option, bind_options, plan_options

#: Noisy values from which a release runs the compiled kernels (numba installed).  Below it
#: they save at most about 0.1 s (census-shaped Privelet: 1.1e7 coefficients 0.25 s against
#: 0.30 s, 1.1e6 no difference), while importing numba and loading them costs a fresh process
#: 0.6-0.8 s of CPU, taken from the engine that counts.  Both give the same bits.  The one
#: threshold of compiled kernels, shared with a direct noise request (``compiled.SIZED_FROM``).
COMPILED_FROM = compiled.SIZED_FROM


#: The row-wise input rules a plan may declare (each ``"raise"`` by default).
ROW_RULES = ("nulls", "on_out_of_domain")


def recorded_inputs(params: Mapping[str, Any]) -> dict[str, Any]:
    """The plan options :meth:`Plan.input_params` recorded in ``params`` (for a reader)."""
    return {"privacy_unit": params.get("privacy_unit"),
            **{rule: params[rule] for rule in ROW_RULES if rule in params}}


class Plan:
    """A release decided from public inputs only; see :func:`polars_dp.plan`.

    ``options`` the validated keywords (defaults filled in); ``epsilon``, ``neighbours`` and
    ``noise``; ``epsilon_effective`` the epsilon actually spent (exact noise rounds scales up);
    ``noise_model`` the release's noise (``None`` when the data decides it);
    ``data_independent`` whether the whole noise law is known before the data;
    ``unknown_before_data`` what part of the error the plan cannot know.
    """

    #: Registry key (the mechanism function's name).
    name: ClassVar[str] = ""
    #: Names of the positional arguments after the data, in order.
    positional: ClassVar[tuple[str, ...]] = ()
    #: Option table, positional arguments included, in the order of the mechanism function's
    #: signature (:mod:`polars_dp.plans.options`: the one home of every option).
    options_table: ClassVar[tuple[Option, ...]] = ()
    #: ``"grid"``, ``"points"`` or ``"sequences"``: the shape of the domain declaration.
    shape: ClassVar[str] = ""
    #: Mechanism names this plan's releases may record.
    release_mechanisms: ClassVar[tuple[str, ...]] = ()
    data_independent: ClassVar[bool] = False
    unknown_before_data: ClassVar[str] = ""
    #: Marks plans for code that does not import this module.
    is_plan: ClassVar[bool] = True

    def __init__(self, *args: Any, **options: Any):
        if len(args) > len(self.positional):
            raise ParameterError(
                f"{self.name} takes {len(self.positional)} positional argument(s) after the data "
                f"({', '.join(self.positional) or 'none'}); pass the others by keyword")
        for name, value in zip(self.positional, args, strict=False):
            if name in options:
                raise ParameterError(f"{self.name} got {name} twice (positionally and by keyword)",
                                     parameter=name)
            options[name] = value
        self.options: dict[str, Any] = bind_options(self.name, self.options_table, options)
        self.epsilon: float = self.options["epsilon"]
        self.neighbours: Neighbours = self.options.get("neighbours", "add_remove")
        self.noise: NoiseKind = self.options.get("noise", "exact")
        self.privacy_unit: Rows = self.options.get("privacy_unit", Rows())
        if self.privacy_unit.truncates and self.options.get("count_column") is not None:
            raise ParameterError("privacy_unit with id_column cannot bound pre-aggregated rows "
                                 "(count_column): pass the individual rows, or Rows()",
                                 parameter="privacy_unit")
        self._calibrate()
        if self.noise == "exact":
            self._check_draws()

    def _calibrate(self) -> None:
        """Compute the scales and the budget split, refusing what the public inputs make
        impossible (subclasses)."""

    def exact_draws(self) -> list[tuple[str, Fraction, int]]:
        """``(part, largest scale drawn, limit)`` of every part of the exact noise (subclasses):
        :data:`~polars_dp.noise.MAX_COUNT_SCALE` (``2^45``) for noise added to counts held in
        float64, :data:`~polars_dp.noise.MAX_SCALE` (``2^56``) for int64 lattice draws."""
        return []

    def _check_draws(self) -> None:
        """Refuse, from the public scales alone and before any data or budget, a part whose
        scale exceeds what its samples may hold (the samplers' own check,
        :func:`~polars_dp.noise.check_scale`, which they repeat at draw time)."""
        for part, scale, limit in self.exact_draws():
            try:
                check_scale(scale.numerator, scale.denominator, limit)
            except ParameterError as exc:
                raise ParameterError(f"{self.name} ({part}): {exc}", parameter="epsilon") from None

    # ------------------------------------------------------------------ facts
    @property
    def count_sensitivity(self) -> int:
        """L1 sensitivity of a vector of counts under the plan's neighbours and privacy unit:
        ``Delta_row k`` (``Delta_row`` 1 under ``add_remove``, 2 under ``replace``; ``k`` the
        unit's ``max_per``, 1 for one row per individual; :mod:`polars_dp.domains.privacy_unit`)."""
        return histogram_sensitivity(self.neighbours) * self.privacy_unit.factor

    def input_params(self) -> dict[str, Any]:
        """What a release records of how its input was read, each entry only when it is not the
        default: the privacy unit (``params["privacy_unit"]``, when an identifier is declared) and
        the row rules the curator chose (``nulls``, ``on_out_of_domain``: they also decide whether
        UG/AG may use the row count as is).  A reader rebuilds the plan with them."""
        out: dict[str, Any] = {}
        if self.privacy_unit.truncates:
            out["privacy_unit"] = self.privacy_unit.record()
        for rule in ROW_RULES:
            if self.options.get(rule, "raise") != "raise":
                out[rule] = self.options[rule]
        return out

    @property
    def epsilon_effective(self) -> float:
        return self.epsilon

    @property
    def epsilon_spent(self) -> Fraction:
        """The exact epsilon the release spends, what an accountant charges: ``sum_i Delta_i /
        b_i`` over the parts of the release (each a (discrete) Laplace mechanism of L1
        sensitivity ``Delta_i`` and scale ``b_i``, the exact rational on the ``2^-20`` grid,
        rounded up from ``Delta_i / epsilon_i``; PrivTree decisions: ``(2 beta - 1) g / ((beta
        - 1) lambda)``), so at most ``epsilon`` (see :mod:`polars_dp.budget`).  Float noise
        (``noise="float"``) is not exactly DP: the exact value of the float ``epsilon``."""
        if self.noise == "float":
            return Fraction(self.epsilon)
        spent = self._exact_spent()
        if not 0 < spent <= Fraction(self.epsilon):  # a calibration bug, never a data outcome
            raise AssertionError(f"{self.name}: spent {spent} outside (0, epsilon={self.epsilon!r}]")
        return spent

    def _exact_spent(self) -> Fraction:
        """``sum_i Delta_i / b_i`` of exact noise (subclasses); the default is ``epsilon``."""
        return Fraction(self.epsilon)

    @property
    def noise_model(self) -> NoiseModel | None:
        return None

    @property
    def release_mechanism(self) -> str:
        return self.release_mechanisms[0]

    @property
    def noisy_values(self) -> int | None:
        """How many values get noise, when the public inputs fix it (None: the data decides)."""
        return None

    @property
    def compiled_kernels(self) -> bool:
        """Whether the release runs the compiled kernels where numba is installed: from
        :data:`COMPILED_FROM` noisy values, or when the data decides their number.  Public
        inputs only; either way the release is the same."""
        n = self.noisy_values
        return n is None or n >= COMPILED_FROM

    def arguments(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """``(args, kwargs)`` that call the mechanism function as this plan (data, seed and
        progress aside)."""
        args = tuple(self.options[p] for p in self.positional)
        kwargs = {k: v for k, v in self.options.items() if k not in self.positional}
        return args, kwargs

    # ------------------------------------------------------------------ running
    def run(self, frame: Any, *, seed: SeedLike = SEED.default,
            progress: bool | None = PROGRESS.default) -> Any:
        """Count ``frame`` and release under this plan (the data is read here, once), with the
        numpy kernels unless :attr:`compiled_kernels`."""
        entry = REGISTRY[self.name]
        if entry.runner is None:
            raise ParameterError(f"no runner is registered for {self.name!r}; import polars_dp")
        with compiled.numpy_only(not self.compiled_kernels):
            return entry.runner(self, frame, seed=seed, progress=progress)

    def __repr__(self) -> str:
        def text(value: Any) -> str:
            height = getattr(value, "height", None)
            return f"<{height} queries>" if isinstance(height, int) else repr(value)

        shown = ", ".join(f"{k}={text(v)}" for k, v in self.options.items()
                          if k not in self.positional and v is not None
                          and not (k == "privacy_unit" and not v.truncates))  # the default unit
        return f"{type(self).__name__}({shown})"


@dataclass
class Entry:
    """One mechanism: its plan class, runner and public function."""

    name: str
    plan_class: type[Plan]
    runner: Callable[..., Any] | None = None
    function: Callable[..., Any] | None = None

    @property
    def options(self) -> tuple[Option, ...]:
        """The plan's options (``plan.run``'s seed and progress left out)."""
        return plan_options(self.plan_class.options_table)

    @property
    def shape(self) -> str:
        return self.plan_class.shape

    @property
    def release_mechanisms(self) -> tuple[str, ...]:
        return self.plan_class.release_mechanisms


#: Mechanism name -> entry, in registration order.
REGISTRY: dict[str, Entry] = {}


def register_plan(cls: type[Plan]) -> type[Plan]:
    """Class decorator: one registry entry for ``cls.name``."""
    REGISTRY[cls.name] = Entry(cls.name, cls)
    return cls


def register_runner(name: str, runner: Callable[..., Any], function: Callable[..., Any]) -> None:
    """Attach the mechanism's ``runner(plan, frame, *, seed, progress)`` and its public function
    (generated from the plan's table: :func:`polars_dp.mechanisms.options.mechanism`)."""
    entry = REGISTRY[name]
    entry.runner, entry.function = runner, function


def plan_class(mechanism: str) -> type[Plan]:
    if mechanism not in REGISTRY:
        raise ParameterError(f"unknown mechanism {mechanism!r}; use one of {', '.join(REGISTRY)}",
                             parameter="mechanism")
    return REGISTRY[mechanism].plan_class


def known_mechanisms() -> tuple[str, ...]:
    """Every mechanism name a release may record (validation of files)."""
    return tuple(dict.fromkeys(m for e in REGISTRY.values() for m in e.release_mechanisms))


def plan_for_release(mechanism: str) -> type[Plan] | None:
    """The plan class whose releases record ``mechanism``."""
    for entry in REGISTRY.values():
        if mechanism in entry.release_mechanisms:
            return entry.plan_class
    return None


__all__ = ["COMPILED_FROM", "REGISTRY", "Entry", "Plan", "known_mechanisms", "plan_class",
           "plan_for_release", "register_plan", "register_runner"]
