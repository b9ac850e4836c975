"""The passive-target lock protocol (aiorma/engine/lock_protocol.py) on EngineNet, 2–5 ranks.

A lock is an MCS queue with a reader count in the target's two lock words (LOCK_TAIL, LOCK_STATE),
driven by the origins' remote atomics; hand-offs travel as control writes into the origins' own
LOCK_HANDOFF / LOCK_DRAINED / LOCK_NEXT words.  The target's engine takes no part: every test
checks that it stays untouched, and one replaces it by bare memory.  After every test the lock
words are at rest: LOCK_TAIL and LOCK_STATE back to 0, and every LOCK_NEXT word (a sum of the
successors' rank + 1, never reset) equal to what its holder has consumed (``LockCounts.linked``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiorma.constants import MODE_NOCHECK, LockType
from aiorma.engine.actions import ControlFetch, ControlWrite, FlushTarget
from aiorma.engine.control import READER_BITS, AtomicOp, Word
from aiorma.engine.lock_protocol import Head, Hold, QueueLock

from .engine_net import EngineNet

EXCL, SHARED = LockType.EXCLUSIVE, LockType.SHARED


# ------------------------------------------------------------------------------------ helpers


def lock_of(net: EngineNet, origin: int, target: int) -> QueueLock | None:
    return net[origin]._locks.get(target)


def hold(net: EngineNet, origin: int, target: int) -> Hold | None:
    lock = lock_of(net, origin, target)
    return None if lock is None else lock.hold


def holders(net: EngineNet, target: int) -> set[int]:
    """Origins whose lock request towards ``target`` holds the lock."""
    return {r for r in range(net.size) if hold(net, r, target) is Hold.HELD}


def word(net: EngineNet, rank: int, which: Word, peer: int) -> int:
    return int(net[rank].control[net.layout.index(which, peer)])


def tail(net: EngineNet, target: int) -> int:
    return int(net[target].control[net.layout.lock_tail])


def state(net: EngineNet, target: int) -> int:
    return int(net[target].control[net.layout.lock_state])


def lock_words(net: EngineNet) -> list[tuple[int, str, int]]:
    """Every lock word not at rest, as (rank, name, value): a non-zero LOCK_TAIL or LOCK_STATE,
    or a LOCK_NEXT holding a successor link its holder has not consumed."""
    layout = net.layout
    found = []
    for rank, engine in enumerate(net.engines):
        control = engine.control
        found += [
            (rank, name, int(control[i]))
            for name, i in (("tail", layout.lock_tail), ("state", layout.lock_state))
            if control[i]
        ]
        counts = getattr(engine, "_lock_counts", None)
        for t in range(net.size):
            value = int(control[layout.index(Word.LOCK_NEXT, t)])
            if value != (counts[t].linked if counts is not None else 0):
                found.append((rank, f"next[{t}]", value))
    return found


def fetch_ops(net: EngineNet, origin: int) -> list[AtomicOp]:
    return [f.op for r, f in net.fetches if r == origin]


def writes_of(net: EngineNet, which: Word) -> list[tuple[int, int, ControlWrite]]:
    """Control writes emitted so far into per-peer word ``which`` (src, dst, write)."""
    return [(s, d, w) for s, d, w in net.sent if net.layout.word_of(w.index)[0] is which]


def assert_untouched(net: EngineNet, target: int) -> None:
    """The target's engine did nothing: no epoch event, no action of any kind, nothing pending."""
    engine = net[target]
    assert engine.history == []
    assert engine._actions == []
    assert engine.quiescent
    assert not [a for r, a in net.fetches if r == target]
    assert not [w for s, _d, w in net.sent if s == target]
    assert net.completed[target] == set()


def assert_all_done(net: EngineNet) -> None:
    for rank, engine in enumerate(net.engines):
        assert engine.quiescent, (rank, engine.live_epochs())
        assert engine._locks == {}
        assert net.errors[rank] == {}
    assert all(not q for q in net.queues.values())
    assert lock_words(net) == []


