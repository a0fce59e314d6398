"""One metadata layout for every release type, read by one codec (:mod:`polars_dp.releases.metadata`):
the header, ``params`` and the type's declared entries; parameters only in ``params``; format-1
files (no ``format`` entry, parameters also copied at top level) read through the one adapter."""

from __future__ import annotations

import json
import tomllib

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import polars_dp as pdp
from polars_dp.releases.integrity import CHECKSUM_KEY, payload_checksum
from polars_dp.releases.metadata import (
    FORMAT_VERSION,
    HEADER_KEYS,
    META_PREFIX,
    decode_metadata,
    encode_metadata,
    read_metadata,
    release_metadata,
)
from tests.helpers import REPO, TESTS_DATA

POINTS = pl.DataFrame({"x": np.random.default_rng(5).beta(2, 5, 2_000),
                       "y": np.random.default_rng(6).beta(5, 2, 2_000)})
SEQS = pl.DataFrame({"s": [[1, 2, 3], [2, 2], [3], [1, 1, 2, 3], [2, 3, 3]] * 40})


def _make(kind: str) -> pdp.Release:
    bounds = [(0, 1), (0, 1)]
    if kind in ("basic", "privelet"):
        frame = pl.DataFrame({"a": np.random.default_rng(1).integers(0, 10, 300)})
        return getattr(pdp, kind)(frame, [pdp.Ordinal("a", 0, 9)], epsilon=1.0, seed=1)
    if kind == "privtree_levels":
        return pdp.privtree(POINTS, ["x", "y"], bounds=bounds, epsilon=1.0, seed=2, levels=2)
    if kind in ("privtree", "uniform_grid", "adaptive_grid"):
        return getattr(pdp, kind)(POINTS, ["x", "y"], bounds=bounds, epsilon=1.0, seed=2)
    return getattr(pdp, kind)(SEQS, "s", alphabet=[1, 2, 3], max_length=6, epsilon=1.0, seed=5)


KINDS = ["basic", "privelet", "privtree", "privtree_levels", "uniform_grid", "adaptive_grid",
         "privtree_sequences", "ngram_sequences"]


@pytest.fixture(scope="module", params=KINDS)
def release(request) -> pdp.Release:
    return _make(request.param)


def _with_meta(table: pa.Table, text: dict[str, str]) -> pa.Table:
    other = {k: v for k, v in (table.schema.metadata or {}).items() if not k.startswith(META_PREFIX.encode())}
    return table.replace_schema_metadata({**other, **{(META_PREFIX + k).encode(): v.encode()
                                                      for k, v in text.items()}})


def as_format_1(release: pdp.Release) -> pa.Table:
    """The table of ``release`` as writers before the format was numbered wrote it: no
    ``format`` entry, spatial files with every parameter copied at top level, sequence files
    with some, and a checksum over that text."""
    text = read_metadata(release.to_arrow())
    del text["format"], text[CHECKSUM_KEY]
    copied = (release.params if isinstance(release, pdp.SpatialRelease)
              else {k: v for k, v in release.params.items() if k in ("lambda", "delta", "l_top", "height")}
              if isinstance(release, pdp.SequenceRelease) else {})
    text.update({k: v for k, v in encode_metadata(copied).items() if k not in text})
    text[CHECKSUM_KEY] = payload_checksum(text, release._payload_arrays())
    return _with_meta(release.to_arrow(), text)


def test_every_release_type_writes_the_same_layout(release):
    text = read_metadata(release.to_arrow())
    layout = [*HEADER_KEYS, "params", *[k for k in type(release).metadata_entries if k in text], CHECKSUM_KEY]
    assert list(text) == layout
    assert json.loads(text["format"]) == FORMAT_VERSION == 2
    params = json.loads(text["params"])
    assert params == release.params and params
    assert not (set(params) - {"levels"}) & set(text)  # a parameter is written once, in params
    assert pdp.read_release(release.to_arrow()) == release


def test_a_format_1_file_reads_back_identically(release):
    old = as_format_1(release)
    back = pdp.read_release(old)
    assert back == release
    assert back.params == release.params
    assert read_metadata(back.to_arrow()) == read_metadata(release.to_arrow())


@pytest.mark.parametrize("kind", [k for k in KINDS if k not in ("basic", "privelet")])  # grids copied none
def test_the_checksum_of_a_format_1_file_covers_its_copies(kind):
    """The adapter drops the copies after the checksum is verified over the text as stored."""
    release = _make(kind)
    text = read_metadata(as_format_1(release))
    key = sorted(set(release.params) & set(text) - {"levels"})[0]
    del text[key]
    with pytest.raises(pdp.ReleaseFormatError, match="checksum"):
        pdp.read_release(_with_meta(release.to_arrow(), text))


@pytest.mark.parametrize(("name", "key"), [("v0_1_0_privtree", "lambda"), ("v0_1_0_uniform_grid", "m"),
                                           ("v0_1_0_pst", "tree_share")])
