"""Write the seeded ``v0_4_0_<case>.parquet`` fixtures and ``v0_4_0.json`` (what each reads back as).

One small release per registered mechanism and notable variant, made by the library as of 0.4.0
(format 2) with a fixed seed; ``tests/unit/releases/test_release_fixtures.py`` reads every file
with today's reader and compares header, ``params``, noise model and payload with the JSON.
Run from the repository root: ``python -m tests.data.make_v0_4_0`` (only to add a case: the
checked-in files are the guard, never re-made to follow a change of the reader).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

import polars_dp as pdp
from polars_dp.plans.noise_model import noise_model_to_json

HERE = Path(__file__).parent
SEED = 20260402


def _grid_frame() -> pl.DataFrame:
    rng = np.random.default_rng(7)
    return pl.DataFrame({"age": rng.integers(0, 16, 200), "job": rng.choice(["a", "b", "c"], 200),
                         "person": rng.integers(0, 80, 200)})


def _points() -> pl.DataFrame:
    rng = np.random.default_rng(8)
    return pl.DataFrame({"x": rng.random(300), "y": rng.random(300) ** 2})


def _sequences() -> pl.DataFrame:
    return pl.DataFrame({"s": ["ab", "abc", "b", "ca", "ab", "cab", "a", "bb", "abca", "c"] * 5})


def cases() -> dict[str, Any]:
    """Case name -> a function making the release (seeded)."""
    grid, points, seqs = _grid_frame(), _points(), _sequences()
    age, job = pdp.Ordinal("age", 0, 15), pdp.Nominal("job", ["a", "b", "c"])
    binned = pdp.Ordinal("age", 0, 15, width=4)
    box = {"bounds": [(0.0, 1.0), (0.0, 1.0)], "epsilon": 1.0, "seed": SEED}
    seq = {"alphabet": ["a", "b", "c"], "max_length": 4, "epsilon": 2.0, "seed": SEED}
    return {
        "basic": lambda: pdp.basic(grid, [age, job], epsilon=1.0, seed=SEED),
        "basic_binned_replace": lambda: pdp.basic(grid, [binned], epsilon=0.5, neighbours="replace",
                                                  seed=SEED),
        "basic_privacy_unit": lambda: pdp.basic(grid, [pdp.Ordinal("age", 0, 9)], epsilon=1.0,
                                                on_out_of_domain="clamp", seed=SEED,
                                                privacy_unit=pdp.Rows(id_column="person", max_per=2)),
        "privelet": lambda: pdp.privelet(grid, [age, job], epsilon=1.0, seed=SEED),
        "privelet_plus": lambda: pdp.privelet(grid, [age, job], epsilon=1.0, untransformed=["job"],
                                              seed=SEED),
        "privelet_float": lambda: pdp.privelet(grid, [age], epsilon=1.0, noise="float", seed=SEED),
        "privelet_postprocessed": lambda: pdp.privelet(grid, [age, job], epsilon=1.0, seed=SEED)
        .postprocess("nonnegative"),
        "hierarchical": lambda: pdp.hierarchical(grid, [age, job], epsilon=1.0, seed=SEED,
                                                 workload=pdp.workload.ranges([age, job])),
        "hierarchical_levels": lambda: pdp.hierarchical(grid, [age, job], epsilon=1.0, levels={"age": 4},
                                                        neighbours="add_remove", seed=SEED),
        "privtree": lambda: pdp.privtree(points, ["x", "y"], **box),
        "privtree_levels": lambda: pdp.privtree(points, ["x", "y"], levels=2, **box),
        "privtree_subgrid": lambda: pdp.privtree_subgrid(points, ["x", "y"], **box),
        "uniform_grid": lambda: pdp.uniform_grid(points, ["x", "y"], **box),
        "adaptive_grid": lambda: pdp.adaptive_grid(points, ["x", "y"], **box),
        "adaptive_grid_public_n": lambda: pdp.adaptive_grid(points, ["x", "y"], n=300, **box),
        "privelet_grid": lambda: pdp.privelet_grid(points, ["x", "y"], bits=3, **box),
        "privtree_sequences": lambda: pdp.privtree_sequences(seqs, "s", **seq),
        "privtree_sequences_unit": lambda: pdp.privtree_sequences(
            seqs.with_row_index("who").with_columns(pl.col("who") // 2), "s", max_nodes=40,
            privacy_unit=pdp.Rows(id_column="who"), **seq),
        "privtree_sequences_clip": lambda: pdp.privtree_sequences(seqs, "s", postprocess="clip_then_sum",
                                                                  length_share=0.0, **seq),
        "ngram": lambda: pdp.ngram_sequences(seqs, "s", height=3, **seq),
    }


def payload_digest(release: Any) -> str:
    """``sha256`` of the release's payload arrays in canonical order (its content, not its metadata)."""
    h = hashlib.sha256()
    for array in release._payload_arrays():
        a = np.ascontiguousarray(np.asarray(array))
        h.update(str(a.dtype).encode() + str(a.shape).encode() + a.tobytes())
    return h.hexdigest()


def describe(release: Any) -> dict[str, Any]:
    """What a fixture is checked against: header, params, noise model, type entries, payload digest."""
    meta = release.metadata()
    noise_model = getattr(release, "noise_model", None)
    return {"release_type": release.release_type, "mechanism": release.mechanism, "epsilon": release.epsilon,
            "neighbours": release.neighbours, "noise": release.noise, "seeded": release.seeded,
            "version": release.library_version, "created": release.created,
            "params": json.loads(json.dumps(dict(release.params))),
            "noise_model": None if noise_model is None else noise_model_to_json(noise_model),
            "entries": json.loads(json.dumps({k: meta[k] for k in release.metadata_entries if k in meta})),
            "payload": payload_digest(release)}


def main() -> None:
    """Write the fixtures that are missing (a case added for a new mechanism) and their entries;
    the files already here are kept as they were written, never made again."""
    table = HERE / "v0_4_0.json"
    out = json.loads(table.read_text()) if table.exists() else {}
    for name, make in cases().items():
        path = HERE / f"v0_4_0_{name}.parquet"
        if path.exists() and name in out:
            continue
        make().write_parquet(path)
        out[name] = describe(pdp.read_release(path))
    table.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
