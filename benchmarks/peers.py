"""The optional peers some benchmarks compare against, and the one line a run prints for those
that are not installed (their columns are skipped, the run goes on).

A peer is looked up without importing it (``importlib.util.find_spec``), so checking costs
nothing and a broken install is not imported twice.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass


@dataclass(frozen=True)
class Peer:
    """An optional package a benchmark measures beside polars-dp."""

    module: str
    what: str  # what is measured with it
    install: str  # how to get it
    benchmarks: tuple[str, ...]  # the bench_* modules that use it


PEERS = (
    Peer("opendp", "OpenDP's make_laplace", "pip install opendp", ("bench_noise", "bench_cold_start")),
    Peer("pyspark", "Privelet+ on Spark", "pip install '.[spark]'", ("bench_scale",)),
)


def installed(module: str) -> bool:
    """Whether ``module`` can be imported (without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing(benchmark: str | None = None) -> list[Peer]:
    """The peers not installed (of ``benchmark`` only, when given)."""
    return [p for p in PEERS if (benchmark is None or benchmark in p.benchmarks) and not installed(p.module)]


def skip_line(peers: list[Peer], label: str = "") -> str | None:
    """One line naming the skipped peers, what each would measure and how to install it; None
    when nothing is skipped."""
    if not peers:
        return None
    names = "; ".join(f"{p.module} ({p.what}: {p.install})" for p in peers)
    return f"{label}optional peers not installed, skipped: {names}"


__all__ = ["PEERS", "Peer", "installed", "missing", "skip_line"]
