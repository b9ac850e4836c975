"""The engine's one road to the world (aiorma.engine.engine_io.EngineIO), answered inside the call.

The driver's I/O hands every step to the transport at once; when the transport answers inside the
call (an atomic into shared memory, a flush of complete data) the engine takes the step that the
answer unblocks before the application call returns.  These tests drive engines through an
in-memory I/O that answers every atomic and flush at once, as shared memory does, and check:

* a lock is granted, and an unlock completes, inside the call — by the same QueueLock steps the
  hand-driven engines of tests/engine_net.py take through actions and events (same atomics, in
  the same order);
* a lock request that queues behind a holder is granted by the holder's hand-off, sent inside
  the holder's unlock call;
* fence and GATS epochs whose peers' words are in finish inside their calls;
* an unlock whose release waits for a successor's link is counted in ``links_awaited`` until the
  link arrives.

Atomics land at once; control writes (links, hand-offs, grants) land only when a test says so
(``deliver``), and a peer learns of either only then: a real transport reports peers' writes from
its poll, never from inside the writer's call.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from aiorma.constants import MODE_NOSUCCEED, LockType
from aiorma.engine.control import AtomicOp
from aiorma.engine.engine_io import EngineIO
from aiorma.engine.lock_protocol import Hold
from aiorma.engine.window_engine import WindowEngine

from .engine_net import EngineNet


def _apply(words: np.ndarray, index: int, op: AtomicOp, value: int, compare: int = 0) -> int:
    """One atomic on a control word, written from MPI's definitions (not from the engine)."""
    old = int(words[index])
    if op is AtomicOp.REPLACE:
        words[index] = value
    elif op is AtomicOp.SUM:
        words[index] = old + value
    elif op is AtomicOp.MAX:
        words[index] = max(old, value)
    elif op is AtomicOp.CAS and old == compare:
        words[index] = value
    return old


class InlineNet:
    """Engines whose I/O answers every atomic and flush inside the call."""

    def __init__(self, size: int) -> None:
        self.engines = [WindowEngine(3, r, size, io=_InlineIO(self, r)) for r in range(size)]
        # (src, dest, index, op, value, compare), in order
        self.fetches: list[tuple[int, int, int, AtomicOp, int, int]] = []
        self.completed: list[list[int]] = [[] for _ in range(size)]
        self.changed: set[int] = set()
        self.writes: list[tuple[int, int, AtomicOp, int]] = []  # (dest, index, op, value), in order

    def __getitem__(self, rank: int) -> WindowEngine:
        return self.engines[rank]

    def deliver(self) -> None:
        """Land the control writes made so far and tell every engine whose control region
        changed (as a transport's poll does)."""
        writes, self.writes = self.writes, []
        for dest, index, op, value in writes:
            _apply(self.engines[dest].control, index, op, value)
            self.changed.add(dest)
        while self.changed:
            self.engines[self.changed.pop()].control_changed()


class _InlineIO(EngineIO):
    def __init__(self, net: InlineNet, rank: int) -> None:
        self.net, self.rank = net, rank

    def issue(self, token: int, target: int, payload: Any) -> None:
        self.net.completed[self.rank].append(token)  # complete at issue

    def fetch(self, token: int, dest: int, index: int, op: AtomicOp, value: int, compare: int) -> int | None:
        self.net.fetches.append((self.rank, dest, index, op, value, compare))
        old = _apply(self.net.engines[dest].control, index, op, value, compare)
        self.net.changed.add(dest)
        return old

    def write(self, dest: int, index: int, op: AtomicOp, value: int) -> None:
        self.net.writes.append((dest, index, op, value))  # lands at deliver()

    def flush(self, target: int, upto: int) -> bool:
        return True

    def complete(self, token: int, error: BaseException | None) -> None:
        assert error is None, error
        self.net.completed[self.rank].append(token)


