"""Regressions: calls that drive the progress other ranks wait for.

A release that waits for its successor's link finishes inside the ``unlock`` call (Late Unlock).

Found by ``python -m aiorma.bench patterns`` (late_unlock, nonblocking: 93–101 % of the delay
propagated after the queue lock replaced the target-side lock table): the holder unlocks just
after the next origin swapped itself into the queue but before it linked itself behind the holder;
the holder's release then waited for the link, which it only noticed after computing.

Here the transport delivers a control write only when its destination polls, as MPI's progress
does, so the link is present but unseen when ``unlock`` is called; the call must poll for it.

A call made while a lock request of the window waits for its hand-off acts on the hand-off that
arrived: found by ``python -m aiorma.bench transactions`` (nonblocking, 16 transactions in flight: 0.81 ×
the blocking mode's throughput).  A rank issuing epochs without awaiting noticed the lock handed
to it only at its next await, up to 16 transactions later, and every peer queued behind it waited
that long: a convoy.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np

import aiorma
from aiorma.engine.control import AtomicOp, ControlLayout, Word
from aiorma.runtime import run_ranks
from aiorma.transport.base import PollNeed
from aiorma.transport.local import LocalEndpoint, LocalNetwork


class _PolledEndpoint(LocalEndpoint):
    def __init__(self, network: LocalNetwork, rank: int) -> None:
        super().__init__(network, rank)
        self.polled = True

    def poll(self) -> bool:
        network: _PolledNetwork = self.network  # type: ignore[assignment]
        queue = network.undelivered[self.rank]
        windows = set()
        kept: deque[tuple[int, int, AtomicOp, int]] = deque()
        while queue:
            win_id, index, op, value = queue.popleft()
            word = ControlLayout(self.size).word_of(index)[0]
            if (
                (network.hold_links and word is Word.LOCK_NEXT)
                or (network.hold_handoffs and word is Word.LOCK_HANDOFF)
                or word in network.held_words
            ):
                kept.append((win_id, index, op, value))  # not arrived yet
                continue
            network._apply_write(self.rank, win_id, index, op, value, report=False)
            windows.add(win_id)
        queue.extend(kept)
        for win_id in windows:
            if self.sink is not None:
                self.sink.control_changed(win_id)
        return bool(windows)

    def look_control(self, win_id: int) -> bool:
        """A look at the rank's own words: the hand-offs that have landed in its memory
        (``landed_handoffs``), even those a poll does not deliver yet."""
        network: _PolledNetwork = self.network  # type: ignore[assignment]
        if not network.landed_handoffs:
            return False
        queue = network.undelivered[self.rank]
        landed = [
            w
            for w in queue
            if w[0] == win_id and ControlLayout(self.size).word_of(w[1])[0] is Word.LOCK_HANDOFF
        ]
        for write in landed:
            queue.remove(write)
            network._apply_write(self.rank, *write, report=False)
        if landed and self.sink is not None:
            self.sink.control_changed(win_id)
        return bool(landed)

    def poll_need(self) -> PollNeed:
        return PollNeed.IDLE


class _PolledNetwork(LocalNetwork):
    """Control writes to another rank land only when that rank polls."""

    def __init__(self, size: int) -> None:
        self.undelivered: list[deque[tuple[int, int, AtomicOp, int]]] = [deque() for _ in range(size)]
        self.hold_links = True  # successors' LOCK_NEXT writes stay in flight until cleared
        self.hold_handoffs = False  # the same for lock hand-offs (LOCK_HANDOFF)
        self.held_words: set[Word] = set()  # and for these words
        self.landed_handoffs = False  # held hand-offs are in memory: a look sees them, a poll not
        super().__init__(size)
        self.endpoints = [_PolledEndpoint(self, rank) for rank in range(size)]

    def control_write(self, src: int, dest: int, win_id: int, index: int, op: AtomicOp, value: int) -> None:
        if src == dest:
            super().control_write(src, dest, win_id, index, op, value)
        else:
            self.undelivered[dest].append((win_id, index, op, value))


def _run(main: Callable[[aiorma.Comm], Awaitable[Any]], network: _PolledNetwork) -> list[Any]:
    """Every rank's result of ``main``, all of them ended (barrier, free) within 10 s."""

    async def go() -> list[Any]:
        async with asyncio.timeout(10):
            return await run_ranks(main, (), network)

    return asyncio.run(go())


