"""A budget ledger that outlives the process: an append-only, hash-chained file of charges.

``pdp.Ledger(path)`` holds, per *dataset* (a name), its total epsilon, neighbour relation and
individual (the privacy unit's ``id_column``; one row when the record has none), fixed by the
first charge, and every charge made against it: the exact epsilon charged (a
:class:`fractions.Fraction`, written as ``"n/d"``), the label, the mechanism, the noise kind and
the fingerprint of the release's declared domain (sha256 of its public declaration, never of
the data).  An :class:`~polars_dp.Accountant` or :class:`~polars_dp.Session` given
``ledger=`` and ``dataset=`` refuses a release that would take the dataset's charges, every
process's, past its total (basic sequential composition, :mod:`polars_dp.budget`).

>>> import polars as pl, polars_dp as pdp, tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "budget.ledger")
>>> df = pl.DataFrame({"age": [23, 35, 61]})
>>> attrs = [pdp.Ordinal("age", 0, 99, width=10)]
>>> pdp.Session(df, epsilon=1.0, neighbours="replace", ledger=pdp.Ledger(path),
...             dataset="people").basic(attrs, epsilon=0.6).epsilon
0.6
>>> pdp.Session(df, epsilon=1.0, neighbours="replace", ledger=pdp.Ledger(path),
...             dataset="people").basic(attrs, epsilon=0.6)
Traceback (most recent call last):
    ...
polars_dp.errors.BudgetExceededError: ...

The file
--------
JSON lines, one record per line: a header (``{"kind": "ledger", "format": ...}``), then
``dataset`` records (name, ``total``, ``neighbours``, and ``id_column`` when an identifier is
the individual) and ``charge`` records.  Every record
carries ``hash = sha256(previous hash + its canonical JSON)`` (the header's previous hash is
64 zeros), so an edited, removed or reordered record breaks the chain and the file is
refused (:class:`LedgerError`).  The chain detects edits and corruption, not a forger who
recomputes it (as a release's checksum; protect the file as you protect the budget).

Why JSON lines and ``flock`` rather than Parquet or DuckDB: a charge is one ``write`` of one
line to a file opened for appending, so a process killed mid-append leaves at most a
trailing partial line, which every reader ignores and the next charge truncates: the
previous ledger stays readable.  Parquet files cannot be appended to (each charge would
rewrite the file) and a DuckDB database file admits one writing process at a time and
brings its own recovery log; the text file is also readable without the library.

Across processes
----------------
A charge takes an exclusive :func:`fcntl.flock` on the file, re-reads what other processes
appended (verifying their hashes), checks the exact sum against the total, appends, syncs
the file to the disk (``fdatasync``) and unlocks: two processes spending 0.6 each of a total
of 1 cannot both succeed, and neither charge is lost.  A ``Ledger`` object keeps what it has verified and
re-reads only what was appended since (checking that its last verified record is still
there).  ``flock`` is advisory and local: every writer must go through this class, and the
file should not live on a network file system that does not honour it.

A charge is written *before* the data is read, and it stays if the release then fails: the
failure (say, a DomainError naming an offending value) may depend on the data, so a refusal
is an output (the conservative rule of :mod:`polars_dp.budget`).
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import IO, Any

from polars_dp.errors import BudgetExceededError, LedgerError, ParameterError

#: The header's ``format`` value: a file whose first record says otherwise is not a ledger.
FORMAT = "polars-dp ledger"
VERSION = 1
GENESIS = "0" * 64
#: Flushes an append to the disk (the file's data and size) before the lock is released.
SYNC = getattr(os, "fdatasync", os.fsync)
#: How the header's canonical JSON begins (sorted keys): a first line torn mid-write is a prefix.
HEADER_START = f'{{"format":"{FORMAT}"'.encode()


def canonical(record: dict[str, Any]) -> str:
    """The one JSON text of a record that its hash covers (sorted keys, no spaces)."""
    return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def chain_hash(previous: str, record: dict[str, Any]) -> str:
    """``sha256(previous hash + canonical JSON of the record without its hash)``."""
    body = {k: v for k, v in record.items() if k != "hash"}
    return hashlib.sha256((previous + canonical(body)).encode()).hexdigest()


def domain_fingerprint(declaration: Any) -> str:
    """sha256 of a public domain declaration (attributes, columns and bounds, an alphabet):
    its JSON, each declaration object by its ``to_json()``.  Never reads data."""
    def encode(value: Any) -> Any:
        to_json = getattr(value, "to_json", None)
        return to_json() if callable(to_json) else repr(value)
    text = json.dumps(declaration, sort_keys=True, separators=(",", ":"), default=encode)
    return hashlib.sha256(text.encode()).hexdigest()


#: Why a budget keeps to one privacy unit (the accountant's and the ledger's refusals say it).
UNITS_DO_NOT_COMPOSE = "releases protecting different individuals do not compose"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class DatasetBudget:
    """One dataset of a ledger: its fixed total, relation and individual (``id_column``, None for
    one row), its charges, their exact sum."""

    name: str
    total: Fraction
    neighbours: str
    created: str
    charges: list[dict[str, Any]] = field(default_factory=list)
    spent: Fraction = Fraction(0)
    id_column: str | None = None

    @property
    def remaining(self) -> Fraction:
        return max(Fraction(0), self.total - self.spent)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready view: exact values as ``"n/d"`` strings beside their floats."""
        return {"dataset": self.name, "total": str(self.total), "total_float": float(self.total),
                "neighbours": self.neighbours, "id_column": self.id_column, "created": self.created,
                "spent": str(self.spent),
                "spent_float": float(self.spent), "remaining": str(self.remaining),
                "remaining_float": float(self.remaining), "charges": [dict(c) for c in self.charges]}


