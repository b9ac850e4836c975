"""Copying bytes without glibc's slow ``rep movsb`` case.

For copies from a few KiB up to its non-temporal threshold, glibc's ``memcpy``/``memmove`` use
the CPU's ``rep movsb`` string instruction.  On AMD Zen processors (this project's machine: an
EPYC VM, glibc 2.36) that instruction runs about ten times slower when the destination lies a few
bytes *after* the source modulo the 4 KiB page — ``(dst - src) mod 4096`` from 1 to 31 measured
there: 256 KiB in ~130 µs against ~10 µs (``dev/probe_copy_alias.py`` prints the table).  It is
the common case of aiorma's collectives: a landing slot starts on a page, and a large numpy array
16 bytes into one (glibc's header of an ``mmap``-ed block), so every chunk copied out of a slot
into such an array went at a tenth of the memory's speed.  numpy's ufunc loops are vector loads
and stores, not ``rep movsb``: ``np.positive`` on bytes is a copy at full speed whatever the
offsets, and within a microsecond of ``memcpy`` where ``memcpy`` is fast — cheaper than finding
out which case a copy is (an array's address costs ~2.5 µs to ask from Python).  From 512 KiB on,
glibc copies with non-temporal stores instead, fast at every offset and faster than the loop, so
long copies stay plain.  (glibc 2.39 learnt to avoid the slow case; older ones are common.)
"""

from __future__ import annotations

import numpy as np

#: Copies shorter than this never use ``rep movsb`` in glibc (its threshold is 2-8 KiB).
SHORT_COPY = 2048
#: From here on glibc copies with non-temporal stores (measured: slow case up to 384 KiB, none at
#: 512 KiB and beyond), where ``memcpy`` beats the vector loop (1 MiB: ~32 µs against ~47 µs).
LONG_COPY = 512 << 10


#: (A dtype object, not the type: ``view`` converts a type to a dtype at every call.)
_BYTE: np.dtype = np.dtype(np.uint8)


def byte_view(array: np.ndarray) -> np.ndarray:
    """``array``'s bytes as a 1-D uint8 view (C-contiguous ``array``; a copy where it is not and
    has more than one dimension, as ``reshape`` makes).  A 1-D array skips the reshape: half the
    cost of a collective call's byte views (0.6 against 1.4 µs)."""
    if array.ndim == 1:
        return array.view(_BYTE)
    return array.reshape(-1).view(_BYTE)


def copy_bytes(out: np.ndarray, src: np.ndarray) -> None:
    """``out[...] = src`` for 1-D contiguous arrays of one dtype and size, at memory speed
    whatever their addresses (see the module docstring)."""
    if SHORT_COPY <= src.nbytes < LONG_COPY:
        # As bytes: a ufunc on the typed values could change them (a float NaN's payload).
        np.positive(src.view(np.uint8), out=out.view(np.uint8))
    else:
        out[...] = src


def load_words(src: np.ndarray) -> np.ndarray:
    """A copy of the 8-byte words ``src`` (int64 or uint64, aligned), each read by one 8-byte
    load: for words a peer may be writing while we copy them (LL slots).  A plain copy is
    ``memmove``, and ``rep movsb`` — which glibc uses for a few KiB, with the slow case of the
    module docstring for a fresh array a few bytes after a page-aligned slot — promises nothing
    per word: 4 KiB LL slots copied that way showed words mixing two writes (tests/test_ll.py,
    about 1 run in 10-20; none in 15 runs since this copy replaced it — the likely cause, not a
    proven one).  numpy's ufunc loop over the 8-byte elements loads each one whole (a vector load
    splits only at a cache line, which an aligned word never straddles)."""
    return np.bitwise_or(src, src.dtype.type(0))
