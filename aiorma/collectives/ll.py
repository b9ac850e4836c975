"""LL ("low latency") messages: the completion flag travels inside the data, one put per message.

The idea is the LL protocol of NVIDIA's NCCL (``src/device/prims_ll.h``, NCCL 2.x): every 8-byte
word carries 4 bytes of payload and a 4-byte flag, the message's sequence number.  A word whose
flag is the sequence number the reader expects holds this message's payload, because a word is
written whole (docs/architecture.md, *One put per small message*), so the reader knows the message
has landed once every word's flag matches — no separate flag write, so a small message is one put
and one flush instead of two of each.  The price is twice the bytes, which is
why only messages up to ``LandingConfig.ll_bytes`` go this way.

Layout of a word (an int64 element of the LL landing window, read as uint64): bits 0–31 payload,
bits 32–63 flag, on either byte order (the codecs below place the halves by ``sys.byteorder``).
Flags are ``(ordinal + 1) mod 2**32`` of the message's per-pair ordinal: never 0 (the window's
initial contents) for the first ``2**32 − 1`` messages, and different from the previous message
that used the slot.

The codec has two forms: a C extension (``_ll_codec.c``, built with the compiled engine and used
on the same decision, :mod:`aiorma._native`) that encodes a message into a new array and decodes
one into a buffer of the caller's in one call each, and the Python one below (struct, memoryview or
numpy by size), which costs a few numpy calls per message — each about a microsecond.

This module is pure data plus a watcher; :mod:`.landing` owns the slots, ordinals and credits.
"""

from __future__ import annotations

import asyncio
import struct
import sys
from typing import Final

import numpy as np

from .. import _native
from .._core.memcopy import load_words
from .._core.watch import MemoryWatcher

_LITTLE: Final = sys.byteorder == "little"
# Where the payload and the flag sit among a word's two uint32 halves in memory: the flag is the
# word's high half, whichever end of the word that is.
_PAY: Final = 0 if _LITTLE else 1
_FLAG: Final = 1 - _PAY
_SHIFT: Final = np.uint64(32)
#: Messages up to this many bytes are encoded and decoded with memoryview operations (a few
#: Python calls, about as cheap for 8 words as for 1), longer ones with numpy (a few array
#: operations, each costing more than the whole memoryview path for a short message).
_SMALL: Final = 32
#: A memoryview format of 4-byte unsigned items (C ``unsigned int``): a word's two halves.
_HALF: Final = "I"
# Two-word messages (5-8 bytes: the default LL size, one float64) are the commonest; ``struct``
# encodes them in about half the time the memoryview path takes and decodes them in two thirds,
# which every 8-byte collective step pays on both sides (docs/benchmarks.md, 2026-11-27 later).
_TWO_HALVES: Final = struct.Struct("=2I")
_TWO_WORDS: Final = struct.Struct("=4I")
_INT64: Final = np.dtype(np.int64)
#: The compiled codec (``_ll_codec.c``: ``encode_into``, ``decode_into``), or None where the build
#: left none: the Python forms run.
COMPILED: Final = _native.compiled_extension("aiorma.collectives._ll_codec")


def words_for(nbytes: int) -> int:
    """Words of an LL message of ``nbytes`` payload bytes (4 per word)."""
    return (nbytes + 3) // 4


def flag_of(ordinal: int) -> int:
    """The flag of a pair's message number ``ordinal`` (counted from 0)."""
    return (ordinal + 1) & 0xFFFF_FFFF