def lock_in_order(net: EngineNet, target: int, requests: list[tuple[int, LockType]]) -> dict[int, int]:
    """Lock ``target`` from each origin in turn, stepping after each call so the requests swap
    into the tail in exactly this order; returns the lock tokens by origin."""
    tokens = {}
    for origin, kind in requests:
        tokens[origin] = net[origin].lock(target, kind)
        net.step()
    swaps = [r for r, f in net.fetches if f.index == net.layout.lock_tail and f.op is AtomicOp.REPLACE]
    assert swaps[-len(requests) :] == [origin for origin, _kind in requests]
    return tokens


# ------------------------------------------------------------------------- uncontended locks


def test_uncontended_exclusive_lock_costs_two_atomics_and_its_unlock_one() -> None:
    net = EngineNet(2)
    t = net[0].lock(1)
    lock = lock_of(net, 0, 1)
    assert lock is not None
    assert (lock.head, lock.hold) == (Head.ENQUEUING, Hold.WAITING)
    net.step()  # swap into LOCK_TAIL: no predecessor
    assert net.fetches[0][1] == ControlFetch(
        net.fetches[0][1].token, 1, net.layout.lock_tail, AtomicOp.REPLACE, 1
    )
    assert (lock.head, lock.hold) == (Head.AT_HEAD, Hold.CHECKING)
    assert tail(net, 1) == 1
    assert t not in net.completed[0]
    net.step()  # read LOCK_STATE: no reader
    assert (lock.head, lock.hold) == (Head.AT_HEAD, Hold.HELD)
    assert net.fetches[1][1].op is AtomicOp.NO_OP
    assert t not in net.completed[0]  # the CompleteRequest is queued, not yet carried out
    net.step()
    assert net.completed[0] == {t}

    x = net[0].rma(1, "x")
    u = net[0].unlock(1)
    net.settle()
    assert [a.token for a in net.issued[0]] == [x]
    assert u in net.completed[0]
    assert fetch_ops(net, 0) == [AtomicOp.REPLACE, AtomicOp.NO_OP, AtomicOp.CAS]
    assert net.sent == []  # no control write at all: nobody else was queued
    assert_untouched(net, 1)
    assert_all_done(net)


def test_mode_nocheck_sends_no_atomics_at_all() -> None:
    net = EngineNet(3)
    t = net[0].lock(1, EXCL, MODE_NOCHECK)
    net.step()
    assert net.completed[0] == {t}
    assert net[0]._locks == {}
    net[0].rma(1, "x")
    u = net[0].unlock(1)
    net.settle()
    assert u in net.completed[0]
    a = net[0].lock_all(MODE_NOCHECK)
    net[0].rma(2, "y")
    ua = net[0].unlock_all()
    net.settle()
    assert {a, ua} <= net.completed[0]
    assert net.payloads(0) == ["x", "y"]
    assert net.flush_requests[0] == [FlushTarget(1, 1), FlushTarget(2, 1)]  # RMA still completed
    assert (net.fetches, net.sent) == ([], [])
    assert_untouched(net, 1)
    assert_untouched(net, 2)
    assert_all_done(net)


# ------------------------------------------------------------------------ exclusion and FIFO


