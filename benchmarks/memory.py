"""Peak memory of the running process, for the benchmarks (Linux ``VmHWM``, else ``ru_maxrss``)."""

from __future__ import annotations

import resource


def hwm_bytes() -> int:
    """The process's peak resident set size in bytes."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