def test_unlock_finishes_its_release_inside_the_call() -> None:
    holding, queued = asyncio.Event(), asyncio.Event()
    network = _PolledNetwork(3)

    async def main(comm: aiorma.Comm) -> Any:
        win = await comm.win_allocate(4, np.int64)
        outcome = None
        if comm.rank == 0:
            await win.lock(2)
            holding.set()
            await queued.wait()
            win.put(np.ones(1, np.int64), 2)
            network.hold_links = False  # the link lands now, but only a poll by rank 0 sees it
            unlock = win.unlock(2)
            outcome = unlock.done()  # no await: a rank that now computes must hold nobody up
            await unlock
        elif comm.rank == 1:
            await holding.wait()
            lock = win.lock(2)  # swaps into the tail; its link to rank 0 is not yet seen there
            queued.set()
            await lock
            await win.unlock(2)
        await comm.barrier()
        await win.free()
        return outcome

    assert _run(main, network)[0] is True


def _handed_off_while_issuing(network: _PolledNetwork, land: Callable[[], None]) -> tuple[bool, ...]:
    """Rank 1 queues a lock epoch and a second one behind rank 0's lock, which rank 0 then
    releases with its hand-off held in flight; ``land()`` lets the hand-off land (in whatever
    way the test says), rank 1 calls once more without awaiting: whether its two lock requests
    and that call's put are done after the call."""
    holding, queued, released = asyncio.Event(), asyncio.Event(), asyncio.Event()
    network.hold_links = False

    async def main(comm: aiorma.Comm) -> Any:
        win = await comm.win_allocate(4, np.int64)
        outcome = None
        if comm.rank == 0:
            await win.lock(2)
            holding.set()
            await queued.wait()
            network.hold_handoffs = True  # the hand-off to rank 1 stays in flight
            await win.unlock(2)
            released.set()
        elif comm.rank == 1:
            await holding.wait()
            first = win.lock(2)  # queued behind rank 0
            win.put(np.ones(1, np.int64), 2, 0)
            win.unlock(2)
            second = win.lock(2)  # deferred: activation is serial
            queued.set()
            await released.wait()
            land()
            put = win.put(np.full(1, 2, np.int64), 2, 1)
            outcome = (first.done(), second.done(), put.done())
            network.hold_handoffs = False
            await win.unlock(2)
        await comm.barrier()
        await win.free()
        return outcome

    return tuple(_run(main, network)[1])


def test_a_call_made_while_a_lock_request_waits_acts_on_its_arrived_hand_off() -> None:
    network = _PolledNetwork(3)

    def land() -> None:
        network.hold_handoffs = False  # the hand-off has landed; only a poll sees it
        # The program computes (no await: nobody polls) for longer than a call waits between
        # two of its polls, then calls.
        time.sleep(1e-3)

    assert _handed_off_while_issuing(network, land) == (True, True, True)


def test_a_call_looks_at_its_control_words_between_polls() -> None:
    # Found by bench transactions (2 ranks, blocking: a lock idle between a release and the next
    # holder's grant as long as it was held): the successor, queued and issuing its epoch's
    # calls, saw the hand-off only at a poll, at most one per 50 µs of calls.  The hand-off lands
    # in its memory at once on one node, where a look at the words costs one C call; here it
    # has landed but no poll delivers it, so only a look made by the call can act on it.
    network = _PolledNetwork(3)

    def land() -> None:
        network.landed_handoffs = True

    assert _handed_off_while_issuing(network, land) == (True, True, True)


def test_a_put_in_a_fence_epoch_is_issued_in_the_call_once_the_target_has_opened() -> None:
    # Found timing fence / put 1 MiB / fence (bench osu: 2.6 x MPI's time): the target's fence
    # notice was in the origin's memory, unread, when the put was called, so the put was recorded
    # and copied only inside the closing fence, after everything else.
    opened = asyncio.Event()
    network = _PolledNetwork(2)
    network.held_words.add(Word.FENCE)

    async def main(comm: aiorma.Comm) -> Any:
        win = await comm.win_allocate(4, np.int64)
        outcome = None
        if comm.rank == 1:
            await win.fence()
            opened.set()
        else:
            await opened.wait()
            await win.fence()  # opening: finished at once, without a poll
            network.held_words.clear()  # rank 1's notice lands; only a poll by rank 0 sees it
            put = win.put(np.ones(1, np.int64), 1)
            outcome = put.done()
        await win.fence()
        await comm.barrier()
        await win.free()
        return outcome

    assert _run(main, network)[0] is True


def test_a_put_in_an_access_epoch_is_issued_in_the_call_once_the_target_has_posted() -> None:
    posted = asyncio.Event()
    network = _PolledNetwork(2)
    network.held_words.add(Word.GRANT)

    async def main(comm: aiorma.Comm) -> Any:
        win = await comm.win_allocate(4, np.int64)
        outcome = None
        if comm.rank == 1:
            await win.post([0])
            posted.set()
            await win.wait()
        else:
            await posted.wait()
            start = win.start([1])
            network.held_words.clear()  # rank 1's grant lands; only a poll by rank 0 sees it
            put = win.put(np.ones(1, np.int64), 1)
            outcome = put.done()
            await start
            await win.complete()
        await comm.barrier()
        await win.free()
        return outcome

    assert _run(main, network)[0] is True
