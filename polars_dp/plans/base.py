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

import importlib
import pkgutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar

from polars_dp import compiled
from polars_dp.domains.privacy_unit import Rows
from polars_dp.domains.size import check_domain_size
from polars_dp.errors import ParameterError, PolarsDPError, ReleaseFormatError
from polars_dp.noise import Neighbours, NoiseKind, SeedLike, check_scale, histogram_sensitivity, noise_params
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


def recorded_rules(params: Mapping[str, Any]) -> dict[str, str]:
    """Every row rule a record states (``"raise"``, the default, where it records none)."""
    return {rule: params.get(rule, "raise") for rule in ROW_RULES}


def recorded_epsilons(params: Mapping[str, Any]) -> tuple[float | None, dict[str, float]]:
    """``(epsilon_effective, {part's epsilon_effective: value})`` of a record's exact scales
    (:func:`exact_fields`): the whole release's when one scale is recorded without prefix
    (``None`` when not), and each prefixed part's."""
    key = "epsilon_effective"
    return params.get(key), {k: v for k, v in params.items() if k.endswith(key) and k != key}


#: A :class:`Field` value that leaves the entry out of the record.
OMIT: Any = object()


@dataclass(frozen=True)
class Field:
    """One entry of a plan's record (a release's ``params``), declared once by the plan class.

    ``key`` the entry's name; ``value(plan, data)`` its value (:data:`OMIT`: not recorded), or
    ``None`` for an entry only the data decides, which the runner hands to :meth:`Plan.record`
    (and a reader takes from the file); ``scale``: the entry follows from epsilon (a reader
    compares it after the inputs); ``keys``: a group of entries (``value`` gives a mapping of
    them, e.g. :func:`exact_fields`), not one; ``stated``: the entry is the one Laplace scale
    the release states (:meth:`Plan.stated_scale`); ``option``: the plan option a reader rebuilds
    from the entry (:meth:`Plan.options_from_record`)."""

    key: str
    value: Callable[[Any, Mapping[str, Any]], Any] | None = None
    scale: bool = False
    keys: tuple[str, ...] = ()
    stated: bool = False
    option: str = ""

    @property
    def names(self) -> tuple[str, ...]:
        return self.keys or (self.key,)


def exact_fields(prefix: str, sensitivity: Callable[[Any], Any], scale: Callable[[Any], Any]) -> Field:
    """The entries of one exact noise scale (:func:`~polars_dp.noise.noise_params`: the rational
    scale and the epsilon it spends), for exact noise only."""
    return Field(f"{prefix}exact", lambda p, d: noise_params(sensitivity(p), scale(p), p.noise, prefix),
                 scale=True, keys=(f"{prefix}noise_scale_exact", f"{prefix}epsilon_effective"))


