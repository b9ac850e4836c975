"""Passive-target locks taken and released with remote atomics: the target's CPU is never needed.

One :class:`QueueLock` is one lock request of this rank towards one target (a lock epoch's or a
lock_all epoch's dealings with that target).  It is a state machine driven by the results of the
atomics it asked for and by words of this rank's own control region (:mod:`.control`).

Theory of operation (an MCS queue lock, Mellor-Crummey & Scott 1991, with a reader count; foMPI
keeps its lock words at the target in the same spirit):

* **Queue (fairness).**  Every request, shared or exclusive, swaps itself (rank + 1) into the
  target's ``LOCK_TAIL``.  The old tail is its predecessor: if there is none, the request is at
  the *head* of the queue at once; otherwise it adds its rank + 1 to the predecessor's
  ``LOCK_NEXT[target]`` and waits until its own ``LOCK_HANDOFF[target]`` rises.  Requests reach
  the head in the order they swapped, so no origin starves.
* **Readers.**  At the head, a shared request adds 1 to the target's ``LOCK_STATE`` (the reader
  count) and hands the head on at once: consecutive readers hold the lock together.  On release
  it subtracts 1.
* **Writers.**  At the head, an exclusive request reads ``LOCK_STATE``; with no reader it holds
  the lock (and keeps the head, so no reader can join).  Otherwise it adds ``(rank + 1) << 20``
  (its name in the writer field) and, if readers were still there when it did, waits until its
  ``LOCK_DRAINED[target]`` rises: the reader whose subtraction finds the count at 1 and a writer
  named is the last one out, and tells that writer.  The writer then clears its name.
* **Handing the head on.**  If ``LOCK_NEXT`` has grown by ``r + 1`` since the last hand-off,
  rank ``r`` is the successor: add 1 to its ``LOCK_HANDOFF``.  (Only ever added to, never reset,
  so that the same successor linking twice is still a change.)  If not, compare-and-swap the
  tail from ourselves to 0; if that fails, a successor has swapped itself in but not yet added
  itself to our ``LOCK_NEXT``: wait for it.

Every wait is on this rank's own memory.  The engine allows one active request per target, so
``LOCK_NEXT``/``LOCK_HANDOFF``/``LOCK_DRAINED`` of a target are never shared by two requests.

Each step ends by asking for one atomic (or by waiting on a word); when the answer comes inside
the call — an atomic into shared memory — the next step is taken at once, so a lock on a free
queue is granted, and released, inside the call that started it: the same steps, taken inline.
The grant and the release are reported to the engine as they happen
(:meth:`LockEngine.lock_granted`, :meth:`LockEngine.lock_released`), which may therefore be
inside the engine's own call that started or released the request: the engine's handlers look at
the epoch's state again rather than assume it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import attr
import numpy as np

from .control import READER_BITS, READER_MASK, AtomicOp, ControlLayout, Word
from .identity_enum import IdentityEnum


class Head(IdentityEnum):
    """Where this request stands in the target's queue."""

    NONE = "none"
    ENQUEUING = "enqueuing"  # tail swap in flight
    QUEUED = "queued"  # behind a predecessor, waiting for LOCK_HANDOFF
    AT_HEAD = "at head"
    PASSING = "passing"  # compare-and-swap of the tail in flight
    AWAITING_NEXT = "awaiting next"  # a successor swapped in; waiting for its LOCK_NEXT write
    PASSED = "passed"  # head handed on (or queue emptied)


class Hold(IdentityEnum):
    """Whether this request holds the lock."""

    WAITING = "waiting"
    JOINING = "joining"  # reader: increment in flight
    CHECKING = "checking"  # writer: reading the reader count
    REGISTERING = "registering"  # writer: naming itself in LOCK_STATE
    DRAINING = "draining"  # writer: waiting for the last reader's LOCK_DRAINED
    CLEARING = "clearing"  # writer: removing its name
    HELD = "held"
    LEAVING = "leaving"  # reader: decrement in flight
    RELEASED = "released"


