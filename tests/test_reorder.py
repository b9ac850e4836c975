"""The four reorder flags (Zounmevo 2014 §5.6.2; docs/semantics.md rules 12–19), read from the
engine's event log.

Each test keeps a first epoch E1 *active* on rank 0 (its peer has not answered yet), opens the next
epoch E2, and reads the engine's history to show exactly when E2 activates: right away, while E1
is still active (reordered), or only after E1 completes (not reordered).  The engine-level matrix
runs on ``EngineNet`` (deterministic, no I/O); Zounmevo's (2014) §5.8 set-ups then run through the public
API on the ``local`` transport, with both Info spellings, reading ``win.engine.history`` and the
``comm.observer`` hook.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import aiorma
from aiorma.constants import MODE_NOSUCCEED, LockType
from aiorma.engine.actions import EpochEvent
from aiorma.engine.rules import EpochKind, EpochState
from aiorma.win_info import Info

from .engine_net import EngineNet

FENCE, POST, START = EpochKind.FENCE, EpochKind.POST, EpochKind.START
LOCK, LOCK_ALL = EpochKind.LOCK, EpochKind.LOCK_ALL
DEFERRED, ACTIVE = EpochState.DEFERRED, EpochState.ACTIVE

AAA = "access_after_access_reorder"
AAE = "access_after_exposure_reorder"
EAE = "exposure_after_exposure_reorder"
EAA = "exposure_after_access_reorder"
FLAGS = (AAA, AAE, EAE, EAA)
MPI_KEY = {
    AAA: "MPI_WIN_ACCESS_AFTER_ACCESS_REORDER",
    AAE: "MPI_WIN_ACCESS_AFTER_EXPOSURE_REORDER",
    EAE: "MPI_WIN_EXPOSURE_AFTER_EXPOSURE_REORDER",
    EAA: "MPI_WIN_EXPOSURE_AFTER_ACCESS_REORDER",
}
ALL_FLAGS = Info(**{f: True for f in FLAGS})


def state(net: EngineNet, rank: int, epoch_id: int) -> EpochState | None:
    """The epoch's state, or None once it has completed (left the live list)."""
    for epoch in net[rank].live_epochs():
        if epoch.id == epoch_id:
            return epoch.state
    return None


def lifetime(net: EngineNet, rank: int) -> list[tuple[str, int]]:
    return net.steps(rank)


def assert_quiet(net: EngineNet) -> None:
    for rank, engine in enumerate(net.engines):
        assert engine.quiescent, (rank, engine.live_epochs())
        assert net.errors[rank] == {}
    assert all(not q for q in net.queues.values())


# ----------------------------------------------------------------------- the first epoch, E1
#
# open_e1(net) opens and closes epoch 1 on rank 0 towards rank 1, with one RMA call, and leaves it
# ACTIVE: rank 1 has not answered.  release_e1(net) is rank 1's answer; E1 then completes.


def open_start(net: EngineNet) -> None:
    net[0].start([1])
    net[0].rma(1, "e1")
    net[0].complete()  # rank 1 has not posted: no grant yet


def release_start(net: EngineNet) -> None:
    net[1].post([0])
    net[1].wait()


def hold_own_lock(net: EngineNet) -> None:
    """Rank 1 locks its own window exclusively and holds it, so a lock request of rank 0 towards
    rank 1 queues behind it: the lock stays busy until :func:`release_lock` (no engine of the
    target is needed to *grant* a lock any more, so holding a packet cannot keep it waiting)."""
    net[1].lock(1)
    net.settle()
    assert net[1].open_epochs()[-1].access[1].granted


def open_lock(net: EngineNet) -> None:
    hold_own_lock(net)  # the lock stays busy: rank 0's request waits in the queue
    net[0].lock(1)
    net[0].rma(1, "e1")
    net[0].unlock(1)


def release_lock(net: EngineNet) -> None:
    net[1].unlock(1)


def open_post(net: EngineNet) -> None:
    net[0].post([1])
    net[0].wait()  # rank 1 has not started its access


def release_post(net: EngineNet) -> None:
    net[1].start([0])
    net[1].rma(0, "e1")
    net[1].complete()


FIRST: dict[EpochKind, tuple[Callable[[EngineNet], None], Callable[[EngineNet], None]]] = {
    START: (open_start, release_start),
    LOCK: (open_lock, release_lock),
    POST: (open_post, release_post),
}


