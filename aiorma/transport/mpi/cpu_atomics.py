"""The CPU's own atomic instructions on words of another process's memory mapped here.

On one node every rank's control region is mapped into every other rank (MPI-4's
``Win_shared_query``).  An MPI atomic on such a word still runs MPICH's whole RMA path — the
window's shared mutex, the op's bookkeeping, then ``Flush_local`` — about 2-3 µs on its own and
8-11 µs inside an epoch's call, where the interpreter has just evicted that code from the caches
(measured on the lock/put/unlock loop, one process alternating the two kinds call by call).  One
locked instruction on the word does the same work; called through ``ctypes`` it costs the call,
4-6 µs in the same loop.

Two forms do the same: a small C extension (``_cpu_atomics.c``, built with the compiled engine by
``./dev/setup.sh`` and used on the same decision, :mod:`aiorma._native`), whose call costs a tenth
of ctypes' (0.1-0.2 µs against 1.4-2.4 µs alone), and, without the build, GCC's ``libatomic``
(``__atomic_exchange_8``, ``__atomic_fetch_add_8``, ``__atomic_compare_exchange_8``, sequentially
consistent) called through ``ctypes`` (:class:`CpuAtomics`).  :func:`load` picks the first there
is; with neither the transport keeps MPI's atomics.  The two kinds must never meet on one word: MPI
promises nothing about its atomics racing other atomic instructions (MPICH may apply its own under
a mutex, which a locked instruction does not take).  So the transport uses these only when *every*
rank of the connection is on this node and found the library (agreed collectively), for every
control word of a window whose regions every rank mapped — and then no MPI atomic touches a control
word at all.

The compiled form also serves a window's data (``accumulate_elements``): the accumulate family —
accumulate, get_accumulate, fetch_and_op, compare_and_swap — as a loop of the calling process over
the target's elements, mapped here, under the target's *gate*, a word that every rank maps, taken
by a compare-and-swap and released by a store.  That is how MPICH's own accumulate into shared
memory keeps the promise MPI makes (every accumulate atomic per element against every other), with
its window's mutex — but reached through the RMA call's bookkeeping, the request and its flush.
The same rule holds as for the control words: a window's accumulates are this path's on every rank
or on none (``open_window`` agrees it: the compiled form on every rank, every rank's memory mapped
and aligned, an element type it computes — :data:`ELEMENT_TYPES`).
"""

from __future__ import annotations

import ctypes
from typing import Protocol

import numpy as np

from ... import _native

#: The memory order every call here uses (``__ATOMIC_SEQ_CST``).
SEQ_CST = 5

#: The compiled form's module name (:data:`aiorma._native.C_EXTENSIONS`).
COMPILED = "aiorma.transport.mpi._cpu_atomics"


class Atomics(Protocol):
    """Sequentially consistent atomics on aligned int64 words of this process's address space,
    by address; every value wraps like int64.  Each returns the word's old value."""

    def exchange(self, address: int, value: int, order: int, /) -> int:
        """Store ``value``."""

    def fetch_add(self, address: int, value: int, order: int, /) -> int:
        """Add ``value``."""

    def compare_exchange(self, address: int, compare: int, value: int, /) -> int:
        """Store ``value`` if the word equals ``compare``."""

    def fetch_max(self, address: int, value: int, /) -> int:
        """Raise the word to ``value`` if it is below."""


class CpuAtomics:
    """Sequentially consistent atomics on aligned int64 words, by address.  Not thread-safe (one
    buffer for compare-and-swap's expected value): called from the event loop's thread only."""

    def __init__(self, library: ctypes.CDLL) -> None:
        word, address = ctypes.c_int64, ctypes.c_void_p
        # getattr: a double-underscore name written in a class body would be mangled.
        #: ``exchange(address, value, SEQ_CST)``: store ``value``; the old value.  (The library's
        #: functions themselves, called with the memory order: no frame of ours per call.)
        self.exchange = getattr(library, "__atomic_exchange_8")
        self.exchange.argtypes = [address, word, ctypes.c_int]
        self.exchange.restype = word
        #: ``fetch_add(address, value, SEQ_CST)``: add ``value`` (wrapping like int64); the old
        #: value.
        self.fetch_add = getattr(library, "__atomic_fetch_add_8")
        self.fetch_add.argtypes = [address, word, ctypes.c_int]
        self.fetch_add.restype = word
        # libatomic's entry point takes no "weak" flag (the compiler builtin does).
        self._compare_exchange = getattr(library, "__atomic_compare_exchange_8")
        self._compare_exchange.argtypes = [address, address, word, ctypes.c_int, ctypes.c_int]
        self._compare_exchange.restype = ctypes.c_bool
        self._expected = word(0)
        self._expected_address = ctypes.addressof(self._expected)

    def fetch_max(self, address: int, value: int) -> int:
        """Raise the word to ``value`` if it is below; the old value."""
        old = self.compare_exchange(address, value, value)  # a read that changes nothing
        while old < value:
            seen = self.compare_exchange(address, old, value)
            if seen == old:
                break
            old = seen
        return old

    def compare_exchange(self, address: int, compare: int, value: int) -> int:
        """Store ``value`` if the word equals ``compare``; the old value either way."""
        expected = self._expected
        expected.value = compare
        # On failure the library writes the word's value into ``expected``; on success it is
        # ``compare``, the old value too.
        self._compare_exchange(address, self._expected_address, value, SEQ_CST, SEQ_CST)
        return int(expected.value)


