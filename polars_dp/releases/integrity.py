"""Checks that a release read from a file (or a DuckDB table) is what its metadata declares.

:func:`polars_dp.read_release` answers only after the release class has verified

* every metadata field's type (a malformed field is a :class:`ReleaseFormatError` naming it);
* ``epsilon`` (a finite number > 0), ``neighbours`` (``"replace"`` / ``"add_remove"``) and
  ``mechanism`` (one of :data:`KNOWN_MECHANISMS`; the list validates names only, no
  behaviour depends on it);
* the derived parameters, recomputed from the declared ones (the noise scale from epsilon,
  the neighbour relation's sensitivity and ``rho``; see each release's ``from_arrow``), with
  :func:`check_noise_scale` as the single tolerance rule; every entry of ``params`` accounted
  for by :func:`check_record` (equal to the record of the plan rebuilt from the file, the values
  only the data decides as the plan checks them; any other entry is refused);
* the cells or leaves, located by their label columns rather than by row order (a reordered
  table is restored exactly; a filtered or duplicated one is refused);
* the ``checksum`` entry: ``sha256`` over the metadata text and the canonical payload
  (:func:`payload_checksum`), always required (:func:`verify_checksum`).  It detects
  accidental corruption, edits and truncation; it is not a signature (whoever edits a file can
  recompute it): tamper evidence is the optional keyed signature over it
  (:mod:`polars_dp.releases.signing`).

A table without a checksum (a file written by 0.1.0, before checksums, or one whose checksum
was removed) is read only when the caller opts in by name, ``read_release(path,
unverified=True)``; the release then says so (``release.verified is False``, its ``repr``), and
whatever is written from it records the entry ``unverified`` (:data:`UNVERIFIED_KEY`), under a
fresh checksum, so that a re-written copy never passes for a verified release: reading it again
needs ``unverified=True`` too.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from polars_dp.errors import ReleaseFormatError
from polars_dp.noise import GRID_BITS, NEIGHBOURS
from polars_dp.plans import known_mechanisms
from polars_dp.plans.base import ANNOTATIONS

#: Mechanism names a release file may declare (validation only; no behaviour depends on them),
#: from the mechanism registry (:mod:`polars_dp.plans`).
KNOWN_MECHANISMS = known_mechanisms()

#: A recorded noise scale may exceed the one recomputed from the declared parameters by this
#: relative amount, or by one step of the ``2^-GRID_BITS`` grid: exact samplers round the scale
#: *up* to that grid (spending at most the declared epsilon), which is a large relative step for
#: tiny scales (huge epsilons); a smaller scale, or a larger one beyond both, is refused.
SCALE_ROUNDING = 1e-3
#: Relative slack for float arithmetic when comparing recomputed values.
RELATIVE_SLACK = 1e-9

CHECKSUM_KEY = "checksum"
#: The entry a release read with ``unverified=True`` records in everything written from it.
UNVERIFIED_KEY = "unverified"
#: The optional keyed signature over the checksum (:mod:`polars_dp.releases.signing`): the one
#: entry the checksum does not cover (it is computed after it).
SIGNATURE_KEY = "signature"
#: How a caller opts in to a release that cannot be verified (named in every refusal).
OPT_IN = "unverified=True"


def field(meta: Mapping[str, str], key: str, parse: Callable[[Any], Any] = lambda x: x, *,
          json_value: bool = True, default: Any = ...) -> Any:
    """``parse(value)`` of metadata entry ``key`` (JSON-decoded unless ``json_value=False``);
    any failure is a ReleaseFormatError naming the field."""
    if key not in meta:
        if default is not ...:
            return default
        raise ReleaseFormatError(f"release metadata has no {key!r} entry")
    text = meta[key]
    try:
        return parse(json.loads(text) if json_value else text)
    except ReleaseFormatError:
        raise
    except Exception as exc:  # any decoding or declaration error of that one field
        raise ReleaseFormatError(
            f"release metadata field {key!r} is malformed ({text[:80]!r}): {exc}") from None


def positive_number(value: Any, name: str = "value") -> float:
    """A finite number > 0 (not a bool), else ReleaseFormatError."""
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            or value <= 0):
        raise ReleaseFormatError(
            f"release metadata field {name!r} must be a finite number > 0, got {value!r}")
    return float(value)


def check_epsilon(value: Any) -> float:
    return positive_number(value, "epsilon")


def check_neighbours(value: Any) -> str:
    if value not in NEIGHBOURS:
        raise ReleaseFormatError(
            f"release metadata field 'neighbours' must be one of {NEIGHBOURS}, got {value!r}")
    return value


def check_mechanism(value: Any) -> str:
    if value not in KNOWN_MECHANISMS:
        raise ReleaseFormatError(
            f"release metadata field 'mechanism' is {value!r}, not a known mechanism {KNOWN_MECHANISMS}")
    return value


def check_noise_scale(name: str, recorded: float, nominal: float) -> None:
    """The one tolerance rule for a recorded noise scale against the scale recomputed from the
    declared epsilon, sensitivity and mechanism parameters:
    ``nominal (1 - RELATIVE_SLACK) <= recorded <= max(nominal (1 + SCALE_ROUNDING),
    nominal (1 + RELATIVE_SLACK) + 2^-GRID_BITS)``.

    A smaller recorded scale would overstate the privacy and understate every error bar; a
    larger one is accepted only as the documented rounding up to a lattice.
    """
    upper = max(nominal * (1 + SCALE_ROUNDING), nominal * (1 + RELATIVE_SLACK) + 2.0**-GRID_BITS)
    if not (nominal * (1 - RELATIVE_SLACK) <= recorded <= upper):
        raise ReleaseFormatError(
            f"release metadata field {name!r} is {recorded!r} but the declared parameters give "
            f"{nominal!r} (epsilon, neighbours and the mechanism's parameters); the file was edited "
            "or is corrupt"
        )


def check_equal(name: str, recorded: Any, expected: Any) -> None:
    """``recorded == expected`` (numbers within RELATIVE_SLACK; a flag is not a number), else
    ReleaseFormatError naming ``name``."""
    if isinstance(expected, float) or isinstance(recorded, float):
        ok = (isinstance(recorded, (int, float)) and not isinstance(recorded, bool)
              and math.isclose(recorded, expected, rel_tol=RELATIVE_SLACK, abs_tol=0.0))
    else:
        ok = recorded == expected and isinstance(recorded, bool) == isinstance(expected, bool)
    if not ok:
        raise ReleaseFormatError(
            f"release metadata field {name!r} is {recorded!r} but the declared parameters give "
            f"{expected!r}; the file was edited or is corrupt"
        )


def _check_value(name: str, recorded: Any, expected: Any) -> None:
    """:func:`check_equal`, list by list and element by element."""
    if isinstance(expected, (list, tuple)):
        if not isinstance(recorded, list) or len(recorded) != len(expected):
            raise ReleaseFormatError(f"release metadata field {name!r} is {recorded!r} but the declared "
                                     f"parameters give {list(expected)!r}; the file was edited or is corrupt")
        for j, (got, want) in enumerate(zip(recorded, expected, strict=True)):
            _check_value(f"{name}[{j}]", got, want)
        return
    check_equal(name, recorded, expected)


LEDGER_KEYS = ("total_epsilon", "neighbours", "entries")
#: What a session's ledger records besides, when it charges a ledger file: the dataset's name.
LEDGER_OPTIONAL = ("dataset",)


def _check_annotations(params: Mapping[str, Any], header: Mapping[str, Any]) -> None:
    if "seeded" in params:
        check_equal("params.seeded", params["seeded"], bool(header["seeded"]))
    ledger = params.get("ledger")
    if ledger is not None and not (isinstance(ledger, dict) and set(LEDGER_KEYS) <= set(ledger)
                                   and set(ledger) <= {*LEDGER_KEYS, *LEDGER_OPTIONAL}
                                   and isinstance(ledger.get("dataset", ""), str)
                                   and ledger["neighbours"] == header["neighbours"]
                                   and isinstance(ledger["entries"], list)):
        raise ReleaseFormatError(f"release metadata field 'params.ledger' must be a session ledger "
                                 f"{list(LEDGER_KEYS)} of the release's neighbour relation, got {ledger!r}")


def _scale_rank(key: str) -> int:
    """The order in which the values epsilon decides are compared: the budget split, then the
    noise scales, then what follows from them (PrivTree's ``lambda``, ...)."""
    return 0 if key.startswith("epsilon_") else 1 if "noise_scale" in key else 2


def check_record(plan: Any, header: Mapping[str, Any],
                 own: Callable[[Any], None] | None = None) -> None:
    """The one comparator of a release file with the plan rebuilt from it
    (:func:`polars_dp.plans.from_record`): the header's ``mechanism`` and ``neighbours`` are the
    plan's; the values only the data decides pass the plan's checks (``plan.check_data``); every
    entry of ``plan.record()`` (the data's values given as recorded) equals the file's
    (:func:`check_equal`, lists element by element), the inputs first, then the release type's
    own entries (``own(plan)``, e.g. a grid's ``noise_scale``), then the values epsilon decides
    (:func:`_scale_rank`).
    An entry that is neither the record's nor an :data:`ANNOTATIONS` entry is refused (no writer
    records it), and with exact noise every entry of the record must be present; files of the
    float sampler written before an entry was recorded may lack it."""
    params = header["params"]
    check_equal("mechanism", header["mechanism"], plan.release_mechanism)
    check_equal("neighbours", header["neighbours"], plan.neighbours)
    plan.check_data(params)
    entries = plan.record_entries({k: params[k] for k in plan.data_keys() if k in params})
    for key, (want, scale) in entries.items():  # the inputs, in the order the plan gives them
        if not scale and key in params:
            _check_value(f"params.{key}", params[key], want)
    if own is not None:
        own(plan)
    for key in sorted((k for k, (_, scale) in entries.items() if scale and k in params), key=_scale_rank):
        _check_value(f"params.{key}", params[key], entries[key][0])
    for key in params:
        if key not in entries and key not in ANNOTATIONS:
            raise ReleaseFormatError(f"release metadata field 'params' has an entry {key!r} that a "
                                     "release of these parameters does not record: the file was edited")
    missing = [k for k in entries if k not in params]
    if header.get("noise") == "exact" and missing:
        raise ReleaseFormatError(f"release metadata field 'params' has no {missing[0]!r} entry, which "
                                 "every release of these parameters records: the file was edited")
    _check_annotations(params, header)


def payload_checksum(metadata_text: Mapping[str, str], arrays: Iterable[np.ndarray]) -> str:
    """``sha256:<hex>`` of the metadata entries (sorted; ``checksum`` itself and the
    ``signature`` over it excluded) and the payload arrays in canonical order (C-contiguous,
    little-endian)."""
    h = hashlib.sha256()
    for key in sorted(metadata_text):
        if key not in (CHECKSUM_KEY, SIGNATURE_KEY):
            h.update(key.encode() + b"\0" + metadata_text[key].encode() + b"\0")
    for array in arrays:
        a = np.asarray(array)
        if a.dtype.kind in "biu":  # integers of any width hash alike (a reader may widen them)
            a = a.astype("<i8", copy=False)
        elif a.dtype.kind == "f":
            a = a.astype("<f8", copy=False)
        h.update(a.dtype.kind.encode() + str(a.shape).encode())
        h.update(np.ascontiguousarray(a).data)  # the buffer itself: no copy of a large payload
    return "sha256:" + h.hexdigest()


#: Metadata entries that every writer since checksums records and the 0.1.0 writer did not (the
#: library version alone cannot tell: it stayed "0.1.0" until 0.4.0, after checksums were added).
POST_CHECKSUM_KEYS = ("noise", "seeded", "format")
PRE_CHECKSUM_VERSIONS = ("0.1.0",)


def predates_checksums(metadata_text: Mapping[str, str]) -> bool:
    """Whether a table's metadata looks as if it was written before checksums: version 0.1.0
    and none of the entries (:data:`POST_CHECKSUM_KEYS`) that later writers always add.

    Anyone can make a file look so by deleting entries: this chooses a refusal's message and
    the checks a 0.1.0 writer could not pass (a sequence model's level sums), never whether a
    table without a checksum is accepted (only ``unverified=True`` does that)."""
    return (metadata_text.get("version") in PRE_CHECKSUM_VERSIONS
            and not any(k in metadata_text for k in POST_CHECKSUM_KEYS))


def verify_checksum(metadata_text: Mapping[str, str], arrays: Iterable[np.ndarray], *,
                    required: bool = False, unverified: bool = False) -> bool:
    """Compare the stored ``checksum`` entry with :func:`payload_checksum`; returns whether the
    release is verified (a matching checksum and no ``unverified`` entry).

    A checksum that does not match is always refused.  With ``required``, a table without a
    checksum, or marked ``unverified`` by a previous reader, is refused unless the caller opted
    in with ``unverified=True`` (then ``False`` is returned); without ``required`` it is
    accepted as unverified."""
    stored = metadata_text.get(CHECKSUM_KEY)
    if stored is None:
        if required and not unverified:
            raise ReleaseFormatError(missing_checksum_message(metadata_text))
        return False
    if payload_checksum(metadata_text, arrays) != stored:
        raise ReleaseFormatError(
            "release checksum does not match its content: the file's values or metadata were "
            "changed after it was written (or it is corrupt); refusing to answer from it"
        )
    if UNVERIFIED_KEY not in metadata_text:
        return True
    if required and not unverified:
        raise ReleaseFormatError(
            "release is marked unverified: it was written from a release read without a checksum, "
            f"so its values were never verified; read it with {OPT_IN} to accept it as it is")
    return False


def missing_checksum_message(metadata_text: Mapping[str, str]) -> str:
    """Why a table without a checksum is refused, and how to opt in (one sentence)."""
    if predates_checksums(metadata_text):
        return ("release has no checksum: it claims to be written by polars-dp 0.1.0 (before "
                "checksums), which anyone can claim by deleting entries, so its values cannot be "
                f"verified; read it with {OPT_IN} to accept it as it is")
    return ("release has no checksum although its metadata is from a version that always writes "
            "one: the checksum was removed after the file was written; refusing to answer from it "
            f"(read it with {OPT_IN} to accept it as it is)")


__all__ = ["CHECKSUM_KEY", "KNOWN_MECHANISMS", "OPT_IN", "RELATIVE_SLACK",
           "SCALE_ROUNDING", "SIGNATURE_KEY", "UNVERIFIED_KEY", "check_epsilon", "check_equal",
           "check_mechanism", "check_neighbours", "check_noise_scale", "check_record", "field",
           "missing_checksum_message", "payload_checksum", "positive_number", "predates_checksums",
           "verify_checksum"]