# ------------------------------------------------------------------------ the next epoch, E2
#
# prepare_e2(net) lets rank 2 do its side first; open_e2(net) opens, fills and closes epoch 2 on
# rank 0 towards rank 2.  Once activated, E2 can complete without rank 1.


def prepare_e2(net: EngineNet, kind: EpochKind) -> None:
    if kind is START:
        net[2].post([0])
        net[2].wait()
    elif kind is POST:
        net[2].start([0])
        net[2].rma(0, "e2")
        net[2].complete()


def open_e2(net: EngineNet, kind: EpochKind) -> None:
    if kind is START:
        net[0].start([2])
        net[0].rma(2, "e2")
        net[0].complete()
    elif kind is LOCK:
        net[0].lock(2)
        net[0].rma(2, "e2")
        net[0].unlock(2)
    else:
        net[0].post([2])
        net[0].wait()


# (E1 kind, E2 kind) -> the flag that lets E2 activate while E1 is active, and its rule in docs/semantics.md.
PAIRS = [
    (START, START, AAA, 12),
    (LOCK, START, AAA, 12),
    (START, LOCK, AAA, 13),
    (LOCK, LOCK, AAA, 13),
    (POST, START, AAE, 14),
    (POST, LOCK, AAE, 15),
    (POST, POST, EAE, 16),
    (START, POST, EAA, 17),
    (LOCK, POST, EAA, 17),
]


def info_variants(flag: str) -> list[tuple[str, Info, bool]]:
    """Windows with no flag, only ``flag`` (both spellings), every flag but ``flag``, every flag;
    with whether E2 may be reordered."""
    others = {f: f != flag for f in FLAGS}
    return [
        ("none", Info(), False),
        ("only-attr", Info(**{flag: True}), True),
        ("only-mpi-key", Info.from_mapping({MPI_KEY[flag]: "1"}), True),
        ("all-others", Info(**others), False),
        ("all", ALL_FLAGS, True),
    ]


MATRIX = [
    pytest.param(e1, e2, info, reordered, id=f"rule{rule}-{e1.value}-then-{e2.value}-{name}")
    for e1, e2, flag, rule in PAIRS
    for name, info, reordered in info_variants(flag)
]


@pytest.mark.parametrize(("e1", "e2", "info", "reordered"), MATRIX)
def test_rules12_17_next_epoch_activates_beside_an_active_one_only_with_its_flag(
    e1: EpochKind, e2: EpochKind, info: Info, reordered: bool
) -> None:
    net = EngineNet(3, info)
    open_e1, release_e1 = FIRST[e1]
    open_e1(net)
    prepare_e2(net, e2)
    net.settle()
    assert state(net, 0, 1) is ACTIVE and lifetime(net, 0) == [("open", 1), ("activate", 1), ("close", 1)]

    open_e2(net, e2)
    net.settle()
    if reordered:
        # Activated at its opening, beside E1, and even completed first (out of order).
        assert state(net, 0, 1) is ACTIVE
        assert state(net, 0, 2) is None
        assert lifetime(net, 0)[3:] == [("open", 2), ("activate", 2), ("close", 2), ("complete", 2)]
    else:
        assert state(net, 0, 2) is DEFERRED  # recorded, nothing of it sent
        assert lifetime(net, 0)[3:] == [("open", 2), ("close", 2)]
        assert "e2" not in [a.payload for a in net.issued[0]]

    release_e1(net)
    net.settle()
    tail = lifetime(net, 0)[3:]
    if reordered:
        assert tail[4:] == [("complete", 1)]
    else:  # serial: E2 activates only once E1 completed
        assert tail[2:] == [("complete", 1), ("activate", 2), ("complete", 2)]
    mine = [name for name, kind in (("e1", e1), ("e2", e2)) if kind is not POST]  # rank 0's RMA
    assert sorted(a.payload for a in net.issued[0]) == mine
    assert_quiet(net)


# ------------------------------------------------------------ the extra conditions 13a/15a, 16a/17a