#: The library's name for the dynamic loader (no ``ctypes.util.find_library``: it runs a
#: subprocess, which a process that initialised MPI had better not fork).
LIBRARY = "libatomic.so.1"


def load_library(name: str = LIBRARY) -> CpuAtomics | None:
    """The atomics through ``ctypes``, or None when the library ``name`` cannot be loaded or lacks
    them."""
    try:
        return CpuAtomics(ctypes.CDLL(name))
    except (OSError, AttributeError):
        return None


def load_compiled() -> Atomics | None:
    """The compiled atomics, or None where this process runs from source or the build left none."""
    return _native.compiled_extension(COMPILED)  # type: ignore[return-value]


class WordStores(Protocol):
    """``store_words(destination, offset, source[, fence])``: the bytes of ``source`` into
    ``destination`` (C-contiguous buffers) from byte ``offset`` on, each aligned 8-byte word by one
    store — a peer reading a word while it lands sees it before or after, never half of each;
    with a true ``fence``, a full memory barrier after them (``Win_sync``'s, without MPI)."""

    def __call__(self, destination: object, offset: int, source: object, fence: bool = False, /) -> None: ...


def load_word_stores() -> WordStores | None:
    """The compiled form's ``store_words``, or None (the ctypes form has none: a copy through
    ``ctypes.memmove`` promises nothing per word)."""
    compiled = _native.compiled_extension(COMPILED)
    return None if compiled is None else compiled.store_words  # type: ignore[no-any-return]


class WordsChanged(Protocol):
    """``words_changed(region, seen)``: whether the int64 words of ``region`` (this rank's control
    words, which peers change only with the CPU's atomics) differ from ``seen``, its copy as last
    looked at; if they do, ``seen`` becomes their copy.  No MPI call: an acquire fence and one load
    per word."""

    def __call__(self, region: object, seen: object, /) -> bool: ...


def load_words_changed() -> WordsChanged | None:
    """The compiled form's ``words_changed``, or None (the ctypes form has none: a poll then
    synchronizes the window through MPI and compares a copy)."""
    compiled = _native.compiled_extension(COMPILED)
    return None if compiled is None else compiled.words_changed  # type: ignore[no-any-return]


#: The element types of the compiled ``accumulate_elements`` (``TYPE_*`` in ``_cpu_atomics.c``), by
#: numpy kind and size: integers, bool as a byte, datetimes and durations as their int64 counts
#: (as MPI computes them), float32 and float64.  Others (complex, float16, strings, records,
#: another byte order) stay MPI's accumulates.
ELEMENT_TYPES: dict[tuple[str, int], int] = {
    ("i", 1): 1, ("i", 2): 2, ("i", 4): 3, ("i", 8): 4,
    ("u", 1): 5, ("u", 2): 6, ("u", 4): 7, ("u", 8): 8, ("b", 1): 5,
    ("m", 8): 4, ("M", 8): 4,
    ("f", 4): 9, ("f", 8): 10,
}  # fmt: skip

#: ``accumulate_elements``'s op for compare-and-swap (the others are :class:`aiorma.Op`'s values).
COMPARE_AND_SWAP = 0


def element_type(dtype: np.dtype) -> int:
    """``accumulate_elements``'s code for elements of ``dtype``, or 0 where it has none."""
    if not dtype.isnative or dtype.names is not None or dtype.subdtype is not None:
        return 0
    return ELEMENT_TYPES.get((dtype.kind, dtype.itemsize), 0)


class Accumulator(Protocol):
    """``accumulate_elements(address, type, op, origin, result, compare, gate)``: MPI's accumulate
    family (``op`` an :class:`aiorma.Op` value, or :data:`COMPARE_AND_SWAP`) on the elements at
    ``address``, under the gate word at ``gate`` (see ``_cpu_atomics.c``); the old values into
    ``result`` (or None).  ``type``: :func:`element_type`.  Raises TimeoutError when the gate stays
    held for 30 s (its holder died inside an accumulate)."""

    def __call__(
        self, address: int, type: int, op: int, origin: object, result: object, compare: object, gate: int, /
    ) -> None: ...


def load_accumulator() -> Accumulator | None:
    """The compiled form's ``accumulate_elements``, or None (the ctypes form has none)."""
    compiled = _native.compiled_extension(COMPILED)
    return None if compiled is None else compiled.accumulate_elements  # type: ignore[no-any-return]


def load() -> Atomics | None:
    """The fastest atomics there are here (see the module's docstring), or None."""
    return load_compiled() or load_library()