# The states and words the steps read, as module constants: on Python 3.11 a read of an enum
# member (``Head.QUEUED``) goes through the enum metaclass's ``__getattr__`` hook, several times
# the cost of a plain attribute; compiled, a Final name is a C variable.
_HEAD_NONE: Final = Head.NONE
_HEAD_ENQUEUING: Final = Head.ENQUEUING
_HEAD_QUEUED: Final = Head.QUEUED
_HEAD_AT_HEAD: Final = Head.AT_HEAD
_HEAD_PASSING: Final = Head.PASSING
_HEAD_AWAITING_NEXT: Final = Head.AWAITING_NEXT
_HEAD_PASSED: Final = Head.PASSED
_HOLD_WAITING: Final = Hold.WAITING
_HOLD_JOINING: Final = Hold.JOINING
_HOLD_CHECKING: Final = Hold.CHECKING
_HOLD_REGISTERING: Final = Hold.REGISTERING
_HOLD_DRAINING: Final = Hold.DRAINING
_HOLD_CLEARING: Final = Hold.CLEARING
_HOLD_HELD: Final = Hold.HELD
_HOLD_LEAVING: Final = Hold.LEAVING
_HOLD_RELEASED: Final = Hold.RELEASED
_SUM: Final = AtomicOp.SUM
_REPLACE: Final = AtomicOp.REPLACE
_NO_OP: Final = AtomicOp.NO_OP
_CAS: Final = AtomicOp.CAS
_LOCK_HANDOFF: Final = Word.LOCK_HANDOFF
_LOCK_DRAINED: Final = Word.LOCK_DRAINED
_LOCK_NEXT: Final = Word.LOCK_NEXT


@attr.s(auto_attribs=True)
class LockCounts:
    """Hand-offs and drains this rank has been told of by one target's queue, over all its
    requests there: the next request waits for one more than these (sum-words never reset)."""

    handoffs: int = 0
    drains: int = 0
    linked: int = 0  # sum of (rank + 1) of the successors already handed the head


class LockEngine:
    """What a :class:`QueueLock` needs from the engine it belongs to
    (:class:`~aiorma.engine.window_engine.WindowEngine` is the one).

    A base class the engine derives from rather than a protocol: compiled (aiorma._native), a
    call through a protocol-typed attribute is a generic Python call — arguments boxed, a bound
    method made — where a call of a base class's method is a direct one; the lock and the
    engine call each other several times per epoch.  The requests report by target: the engine
    allows one active request per target."""

    control: np.ndarray
    layout: ControlLayout
    #: Requests whose release waits for a successor's link (Head.AWAITING_NEXT), kept by them.
    links_awaited: int
    #: Requests waiting for a peer to write one of our lock words — the hand-off (Head.QUEUED) or
    #: the last reader's drain (Hold.DRAINING) — kept by them: whoever is queued behind such a
    #: request waits for this rank to see that word.
    lock_words_awaited: int
    #: Hand-offs written (the head given to a successor), counted by the requests; the engine's
    #: owner reads and clears it.
    handoffs_given: int

    def control_fetch(
        self, dest: int, index: int, op: AtomicOp, value: int, compare: int, then: Callable[[int], None]
    ) -> int | None:
        """The old value when the answer is in hand now (the caller takes the next step), else
        None: ``then(old)`` is called when it comes."""
        raise NotImplementedError

    def control_write(self, dest: int, index: int, op: AtomicOp, value: int) -> None:
        raise NotImplementedError

    def lock_granted(self, target: int) -> None:
        """The request towards ``target`` holds the lock."""
        raise NotImplementedError

    def lock_released(self, target: int) -> None:
        """The request towards ``target`` gave the lock back and is done."""
        raise NotImplementedError