@pytest.mark.parametrize("flags", [Info(**{AAA: True}), ALL_FLAGS], ids=["aaa", "all"])
@pytest.mark.parametrize("e1", [START, LOCK], ids=["after-start", "after-lock"])
def test_rule13a_lock_of_a_current_target_is_not_reordered(e1: EpochKind, flags: Info) -> None:
    """lock(1) while an active access epoch targets rank 1 waits for it; lock(2) does not."""
    net = EngineNet(3, flags)
    open_e1, release_e1 = FIRST[e1]
    open_e1(net)
    net.settle()
    net[0].lock(2)  # control: rank 2 is not a target of E1
    net[0].rma(2, "e2")
    net[0].unlock(2)
    net.settle()
    assert state(net, 0, 2) is None  # reordered and completed
    net[0].lock(1)  # rank 1 *is* a target of the active E1: rule 13a
    net[0].rma(1, "e3")
    net[0].unlock(1)
    net.settle()
    assert state(net, 0, 1) is ACTIVE and state(net, 0, 3) is DEFERRED
    release_e1(net)
    net.settle()
    steps = lifetime(net, 0)
    assert steps.index(("complete", 2)) < steps.index(("complete", 1)) < steps.index(("activate", 3))
    assert [a.payload for a in net.issued[0]] == ["e2", "e1", "e3"]
    assert_quiet(net)


def test_rule13a_transactions_to_one_target_serialize_others_overlap() -> None:
    """Zounmevo (2014) §5.4.2: U(a,0) U(b,0) U(a,1) with access_after_access — U(b,0) runs beside U(a,0),
    U(a,1) waits for U(a,0) (same rank), and none waits for a lock it could not get anyway."""
    net = EngineNet(3, Info(access_after_access_reorder=True))
    net.manual.add(0)  # rank 0's RMA stays in flight until the test completes it
    for target, name in ((1, "a0"), (2, "b0"), (1, "a1")):
        net[0].lock(target, LockType.EXCLUSIVE)
        net[0].rma(target, name)
        net[0].unlock(target)
    net.settle()
    assert [(e.id, e.state) for e in net[0].live_epochs()] == [(1, ACTIVE), (2, ACTIVE), (3, DEFERRED)]
    assert [a.payload for a in net.issued[0]] == ["a0", "b0"]
    net.manual.discard(0)
    for target in (1, 2):
        net[0].flushed(target, net[0].peers[target].issued_seq)
    net.settle()
    steps = lifetime(net, 0)
    assert steps.index(("complete", 1)) < steps.index(("activate", 3))
    assert [a.payload for a in net.issued[0]] == ["a0", "b0", "a1"]
    assert_quiet(net)


@pytest.mark.parametrize("flags", [Info(**{AAE: True, EAA: True}), ALL_FLAGS], ids=["aae+eaa", "all"])
def test_rule15a_lock_after_post_of_a_current_target_is_not_reordered(flags: Info) -> None:
    """E1 start(2) is active; E2 post(1) is reordered beside it (rule 17); E3 lock(2) after the
    post needs rule 15, whose condition (a) fails: rank 2 is a target of E1.  lock(3) is fine."""
    net = EngineNet(4, flags)
    net[0].start([2])
    net[0].rma(2, "e1")
    net[0].complete()  # rank 2 has not posted
    net[0].post([1])
    net[0].wait()  # rank 1 has not started
    net.settle()
    assert [(e.id, e.state) for e in net[0].live_epochs()] == [(1, ACTIVE), (2, ACTIVE)]
    net[0].lock(2)
    net[0].rma(2, "e3")
    net[0].unlock(2)
    net.settle()
    assert state(net, 0, 3) is DEFERRED

    other = EngineNet(4, flags)  # control: the same, locking rank 3 instead
    other[0].start([2])
    other[0].rma(2, "e1")
    other[0].complete()
    other[0].post([1])
    other[0].wait()
    other[0].lock(3)
    other[0].rma(3, "e3")
    other[0].unlock(3)
    other.settle()
    assert state(other, 0, 3) is None  # reordered and completed

    net[2].post([0])
    net[2].wait()
    net.settle()
    steps = lifetime(net, 0)
    assert steps.index(("complete", 1)) < steps.index(("activate", 3))
    assert state(net, 0, 2) is ACTIVE  # E3 activated beside the still active post (rule 15)
    net[1].start([0])
    net[1].complete()
    net.settle()
    assert_quiet(net)


