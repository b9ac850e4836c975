"""The control region: the int64 words through which window engines synchronize one-sidedly.

Every rank holds, beside each window, a small array of counters that its *peers* raise with
remote atomics (Zounmevo 2014, §5.7.3: the ``win_trait`` counters "the peer updates by RDMA").  A rank
learns of a grant, a "done" or a fence by reading its own memory; no receive, no peer CPU.

Layout for a window of ``P`` ranks (``s`` is the peer that writes the word, ``t`` the lock target):

===================  ===================================================================  ========
word                 meaning (at the rank that holds it)                                   update
===================  ===================================================================  ========
``GRANT[s]``         highest GATS access of mine towards ``s`` that ``s`` has granted      max
``DONE[s]``          highest GATS access of ``s`` towards me that ``s`` has completed      max
``FENCE[s]``         ``(fences s opened) << 32 | (fences s finished)``                     max
``LOCK_HANDOFF[t]``  times the head of ``t``'s lock queue was handed to me                 sum
``LOCK_DRAINED[t]``  times the last reader of ``t`` left while my writer waited            sum
``LOCK_NEXT[t]``     sum of rank + 1 of the requests queued behind mine in ``t``'s queue    sum
``LOCK_TAIL``        rank + 1 of the last request in my lock queue (0: queue empty)        swap/CAS
``LOCK_STATE``       ``writer << 20 | readers``: shared holders, and the writer waiting    sum
===================  ===================================================================  ========

Max-words only grow and are compared with ``>=`` (rule 7, docs/semantics.md), so a write that
arrives late or twice changes nothing. Each has exactly one writer, ``s`` (the engine raises only
its own slot), which lets a transport apply a max into shared memory as a plain store of the larger
value. Sum-words count events that happen exactly once each (a hand-off, a drain), compared with
``>=`` against the count the waiting side expects.
"""

from __future__ import annotations

import enum
from typing import Final

import attr

from .identity_enum import IdentityEnum


class Word(enum.IntEnum):
    """The per-peer words; each has one slot per rank."""

    GRANT = 0
    DONE = 1
    FENCE = 2
    LOCK_HANDOFF = 3
    LOCK_DRAINED = 4
    LOCK_NEXT = 5


class AtomicOp(IdentityEnum):
    """What a control write or fetch does to the word at the destination."""

    MAX = "max"
    SUM = "sum"
    REPLACE = "replace"
    NO_OP = "no_op"  # fetch only
    CAS = "cas"  # fetch only: replace by ``value`` if equal to ``compare``


READER_BITS: Final = 20  # LOCK_STATE: low bits count shared holders
READER_MASK: Final = (1 << READER_BITS) - 1
FENCE_SHIFT: Final = 32
FENCE_MASK: Final = (1 << FENCE_SHIFT) - 1
MAX_RANKS: Final = (1 << 16) - 2  # rank + 1 must fit the writer field of LOCK_STATE


def pack_fence(opened: int, finished: int) -> int:
    return opened << FENCE_SHIFT | finished


def unpack_fence(word: int) -> tuple[int, int]:
    """(opened, finished) from a FENCE word."""
    return word >> FENCE_SHIFT, word & FENCE_MASK


_PER_PEER: Final = len(Word)


@attr.s(auto_attribs=True, eq=True, hash=True)
class ControlLayout:
    """Indices of the words of one window's control region for ``size`` ranks.  Never changed
    after construction (not declared frozen: a frozen attrs class cannot be compiled, see
    aiorma._native)."""

    size: int
    lock_tail: int = attr.ib(init=False)
    lock_state: int = attr.ib(init=False)
    words: int = attr.ib(init=False)

    def __attrs_post_init__(self) -> None:
        # Looked up on every lock step: plain attributes, not properties.
        per_peer = _PER_PEER * self.size
        self.lock_tail = per_peer
        self.lock_state = per_peer + 1
        self.words = per_peer + 2

    def index(self, word: Word, peer: int) -> int:
        return word * self.size + peer

    def word_of(self, index: int) -> tuple[Word | None, int]:
        """(word, peer) of a per-peer index; (None, -1) for the lock words of this rank."""
        if index >= self.lock_tail:
            return None, -1
        return Word(index // self.size), index % self.size