def test_exclusive_lock_excludes_others_and_unlock_hands_on_in_swap_order() -> None:
    """Four origins ask rank 4 for an exclusive lock; they swap into the tail in the order
    2, 0, 3, 1 (not rank order) and get the lock in that order, one at a time."""
    net = EngineNet(5)
    order = [2, 0, 3, 1]
    tokens = lock_in_order(net, 4, [(r, EXCL) for r in order])
    net.settle()
    # the MCS chain: each request named itself in its predecessor's LOCK_NEXT[4]
    assert [word(net, r, Word.LOCK_NEXT, 4) for r in order] == [0 + 1, 3 + 1, 1 + 1, 0]
    assert tail(net, 4) == 1 + 1
    assert state(net, 4) == 0  # writers never count as readers
    for r in order:
        net[r].rma(4, f"from {r}")
    net.settle()
    for i, r in enumerate(order):
        assert holders(net, 4) == {r}
        assert [tokens[o] in net.completed[o] for o in order] == [True] * (i + 1) + [False] * (3 - i)
        assert [a.payload for o in order for a in net.issued[o]] == [f"from {o}" for o in order[: i + 1]]
        for later in order[i + 1 :]:
            assert hold(net, later, 4) is Hold.WAITING
            assert lock_of(net, later, 4).head is Head.QUEUED  # type: ignore[union-attr]
        u = net[r].unlock(4)
        net.settle()
        assert u in net.completed[r]
    handoffs = writes_of(net, Word.LOCK_HANDOFF)
    assert [(s, d) for s, d, _w in handoffs] == [(2, 0), (0, 3), (3, 1)]
    assert [word(net, r, Word.LOCK_HANDOFF, 4) for r in order] == [0, 1, 1, 1]
    assert_untouched(net, 4)
    assert_all_done(net)


def test_shared_locks_coexist() -> None:
    net = EngineNet(4)
    tokens = lock_in_order(net, 3, [(0, SHARED), (1, SHARED), (2, SHARED)])
    net.settle()
    assert [tokens[r] in net.completed[r] for r in range(3)] == [True] * 3
    assert holders(net, 3) == {0, 1, 2}
    assert state(net, 3) == 3  # three readers, no writer
    assert tail(net, 3) == 0  # readers hand the head on at once: the queue is empty
    for r in range(3):
        net[r].rma(3, f"r{r}")
        net[r].unlock(3)
    net.settle()
    assert [net.payloads(r) for r in range(3)] == [["r0"], ["r1"], ["r2"]]
    assert writes_of(net, Word.LOCK_DRAINED) == []
    assert_untouched(net, 3)
    assert_all_done(net)


def test_shared_request_behind_exclusive_one_waits_though_only_readers_hold() -> None:
    """Fairness: queue order reader 2, writer 0, reader 1.  Reader 1 does not overtake the
    waiting writer, although the lock is held only in shared mode when it asks."""
    net = EngineNet(4)
    tokens = lock_in_order(net, 3, [(2, SHARED), (0, EXCL), (1, SHARED)])
    net.settle()
    assert [hold(net, r, 3) for r in (2, 0, 1)] == [Hold.HELD, Hold.DRAINING, Hold.WAITING]
    assert [tokens[r] in net.completed[r] for r in (2, 0, 1)] == [True, False, False]
    assert state(net, 3) == (0 + 1) << READER_BITS | 1  # one reader, writer 0 named

    net[2].unlock(3)
    net.settle()
    assert writes_of(net, Word.LOCK_DRAINED)[0][:2] == (2, 0)  # the last reader tells the writer
    assert holders(net, 3) == {0}
    assert hold(net, 1, 3) is Hold.WAITING
    assert state(net, 3) == 0  # the writer cleared its name
    net[0].rma(3, "w")
    net[0].unlock(3)
    net.settle()
    assert holders(net, 3) == {1}
    assert tokens[1] in net.completed[1]
    net[1].unlock(3)
    net.settle()
    assert_untouched(net, 3)
    assert_all_done(net)


