"""The release base class: what every published output shares.

A release is the public output of a mechanism: everything computed from it is
post-processing of a differentially private output, and it holds no reference to the input
data.  Every release converts to a pyarrow Table whose ``polars_dp.*`` schema metadata
(:mod:`polars_dp.releases.metadata`) records the mechanism, epsilon, the neighbour relation,
how the noise was drawn (``noise``: ``"exact"`` or ``"float"``), whether a seed made it
reproducible (``seeded``), the public domain and the library version.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import polars as pl
import pyarrow as pa

from polars_dp._version import __version__
from polars_dp.errors import ReleaseFormatError
from polars_dp.progress import Progress
from polars_dp.releases.io import write_table_atomic
from polars_dp.releases.metadata import attach_metadata

#: How noise was drawn: exact integer/lattice samplers, or numpy's floating-point Laplace.
NOISE_KINDS = ("exact", "float")


class Release:
    """Common behaviour of every release: metadata, Arrow/Polars/Parquet export."""

    release_type: ClassVar[str] = ""

    mechanism: str
    epsilon: float
    neighbours: str
    params: dict[str, Any]
    created: str
    library_version: str
    noise: str
    seeded: bool

    def _init_common(self, *, mechanism: str, epsilon: float, neighbours: str,
                     params: Mapping[str, Any] | None, created: str | None,
                     library_version: str | None, noise: str = "float", seeded: bool = False) -> None:
        self.mechanism = mechanism
        self.epsilon = float(epsilon)
        self.neighbours = neighbours
        self.params = dict(params or {})
        self.created = created or datetime.now(UTC).isoformat(timespec="seconds")
        self.library_version = library_version or __version__
        self.noise = noise
        self.seeded = bool(seeded)

    def metadata(self) -> dict[str, Any]:
        """What the Arrow schema metadata records (keys without the ``polars_dp.`` prefix)."""
        return {
            "release_type": self.release_type,
            "mechanism": self.mechanism,
            "epsilon": self.epsilon,
            "neighbours": self.neighbours,
            "noise": self.noise,
            "seeded": self.seeded,
            "params": self.params,
            "version": self.library_version,
            "created": self.created,
        }

    @staticmethod
    def _common_from_metadata(meta: Mapping[str, str]) -> dict[str, Any]:
        """Constructor arguments shared by every release type, from decoded metadata.

        Files written before ``noise``/``seeded`` were recorded (0.1.0) used the float sampler;
        whether a seed was used is unknown there and read as ``False``.
        """
        try:
            return {
                "mechanism": meta["mechanism"],
                "epsilon": json.loads(meta["epsilon"]),
                "neighbours": meta["neighbours"],
                "params": json.loads(meta.get("params", "{}")),
                "created": meta.get("created"),
                "library_version": meta.get("version"),
                "noise": meta.get("noise", "float"),
                "seeded": json.loads(meta.get("seeded", "false")),
            }
        except KeyError as exc:
            raise ReleaseFormatError(f"release metadata has no {exc.args[0]!r} entry") from None
        except ValueError as exc:
            raise ReleaseFormatError(f"release metadata is not valid JSON: {exc}") from None

    def _repr_flags(self) -> str:
        """``, seeded`` / ``, noise='float'`` for the repr of releases that are not production-grade."""
        flags = ""
        if self.noise != "exact":
            flags += f", noise={self.noise!r}"
        if self.seeded:
            flags += ", SEEDED (not for publication)"
        return flags

    def _table(self) -> pa.Table:
        raise NotImplementedError

    def to_arrow(self) -> pa.Table:
        """The release as a pyarrow Table with ``polars_dp.*`` schema metadata."""
        return attach_metadata(self._table(), self.metadata())

    def to_polars(self) -> pl.DataFrame:
        """The release as a Polars DataFrame (Polars keeps no schema metadata)."""
        return pl.from_arrow(self._table())

    def write_parquet(self, path: str | os.PathLike, *, compression: str = "zstd",
                      progress: bool | None = None) -> Path:
        """Write the release (with metadata) to Parquet atomically; returns the path.

        ``progress``: stage bars on stderr (building the table, writing); ``None``: on a
        terminal for large releases.
        """
        bar = Progress("write_parquet", progress, self._size())
        bar.step("building the table")
        table = self.to_arrow()
        bar.step("writing")
        written = write_table_atomic(table, path, compression=compression)
        bar.close()
        return written

    def _size(self) -> int:
        """Rows of the release table, for progress decisions (0 when not cheap to know)."""
        return int(getattr(self, "n_cells", 0) or getattr(self, "n_leaves", 0) or 0)

    @classmethod
    def from_arrow(cls, table: pa.Table) -> Release:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        if type(self) is not type(other):
            return NotImplemented
        return self.metadata() == other.metadata() and self._payload_equal(other)

    def _payload_equal(self, other: Release) -> bool:
        return self._table().equals(other._table())

    __hash__ = None  # mutable numpy payload


__all__ = ["NOISE_KINDS", "Release"]
