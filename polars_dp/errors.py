"""Typed exceptions: every error the library raises subclasses :class:`PolarsDPError`.

Each subclass also derives from the matching built-in exception (``ValueError``,
``LookupError``, ``MemoryError``, ``OSError``) so generic handlers keep working.  Messages name the
column and the offending value and say what to change.
"""

from __future__ import annotations


class PolarsDPError(Exception):
    """Base class of every error raised by polars-dp."""


class ParameterError(PolarsDPError, ValueError):
    """A mechanism or declaration parameter is invalid (epsilon, width, bounds, ...).

    ``parameter`` names the option at fault when one is (``None`` otherwise), so a caller such
    as the command line can point at the offending key without parsing the message.
    """

    def __init__(self, *args: object, parameter: str | None = None):
        super().__init__(*args)
        self.parameter = parameter


class ColumnNotFoundError(PolarsDPError, LookupError):
    """A declared column is missing from the input frame."""

    def __str__(self) -> str:  # LookupError would quote the message otherwise
        return str(self.args[0]) if self.args else ""


class DomainError(PolarsDPError, ValueError):
    """A value lies outside the declared public domain, or is null/NaN."""


class HierarchyError(PolarsDPError, ValueError):
    """A nominal hierarchy is malformed (duplicate label, cycle, empty group, ...)."""


class DomainTooLargeError(PolarsDPError, MemoryError):
    """The declared domain has more cells than fit in memory (or a requested output more rows)."""


class QueryError(PolarsDPError, ValueError):
    """A query names an unknown column or label, or an empty / out-of-domain range."""


class ReleaseFormatError(PolarsDPError, ValueError):
    """A file or Arrow table is not a polars-dp release (or was written by an incompatible version)."""


class ReleaseSignatureError(ReleaseFormatError):
    """A release read with ``verify_key=`` has no signature, or one the key does not verify."""


class ReleaseWriteError(PolarsDPError, OSError):
    """A release (or a command's output) cannot be written at the path given: the directory is
    read-only, not a directory, or on a file system that takes no files.  Nothing was written;
    ``filename`` is the path given (never a temporary file)."""

    def __init__(self, message: str, filename: str | None = None):
        super().__init__(message)
        self.filename = filename

    def __str__(self) -> str:  # OSError would format its arguments otherwise
        return str(self.args[0]) if self.args else ""


class BudgetExceededError(PolarsDPError):
    """Spending this release would exceed the accountant's total epsilon."""


class LedgerError(PolarsDPError, ValueError):
    """A ledger file that is not a polars-dp ledger, was edited (its hash chain breaks), or
    fixes a dataset's total or neighbour relation differently from what is asked."""


class EmptyReleaseError(ParameterError):
    """A release has no positive count, so it defines no distribution to sample from."""


__all__ = [
    "BudgetExceededError",
    "ColumnNotFoundError",
    "DomainError",
    "DomainTooLargeError",
    "EmptyReleaseError",
    "HierarchyError",
    "LedgerError",
    "ParameterError",
    "PolarsDPError",
    "QueryError",
    "ReleaseFormatError",
    "ReleaseSignatureError",
    "ReleaseWriteError",
]
