"""Optional tamper evidence: a keyed signature over a release's checksum.

The checksum (:func:`~polars_dp.releases.integrity.payload_checksum`) covers every metadata
entry and the whole payload, so it detects accidental corruption and truncation, but whoever
edits a file can recompute it.  A signature over it can only be made with a key:

* **Ed25519** (preferred): ``release.write_parquet(path, signing_key=private_key)`` with a
  ``cryptography`` ``Ed25519PrivateKey``; anyone holding the public key verifies,
  ``read_release(path, verify_key=public_key)``, and cannot sign.
* **HMAC-SHA256**: ``signing_key=secret`` (``bytes``, at least :data:`MIN_HMAC_BYTES`); the
  same secret verifies, and whoever can verify can also sign.

The signature is stored as the metadata entry ``signature`` (``"ed25519:<base64>"`` or
``"hmac-sha256:<base64>"``), the one entry the checksum does not cover; it signs
:data:`CONTEXT` followed by the checksum text.  ``read_release(..., verify_key=...)`` refuses
(:class:`~polars_dp.errors.ReleaseSignatureError`) a release without a signature, with a
signature of the other kind, or with one the key does not verify; the class then checks that
the signed checksum matches the content, so an edited payload fails one or the other.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from polars_dp.errors import ParameterError, ReleaseSignatureError
from polars_dp.releases.integrity import CHECKSUM_KEY, SIGNATURE_KEY
from polars_dp.releases.metadata import META_PREFIX

#: What is signed before the checksum (domain separation: a signature made for anything else
#: never verifies as a release's).
CONTEXT = b"polars-dp release checksum\0"
#: The shortest HMAC secret accepted (256 bits).
MIN_HMAC_BYTES = 32
ED25519, HMAC = "ed25519", "hmac-sha256"

SigningKey = Ed25519PrivateKey | bytes
VerifyKey = Ed25519PublicKey | Ed25519PrivateKey | bytes


def _kind(key: Any, what: str, ed25519: tuple[type, ...]) -> str:
    if isinstance(key, ed25519):
        return ED25519
    if isinstance(key, (bytes, bytearray)) and len(key) >= MIN_HMAC_BYTES:
        return HMAC
    size = f" of {len(key)} bytes" if isinstance(key, (bytes, bytearray)) else ""
    raise ParameterError(f"{what} must be an Ed25519 key (cryptography.hazmat.primitives.asymmetric."
                         f"ed25519) or an HMAC secret of at least {MIN_HMAC_BYTES} bytes, got "
                         f"{type(key).__name__}{size}")


def sign(checksum: str, key: SigningKey) -> str:
    """The ``signature`` entry of a release whose ``checksum`` entry is ``checksum``."""
    kind = _kind(key, "signing_key", (Ed25519PrivateKey,))
    message = CONTEXT + checksum.encode()
    if kind == ED25519:
        raw = key.sign(message)  # type: ignore[union-attr]
    else:
        raw = hmac.digest(bytes(key), message, hashlib.sha256)  # type: ignore[arg-type]
    return f"{kind}:{base64.b64encode(raw).decode()}"


def check_signature(metadata_text: Mapping[str, str], key: VerifyKey) -> None:
    """Refuse (:class:`ReleaseSignatureError`) unless the stored ``signature`` verifies the
    stored ``checksum`` with ``key``."""
    kind = _kind(key, "verify_key", (Ed25519PublicKey, Ed25519PrivateKey))
    stored, checksum = metadata_text.get(SIGNATURE_KEY), metadata_text.get(CHECKSUM_KEY)
    if stored is None or checksum is None:
        raise ReleaseSignatureError(
            "release has no signature, so verify_key= cannot vouch for it: it was written without "
            "signing_key= or its signature was removed; refusing to answer from it")
    stored_kind, _, text = stored.partition(":")
    if stored_kind != kind:
        raise ReleaseSignatureError(f"release is signed with {stored_kind!r} but verify_key is an {kind} "
                                    "key; give the key of the signer")
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError:
        raise ReleaseSignatureError(f"release metadata field 'signature' is malformed ({stored[:80]!r})"
                                    ) from None
    message = CONTEXT + checksum.encode()
    if kind == ED25519:
        public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
        try:
            public.verify(raw, message)  # type: ignore[union-attr]
            return
        except InvalidSignature:
            pass
    elif hmac.compare_digest(raw, hmac.digest(bytes(key), message, hashlib.sha256)):  # type: ignore[arg-type]
        return
    raise ReleaseSignatureError(
        "release signature does not verify with this key: the release was changed after it was "
        "signed, or signed with another key; refusing to answer from it")


def with_signature(reader: pa.RecordBatchReader, key: SigningKey) -> pa.RecordBatchReader:
    """``reader`` with a ``signature`` entry over the ``checksum`` entry of its schema metadata."""
    meta = dict(reader.schema.metadata or {})
    checksum = meta[(META_PREFIX + CHECKSUM_KEY).encode()].decode()
    meta[(META_PREFIX + SIGNATURE_KEY).encode()] = sign(checksum, key).encode()
    return pa.RecordBatchReader.from_batches(reader.schema.with_metadata(meta), reader)


__all__ = ["CONTEXT", "ED25519", "HMAC", "MIN_HMAC_BYTES", "SigningKey", "VerifyKey", "check_signature",
           "sign", "with_signature"]