#: The entries of how the input was read (:meth:`Plan.input_params`).
INPUTS = Field("inputs", lambda p, d: p.input_params(), keys=("privacy_unit", *ROW_RULES))


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
    #: The paper behind each of :attr:`release_mechanisms` (the release card cites it; a test
    #: refuses a registered mechanism without one).
    papers: ClassVar[Mapping[str, str]] = {}
    data_independent: ClassVar[bool] = False
    unknown_before_data: ClassVar[str] = ""
    #: The entries of the record (:meth:`record`), in the order a release writes them.
    record_fields: ClassVar[tuple[Field, ...]] = ()
    #: The value an entry giving an option had in a record written before it was recorded.
    record_defaults: ClassVar[Mapping[str, Any]] = {}

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

    @classmethod
    def make(cls, *args: Any, **options: Any) -> Plan:
        """The plan these arguments describe, what ``pdp.plan(name, ...)`` and the mechanism
        function build: ``cls(*args, **options)`` (a grid plan with ``strategy="workload"``
        the least-error grid plan, which may be of another class:
        :meth:`polars_dp.plans.grid.GridPlan.make`)."""
        return cls(*args, **options)

    def _calibrate(self) -> None:
        """Compute the scales and the budget split, refusing what the public inputs make
        impossible (subclasses)."""

    def working_size(self) -> dict[str, Any] | None:
        """The arrays running the plan allocates whatever the data (the arguments of
        :func:`~polars_dp.domains.size.check_domain_size`: ``shape``, ``bytes_per_cell`` and how
        the message words them), or None where only the data decides the sizes (subclasses)."""
        return None

    def check_size(self) -> None:
        """DomainTooLargeError, from public inputs only (the declaration and the machine's
        memory), when running the plan would need more memory than the machine has: an
        accountant asks before it charges, and the runner before it reads a row."""
        size = self.working_size()
        if size is not None:
            check_domain_size(**size)

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

    # ------------------------------------------------------------------ record
    @classmethod
    def record_keys(cls) -> tuple[str, ...]:
        """Every entry a record of this class may hold."""
        return tuple(k for f in cls.record_fields for k in f.names)

    @classmethod
    def data_keys(cls) -> tuple[str, ...]:
        """The entries only the data decides (given to :meth:`record`)."""
        return tuple(f.key for f in cls.record_fields if f.value is None)

    def record_entries(self, data: Mapping[str, Any]) -> dict[str, tuple[Any, bool]]:
        """``key -> (value, scale)`` of :meth:`record`."""
        unknown = set(data) - set(self.data_keys()) if data else ()
        if unknown:
            raise ValueError(f"{self.name}: {sorted(unknown)} are not data entries of its record")
        out: dict[str, tuple[Any, bool]] = {}
        for f in self.record_fields:
            if f.value is None:
                if f.key in data:
                    out[f.key] = (data[f.key], False)
            elif f.keys:
                out.update((k, (v, f.scale)) for k, v in f.value(self, data).items())
            elif (value := f.value(self, data)) is not OMIT:
                out[f.key] = (value, f.scale)
        return out

    def record(self, **data: Any) -> dict[str, Any]:
        """The release's ``params``: every entry of :attr:`record_fields` in order, those only the
        data decides given as ``data`` (e.g. PrivTree sequences' ``capped``)."""
        return {k: v for k, (v, _) in self.record_entries(data).items()}

    @classmethod
    def options_from_record(cls, params: Mapping[str, Any]) -> dict[str, Any]:
        """The options (domain, epsilon, neighbours and noise aside) that made a record: the entry of
        each :class:`Field` naming an ``option`` (:attr:`record_defaults` where the record has
        none; subclasses add what needs more)."""
        return {f.option: params[f.key] if f.key in params or f.key not in cls.record_defaults
                else cls.record_defaults[f.key] for f in cls.record_fields if f.option}

    # What a release reads of its record, asked of the class that declares it (a release built
    # by hand without a plan of a registered mechanism reads nothing: :class:`Plan` itself).
    @classmethod
    def stated_scale(cls, params: Mapping[str, Any]) -> float | None:
        """The one Laplace scale a record of this class states (its :class:`Field` marked
        ``stated``; per wavelet coefficient where :meth:`transformed_axes`), if any."""
        for f in cls.record_fields:
            if f.stated and f.key in params:
                return float(params[f.key])
        return None

    @classmethod
    def transformed_axes(cls, params: Mapping[str, Any]) -> tuple[str, ...]:
        """The columns a record's wavelet transform ran along (subclasses; none by default)."""
        return ()

    @classmethod
    def note(cls, params: Mapping[str, Any]) -> str | None:
        """What a record says of itself for people (subclasses; none by default)."""
        return None

    def restored(self, params: Mapping[str, Any]) -> Plan:
        """This plan with the free public choices its record states and its options cannot
        carry (subclasses; e.g. Privelet's workload-chosen untransformed set)."""
        return self

    def check_data(self, params: Mapping[str, Any]) -> None:
        """Refuse a recorded value only the data decides that no release of this plan holds
        (:class:`ReleaseFormatError` naming it; subclasses)."""

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


def discover(name: str, path: Iterable[str]) -> None:
    """Import every module of the package ``name`` (its ``__path__``): the registries find the
    plans, runners and release types that register themselves, and adding one edits no package
    ``__init__``."""
    for module in pkgutil.iter_modules(path):
        importlib.import_module(f"{name}.{module.name}")


