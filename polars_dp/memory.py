"""The machine's memory, the one probe every size guard reads.

``total_memory_bytes`` (physical memory: a property of the machine, not of the data) decides
refusals made before the data is read (a domain too large to count, too many synthetic
rows); ``available_memory`` (what is free now) only chooses between an in-memory and a
streamed computation of the same public output.
"""

from __future__ import annotations

import functools
import os


@functools.cache
def total_memory_bytes() -> int:
    """Physical memory of this machine (falls back to 8 GiB where it cannot be read), read once:
    it does not change while the process runs."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 8 << 30


def available_memory() -> int | None:
    """Bytes of memory available now (``MemAvailable`` of /proc/meminfo, else free pages), or
    None when unknown."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


__all__ = ["available_memory", "total_memory_bytes"]
