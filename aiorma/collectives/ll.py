"""LL ("low latency") messages: the completion flag travels inside the data, one put per message.

The idea is the LL protocol of NVIDIA's NCCL (``src/device/prims_ll.h``, NCCL 2.x): every 8-byte
word carries 4 bytes of payload and a 4-byte flag, the message's sequence number.  A word whose
flag is the sequence number the reader expects holds this message's payload, because a word is
written whole (docs/architecture.md, *One put per small message*), so the reader knows the message
has landed once every word's flag matches — no separate flag write, so a small message is one put
and one flush instead of two of each.  The price is twice the bytes, which is
why only messages up to ``LandingConfig.ll_bytes`` go this way.

Layout of a word (an int64 element of the LL landing window, read as uint64): bits 0–31 payload,
bits 32–63 flag.  Arithmetic on uint64 values, never a view of the halves, so the layout is the
same on either byte order.  Flags are ``(ordinal + 1) mod 2**32`` of the message's per-pair
ordinal: never 0 (the window's initial contents) for the first ``2**32 − 1`` messages, and
different from the previous message that used the slot.

This module is pure data plus a watcher; :mod:`.landing` owns the slots, ordinals and credits.
"""

from __future__ import annotations

import asyncio

import numpy as np

from .._core.watch import _GUARD, MemoryWatcher

_LOW = np.uint64(0xFFFF_FFFF)
_SHIFT = np.uint64(32)


def words_for(nbytes: int) -> int:
    """Words of an LL message of ``nbytes`` payload bytes (4 per word)."""
    return (nbytes + 3) // 4


def flag_of(ordinal: int) -> int:
    """The flag of a pair's message number ``ordinal`` (counted from 0)."""
    return (ordinal + 1) & 0xFFFF_FFFF


def encode(data: np.ndarray, flag: int) -> np.ndarray:
    """``data`` (1-D uint8) as LL words (int64, the landing window's dtype): each carries 4 bytes
    of it (zero-padded at the end) and ``flag``."""
    nbytes = int(data.size)
    if nbytes % 4:
        padded = np.zeros(words_for(nbytes) * 4, np.uint8)
        padded[:nbytes] = data
        data = padded
    words = data.view(np.uint32).astype(np.uint64)
    words |= np.uint64(flag) << _SHIFT
    return words.view(np.int64)


def decode(slot: np.ndarray, flag: int, nbytes: int) -> np.ndarray | None:
    """The payload (1-D uint8, ``nbytes``) of the LL words in ``slot`` (int64, the window's memory)
    if every word carries ``flag``, else None (not all landed yet).

    The words are copied first and only the copy is examined: each word is read once, by one
    8-byte load, so flag and payload of a word come from the same write even on a CPU that
    reorders loads — nothing depends on when the slot is looked at again."""
    words = slot.view(np.uint64).copy()
    if not bool(((words >> _SHIFT) == flag).all()):
        return None
    return words.astype(np.uint32).view(np.uint8)[:nbytes]


def _landed(words: np.ndarray, flag: int) -> bool:
    return bool(((words >> _SHIFT) == flag).all())


class SlotWatcher(MemoryWatcher):
    """A :class:`MemoryWatcher` over the LL landing window (viewed as uint64) that also waits for
    a whole slot: every word of ``[lo, hi)`` carrying a flag.  It is a watcher like the flag
    window's, so the local transport's pokes and the rank's waiter re-check it the same way."""

    def __init__(self, memory: np.ndarray, waiter: object) -> None:
        super().__init__(memory.view(np.uint64), waiter)  # type: ignore[arg-type]

    def wait_slot(self, lo: int, hi: int, flag: int) -> asyncio.Future[None]:
        """A future finished once every word of ``memory[lo:hi]`` carries ``flag`` (a hint:
        :func:`decode` decides, on its own copy of the words)."""
        if _landed(self.memory[lo:hi], flag):
            return self._done
        future: asyncio.Future[None] = self._loop.create_future()
        if self._failure is not None:
            future.set_exception(self._failure)
            return future
        self._waits.append((slice(lo, hi), _landed, flag, future))  # type: ignore[arg-type]
        if self._waiter.polled:
            self._waiter.wake()
        elif self._guard is None:
            self._guard = self._loop.call_later(_GUARD, self._guard_check)
        return future