def plan_class(mechanism: str) -> type[Plan]:
    if mechanism not in REGISTRY:
        raise ParameterError(f"unknown mechanism {mechanism!r}; use one of {', '.join(REGISTRY)}",
                             parameter="mechanism")
    return REGISTRY[mechanism].plan_class


def known_mechanisms() -> tuple[str, ...]:
    """Every mechanism name a release may record (validation of files)."""
    return tuple(dict.fromkeys(m for e in REGISTRY.values() for m in e.release_mechanisms))


def paper_of(mechanism: str) -> str:
    """The citation of a release ``mechanism`` (``""`` when no registered plan cites one)."""
    papers = [e.plan_class.papers for e in REGISTRY.values() if mechanism in e.plan_class.papers]
    return papers[0][mechanism] if papers else ""


#: ``params`` entries any release may hold beside its plan's record, added after the mechanism: the
#: post-processing steps (checked against the counts by
#: :func:`polars_dp.releases.postprocess.verify_postprocessed`), a :class:`~polars_dp.Session`'s
#: ledger and the command line's copy of ``seeded`` (both checked against the header by
#: :func:`polars_dp.releases.integrity.check_record`).
ANNOTATIONS = ("postprocessed", "ledger", "seeded")


def record_class(mechanism: str, params: Mapping[str, Any]) -> type[Plan]:
    """The registered plan class of a release recording ``mechanism`` and ``params``: the first
    whose releases record that mechanism and whose record holds every entry (a Privelet release
    that transformed no axis records ``basic`` with Privelet's entries)."""
    entries = set(params) - set(ANNOTATIONS)
    candidates = [e.plan_class for e in REGISTRY.values() if mechanism in e.release_mechanisms]
    if not candidates:
        raise ReleaseFormatError(f"release metadata field 'mechanism' is {mechanism!r}, not a known "
                                 f"mechanism {known_mechanisms()}")
    for cls in candidates:
        if entries <= set(cls.record_keys()):
            return cls
    unknown = sorted(entries - set(candidates[0].record_keys()))[0]
    raise ReleaseFormatError(f"release metadata field 'params' has an entry {unknown!r} that a "
                             f"{mechanism!r} release does not record: the file was edited")


def from_record(header: Mapping[str, Any], params: Mapping[str, Any], domain: Mapping[str, Any]) -> Plan:
    """The plan a release was made under, rebuilt from its header (``mechanism``, ``epsilon``,
    ``neighbours``, ``noise``), its record ``params`` and its public ``domain`` (the options the
    release type stores: attributes, box or alphabet); a record that no plan accepts (a missing
    entry, one of the wrong type or value) is a :class:`ReleaseFormatError` naming the entry."""
    cls = record_class(header["mechanism"], params)
    try:
        options = {**domain, "epsilon": header["epsilon"], "noise": header.get("noise", "float"),
                   **recorded_inputs(params), **cls.options_from_record(params)}
        if "neighbours" in {o.name for o in cls.options_table}:
            options["neighbours"] = header["neighbours"]
        return cls(**options).restored(params)
    except KeyError as exc:
        raise ReleaseFormatError(f"release metadata field 'params' has no {exc.args[0]!r} entry, which a "
                                 f"{header['mechanism']!r} release records: the file was edited") from None
    except (PolarsDPError, TypeError, ValueError) as exc:
        if isinstance(exc, ReleaseFormatError):
            raise
        key = getattr(exc, "parameter", None)
        name = f"params.{key}" if key else "params"
        raise ReleaseFormatError(f"release metadata field {name!r} is invalid: {exc}") from None


__all__ = ["ANNOTATIONS", "COMPILED_FROM", "INPUTS", "OMIT", "REGISTRY", "Entry", "Field", "Plan",
           "discover", "exact_fields", "from_record", "known_mechanisms", "paper_of", "plan_class",
           "record_class", "recorded_epsilons", "recorded_inputs", "recorded_rules", "register_plan",
           "register_runner"]