def encode(data: np.ndarray, flag: int) -> np.ndarray:
    """``data`` (1-D uint8) as LL words (int64, the landing window's dtype), a new writable
    array: each carries 4 bytes of it (zero-padded at the end) and ``flag``."""
    codec = COMPILED
    if codec is not None:
        words = np.empty((int(data.size) + 3) // 4, _INT64)
        codec.encode_into(words, data, flag)
        return words
    return encode_python(data, flag)


def encode_python(data: np.ndarray, flag: int) -> np.ndarray:
    """:func:`encode`'s Python form."""
    nbytes = int(data.size)
    if 4 < nbytes <= 8:
        low, high = _TWO_HALVES.unpack(data.tobytes().ljust(8, b"\0"))
        out = bytearray(16)  # writable: see below
        if _LITTLE:
            _TWO_WORDS.pack_into(out, 0, low, flag, high, flag)
        else:
            _TWO_WORDS.pack_into(out, 0, flag, low, flag, high)
        return np.frombuffer(out, np.int64)
    if nbytes <= _SMALL:
        raw = data.tobytes()
        if nbytes % 4:
            raw += bytes(4 - nbytes % 4)
        count = len(raw) // 4
        # Writable (a bytearray): where MPI wants a writable origin (an off-node put as
        # Rget_accumulate with AIORMA_INLINE=0) the transport would otherwise copy a read-only one.
        out = bytearray(8 * count)
        parts = memoryview(out).cast(_HALF)
        parts[_PAY::2] = memoryview(raw).cast(_HALF)
        parts[_FLAG::2] = memoryview(flag.to_bytes(4, sys.byteorder) * count).cast(_HALF)
        return np.frombuffer(out, np.int64)
    halves = np.empty(2 * words_for(nbytes), np.uint32)
    halves[_FLAG::2] = flag
    if nbytes % 4:
        padded = np.zeros(words_for(nbytes) * 4, np.uint8)
        padded[:nbytes] = data
        data = padded
    halves[_PAY::2] = data.view(np.uint32)
    return halves.view(np.int64)


def encode_word(data: np.ndarray, flag: int) -> int:
    """A message of at most 4 bytes as its one LL word, a Python int in int64's range (what
    :meth:`aiorma.Window.signal` writes)."""
    payload = int.from_bytes(data.tobytes().ljust(4, b"\0"), sys.byteorder)  # its bytes in memory
    word = payload | flag << 32
    return word - (1 << 64) if word >= 1 << 63 else word


def decode(slot: np.ndarray, flag: int, nbytes: int) -> np.ndarray | None:
    """The payload (1-D uint8, ``nbytes``) of the LL words in ``slot`` (int64, the window's memory)
    if every word carries ``flag``, else None (not all landed yet).

    The words are copied first and only the copy is examined: each word is read once, by one
    8-byte load, so flag and payload of a word come from the same write even on a CPU that
    reorders loads — nothing depends on when the slot is looked at again."""
    if nbytes <= 4:
        word = int(slot[0]) & 0xFFFF_FFFF_FFFF_FFFF  # one load
        if word >> 32 != flag:
            return None
        return np.frombuffer((word & 0xFFFF_FFFF).to_bytes(4, sys.byteorder), np.uint8, nbytes)
    if nbytes <= 8:
        pair = _TWO_WORDS.unpack(slot.tobytes())  # one copy of the two words, as four halves
        if pair[_FLAG] != flag or pair[_FLAG + 2] != flag:
            return None
        return np.frombuffer(_TWO_HALVES.pack(pair[_PAY], pair[_PAY + 2]), np.uint8, nbytes)
    if nbytes <= _SMALL:
        parts = memoryview(slot.tobytes()).cast(_HALF)
        if parts[_FLAG::2].tolist() != [flag] * (len(parts) // 2):
            return None
        return np.frombuffer(parts[_PAY::2].tobytes(), np.uint8, nbytes)
    halves = load_words(slot).view(np.uint32)  # (not slot.copy(): see load_words)
    if not bool((halves[_FLAG::2] == flag).all()):
        return None
    return halves[_PAY::2].copy().view(np.uint8)[:nbytes]


def decode_into(out: np.ndarray, memory: np.ndarray, word: int, flag: int) -> bool:
    """True and the payload of the LL message whose words start at ``memory[word]`` (the LL
    window's memory) in ``out`` (1-D uint8, the message's size) when every word of it carries
    ``flag``; else False, ``out`` untouched.  Each word is read once, as :func:`decode` does."""
    codec = COMPILED
    if codec is not None:
        landed: bool = codec.decode_into(out, memory, word, flag)
        return landed
    nbytes = int(out.size)
    payload = decode(memory[word : word + words_for(nbytes)], flag, nbytes)
    if payload is None:
        return False
    out[...] = payload
    return True


def _landed(words: np.ndarray, flag: int) -> bool:
    """Every word (uint64) carries ``flag``.  A waiting receiver runs this at every poll, so a short
    slot is tested with Python ints (under a microsecond; the numpy form costs several)."""
    if words.size > _SMALL // 4:
        return bool(((words >> _SHIFT) == flag).all())
    for word in words.tolist():  # noqa: SIM110 - a loop costs a third of all() over a generator
        if word >> 32 != flag:
            return False
    return True


class SlotWatcher(MemoryWatcher):
    """A :class:`MemoryWatcher` over the LL landing window (viewed as uint64) that also waits for
    a whole slot: every word of ``[lo, hi)`` carrying a flag.  It is a watcher like the flag
    window's, so the local transport's pokes and the rank's waiter re-check it the same way."""

    def __init__(self, memory: np.ndarray, waiter: object) -> None:
        super().__init__(memory.view(np.uint64), waiter)  # type: ignore[arg-type]

    def wait_slot(self, lo: int, hi: int, flag: int) -> asyncio.Future[None]:
        """A future finished once every word of ``memory[lo:hi]`` carries ``flag`` (a hint:
        :func:`decode` decides, on its own copy of the words)."""
        return self.wait_for(slice(lo, hi), _landed, flag)
