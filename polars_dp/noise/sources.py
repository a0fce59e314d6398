"""Random bits: a ChaCha20 keystream keyed from the OS by default, seeded PCG64 for tests.

See :mod:`polars_dp.noise` (Randomness) for the choice of generator.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, TypeAlias

import numpy as np

from polars_dp.errors import ParameterError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers import CipherContext

try:  # the default cryptographic bit source (falls back to os.urandom without it)
    from cryptography.hazmat.primitives.ciphers import Cipher as _Cipher
    from cryptography.hazmat.primitives.ciphers.algorithms import ChaCha20 as _ChaCha20
except ImportError:  # pragma: no cover - exercised only without the package
    _Cipher = _ChaCha20 = None  # type: ignore[misc,assignment]  # fallback: package absent


#: Masks of random 64-bit words.
MASK63 = np.uint64((1 << 63) - 1)
U64 = 1 << 64

SeedLike: TypeAlias = int | np.random.SeedSequence | np.random.Generator | None


# ============================================================================ randomness
_ZERO_CHUNK = 1 << 24


@lru_cache(maxsize=1)
def _zero_block() -> memoryview:
    return memoryview(bytes(_ZERO_CHUNK))


#: Incremented in every child right after ``fork`` (:func:`os.register_at_fork`): a source keyed
#: under another generation re-keys before its next word, so no process replays a stream,
#: whatever its PID (a PID can be reused by a grandchild once its parent is gone).
_fork_generation = 0


def _after_fork_in_child() -> None:
    global _fork_generation
    _fork_generation += 1


if hasattr(os, "register_at_fork"):  # POSIX; Windows has no fork
    os.register_at_fork(after_in_child=_after_fork_in_child)


class NoiseSource:
    """Random 64-bit words for the samplers, and a flag saying whether they are seeded.

    ``NoiseSource()`` is cryptographic: a ChaCha20 keystream (pyca ``cryptography``, i.e.
    OpenSSL) under a fresh 256-bit key from :func:`os.urandom`, re-keyed in a child after
    ``fork`` (an :func:`os.register_at_fork` hook, not a PID comparison) and every ``2^32``
    words; without ``cryptography`` it reads :func:`os.urandom` directly.
    ``NoiseSource(generator)`` takes words from a numpy Generator (``bit_generator.random_raw``),
    which is what a seed gives.  :attr:`generator` is that Generator (None when cryptographic).
    """

    def __init__(self, generator: np.random.Generator | None = None):
        self.generator = generator
        self.seeded = generator is not None
        self._cipher: CipherContext | None = None
        self._generation = -1
        self._left = 0

    def _keystream(self, nbytes: int) -> np.ndarray | None:
        if _ChaCha20 is None:
            return None
        if self._cipher is None or self._generation != _fork_generation or self._left < nbytes:
            # fresh key, zero 32-bit block counter: at most 2^32 words (2^29 blocks) per key
            key, nonce = os.urandom(32), bytes(4) + os.urandom(12)
            self._cipher = _Cipher(_ChaCha20(key, nonce), mode=None).encryptor()
            self._generation = _fork_generation
            self._left = 8 << 32
        self._left -= nbytes
        out = np.empty(nbytes + 64, dtype=np.uint8)  # update_into wants room for a block
        zeros = _zero_block()
        for a in range(0, nbytes, _ZERO_CHUNK):
            m = min(_ZERO_CHUNK, nbytes - a)
            self._cipher.update_into(zeros[:m], out[a:a + m + 64].data)
        return out[:nbytes]

    @property
    def kind(self) -> str:
        """``"pcg64 (seeded)"``, ``"chacha20"`` or ``"os.urandom"``."""
        if self.seeded:
            return "pcg64 (seeded)"
        return "os.urandom" if _ChaCha20 is None else "chacha20"

    def words(self, n: int) -> np.ndarray:
        """``n`` independent uniform uint64 words."""
        n = int(n)
        if self.generator is not None:
            return np.asarray(self.generator.bit_generator.random_raw(n), dtype=np.uint64)
        stream = self._keystream(8 * n)
        if stream is None:
            return np.frombuffer(os.urandom(8 * n), dtype=np.uint64)
        return stream.view(np.uint64)

    def integers_below(self, bound: int, n: int) -> np.ndarray:
        """``n`` uniform integers in ``[0, bound)`` (any ``bound >= 1``) by rejection: with
        ``k`` words per draw (``k = 1`` up to ``2^64``), ``w`` is kept iff ``w < floor(2^(64k) /
        bound) * bound``, then ``w mod bound``.  uint64 for ``bound <= 2^64``, else Python ints
        (an object array; the exact CKS Bernoulli of large PrivTree scales needs them)."""
        bound = int(bound)
        if bound < 1:
            raise ParameterError(f"integers_below needs bound >= 1, got {bound}")
        if bound > U64:
            return self._integers_below_wide(bound, n)
        out = np.empty(n, dtype=np.uint64)
        limit = (U64 // bound) * bound
        todo = np.arange(n)
        while todo.size:
            w = self.words(todo.size)
            if limit < U64:
                ok = w < np.uint64(limit)
                out[todo[ok]] = w[ok] % np.uint64(bound)
                todo = todo[~ok]
            else:  # bound divides 2^64 (a power of two)
                out[todo] = w if bound == U64 else w % np.uint64(bound)
                break
        return out

    def _integers_below_wide(self, bound: int, n: int) -> np.ndarray:
        k = -(-bound.bit_length() // 64)
        limit = ((1 << (64 * k)) // bound) * bound
        out = np.empty(n, dtype=object)
        todo = np.arange(n)
        while todo.size:
            w = self.words(todo.size * k).reshape(todo.size, k)
            v = np.zeros(todo.size, dtype=object)
            for i in range(k):  # most significant word first
                v = (v << 64) | w[:, i].astype(object)
            ok = (v < limit).astype(bool)
            out[todo[ok]] = v[ok] % bound
            todo = todo[~ok]
        return out

    def block_streams(self) -> Callable[[int], NoiseSource]:
        """``stream(k)``: a source of its own for block ``k``, independent of every other block's
        and of this source's later words, so that blocks can draw in any order or at once.

        Cryptographic: every ``stream(k)`` is a new :class:`NoiseSource`, keyed afresh from
        :func:`os.urandom`.  Seeded: two words of this source are a 128-bit root, and
        ``stream(k)`` is PCG64 seeded by ``SeedSequence(root, spawn_key=(k,))`` (numpy's
        construction of independent child streams), so the same seed gives the same blocks."""
        if self.generator is None:
            return lambda k: NoiseSource()
        w = self.words(2)
        root = (int(w[0]) << 64) | int(w[1])

        def stream(k: int) -> NoiseSource:
            seq = np.random.SeedSequence(root, spawn_key=(int(k),))
            return NoiseSource(np.random.Generator(np.random.PCG64(seq)))

        return stream

    def fair_bits(self, n: int) -> np.ndarray:
        """``n`` independent fair booleans."""
        w = self.words(-(-n // 64))
        return np.unpackbits(w.view(np.uint8))[:n].astype(bool)

    def __repr__(self) -> str:
        return f"NoiseSource({self.kind})"


def make_rng(seed: SeedLike = None) -> np.random.Generator:
    """A numpy Generator (PCG64) for randomness that is not privacy noise.

    ``None`` seeds from 128 bits of OS entropy (:func:`secrets.randbits`).  An int or
    SeedSequence gives a reproducible stream.  An existing Generator is returned as is.
    Mechanisms use :func:`noise_source` instead.
    """
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None:
        return np.random.Generator(np.random.PCG64(np.random.SeedSequence(secrets.randbits(128))))
    if isinstance(seed, np.random.SeedSequence):
        return np.random.Generator(np.random.PCG64(seed))
    if isinstance(seed, (bool, float, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise ParameterError(f"seed must be an int, a numpy Generator or None, got {seed!r}")
    if seed < 0:
        raise ParameterError(f"seed must be >= 0, got {seed}")
    return np.random.Generator(np.random.PCG64(int(seed)))


def noise_source(seed: SeedLike | NoiseSource = None) -> NoiseSource:
    """The random source of a mechanism: the OS CSPRNG for ``None``, else a seeded PCG64
    stream (:func:`make_rng`; the release is then marked ``seeded``)."""
    if isinstance(seed, NoiseSource):
        return seed
    if seed is None:
        return NoiseSource()
    return NoiseSource(make_rng(seed))


def as_source(rng: np.random.Generator | NoiseSource | None) -> NoiseSource:
    """A NoiseSource for ``rng`` (a Generator is wrapped and counts as seeded)."""
    if isinstance(rng, NoiseSource):
        return rng
    if rng is None:
        return NoiseSource()
    if isinstance(rng, np.random.Generator):
        return NoiseSource(rng)
    raise ParameterError(f"expected a NoiseSource or a numpy Generator, got {rng!r}")


__all__ = ["MASK63", "NoiseSource", "SeedLike", "U64", "as_source", "make_rng", "noise_source"]