def test_an_edited_copy_in_an_old_file_is_refused_naming_it(name, key):
    table = pq.read_table(TESTS_DATA / f"{name}.parquet")
    text = read_metadata(table)
    assert "format" not in text and CHECKSUM_KEY not in text  # 0.1.0: format 1, before checksums
    pdp.read_release(table, unverified=True)
    text[key] = json.dumps(json.loads(text[key]) * 2)
    with pytest.raises(pdp.ReleaseFormatError, match=f"'{key}' is .* but the declared parameters give"):
        pdp.read_release(_with_meta(table, text), unverified=True)


def test_old_files_decode_as_format_1_without_their_copies():
    text = read_metadata(pq.read_schema(TESTS_DATA / "v0_1_0_privtree.parquet"))
    decoded = decode_metadata(text, pdp.SpatialRelease.metadata_entries)
    assert decoded.format == 1 and decoded.text == text
    assert set(decoded.entries) == {"columns", "bounds", "layout", "n_leaves"}
    assert decoded.common["params"]["lambda"] == json.loads(text["lambda"])
    assert (decoded.common["noise"], decoded.common["seeded"]) == ("float", False)


@pytest.mark.parametrize(("value", "message"), [("3", "'format' is 3: this version of polars-dp reads"),
                                                ("\"2\"", "'format' is '2'"), ("true", "'format' is True"),
                                                ("{", "'format' is malformed")])
def test_an_unknown_format_is_refused(value, message):
    release = _make("basic")
    text = read_metadata(release.to_arrow())
    text["format"] = value
    with pytest.raises(pdp.ReleaseFormatError, match=message):
        pdp.read_release(_with_meta(release.to_arrow(), text))


def test_a_numbered_file_without_its_checksum_is_refused_even_posing_as_0_1_0():
    """``format`` marks a writer that always adds a checksum (like ``noise`` and ``seeded``); a
    file posing as 0.1.0 is refused too, unless the caller opts in, and then says it is unverified."""
    release = _make("basic")
    text = read_metadata(release.to_arrow())
    for key in (CHECKSUM_KEY, "noise", "seeded"):
        del text[key]
    text["params"] = json.dumps({"sensitivity": 2})  # 0.1.0 recorded no exact scale
    with pytest.raises(pdp.ReleaseFormatError, match="checksum was removed"):
        pdp.read_release(_with_meta(release.to_arrow(), text))
    del text["format"]
    assert text["version"] == pdp.__version__ != "0.1.0"  # a file written now never claims 0.1.0
    with pytest.raises(pdp.ReleaseFormatError, match="checksum was removed"):
        pdp.read_release(_with_meta(release.to_arrow(), text))
    text["version"] = "0.1.0"  # what a 0.1.0 file looks like
    with pytest.raises(pdp.ReleaseFormatError, match="claims to be written by polars-dp 0.1.0"):
        pdp.read_release(_with_meta(release.to_arrow(), text))
    legacy = pdp.read_release(_with_meta(release.to_arrow(), text), unverified=True)
    assert legacy.noise == "float" and legacy.verified is False


def test_the_writer_refuses_an_entry_out_of_place():
    header = {"release_type": "grid", "mechanism": "basic", "epsilon": 1.0, "neighbours": "replace",
              "noise": "exact", "seeded": False, "version": "x", "created": "y"}
    assert list(release_metadata(header, {}, {}, ("shape",))) == [*HEADER_KEYS, "params"]
    with pytest.raises(ValueError, match="out of place"):
        release_metadata(header, {}, {"lambda": 1.0}, ("shape",))  # not a declared entry
    with pytest.raises(ValueError, match="out of place"):
        release_metadata({**header, "format": 1}, {}, {}, ())
    with pytest.raises(ValueError, match="out of place"):
        release_metadata(header, {}, {}, ("epsilon",))  # an entry may not shadow the header


def test_a_newer_format_is_named_before_its_release_type():
    table = _make("basic").to_arrow()
    text = read_metadata(table)
    text.update(format="3", release_type="hypercube")
    with pytest.raises(pdp.ReleaseFormatError, match="'format' is 3: .*a newer polars-dp"):
        pdp.read_release(_with_meta(table, text))
    del text["format"]
    with pytest.raises(pdp.ReleaseFormatError, match="unknown release type 'hypercube'"):
        pdp.read_release(_with_meta(table, text))


def test_files_written_now_record_the_version_of_pyproject_never_0_1_0(tmp_path):
    """0.1.0 is what files written before checksums claim: a file written now must not claim it
    (the version is written in ``polars_dp/_version.py``, not read from a possibly stale install)."""
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert pdp.__version__ == declared and declared != "0.1.0"
    path = _make("basic").write_parquet(tmp_path / "r.parquet")
    assert read_metadata(pq.read_schema(path))["version"] == declared
    assert pdp.read_release(path).library_version == declared


def test_created_is_when_the_release_was_made_and_what_it_was_read_with(tmp_path):
    from datetime import UTC, datetime
    before = datetime.now(UTC).replace(microsecond=0)
    release = _make("basic")
    after = datetime.now(pdp.releases.base.UTC)
    made = datetime.fromisoformat(release.created)
    assert before <= made <= after and made.utcoffset().total_seconds() == 0
    assert release.created.endswith("+00:00") and len(release.created) == len("2026-01-01T00:00:00+00:00")
    assert release.metadata()["created"] == release.created
    release.write_parquet(tmp_path / "r.parquet")
    assert pdp.read_release(tmp_path / "r.parquet").created == release.created