@pytest.mark.parametrize(
    "e1", [POST, START, LOCK], ids=["rule16a-after-post", "rule17a-after-start", "rule17a-after-lock"]
)
def test_rules16a_17a_post_while_the_window_is_locked_is_not_reordered(e1: EpochKind) -> None:
    """Rank 3 holds a lock on rank 0's window: post(2) waits although its flag is set; it
    activates the moment the lock is released — still beside the active E1."""
    net = EngineNet(4, ALL_FLAGS)
    open_e1, release_e1 = FIRST[e1]
    open_e1(net)
    net[3].lock(0, LockType.SHARED)
    net.settle()
    assert net[0].window_locked
    net[2].start([0])
    net[2].complete()
    net[0].post([2])
    net[0].wait()
    net.settle()
    assert state(net, 0, 1) is ACTIVE and state(net, 0, 2) is DEFERRED

    net[3].unlock(0)
    net.settle()
    assert not net[0].window_locked
    assert state(net, 0, 1) is ACTIVE  # E1 still waits for rank 1 ...
    assert state(net, 0, 2) is None  # ... but E2 activated at the release, and completed
    steps = lifetime(net, 0)
    assert steps[-4:] == [("open", 2), ("close", 2), ("activate", 2), ("complete", 2)]
    release_e1(net)
    net.settle()
    assert lifetime(net, 0)[-1] == ("complete", 1)
    assert_quiet(net)


def test_rule16a_control_unlocked_window_reorders_post() -> None:
    net = EngineNet(4, ALL_FLAGS)
    open_post(net)
    net[3].lock(0, LockType.SHARED)
    net[3].unlock(0)  # locked and released before the post: no longer locked
    net[2].start([0])
    net[2].complete()
    net.settle()
    net[0].post([2])
    net[0].wait()
    net.settle()
    assert state(net, 0, 2) is None and state(net, 0, 1) is ACTIVE


# ---------------------------------------------------------------- rules 18-19: fence, lock_all


def open_fence(net: EngineNet) -> None:
    """Epoch 1 on rank 0: a fence epoch with a put to rank 1, closed; it completes only when
    ranks 1 and 2 close theirs (barrier semantics)."""
    net[0].fence()
    net[0].rma(1, "e1")
    net[0].fence(MODE_NOSUCCEED)


def release_fence(net: EngineNet) -> None:
    for r in (1, 2):
        net[r].fence()
        net[r].fence(MODE_NOSUCCEED)


def open_lock_all(net: EngineNet) -> None:
    hold_own_lock(net)  # rank 0's shared lock at rank 1 waits behind it
    net[0].lock_all()
    net[0].rma(1, "e1")
    net[0].unlock_all()


NEVER_FIRST = {FENCE: (open_fence, release_fence), LOCK_ALL: (open_lock_all, release_lock)}


def open_e2_any(net: EngineNet, kind: EpochKind) -> None:
    if kind is FENCE:
        net[0].fence()  # opens; completing it needs ranks 1 and 2 (see finish_e2)
    elif kind is LOCK_ALL:
        net[0].lock_all()
        net[0].rma(2, "e2")
        net[0].unlock_all()
    else:
        open_e2(net, kind)


def finish_e2(net: EngineNet, kind: EpochKind) -> None:
    if kind is FENCE:
        net[0].fence(MODE_NOSUCCEED)
        for r in (1, 2):
            net[r].fence()
            net[r].fence(MODE_NOSUCCEED)


NEVER_PAIRS = [(FENCE, k) for k in (START, LOCK, POST, LOCK_ALL, FENCE)] + [
    (LOCK_ALL, k) for k in (START, LOCK, POST, LOCK_ALL, FENCE)
]
NEVER_PAIRS += [(k, FENCE) for k in (START, LOCK, POST)] + [(k, LOCK_ALL) for k in (START, LOCK, POST)]


@pytest.mark.parametrize(("e1", "e2"), NEVER_PAIRS, ids=[f"{a.value}-then-{b.value}" for a, b in NEVER_PAIRS])
def test_rules18_19_never_reordered_across_fence_or_lock_all_even_with_every_flag(
    e1: EpochKind, e2: EpochKind
) -> None:
    net = EngineNet(3, ALL_FLAGS)
    open_e1, release_e1 = NEVER_FIRST.get(e1) or FIRST[e1]
    open_e1(net)
    net.settle()
    assert state(net, 0, 1) is ACTIVE
    open_e2_any(net, e2)
    net.settle()
    assert state(net, 0, 2) is DEFERRED
    assert ("activate", 2) not in lifetime(net, 0)
    release_e1(net)
    # Rank 2 does its side of E2 only now: an exposure or access of rank 2 opened before it
    # closes its own fence would hold that fence back (rule 18 on rank 2), as in blocking MPI.
    prepare_e2(net, e2)
    net.settle()
    finish_e2(net, e2)
    net.settle()
    steps = lifetime(net, 0)
    assert steps.index(("complete", 1)) < steps.index(("activate", 2)) < steps.index(("complete", 2))
    assert_quiet(net)


