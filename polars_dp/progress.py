"""Progress of long work on stderr: one tqdm bar per named stage (counting, transform, noise,
writing, ...).

``progress=None`` (the default of every mechanism and of ``range_counts``) shows the bars
only when stderr is a terminal and the work is large (at least :data:`LARGE_WORK` units:
cells, coefficients, queries) or not known from public inputs; ``True`` always shows them;
``False`` never.  The work is a public size, never the private row count: whether bars
appear is the same for every dataset a release may be made from (a mechanism whose work
only the data decides, such as PrivTree's, shows them on every terminal).  On a terminal a stage is a
live bar; elsewhere (a log file, a pipe) it is one plain line ``title: stage`` when the stage
starts, with no carriage-return frames.  Progress output carries no data values.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from tqdm import tqdm

from polars_dp.errors import ParameterError

#: Work (cells, rows, queries) from which ``progress=None`` shows bars on a terminal.
LARGE_WORK = 5_000_000


def show_progress(progress: bool | None, work: int | None = 0) -> bool:
    """Resolve a ``progress`` option: ``None`` means stderr is a terminal and the public
    ``work`` is large (or not public: ``work=None``)."""
    if progress is None:
        return (work is None or work >= LARGE_WORK) and _is_terminal()
    if not isinstance(progress, bool):
        raise ParameterError(f"progress must be True, False or None (automatic), got {progress!r}")
    return progress


def _noop(n: int = 1) -> None:
    return None


def _is_terminal() -> bool:
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty())


class Progress:
    """Stage bars of one task (``title``); every method is a no-op when disabled.

    ``step(name, total)`` closes the current stage's bar and opens the next one; ``close()``
    ends the last one.  ``stage(...)`` is the same as a context manager.
    """

    def __init__(self, title: str, progress: bool | None = None, work: int | None = 0):
        self.title = title
        self.enabled = show_progress(progress, work)
        self._bar: tqdm | None = None

    def step(self, name: str, total: int | None = None, unit: str = "it") -> Callable[[int], None]:
        """Start stage ``name``; returns ``advance(n)`` (moves its bar by ``n`` of ``total``)."""
        self.close()
        if not self.enabled:
            return _noop
        if not _is_terminal():  # a log: one plain line per stage
            print(f"{self.title}: {name}", file=sys.stderr, flush=True)
            return _noop
        self._bar = tqdm(total=total, desc=f"{self.title}: {name}", unit=unit, unit_scale=True,
                         file=sys.stderr, leave=True, dynamic_ncols=True,
                         bar_format=None if total else "{desc} {elapsed}")
        return self._bar.update

    def close(self) -> None:
        """End the current stage (its bar jumps to its total)."""
        bar, self._bar = self._bar, None
        if bar is not None:
            if bar.total is not None and bar.n < bar.total:
                bar.update(bar.total - bar.n)
            bar.close()

    @contextmanager
    def stage(self, name: str, total: int | None = None, unit: str = "it") -> Iterator[Callable[[int], None]]:
        """Context of one stage; yields ``advance(n)``."""
        try:
            yield self.step(name, total, unit)
        finally:
            self.close()


__all__ = ["LARGE_WORK", "Progress", "show_progress"]
