"""Helpers of the command-line tests: data matching a domain file, running the CLI, reading PNGs."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl

import polars_dp as pdp
from polars_dp.cli import main
from polars_dp.cli.spec import Spec
from tests.helpers import REPO, SPECS

__all__ = ["REPO", "SPECS", "data_for", "png_pixels", "png_size", "run_cli", "run_subprocess"]


def data_for(spec: Spec, n: int, seed: int) -> pl.DataFrame:
    """``n`` rows drawn uniformly from the public domain a domain file declares (test data)."""
    rng = np.random.default_rng(seed)
    if spec.shape == "grid":
        cols = {}
        for a in spec.attributes:
            labels = np.asarray(a.cell_labels(), dtype=object if isinstance(a, pdp.Nominal) else None)
            cols[a.column] = labels[rng.integers(0, len(labels), n)].tolist()
        return pl.DataFrame(cols)
    if spec.shape == "points":
        return pl.DataFrame({c: rng.uniform(lo, hi, n) for c, (lo, hi) in zip(spec.columns, spec.bounds,
                                                                             strict=True)})
    alphabet = np.asarray(spec.alphabet, dtype=object)
    lengths = rng.integers(1, spec.max_length + 3, n)
    seqs = [alphabet[rng.integers(0, len(alphabet), k)].tolist() for k in lengths]
    if all(isinstance(s, str) and len(s) == 1 for s in spec.alphabet):
        return pl.DataFrame({spec.column: ["".join(s) for s in seqs]})
    return pl.DataFrame({spec.column: seqs})


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    """``main(args)`` in this process: exit code, stdout, stderr."""
    capsys.readouterr()
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def run_subprocess(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``python -m polars_dp args`` in a fresh interpreter running this checkout's code."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "polars_dp", *map(str, args)], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=120)


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


def png_pixels(path: Path) -> np.ndarray:
    import matplotlib.image

    return matplotlib.image.imread(path)
