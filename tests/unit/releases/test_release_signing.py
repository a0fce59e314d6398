"""Tamper evidence: ``write_parquet(signing_key=...)`` signs the checksum, ``read_release(...,
verify_key=...)`` refuses a release without a signature, with a bad one, or signed by another key
(:mod:`polars_dp.releases.signing`)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

import polars_dp as pdp
from polars_dp.releases.metadata import META_PREFIX, read_metadata

SIGNATURE = (META_PREFIX + "signature").encode()
SECRET = bytes(range(32))

ATTRS = [pdp.Ordinal("age", 0, 99, width=10)]


def _grid(seed: int) -> pdp.GridRelease:
    frame = pl.DataFrame({"age": np.random.default_rng(seed).integers(0, 100, 400)})
    return pdp.basic(frame, ATTRS, epsilon=1.0, seed=seed)


@pytest.fixture(scope="module")
def key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def _meta(table, **changes: bytes | None):
    meta = dict(table.schema.metadata)
    for name, value in changes.items():
        full = (META_PREFIX + name).encode()
        if value is None:
            meta.pop(full, None)
        else:
            meta[full] = value
    return table.replace_schema_metadata(meta)


def test_a_signed_release_verifies_with_the_public_key_only(tmp_path, key):
    release = _grid(1)
    path = release.write_parquet(tmp_path / "r.parquet", signing_key=key)
    assert read_metadata(pq.read_schema(path))["signature"].startswith("ed25519:")
    back = pdp.read_release(path, verify_key=key.public_key())
    assert back == release and back.verified
    assert pdp.read_release(path) == release  # a signature changes nothing for a plain reader
    assert pdp.scan_release(path).collect().height == release.n_cells


def test_scan_release_checks_the_signature_before_it_returns(tmp_path, key):
    release = _grid(1)
    path = release.write_parquet(tmp_path / "r.parquet", signing_key=key)
    assert pdp.scan_release(path, verify_key=key.public_key()).collect().height == release.n_cells
    with pytest.raises(pdp.ReleaseSignatureError, match="does not verify with this key"):
        pdp.scan_release(path, verify_key=Ed25519PrivateKey.generate().public_key())
    with pytest.raises(pdp.ReleaseSignatureError, match="has no signature"):
        pdp.scan_release(_grid(1).write_parquet(tmp_path / "plain.parquet"), verify_key=key.public_key())
    hmac = release.write_parquet(tmp_path / "h.parquet", signing_key=SECRET)
    assert pdp.scan_release(hmac, verify_key=SECRET).collect().height == release.n_cells
    with pytest.raises(pdp.ReleaseSignatureError, match="does not verify"):
        pdp.scan_release(hmac, verify_key=bytes(32))


def test_a_payload_changed_after_signing_is_refused(tmp_path, key):
    """Another release's content under the signed file's signature: its own checksum matches its
    content, but the signature does not verify that checksum."""
    path = _grid(1).write_parquet(tmp_path / "r.parquet", signing_key=key)
    signature = pq.read_schema(path).metadata[SIGNATURE]
    forged = _meta(_grid(2).to_arrow(), signature=signature)
    assert pdp.read_release(forged).verified  # its checksum is right: the checksum is not a seal
    with pytest.raises(pdp.ReleaseSignatureError, match="does not verify with this key"):
        pdp.read_release(forged, verify_key=key.public_key())
    table = pq.read_table(path)
    counts = table.column("count").to_numpy().copy()
    counts[0] += 100
    edited = table.set_column(table.schema.get_field_index("count"), "count", pl.Series(counts).to_arrow())
    with pytest.raises(pdp.ReleaseFormatError, match="checksum does not match"):  # not recomputed
        pdp.read_release(edited, verify_key=key.public_key())


def test_the_wrong_key_is_refused(tmp_path, key):
    path = _grid(1).write_parquet(tmp_path / "r.parquet", signing_key=key)
    with pytest.raises(pdp.ReleaseSignatureError, match="does not verify with this key"):
        pdp.read_release(path, verify_key=Ed25519PrivateKey.generate().public_key())
    with pytest.raises(pdp.ReleaseSignatureError, match="signed with 'ed25519' but verify_key is an hmac"):
        pdp.read_release(path, verify_key=SECRET)


def test_a_stripped_signature_is_refused(tmp_path, key):
    path = _grid(1).write_parquet(tmp_path / "r.parquet", signing_key=key)
    stripped = _meta(pq.read_table(path), signature=None)
    assert pdp.read_release(stripped).verified  # the checksum alone still reads
    with pytest.raises(pdp.ReleaseSignatureError, match="has no signature"):
        pdp.read_release(stripped, verify_key=key.public_key())
    with pytest.raises(pdp.ReleaseSignatureError, match="has no signature"):
        pdp.read_release(_grid(1).write_parquet(tmp_path / "plain.parquet"), verify_key=key.public_key())
    posing = _meta(stripped, checksum=None, format=None, noise=None, seeded=None, version=b"0.1.0")
    with pytest.raises(pdp.ReleaseSignatureError, match="has no signature"):
        pdp.read_release(posing, verify_key=key.public_key(), unverified=True)
    garbled = _meta(pq.read_table(path), signature=b"ed25519:not base64!")
    with pytest.raises(pdp.ReleaseSignatureError, match="'signature' is malformed"):
        pdp.read_release(garbled, verify_key=key.public_key())


def test_an_hmac_secret_signs_and_verifies(tmp_path):
    path = _grid(1).write_parquet(tmp_path / "r.parquet", signing_key=SECRET)
    assert read_metadata(pq.read_schema(path))["signature"].startswith("hmac-sha256:")
    assert pdp.read_release(path, verify_key=SECRET).verified
    with pytest.raises(pdp.ReleaseSignatureError, match="does not verify"):
        pdp.read_release(path, verify_key=bytes(32))


def test_a_bad_key_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(pdp.ParameterError, match="at least 32 bytes, got bytes of 8 bytes"):
        _grid(1).write_parquet(tmp_path / "r.parquet", signing_key=b"password")
    with pytest.raises(pdp.ParameterError, match="signing_key must be an Ed25519 key"):
        _grid(1).write_parquet(tmp_path / "r.parquet", signing_key="secret")  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []
    path = _grid(1).write_parquet(tmp_path / "r.parquet", signing_key=SECRET)
    with pytest.raises(pdp.ParameterError, match="verify_key must be"):
        pdp.read_release(path, verify_key="secret")  # type: ignore[arg-type]


def test_spatial_and_sequence_releases_with_geometry_are_signed_alike(tmp_path, key):
    rng = np.random.default_rng(3)
    points = pl.DataFrame({"x": rng.random(500), "y": rng.random(500)})
    tree = pdp.privtree(points, ["x", "y"], bounds=[(0, 1), (0, 1)], epsilon=1.0, seed=1, levels=1)
    path = tree.write_parquet(tmp_path / "t.parquet", geometry=True, signing_key=key)
    assert pdp.read_release(path, verify_key=key.public_key()) == tree
    model = pdp.ngram_sequences(pl.DataFrame({"s": ["ab", "ba", "abc"] * 20}), "s", alphabet="abc",
                                max_length=4, epsilon=1.0, height=2, seed=1)
    path = model.write_parquet(tmp_path / "m.parquet", signing_key=key)
    assert pdp.read_release(path, verify_key=key.public_key()) == model