# ====================================================================================
# Zounmevo's (2014) §5.8 set-ups through the public API on the local transport.
#
# A late peer waits on an asyncio.Event, set by the test once the other ranks have had every
# chance to progress: whether the victim's epoch finished before that moment is then exactly
# whether the engine reordered.  Each returns what its ranks saw; flags come in both spellings.


def window_info(flag: str, enabled: bool, spelling: str) -> Any:
    if spelling == "attr":
        return Info(**{flag: enabled})
    return {MPI_KEY[flag]: "1" if enabled else "0"}


async def settle_loop(rounds: int = 200) -> None:
    """Let every in-process rank run until nothing moves (the local transport delivers packets
    and completions by loop callbacks)."""
    for _ in range(rounds):
        await asyncio.sleep(0)


def lifetime_of(history: list[EpochEvent]) -> list[tuple[str, int]]:
    return [(e.step, e.epoch_id) for e in history if e.step != "issue"]


def run_local(nprocs: int, flag: str, enabled: bool, spelling: str, body: Callable[..., Any]) -> list[Any]:
    """Run ``body(comm, win, late)`` on each rank of a local job; ``late`` is one asyncio.Event
    shared by the ranks.  Returns each rank's (body result, lifetime steps, window memory)."""
    shared: dict[str, asyncio.Event] = {}

    async def main(comm: aiorma.Comm) -> Any:
        late = shared.setdefault("late", asyncio.Event())  # created on aiorma.run's loop
        comm.history = True
        win = await comm.win_allocate(8, np.int64, info=window_info(flag, enabled, spelling))
        result = await body(comm, win, late)
        await comm.barrier()
        memory = win.memory.tolist()
        history = list(win.engine.history or [])
        await win.free()
        return result, lifetime_of(history), memory

    return aiorma.run(main, nprocs=nprocs, transport="local")


SPELLINGS = pytest.mark.parametrize("spelling", ["attr", "mpi"])
ENABLED = pytest.mark.parametrize("enabled", [False, True], ids=["flag-off", "flag-on"])


@SPELLINGS
@ENABLED
@pytest.mark.timeout(30)
def test_local_access_after_access_gats(enabled: bool, spelling: str) -> None:
    """Fig 5.18: origin 0 opens access to T0=1 (late post) then to T1=2.  With the flag the
    second epoch activates at once and completes while T0 has not even posted."""

    async def body(comm: aiorma.Comm, win: aiorma.Window, late: asyncio.Event) -> Any:
        if comm.rank == 0:
            win.start([1])
            win.put(np.array([11]), 1, 0)
            first = win.complete()
            win.start([2])
            win.put(np.array([22]), 2, 0)
            second = win.complete()
            await settle_loop()
            seen = (first.done(), second.done())
            late.set()
            await first
            await second
            return seen
        if comm.rank == 1:
            await late.wait()
        win.post([0])
        await win.wait()
        return None

    results = run_local(3, AAA, enabled, spelling, body)
    (seen, steps, _), (_, _, mem1), (_, _, mem2) = results
    assert seen == (False, enabled)
    assert (mem1[0], mem2[0]) == (11, 22)
    if enabled:
        assert steps.index(("activate", 2)) < steps.index(("complete", 2)) < steps.index(("complete", 1))
    else:
        assert steps.index(("complete", 1)) < steps.index(("activate", 2))


