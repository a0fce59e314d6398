"""Sequence releases (PST and n-gram) are verified on read like grid and spatial ones: the
checksum (required unless the file predates checksums), the parameters recomputed from the
declared epsilon and shares, and the tree structure."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

import polars_dp as pdp

SEQS = [[1, 2, 3], [2, 2], [3], [1, 1, 2, 3], [2, 3, 3]] * 40


@pytest.fixture(scope="module", params=["privtree_sequences", "ngram_sequences"])
def model(request) -> pdp.SequenceRelease:
    df = pl.DataFrame({"s": SEQS})
    return getattr(pdp, request.param)(df, "s", alphabet=[1, 2, 3], max_length=6, epsilon=1.0, seed=5)


def edit(table: pa.Table, *, drop: tuple[str, ...] = (), params: dict | None = None, counts=None,
         **changes: str) -> pa.Table:
    """``table`` with metadata entries dropped or replaced, ``params`` entries replaced, or the
    count column replaced."""
    meta = dict(table.schema.metadata)
    for key in drop:
        meta.pop(f"polars_dp.{key}".encode(), None)
    for key, value in changes.items():
        meta[f"polars_dp.{key}".encode()] = value.encode()
    if params:
        p = json.loads(meta[b"polars_dp.params"])
        p.update(params)
        meta[b"polars_dp.params"] = json.dumps(p).encode()
    if counts is not None:
        table = table.set_column(table.column_names.index("count"), "count", pa.array(counts, pa.float64()))
    return table.replace_schema_metadata(meta)


#: Ways to pass an edit off: keep the (now stale) checksum, delete it, or delete it and the
#: entries newer writers add so that the file looks as if it predated checksums.
DISGUISES = {"stale checksum": (), "no checksum": ("checksum",),
             "posing as 0.1.0": ("checksum", "noise", "seeded")}


def test_sequence_release_reads_back_identically(model, tmp_path):
    path = tmp_path / "m.parquet"
    model.write_parquet(path)
    back = pdp.read_release(path)
    assert back == model
    np.testing.assert_array_equal(back.hist, model.hist)


@pytest.mark.parametrize("disguise", list(DISGUISES))
def test_edited_epsilon_is_refused(model, disguise):
    table = edit(model.to_arrow(), drop=DISGUISES[disguise], epsilon="0.01")
    with pytest.raises(pdp.ReleaseFormatError):
        pdp.read_release(table)


@pytest.mark.parametrize("disguise", list(DISGUISES))
def test_multiplied_noise_scale_is_refused(model, disguise):
    key = "leaf_noise_scale" if model.mechanism == "privtree_sequences" else "noise_scale"
    scaled = model.params[key] * 10
    table = edit(model.to_arrow(), drop=DISGUISES[disguise], params={key: scaled},
                 **{key: json.dumps(scaled)})
    with pytest.raises(pdp.ReleaseFormatError, match="checksum|noise_scale"):
        pdp.read_release(table)


@pytest.mark.parametrize("disguise", ["stale checksum", "no checksum"])
def test_doubled_counts_are_refused(model, disguise):
    """Doubling every count keeps the internal sums consistent: the checksum (which a file of
    this version must carry) is what refuses it."""
    table = model.to_arrow()
    table = edit(table, drop=DISGUISES[disguise], counts=2 * table.column("count").to_numpy())
    with pytest.raises(pdp.ReleaseFormatError, match="checksum"):
        pdp.read_release(table)


def test_deleted_checksum_is_refused_and_the_message_says_why(model):
    with pytest.raises(pdp.ReleaseFormatError, match="checksum was removed"):
        pdp.read_release(edit(model.to_arrow(), drop=("checksum",)))


def test_edited_shares_and_lambda_are_refused_even_without_checksum():
    model = pdp.privtree_sequences(pl.DataFrame({"s": SEQS}), "s", alphabet=[1, 2, 3], max_length=6,
                                   epsilon=1.0, seed=5)
    legacy = DISGUISES["posing as 0.1.0"]
    half = model.params["lambda"] / 2
    for params, extra in (({"tree_share": 0.5}, {"tree_share": "0.5"}),
                          ({"lambda": half}, {"lambda": json.dumps(half)}),
                          ({"delta": model.params["delta"] / 2}, {}),
                          ({"epsilon_leaf": model.params["epsilon_leaf"] * 2}, {}),
                          ({"l_top": 3}, {"l_top": "3"})):
        with pytest.raises(pdp.ReleaseFormatError):
            pdp.read_release(edit(model.to_arrow(), drop=legacy, params=params, **extra), unverified=True)
    with pytest.raises(pdp.ReleaseFormatError, match="add_remove"):
        pdp.read_release(edit(model.to_arrow(), drop=legacy, neighbours="replace"), unverified=True)


def test_edited_tree_structure_is_refused(model):
    table = model.to_arrow()
    beta = model.alphabet_size + 1
    legacy = DISGUISES["posing as 0.1.0"]
    cut = table.slice(0, table.num_rows - beta)  # the last node removed
    with pytest.raises(pdp.ReleaseFormatError):
        pdp.read_release(edit(cut, drop=legacy), unverified=True)
    with pytest.raises(pdp.ReleaseFormatError):
        pdp.read_release(edit(cut, drop=legacy, n_nodes=str(model.n_nodes - 1)), unverified=True)
    if model.mechanism == "privtree_sequences":  # an internal count edited breaks the sums
        counts = table.column("count").to_numpy().copy()
        counts[0] += 5
        with pytest.raises(pdp.ReleaseFormatError, match="sums"):  # checked before the checksum
            pdp.read_release(edit(table, counts=counts))


@pytest.mark.parametrize("kind", ["privtree_sequences", "ngram_sequences"])
def test_a_model_of_the_root_alone_is_written_and_read(kind, tmp_path):
    """A public cap that stops the tree at its root (``max_nodes=1``, ``height=1``) still gives a
    release that exports (regression: building the node contexts raised IndexError)."""
    cap = {"max_nodes": 1} if kind == "privtree_sequences" else {"height": 1}
    model = getattr(pdp, kind)(pl.DataFrame({"s": SEQS}), "s", alphabet=[1, 2, 3], max_length=6,
                               epsilon=1.0, seed=5, **cap)
    assert model.n_nodes == 1
    back = pdp.read_release(model.write_parquet(tmp_path / "root.parquet"))
    assert back == model
    np.testing.assert_array_equal(back.frequencies([[1], [2, 3]]), model.frequencies([[1], [2, 3]]))
