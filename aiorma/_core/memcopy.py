"""Copying bytes without glibc's slow ``rep movsb`` case.

For copies of a few KiB and more, glibc's ``memcpy``/``memmove`` use the CPU's ``rep movsb``
string instruction.  On AMD Zen processors (this project's machine: an EPYC VM, glibc 2.36) that
instruction runs about ten times slower when the destination lies a few bytes *after* the source
modulo the 4 KiB page — ``(dst - src) mod 4096`` from 1 to 31 measured there: 256 KiB in
~120 µs against ~10 µs.  It is the common case of aiorma's collectives: a landing slot starts on a
page, and a large numpy array starts 16 bytes into one (glibc's header of an ``mmap``-ed block),
so every large receive copied out of a slot at a tenth of the memory's speed.  numpy's ufunc loops
are vector loads and stores, not ``rep movsb``: ``np.positive`` on bytes is such a copy at full
speed whatever the offsets.  (glibc 2.39 learnt to avoid the case; older ones are common.)
"""

from __future__ import annotations

import numpy as np

#: Relative page offsets ``(dst - src) mod 4096`` below this (and above 0) take the vector loop;
#: 1-31 measured slow, 32-63 kept out too for margin on other cores.
ALIASED_BELOW = 64
#: Copies shorter than this never use ``rep movsb`` in glibc (its threshold is 2-8 KiB): plain
#: assignment, without looking at the addresses.
SHORT_COPY = 2048


def page_aliased(dst_address: int, src_address: int) -> bool:
    """True when a forward copy from ``src_address`` to ``dst_address`` is the slow case."""
    return 0 < (dst_address - src_address) % 4096 < ALIASED_BELOW


def copy_bytes(out: np.ndarray, src: np.ndarray) -> None:
    """``out[...] = src`` for 1-D contiguous arrays of one dtype and size, at memory speed
    whatever their addresses (see the module docstring)."""
    if src.nbytes >= SHORT_COPY and page_aliased(out.ctypes.data, src.ctypes.data):
        # As bytes: a ufunc on the typed values could change them (a float NaN's payload).
        np.positive(src.view(np.uint8), out=out.view(np.uint8))
    else:
        out[...] = src