@SPELLINGS
@ENABLED
@pytest.mark.timeout(30)
def test_local_access_after_access_lock(enabled: bool, spelling: str) -> None:
    """Fig 5.19: O0=0 holds T0=2's lock until ``late``; O1=1 locks T0 then T1=3.  With the flag
    O1's second lock epoch completes while its first still waits for the lock."""

    async def body(comm: aiorma.Comm, win: aiorma.Window, late: asyncio.Event) -> Any:
        if comm.rank == 0:
            await win.lock(2, aiorma.LOCK_EXCLUSIVE)
            win.put(np.array([1]), 2, 0)
            await late.wait()
            await win.unlock(2)
        elif comm.rank == 1:
            await settle_loop(20)  # O0's lock request is first at T0
            win.lock(2, aiorma.LOCK_EXCLUSIVE)
            win.put(np.array([2]), 2, 1)
            first = win.unlock(2)
            win.lock(3, aiorma.LOCK_EXCLUSIVE)
            win.put(np.array([3]), 3, 1)
            second = win.unlock(3)
            await settle_loop()
            seen = (first.done(), second.done())
            late.set()
            await first
            await second
            return seen
        return None

    results = run_local(4, AAA, enabled, spelling, body)
    assert results[1][0] == (False, enabled)
    assert results[2][2][:2] == [1, 2] and results[3][2][1] == 3


@SPELLINGS
@ENABLED
@pytest.mark.timeout(30)
def test_local_access_after_exposure(enabled: bool, spelling: str) -> None:
    """Fig 5.20: P2 exposes to the late P0, then accesses P1.  With the flag P1's exposure
    completes while P0 is still late."""

    async def body(comm: aiorma.Comm, win: aiorma.Window, late: asyncio.Event) -> Any:
        if comm.rank == 0:
            await late.wait()
            win.start([2])
            win.put(np.array([20]), 2, 0)
            await win.complete()
        elif comm.rank == 1:
            win.post([2])
            exposure = win.wait()
            await settle_loop()
            seen = exposure.done()
            late.set()
            await exposure
            return seen
        else:
            win.post([0])
            w = win.wait()
            win.start([1])
            win.put(np.array([21]), 1, 0)
            c = win.complete()
            await w
            await c
        return None

    results = run_local(3, AAE, enabled, spelling, body)
    assert results[1][0] is enabled
    assert results[1][2][0] == 21 and results[2][2][0] == 20
    steps = results[2][1]  # P2: epoch 1 = post, epoch 2 = start
    if enabled:
        assert steps.index(("complete", 2)) < steps.index(("complete", 1))
    else:
        assert steps.index(("complete", 1)) < steps.index(("activate", 2))


@SPELLINGS
@ENABLED
@pytest.mark.timeout(30)
def test_local_exposure_after_exposure(enabled: bool, spelling: str) -> None:
    """Fig 5.21: the target T=2 exposes to the late O0=0, then to O1=1.  With the flag O1's
    access epoch completes while O0 is still late."""

    async def body(comm: aiorma.Comm, win: aiorma.Window, late: asyncio.Event) -> Any:
        if comm.rank == 2:
            win.post([0])
            first = win.wait()
            win.post([1])
            second = win.wait()
            await first
            await second
            return None
        if comm.rank == 0:
            await late.wait()
            win.start([2])
            win.put(np.array([10]), 2, 0)
            await win.complete()
            return None
        win.start([2])
        win.put(np.array([11]), 2, 1)
        access = win.complete()
        await settle_loop()
        seen = access.done()
        late.set()
        await access
        return seen

    results = run_local(3, EAE, enabled, spelling, body)
    assert results[1][0] is enabled
    assert results[2][2][:2] == [10, 11]
    steps = results[2][1]
    if enabled:
        assert steps.index(("activate", 2)) < steps.index(("complete", 1))
    else:
        assert steps.index(("complete", 1)) < steps.index(("activate", 2))


@SPELLINGS
@ENABLED
@pytest.mark.timeout(30)
def test_local_exposure_after_access(enabled: bool, spelling: str) -> None:
    """Fig 5.22: P2 accesses the late target P0, then exposes to P1.  With the flag P1's access
    completes while P0 is still late."""

    async def body(comm: aiorma.Comm, win: aiorma.Window, late: asyncio.Event) -> Any:
        if comm.rank == 0:
            await late.wait()
            win.post([2])
            await win.wait()
            return None
        if comm.rank == 2:
            win.start([0])
            win.put(np.array([20]), 0, 0)
            c = win.complete()
            win.post([1])
            w = win.wait()
            await c
            await w
            return None
        win.start([2])
        win.put(np.array([21]), 2, 0)
        access = win.complete()
        await settle_loop()
        seen = access.done()
        late.set()
        await access
        return seen

    results = run_local(3, EAA, enabled, spelling, body)
    assert results[1][0] is enabled
    assert results[0][2][0] == 20 and results[2][2][0] == 21