def test_lock_granted_and_released_inside_the_calls() -> None:
    net = InlineNet(2)
    locked = net[0].lock(1, LockType.EXCLUSIVE)
    assert locked in net.completed[0]  # granted before lock() returned
    put = net[0].rma(1, "put")
    unlocked = net[0].unlock(1)
    assert put in net.completed[0] and unlocked in net.completed[0]
    assert net[0].quiescent and not net[0]._locks


def test_inline_steps_are_the_hand_driven_steps() -> None:
    """The same QueueLock steps, whether their answers come inside the call or as events later:
    the atomics asked for, in order, are identical."""
    net = InlineNet(2)
    net[0].lock(1, LockType.EXCLUSIVE)
    net[0].unlock(1)
    net[0].lock(1, LockType.SHARED)
    net[0].unlock(1)
    inline = [(dest, index, op, value, compare) for _src, dest, index, op, value, compare in net.fetches]

    hand = EngineNet(2)
    for lock_type in (LockType.EXCLUSIVE, LockType.SHARED):
        hand[0].lock(1, lock_type)
        while hand.step():
            pass
        hand[0].unlock(1)
        while hand.step():
            pass
    driven = [(f.dest, f.index, f.op, f.value, f.compare) for _rank, f in hand.fetches]
    assert inline == driven
    assert len(inline) == 7  # exclusive: swap, look, release CAS; shared: swap, join, head CAS, leave


def test_lock_queued_behind_a_holder_is_granted_by_its_hand_off() -> None:
    net = InlineNet(3)
    first = net[0].lock(2, LockType.EXCLUSIVE)
    assert first in net.completed[0]  # granted inside the call
    token = net[1].lock(2, LockType.EXCLUSIVE)
    assert token not in net.completed[1]  # queued behind rank 0
    queued = net[1]._locks[2]
    [epoch] = net[1].open_epochs()
    assert epoch.access[2].lock is queued and queued.hold is Hold.WAITING
    net.deliver()  # rank 1's link into rank 0's LOCK_NEXT
    unlocked = net[0].unlock(2)
    assert unlocked in net.completed[0]  # hands the head to rank 1 inside the call
    net.deliver()  # rank 1 sees its hand-off
    assert token in net.completed[1]
    assert queued.hold is Hold.HELD


def test_fence_and_gats_epochs_finish_inside_their_calls_once_the_peers_words_are_in() -> None:
    net = InlineNet(2)
    opened = [net[r].fence() for r in range(2)]
    assert all(t in net.completed[r] for r, t in enumerate(opened))  # open: done at activation
    net.deliver()  # each rank's fence notice
    put = net[0].rma(1, "put")
    assert put in net.completed[0]  # the notice was in: issued at once
    closing = net[1].fence(MODE_NOSUCCEED)  # close only
    assert closing not in net.completed[1]  # rank 0's "done" is not in yet
    closed = net[0].fence(MODE_NOSUCCEED)
    net.deliver()
    assert closed in net.completed[0]  # ... after the peer's "done" arrived
    net[1].control_changed()
    assert closing in net.completed[1]

    posted = net[1].post([0])
    assert posted in net.completed[1]  # exposure: granted at the call
    net.deliver()
    started = net[0].start([1])
    assert started in net.completed[0]  # the grant was in already
    net[0].rma(1, "put")
    completed = net[0].complete()
    assert completed in net.completed[0]  # data complete inside the call: "done" sent
    net.deliver()
    waited = net[1].wait()
    assert waited in net.completed[1]
    assert net[0].quiescent and net[1].quiescent


def test_release_waiting_for_a_link_is_counted_until_the_link_arrives() -> None:
    net = InlineNet(3)
    net[0].lock(2, LockType.EXCLUSIVE)
    waiting = net[1].lock(2, LockType.EXCLUSIVE)  # swapped into the tail; its link is not delivered
    unlocked = net[0].unlock(2)  # the tail CAS fails: a successor swapped in, not yet linked
    assert net[0].links_awaited == 1 and unlocked not in net.completed[0]
    net.deliver()  # the link arrives; rank 0 hands the head on; rank 1 is granted
    net.deliver()
    assert net[0].links_awaited == 0
    assert unlocked in net.completed[0] and waiting in net.completed[1]