@pytest.mark.parametrize("leaving", [(0, 1), (1, 0)], ids=["first-in-first-out", "last-in-first-out"])
def test_exclusive_request_waits_for_every_earlier_reader_to_leave(leaving: tuple[int, int]) -> None:
    """The drain path: readers 0 and 1 hold; writer 2 names itself in LOCK_STATE and waits for
    its LOCK_DRAINED, which only the *last* reader out raises."""
    net = EngineNet(4)
    tokens = lock_in_order(net, 3, [(0, SHARED), (1, SHARED), (2, EXCL)])
    net.settle()
    assert [hold(net, r, 3) for r in range(3)] == [Hold.HELD, Hold.HELD, Hold.DRAINING]
    assert state(net, 3) == (2 + 1) << READER_BITS | 2
    first, last = leaving
    net[first].unlock(3)
    net.settle()
    assert hold(net, 2, 3) is Hold.DRAINING
    assert tokens[2] not in net.completed[2]
    assert writes_of(net, Word.LOCK_DRAINED) == []
    assert state(net, 3) == 3 << READER_BITS | 1
    net[last].unlock(3)
    net.settle()
    drained = writes_of(net, Word.LOCK_DRAINED)
    assert [(s, d, w.op, w.value) for s, d, w in drained] == [(last, 2, AtomicOp.SUM, 1)]
    assert word(net, 2, Word.LOCK_DRAINED, 3) == 1
    assert holders(net, 3) == {2}
    assert tokens[2] in net.completed[2]
    net[2].unlock(3)
    net.settle()
    assert_untouched(net, 3)
    assert_all_done(net)


def test_readers_leaving_between_the_writers_two_looks_need_no_drain() -> None:
    """The writer reads one reader, the reader leaves, then the writer names itself: it finds
    the count at 0 (no drain will come), clears its name and holds."""
    net = EngineNet(3)
    net[0].lock(2, SHARED)
    net.settle()
    w = net[1].lock(2, EXCL)
    net.step()  # swap: no predecessor (the reader handed the head on)
    net.step()  # read LOCK_STATE: one reader
    assert hold(net, 1, 2) is Hold.REGISTERING
    net[0].unlock(2)  # the reader's decrement goes out in the next step, before the writer's
    net.step()
    assert hold(net, 1, 2) is Hold.CLEARING
    net.settle()
    assert holders(net, 2) == {1}
    assert w in net.completed[1]
    assert writes_of(net, Word.LOCK_DRAINED) == []
    net[1].unlock(2)
    net.settle()
    assert_untouched(net, 2)
    assert_all_done(net)


# ----------------------------------------------------------- the half-enqueued successor race


@pytest.mark.parametrize("kind", [EXCL, SHARED], ids=["exclusive-holder", "shared-holder"])
def test_release_waits_for_a_successor_whose_next_write_is_held(kind: LockType) -> None:
    """Rank 1 swapped itself into the tail behind rank 0, but its LOCK_NEXT write to rank 0 is
    still in flight: rank 0's compare-and-swap of the tail fails, and rank 0 must wait for the
    write and then hand the head to rank 1 (its unlock finishes only then)."""
    net = EngineNet(3)
    net.hold(1, 0)
    net[0].lock(2, kind)
    if kind is EXCL:
        net.settle()  # rank 0 holds and keeps the head
        net[1].lock(2, EXCL)
        net.settle()
    else:
        net.step()  # rank 0 swapped; its reader increment goes out next
        net[1].lock(2, EXCL)
        net.settle()  # rank 0 joins, rank 1 swaps, rank 0's tail CAS fails
        assert lock_of(net, 0, 2).head is Head.AWAITING_NEXT  # type: ignore[union-attr]
    assert holders(net, 2) == {0}
    assert tail(net, 2) == 1 + 1
    assert net.notices(1, 0) == [(Word.LOCK_NEXT, 1 + 1)]
    assert hold(net, 1, 2) is Hold.WAITING

    u = net[0].unlock(2)
    net.settle()
    lock0 = lock_of(net, 0, 2)
    assert lock0 is not None
    assert (lock0.head, lock0.hold) == (Head.AWAITING_NEXT, Hold.RELEASED)
    assert u not in net.completed[0]
    assert hold(net, 1, 2) is Hold.WAITING
    assert writes_of(net, Word.LOCK_HANDOFF) == []

    net.release(1, 0)
    net.settle()
    assert u in net.completed[0]
    assert [(s, d) for s, d, _w in writes_of(net, Word.LOCK_HANDOFF)] == [(0, 1)]
    assert holders(net, 2) == {1}
    net[1].unlock(2)
    net.settle()
    assert_untouched(net, 2)
    assert_all_done(net)