@pytest.mark.timeout(30)
def test_local_lock_all_never_reordered_observer_timestamps() -> None:
    """Rule 19 through the API, watched with the ``comm.observer`` hook: after lock_all, a lock
    waits for the lock_all epoch to complete even with every flag (both spellings).

    Rank 1 holds an exclusive lock on its own window meanwhile, so rank 0's lock_all stays active
    (its shared lock at rank 1 is queued) until rank 1 lets go: on the local transport an
    uncontended lock_all/unlock_all completes within the calls (the lock atomics are carried
    out inline), which would leave nothing for the later lock to wait for."""
    shared: dict[str, asyncio.Event] = {}

    async def main(comm: aiorma.Comm) -> Any:
        late = shared.setdefault("late", asyncio.Event())
        log: list[tuple[int, int, EpochEvent]] = []
        comm.observer = lambda win_id, event: log.append((time.perf_counter_ns(), win_id, event))
        info = {MPI_KEY[AAA]: "1", MPI_KEY[AAE]: "true", EAE: True, EAA: "on"}
        win = await comm.win_allocate(4, np.int64, info=info)
        assert win.engine.info == ALL_FLAGS
        seen = None
        if comm.rank == 1:
            await win.lock(1, aiorma.LOCK_EXCLUSIVE)
        await comm.barrier()
        if comm.rank == 0:
            win.lock_all()
            win.put(np.array([5]), 1, 0)
            done_all = win.unlock_all()
            win.lock(1)
            win.put(np.array([6]), 1, 1)
            unlocked = win.unlock(1)
            await settle_loop()
            seen = (done_all.done(), unlocked.done())
            late.set()
            await unlocked
            await done_all
        else:
            await late.wait()
            await win.unlock(1)
        await comm.barrier()
        memory = win.memory.tolist()
        await win.free()
        mine = [(t, w, e.step, e.epoch_id) for t, w, e in log if w == win.win_id]
        return mine, memory, seen

    results = aiorma.run(main, nprocs=2)
    log, _, seen = results[0]
    assert seen == (False, False)  # both wait for rank 1's own lock, the lock also for rule 19
    assert results[1][1][:2] == [5, 6]
    when = {(step, epoch): t for t, _w, step, epoch in log if step != "issue"}
    assert when[("complete", 1)] <= when[("activate", 2)]
    assert [step for _t, _w, step, epoch in log if epoch == 2] == [
        "open",
        "close",
        "activate",
        "issue",
        "complete",
    ]
    ordered = [t for t, *_ in log]
    assert ordered == sorted(ordered)


@pytest.mark.timeout(30)
def test_local_observer_not_installed_by_default() -> None:
    async def main(comm: aiorma.Comm) -> Any:
        win = await comm.win_allocate(1, np.int64)
        observers = (comm.observer, win.engine.observer, win.engine.history)
        await win.free()
        return observers

    assert aiorma.run(main, nprocs=2) == [(None, None, None)] * 2


@pytest.mark.timeout(30)
def test_info_flags_are_per_window() -> None:
    """§5.6.2: the flags act per window.  The same late-post sequence on a flagged and a plain
    window of one job: only the flagged window's second epoch completes before the late post."""
    shared: dict[str, asyncio.Event] = {}

    async def main(comm: aiorma.Comm) -> Any:
        late = shared.setdefault("late", asyncio.Event())
        flagged = await comm.win_allocate(1, np.int64, info={MPI_KEY[AAA]: "1"})
        plain = await comm.win_allocate(1, np.int64)
        seen = None
        if comm.rank == 0:
            seconds = []
            for win in (flagged, plain):
                win.start([1])
                win.put(np.array([1]), 1, 0)
                win.complete()
                win.start([2])
                win.put(np.array([2]), 2, 0)
                seconds.append(win.complete())
            await settle_loop()
            seen = [c.done() for c in seconds]
            late.set()
            for c in seconds:
                await c
        else:
            if comm.rank == 1:
                await late.wait()
            for win in (flagged, plain):
                win.post([0])
                await win.wait()
        await comm.barrier()
        for win in (flagged, plain):
            await win.free()
        return seen

    assert aiorma.run(main, nprocs=3)[0] == [True, False]