@dataclass
class _State:
    """What a ledger object has verified: up to byte ``offset``, the last record and its start."""

    offset: int = 0
    last_start: int = 0
    last_line: bytes = b""
    last_hash: str = GENESIS
    records: int = 0
    datasets: dict[str, DatasetBudget] = field(default_factory=dict)



def exact_text(value: Fraction) -> str:
    """An exact budget for a message: the float that is it (``0.25``, ``1``), else the float's
    shortest text and the exact rational (``0.8 (exactly 4/5)``), never a float's 17 digits."""
    x = float(value)
    text = repr(x).removesuffix(".0")
    return text if Fraction(x) == value else f"{text} (exactly {value})"

class Ledger:
    """An append-only, hash-chained file of charges per dataset (module docstring).

    ``Ledger(path)``: the file need not exist (it is created by the first charge; its folder
    must exist).  An existing file is read and verified now.  ``datasets()`` /
    ``dataset(name)`` report; :meth:`charge` is what an accountant calls.
    """

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        if not self.path.parent.is_dir():
            raise ParameterError(f"ledger {str(self.path)!r}: its folder does not exist; create it or give "
                                 "another path", parameter="ledger")
        if self.path.is_dir():
            raise ParameterError(f"ledger {str(self.path)!r} is a folder; give a file path",
                                 parameter="ledger")
        self._state = _State()
        if self.path.exists():
            self.datasets()

    def __repr__(self) -> str:
        return f"Ledger({str(self.path)!r})"

    # ------------------------------------------------------------------ reading
    def _fail(self, line: int, what: str) -> LedgerError:
        return LedgerError(f"ledger {str(self.path)!r}, line {line}: {what}; a ledger is append-only: "
                           "restore it from a copy, or start a new ledger file")

    def _not_a_ledger(self) -> LedgerError:
        return LedgerError(f"{str(self.path)!r} is not a polars-dp ledger (its first line is not a ledger "
                           "header); give a ledger file or a new path")

    def _parse(self, line: bytes, number: int, previous: str) -> dict[str, Any]:
        try:
            record = json.loads(line)
        except (ValueError, UnicodeDecodeError):
            record = None
        if number == 1 and (not isinstance(record, dict) or record.get("format") != FORMAT):
            raise self._not_a_ledger()
        if not isinstance(record, dict):
            raise self._fail(number, "is not a JSON record")
        if record.get("hash") != chain_hash(previous, record):
            raise self._fail(number, "its hash does not chain to the record before it (the file was edited "
                                     "or corrupted)")
        return record

    def _apply(self, state: _State, record: dict[str, Any], number: int) -> None:
        kind = record.get("kind")
        if number == 1:
            if kind != "ledger":
                raise self._not_a_ledger()
            if record.get("version") != VERSION:
                raise LedgerError(f"ledger {str(self.path)!r} has format version {record.get('version')!r}; "
                                  f"this polars-dp reads version {VERSION}: upgrade polars-dp")
            return
        try:
            if kind == "dataset":
                name = str(record["dataset"])
                if name in state.datasets:
                    raise self._fail(number, f"declares dataset {name!r} twice")
                id_column = record.get("id_column")
                state.datasets[name] = DatasetBudget(name, Fraction(record["total"]),
                                                     str(record["neighbours"]), str(record["time"]),
                                                     id_column=None if id_column is None else str(id_column))
            elif kind == "charge":
                budget = state.datasets[str(record["dataset"])]
                budget.spent += Fraction(record["epsilon"])
                budget.charges.append({k: v for k, v in record.items()
                                       if k not in ("kind", "hash", "dataset")})
            else:
                raise self._fail(number, f"has an unknown kind {kind!r}")
        except (KeyError, ValueError, ZeroDivisionError, TypeError):
            raise self._fail(number, "is not a well-formed ledger record") from None

    def _refresh(self, handle: IO[bytes]) -> _State:
        """Verify what was appended since the last read (or the whole file), under a lock."""
        state = self._state
        size = handle.seek(0, os.SEEK_END)
        handle.seek(state.last_start)
        if size < state.offset or handle.read(len(state.last_line)) != state.last_line:
            state = _State()  # not the file we verified: read it all again
        handle.seek(state.offset)
        tail = handle.read()
        complete = tail[:tail.rfind(b"\n") + 1]  # a trailing partial line is a torn write: ignored
        partial = tail[len(complete):]
        if state.records == 0 and not complete and partial and not (
                partial.startswith(HEADER_START) or HEADER_START.startswith(partial)):
            raise self._not_a_ledger()  # never truncate a file that is not a torn ledger header
        number, start = state.records, state.offset
        for line in complete.splitlines(keepends=True):
            number += 1
            record = self._parse(line, number, state.last_hash)
            self._apply(state, record, number)
            state.last_hash, state.last_start, state.last_line = record["hash"], start, line
            start += len(line)
        state.offset, state.records = start, number
        self._state = state
        return state

    @contextmanager
    def _locked(self, exclusive: bool) -> Iterator[IO[bytes]]:
        try:
            handle = open(self.path, "a+b" if exclusive else "rb")  # closed below, which releases the lock
        except OSError as exc:
            raise ParameterError(f"ledger {str(self.path)!r} cannot be opened: {exc.strerror}",
                                 parameter="ledger") from None
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            yield handle
        finally:
            handle.close()  # releases the lock

    def datasets(self) -> dict[str, DatasetBudget]:
        """Every dataset of the file, verified (empty if the file does not exist yet)."""
        if not self.path.exists():
            return {}
        with self._locked(exclusive=False) as handle:
            state = self._refresh(handle)
        return {k: dataclasses.replace(v, charges=list(v.charges)) for k, v in state.datasets.items()}

    def dataset(self, name: str) -> DatasetBudget | None:
        """The dataset ``name`` (None if it has no charge yet)."""
        return self.datasets().get(name)

    def spent(self, name: str) -> Fraction:
        """The exact sum of every charge to ``name`` in the file."""
        budget = self.dataset(name)
        return Fraction(0) if budget is None else budget.spent

    def check(self, name: str, total: Fraction | None, neighbours: str, id_column: str | None = None
              ) -> Fraction | None:
        """The total the file fixes for ``name`` (``total`` if it has none yet); a LedgerError if
        the file fixes another total, relation or individual (``id_column``, None for one row).
        ``total=None``: whatever the file fixes."""
        check_dataset_name(name)
        budget = self.dataset(name)
        if budget is None:
            return total
        self._same(budget, total, neighbours, id_column)
        return budget.total

    def _same(self, budget: DatasetBudget, total: Fraction | None, neighbours: str,
              id_column: str | None) -> None:
        if total is not None and budget.total != total:
            raise LedgerError(f"ledger {str(self.path)!r} fixes the total of dataset {budget.name!r} at "
                              f"{budget.total} (= {float(budget.total):g}), not {total} "
                              f"(= {float(total):g}): give that total, or another dataset name")
        if budget.neighbours != neighbours:
            raise LedgerError(f"ledger {str(self.path)!r} composes dataset {budget.name!r} under "
                              f"neighbours={budget.neighbours!r}, not {neighbours!r}: releases under "
                              "different relations do not compose")
        if budget.id_column != id_column:
            raise LedgerError(f"ledger {str(self.path)!r} composes dataset {budget.name!r} under the "
                              f"privacy unit's id_column={budget.id_column!r}, not {id_column!r} (None: one "
                              f"row is one individual): {UNITS_DO_NOT_COMPOSE}; declare the dataset's unit "
                              "(privacy_unit=, or [privacy_unit] in a domain file)")

    # ------------------------------------------------------------------ writing
    @staticmethod
    def _chained(records: list[dict[str, Any]], previous: str) -> bytes:
        """The lines of ``records``, each with its hash chained to the one before (``previous`` first)."""
        lines = []
        for record in records:
            previous = chain_hash(previous, record)
            lines.append(canonical({**record, "hash": previous}) + "\n")
        return "".join(lines).encode()

    def charge(self, name: str, epsilon: Fraction, *, total: Fraction, neighbours: str, label: str,
               mechanism: str | None = None, noise: str | None = None, domain: str | None = None,
               id_column: str | None = None) -> Fraction:
        """Append the charge ``epsilon`` to dataset ``name`` if the exact sum of its charges
        (every process's) stays within its total, and return that sum; else raise
        BudgetExceededError, writing nothing.  The first charge of a dataset fixes its
        ``total``, ``neighbours`` and individual (``id_column``, None for one row); a later one
        with others is a LedgerError."""
        check_dataset_name(name)
        with self._locked(exclusive=True) as handle:
            state = self._refresh(handle)
            if handle.seek(0, os.SEEK_END) > state.offset:
                os.ftruncate(handle.fileno(), state.offset)  # a torn write: drop its partial line
            records = [] if state.records else [{"kind": "ledger", "format": FORMAT, "version": VERSION,
                                                  "time": _now()}]
            budget = state.datasets.get(name)
            if budget is None:
                records.append({"kind": "dataset", "dataset": name, "total": str(total),
                                "neighbours": neighbours, "time": _now(),
                                **({} if id_column is None else {"id_column": id_column})})
            else:
                self._same(budget, total, neighbours, id_column)
            spent = Fraction(0) if budget is None else budget.spent
            if spent + epsilon > total:
                raise BudgetExceededError(
                    f"{label} asks for epsilon {exact_text(epsilon)} but dataset {name!r} of ledger "
                    f"{str(self.path)!r} has {exact_text(max(Fraction(0), total - spent))} of its total "
                    f"{exact_text(total)} left (spent {exact_text(spent)} on "
                    f"{len(budget.charges) if budget else 0} release(s), by every process, added exactly); "
                    "lower epsilon or stop releasing from this data")
            records.append({"kind": "charge", "dataset": name, "epsilon": str(epsilon),
                            "epsilon_float": float(epsilon), "label": label, "mechanism": mechanism,
                            "noise": noise, "domain": domain, "time": _now(), "pid": os.getpid()})
            # a kill leaves at most a partial last line
            write_all(handle.fileno(), self._chained(records, state.last_hash))
            SYNC(handle.fileno())
            self._refresh(handle)
        return spent + epsilon


def write_all(fd: int, data: bytes) -> None:
    """``data`` appended to ``fd`` (a short write continued)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def check_dataset_name(name: object) -> str:
    """A dataset name: a non-empty string."""
    if not isinstance(name, str) or not name.strip():
        raise ParameterError(f"dataset must be a non-empty name, got {name!r}", parameter="dataset")
    return name


__all__ = ["UNITS_DO_NOT_COMPOSE", "DatasetBudget", "Ledger", "chain_hash", "check_dataset_name",
           "domain_fingerprint", "exact_text"]