@pytest.mark.parametrize("kind", [EXCL, SHARED], ids=["exclusive-holder", "shared-holder"])
def test_repeated_half_enqueued_race_with_the_same_successor_hands_off(kind: LockType) -> None:
    """The race above three times in a row with the same successor.  (Against 1aa7af8, where the
    holder reset LOCK_NEXT to 0 after a hand-off, the second round hung: the repeated link wrote
    the same value again and the engine saw no change.  LOCK_NEXT is now a sum-word; see also
    tests/test_lock_handoff_regression.py.)"""
    net = EngineNet(3)
    for round_ in range(3):
        net.hold(1, 0)
        net[0].lock(2, kind)
        if kind is EXCL:
            net.settle()
            t1 = net[1].lock(2, EXCL)
        else:
            net.step()
            t1 = net[1].lock(2, EXCL)
        net.settle()
        lock0 = lock_of(net, 0, 2)
        assert lock0 is not None and holders(net, 2) == {0}
        u = net[0].unlock(2)
        net.settle()
        assert lock0.head is Head.AWAITING_NEXT
        assert u not in net.completed[0]
        net.release(1, 0)
        net.settle()
        assert u in net.completed[0], f"round {round_}: rank 0 never saw rank 1's LOCK_NEXT link"
        assert t1 in net.completed[1]
        assert word(net, 0, Word.LOCK_NEXT, 2) == (round_ + 1) * (1 + 1)  # a sum, never reset
        net[1].unlock(2)
        net.settle()
    assert_untouched(net, 2)
    assert_all_done(net)


# --------------------------------------------------------------------- self, lock_all, flush


def test_lock_on_oneself() -> None:
    """Rank 0 locks its own window: the same atomics, on its own words; rank 1 queues behind."""
    net = EngineNet(2)
    t = net[0].lock(0, EXCL)
    net.settle()
    assert t in net.completed[0]
    assert (tail(net, 0), holders(net, 0)) == (1, {0})
    assert all(f.dest == 0 for _r, f in net.fetches)
    other = net[1].lock(0, EXCL)
    net.settle()
    assert other not in net.completed[1]
    assert word(net, 0, Word.LOCK_NEXT, 0) == 1 + 1  # rank 1 queued behind rank 0
    assert net[0].window_locked
    net[0].rma(0, "mine")
    net[0].unlock(0)
    net.settle()
    assert holders(net, 0) == {1}
    net[1].rma(0, "theirs")
    net[1].unlock(0)
    net.settle()
    assert (net.payloads(0), net.payloads(1)) == (["mine"], ["theirs"])
    assert not net[0].window_locked
    assert_all_done(net)


def test_lock_all_is_a_shared_lock_at_every_rank() -> None:
    net = EngineNet(3)
    t = net[0].lock_all()
    net.settle()
    assert t in net.completed[0]
    for r in range(3):
        assert hold(net, 0, r) is Hold.HELD
        assert lock_of(net, 0, r).exclusive is False  # type: ignore[union-attr]
        assert state(net, r) == 1  # one reader at every rank
    s = net[1].lock(2, SHARED)  # a reader joins rank 0's reader at rank 2
    e = net[1].lock(0, EXCL)  # a writer waits for rank 0's reader at rank 0
    net.settle()
    assert s in net.completed[1]
    assert (e in net.completed[1], hold(net, 1, 0)) == (False, Hold.DRAINING)
    assert state(net, 2) == 2
    for r in range(3):
        net[0].rma(r, f"to {r}")
    net[0].unlock_all()
    net.settle()
    assert e in net.completed[1]
    assert holders(net, 0) == {1}
    net[1].unlock(2)
    net[1].unlock(0)
    net.settle()
    assert net.payloads(0) == ["to 0", "to 1", "to 2"]
    assert_untouched(net, 2)
    assert_all_done(net)