class QueueLock:
    """One lock request of ``rank`` towards ``target``; see the module docstring."""

    def __init__(
        self,
        io: LockEngine,
        rank: int,
        target: int,
        exclusive: bool,
        counts: LockCounts,
    ) -> None:
        self.io = io
        self.me = rank + 1
        self.target = target
        self.exclusive = exclusive
        self.head = _HEAD_NONE
        self.hold = _HOLD_WAITING
        self.counts = counts
        self.handoffs_needed = 0  # LOCK_HANDOFF[target] value that means "head is mine"
        self.drains_needed = 0
        self.release_requested = False
        self._next = io.layout.index(_LOCK_NEXT, target)

    @property
    def done(self) -> bool:
        return self.head is _HEAD_PASSED and self.hold is _HOLD_RELEASED

    # ------------------------------------------------------------------ driving it

    def acquire(self) -> None:
        """Start: swap into the tail."""
        self.head = _HEAD_ENQUEUING
        self._fetch(self.io.layout.lock_tail, _REPLACE, self.me, 0, self._enqueued)

    def release(self) -> None:
        """The epoch's RMA to ``target`` is remotely complete: give the lock back."""
        if self.hold is not _HOLD_HELD:
            raise RuntimeError(f"release of a lock request in state {self.hold.value}")
        self.release_requested = True
        if self.exclusive:
            self.hold = _HOLD_RELEASED
            self._pass_head()
        else:
            self.hold = _HOLD_LEAVING
            self._fetch(self.io.layout.lock_state, _SUM, -1, 0, self._left)

    def control_changed(self) -> None:
        """Re-read the words this request may be waiting on."""
        control, layout, target = self.io.control, self.io.layout, self.target
        handoff = layout.index(_LOCK_HANDOFF, target)
        if self.head is _HEAD_QUEUED and control[handoff] >= self.handoffs_needed:
            self.head = _HEAD_AT_HEAD
            self.io.lock_words_awaited -= 1
            self._at_head()
        if self.head is _HEAD_AWAITING_NEXT and control[self._next] != self.counts.linked:
            self._pass_to_next()
        drained = layout.index(_LOCK_DRAINED, target)
        if self.hold is _HOLD_DRAINING and control[drained] >= self.drains_needed:
            self.hold = _HOLD_CLEARING
            self.io.lock_words_awaited -= 1
            self._fetch(self.io.layout.lock_state, _SUM, -(self.me << READER_BITS), 0, self._cleared)

    # ------------------------------------------------------------------ the steps

    def _fetch(self, index: int, op: AtomicOp, value: int, compare: int, then: Callable[[int], None]) -> None:
        old = self.io.control_fetch(self.target, index, op, value, compare, then)
        if old is not None:  # answered inside the call (shared memory): the next step, now
            then(old)

    def _enqueued(self, predecessor: int) -> None:
        if predecessor == 0:
            self.head = _HEAD_AT_HEAD
            self._at_head()
            return
        self.counts.handoffs += 1
        self.handoffs_needed = self.counts.handoffs
        self.head = _HEAD_QUEUED
        self.io.lock_words_awaited += 1
        self.io.control_write(predecessor - 1, self.io.layout.index(_LOCK_NEXT, self.target), _SUM, self.me)
        self.control_changed()  # the hand-off may already be here (a fast predecessor)

    def _at_head(self) -> None:
        state = self.io.layout.lock_state
        if self.exclusive:
            self.hold = _HOLD_CHECKING
            self._fetch(state, _NO_OP, 0, 0, self._checked)
        else:
            self.hold = _HOLD_JOINING
            self._fetch(state, _SUM, 1, 0, self._joined)

    def _joined(self, _old: int) -> None:
        self._grant()
        self._pass_head()  # readers behind us may join too

    def _checked(self, old: int) -> None:
        if old & READER_MASK == 0:
            self._grant()
            return
        self.hold = _HOLD_REGISTERING
        self._fetch(self.io.layout.lock_state, _SUM, self.me << READER_BITS, 0, self._registered)

    def _registered(self, old: int) -> None:
        if old & READER_MASK == 0:  # the readers left between our two looks: no drain will come
            self.hold = _HOLD_CLEARING
            self._fetch(self.io.layout.lock_state, _SUM, -(self.me << READER_BITS), 0, self._cleared)
            return
        self.counts.drains += 1
        self.drains_needed = self.counts.drains
        self.hold = _HOLD_DRAINING
        self.io.lock_words_awaited += 1
        self.control_changed()

    def _cleared(self, _old: int) -> None:
        self._grant()

    def _grant(self) -> None:
        self.hold = _HOLD_HELD
        self.io.lock_granted(self.target)

    def _left(self, old: int) -> None:
        writer = old >> READER_BITS
        if old & READER_MASK == 1 and writer:
            self.io.control_write(writer - 1, self.io.layout.index(_LOCK_DRAINED, self.target), _SUM, 1)
        self.hold = _HOLD_RELEASED
        self._check_done()

    def _pass_head(self) -> None:
        if self.io.control[self._next] != self.counts.linked:
            self._pass_to_next()
            return
        self.head = _HEAD_PASSING
        self._fetch(self.io.layout.lock_tail, _CAS, 0, self.me, self._tail_swapped)

    def _tail_swapped(self, old: int) -> None:
        if old == self.me:
            self.head = _HEAD_PASSED
            self._check_done()
            return
        self.head = _HEAD_AWAITING_NEXT
        self.io.links_awaited += 1
        self.control_changed()

    def _pass_to_next(self) -> None:
        if self.head is _HEAD_AWAITING_NEXT:
            self.io.links_awaited -= 1
        successor = int(self.io.control[self._next]) - self.counts.linked
        self.counts.linked += successor
        self.io.control_write(successor - 1, self.io.layout.index(_LOCK_HANDOFF, self.target), _SUM, 1)
        self.io.handoffs_given += 1
        self.head = _HEAD_PASSED
        self._check_done()

    def _check_done(self) -> None:
        if self.done:
            self.io.lock_released(self.target)
