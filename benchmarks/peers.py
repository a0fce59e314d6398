"""The optional peers some benchmarks compare against, and the one line a run prints for those
that are not installed (their columns are skipped, the run goes on).

A peer is looked up without importing it (``importlib.util.find_spec``), so checking costs
nothing and a broken install is not imported twice.  A peer that is a source checkout rather
than a package (``env`` set) is found where that environment variable (or the benchmark's
option) points, when the file ``marker`` is there; the benchmark imports it in its own process.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Peer:
    """An optional package a benchmark measures beside polars-dp."""

    module: str
    what: str  # what is measured with it
    install: str  # how to get it
    benchmarks: tuple[str, ...]  # the bench_* modules that use it
    env: str = ""  # a checkout, not a package: the environment variable naming its directory
    marker: str = ""  # the file that makes a directory that checkout


PEERS = (
    Peer("opendp", "OpenDP's make_laplace", "pip install opendp", ("bench_noise", "bench_cold_start")),
    Peer("pyspark", "Privelet+ on Spark", "pip install '.[spark]'", ("bench_scale",)),
    Peer("privmap", "privmap's PrivTree build (numpy), cold and warm",
         "git clone https://github.com/enesunal-m/privmap, then POLARS_DP_PRIVMAP=<checkout> "
         "or --privmap=<checkout>", ("bench_cold_start",), env="POLARS_DP_PRIVMAP",
         marker="backend/app/privacy/privtree.py"),
)


def installed(module: str) -> bool:
    """Whether ``module`` can be imported (without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def checkout(peer: Peer, path: str | os.PathLike[str] | None = None) -> Path | None:
    """The directory of a checkout peer: ``path`` if given, else ``$peer.env``; None when unset or
    when it lacks ``peer.marker``."""
    where = path if path is not None else os.environ.get(peer.env, "")
    if not peer.env or not where:
        return None
    root = Path(where).expanduser().resolve()
    return root if (root / peer.marker).is_file() else None


def available(peer: Peer) -> bool:
    """Whether ``peer`` can be run: its module installed, or its checkout found."""
    return checkout(peer) is not None if peer.env else installed(peer.module)


def missing(benchmark: str | None = None) -> list[Peer]:
    """The peers not installed (of ``benchmark`` only, when given)."""
    return [p for p in PEERS if (benchmark is None or benchmark in p.benchmarks) and not available(p)]


def skip_line(peers: list[Peer], label: str = "") -> str | None:
    """One line naming the skipped peers, what each would measure and how to install it; None
    when nothing is skipped."""
    if not peers:
        return None
    names = "; ".join(f"{p.module} ({p.what}: {p.install})" for p in peers)
    return f"{label}optional peers not installed, skipped: {names}"


__all__ = ["PEERS", "Peer", "available", "checkout", "installed", "missing", "skip_line"]