def test_unlock_releases_only_after_the_rma_is_flushed() -> None:
    net = EngineNet(3)
    net.manual.add(0)  # rank 0's flushes are answered by the test
    net[0].lock(2, EXCL)
    net.settle()
    waiting = net[1].lock(2, EXCL)
    x = net[0].rma(2, "x")
    u = net[0].unlock(2)
    net.settle()
    assert net.payloads(0) == ["x"]
    assert net.flush_requests[0] == [FlushTarget(2, 1)]
    assert holders(net, 2) == {0}
    assert (u in net.completed[0], waiting in net.completed[1]) == (False, False)
    assert writes_of(net, Word.LOCK_HANDOFF) == []  # the lock is not handed on before the flush
    assert fetch_ops(net, 0) == [AtomicOp.REPLACE, AtomicOp.NO_OP]
    net[0].flushed(2, 1)
    net.settle()
    assert u in net.completed[0]
    assert waiting in net.completed[1]
    assert x not in net.completed[0]  # an op token is an identity only
    net[1].unlock(2)
    net.settle()
    assert_untouched(net, 2)
    assert_all_done(net)


# -------------------------------------------------------------- the target is memory only


class MemoryOnly:
    """Stands in for the target's engine: its control region and nothing else.  The harness
    announces writes and atomics with ``control_changed()``; it is counted and ignored.  It has
    no ``drain``: stepping it would fail."""

    def __init__(self, words: int) -> None:
        self.control = np.zeros(words, np.int64)
        self.announced = 0

    def control_changed(self) -> None:
        self.announced += 1


def step_origins(net: EngineNet, origins: list[int]) -> int:
    count = 0
    for rank in origins:
        for action in net[rank].drain():
            count += 1
            net._execute(rank, net[rank], action)
    return count


def test_locks_work_with_a_target_that_is_only_memory() -> None:
    """Three origins take turns (mixed exclusive and shared, three rounds) on rank 3, whose
    engine is replaced by bare memory and never stepped."""
    net = EngineNet(4)
    target = MemoryOnly(net.layout.words)
    net.engines[3] = target  # type: ignore[call-overload]
    origins = [0, 1, 2]
    rounds = {0: [EXCL, SHARED, EXCL], 1: [SHARED, SHARED, EXCL], 2: [EXCL, EXCL, SHARED]}

    def run() -> None:
        while step_origins(net, origins) + net.deliver():
            held = {r: lock_of(net, r, 3).exclusive for r in origins if hold(net, r, 3) is Hold.HELD}  # type: ignore[union-attr]
            assert len(held) <= 1 or not any(held.values()), held

    for i in range(3):
        tokens = {r: net[r].lock(3, rounds[r][i]) for r in origins}
        run()
        while any(net[r].open_epochs() for r in origins):
            granted = [r for r in origins if tokens[r] in net.completed[r] and net[r].open_epochs()]
            assert granted, "nobody holds the lock, yet requests are open"
            for r in granted:
                net[r].rma(3, f"{r}.{i}")
                net[r].unlock(3)
            run()
        assert all(net[r].quiescent for r in origins)
    assert [net.payloads(r) for r in origins] == [[f"{r}.{i}" for i in range(3)] for r in origins]
    assert target.announced > 0
    assert not target.control[net.layout.lock_tail] and not target.control[net.layout.lock_state]
    assert all(not net[r]._locks for r in origins)
    assert lock_words(net) == []
    assert [f.dest for _r, f in net.fetches] == [3] * len(net.fetches)


# ----------------------------------------------------------------- random interleavings


ORIGINS = (0, 1, 2)
TARGET = 3


