"""Keyword checking of the mechanism functions: an unknown keyword is a ParameterError."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from polars_dp.errors import ParameterError

F = TypeVar("F", bound=Callable[..., Any])


def checked_options(name: str) -> Callable[[F], F]:
    """Decorator: a call with a keyword the mechanism does not take raises
    :class:`~polars_dp.ParameterError` naming it and listing the accepted ones (instead of a bare
    ``TypeError``); the signature is kept (``help``, ``inspect``)."""

    def wrap(function: F) -> F:
        signature = inspect.signature(function)
        accepted = [p for p in list(signature.parameters)[1:]]

        @functools.wraps(function)
        def checked(*args: Any, **kwargs: Any) -> Any:
            unknown = [k for k in kwargs if k not in signature.parameters]
            if unknown:
                raise ParameterError(f"{name} has no option {unknown[0]!r}; its options are "
                                     f"{', '.join(accepted)}", parameter=unknown[0])
            return function(*args, **kwargs)

        return checked  # type: ignore[return-value]

    return wrap


__all__ = ["checked_options"]