def _holding(net: EngineNet) -> dict[int, bool]:
    """Origins whose request counts as holding TARGET's lock (a reader's decrement in flight
    still counts), mapped to whether the request is exclusive."""
    held = {}
    for r in ORIGINS:
        lock = lock_of(net, r, TARGET)
        if lock is not None and lock.hold in (Hold.HELD, Hold.LEAVING):
            held[r] = lock.exclusive
    return held


@settings(max_examples=200, deadline=None)
@given(
    rounds=st.lists(st.lists(st.booleans(), min_size=1, max_size=3), min_size=3, max_size=3),
    data=st.data(),
)
def test_random_interleavings_never_share_an_exclusive_lock(rounds: list[list[bool]], data: Any) -> None:
    """Three origins each run a few lock/put/unlock rounds (exclusive or shared at random)
    against rank 3, while the order in which engines act and pairs deliver is drawn at random.
    After every move: an exclusive holder holds alone.  In the end everyone finished, requests
    were granted in the order they swapped into the tail (FIFO), the words are back to 0 and the
    target's engine was never involved.  (With a few thousand examples it finds the repeated-link
    hang of 1aa7af8: see test_repeated_half_enqueued_race_with_the_same_successor_hands_off.)"""
    net = EngineNet(4)
    next_round = dict.fromkeys(ORIGINS, 0)
    phase = dict.fromkeys(ORIGINS, "idle")
    token: dict[int, int] = {}
    granted: list[tuple[int, int]] = []  # (origin, round), in grant order

    def can_advance(r: int) -> bool:
        if phase[r] == "idle":
            return next_round[r] < len(rounds[r])
        return token[r] in net.completed[r]

    def advance(r: int) -> None:
        if phase[r] == "idle":
            kind = EXCL if rounds[r][next_round[r]] else SHARED
            token[r] = net[r].lock(TARGET, kind)
            phase[r] = "locking"
        elif phase[r] == "locking":
            net[r].rma(TARGET, f"{r}.{next_round[r]}")
            token[r] = net[r].unlock(TARGET)
            phase[r] = "unlocking"
        else:
            phase[r] = "idle"
            next_round[r] += 1

    def check() -> None:
        held = _holding(net)
        if any(held.values()):
            assert len(held) == 1, held
        for r in ORIGINS:
            if hold(net, r, TARGET) is Hold.HELD and (r, next_round[r]) not in granted:
                granted.append((r, next_round[r]))

    def moves() -> list[tuple[Any, ...]]:
        found: list[tuple[Any, ...]] = [("advance", r) for r in ORIGINS if can_advance(r)]
        found += [("step", r) for r in range(net.size) if net[r]._actions]
        found += [("deliver", s, d) for (s, d), q in net.queues.items() if q]
        return found

    for _ in range(400):
        options = moves()
        if not options:
            break
        move = data.draw(st.sampled_from(options))
        if move[0] == "advance":
            advance(move[1])
        elif move[0] == "step":
            step_origins(net, [move[1]])
        else:
            net.deliver(move[1], move[2])
        check()

    def run_out() -> None:
        """Step each engine and deliver each pair in turn, checking after every single move."""
        moved = True
        while moved:
            moved = False
            for r in range(net.size):
                if step_origins(net, [r]):
                    moved = True
                    check()
            for (s, d), queue in net.queues.items():
                if queue:
                    net.deliver(s, d)
                    moved = True
                    check()

    for _ in range(100):  # finish deterministically
        for r in ORIGINS:
            while can_advance(r):
                advance(r)
            run_out()
        if not moves():
            break
    assert next_round == {r: len(rounds[r]) for r in ORIGINS}, "some origin never finished"
    swaps = [
        r
        for r, f in net.fetches
        if f.dest == TARGET and f.index == net.layout.lock_tail and f.op is AtomicOp.REPLACE
    ]
    seen: dict[int, int] = dict.fromkeys(ORIGINS, 0)
    swap_order = []
    for r in swaps:
        swap_order.append((r, seen[r]))
        seen[r] += 1
    assert granted == swap_order
    assert_untouched(net, TARGET)
    assert_all_done(net)
