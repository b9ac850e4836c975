"""The cancellation audit (docs/semantics.md, *Cancellation leaves nothing behind*): every awaitable
the API returns, cancelled at its worst moment — while it waits for a peer that holds it up, or
just after it was granted — completes or is abandoned without leaving a lock, a permit, an epoch
or a collective step held, queued or half-done.  One test per row of the table, each under asyncio
and under trio (anyio's cancel scopes), in-process; the peer that holds a wait up waits for the
canceller's word, so the cancellation is sure to land on every run.

Rows proven elsewhere: Mutex and Semaphore acquires (tests/test_sync_cancel.py: storms at 2-4
ranks, in-process and under mpiexec), ``win_create``/``win_allocate`` (tests/
test_collective_cancellation.py), the entries into ``async with`` blocks on every transport
(tests/scenarios.py, ``cancelled_*_entry_closes_the_epoch``), ``connect``/``connect_local``
(tests/test_any_loop.py via tests/mpi_scripts/any_loop.py).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import anyio
import numpy as np
import pytest

import aiorma
from aiorma import LOCK_EXCLUSIVE

from .scenarios import free_words, word_window

BACKENDS = ["asyncio", "trio"]
Row = Callable[[aiorma.Comm], Awaitable[None]]

pytestmark = pytest.mark.timeout(60)


async def _abandoned(awaitable: Awaitable[object]) -> None:
    """Await under a deadline that must expire."""
    with anyio.move_on_after(0.05) as scope:
        await awaitable
    assert scope.cancelled_caught, "the wait was not held up"


async def _cancelled_at_checkpoint(awaitable: Awaitable[object]) -> None:
    """Await something already finished, cancelled at the await's fairness checkpoint."""
    with anyio.CancelScope() as scope:
        scope.cancel()
        time.sleep(2 * aiorma.request.FAIR_SLICE)  # the await checkpoints: the cancel lands
        await awaitable
    assert scope.cancelled_caught


def run(row: Row, backend: str, nprocs: int = 2) -> None:
    async def main(comm: aiorma.Comm) -> None:
        with anyio.fail_after(30):
            await row(comm)

    assert aiorma.run(main, nprocs=nprocs, backend=backend) == [None] * nprocs


# --------------------------------------------------------------------------------- rows


async def lock_opening_awaited(comm: aiorma.Comm) -> None:
    """``await win.lock(0)`` given up while rank 0 holds the lock: the epoch is still the
    program's — it unlocks it — and the lock then goes round every rank."""
    win = await comm.win_allocate(1, np.int64)
    words = await word_window(comm, 2)
    if comm.rank == 0:
        await win.lock(0, LOCK_EXCLUSIVE)
    await comm.barrier()
    if comm.rank == 1:
        await _abandoned(win.lock(0, LOCK_EXCLUSIVE))
        win.accumulate(np.ones(1, np.int64), 0, 0)
        await words.signal(0, 0, 1)
        await win.unlock(0)  # the abandoned wait left the epoch open: the program closes it
    if comm.rank == 0:
        await words.wait_until(0, ">=", 1)
        await win.unlock(0)
    async with win.lock(0, LOCK_EXCLUSIVE):
        win.accumulate(np.ones(1, np.int64), 0, 0)
    await comm.barrier()
    if comm.rank == 0:
        assert int(win.memory[0]) == 1 + comm.size
    await free_words(words)
    await win.free()


async def lock_block_granted_then_cancelled(comm: aiorma.Comm) -> None:
    """``async with win.lock(1)`` granted at once but cancelled at the entry's checkpoint: the
    block unlocks, and the peer locks next."""
    win = await comm.win_allocate(1, np.int64)
    if comm.rank == 0:
        await _cancelled_at_checkpoint(_enter(win.lock(1, LOCK_EXCLUSIVE)))
        assert win.engine.open_epochs() == []
    await comm.barrier()
    async with win.lock(1, LOCK_EXCLUSIVE):
        pass
    await comm.barrier()
    await win.free()


async def _enter(opening: aiorma.EpochRequest) -> None:
    async with opening:
        raise AssertionError("the block ran although its entry was cancelled")


async def lock_all_block_entry(comm: aiorma.Comm) -> None:
    """``async with win.lock_all()`` given up while rank 0 holds its lock exclusively: unlocked
    all, so rank 0's next exclusive lock is granted."""
    win = await comm.win_allocate(1, np.int64)
    words = await word_window(comm, 2)
    if comm.rank == 0:
        await win.lock(0, LOCK_EXCLUSIVE)
    await comm.barrier()
    if comm.rank == 1:
        await _abandoned(_enter(win.lock_all()))
        await words.signal(0, 0, 1)
    if comm.rank == 0:
        await words.wait_until(0, ">=", 1)
        await win.unlock(0)
    await comm.barrier()
    async with win.lock(0, LOCK_EXCLUSIVE):
        pass
    await comm.barrier()
    await free_words(words)
    await win.free()


async def start_block_entry(comm: aiorma.Comm) -> None:
    """``async with win.start([0])`` given up before rank 0 posts: completed, so rank 0's wait
    completes and the next epochs still match."""
    win = await comm.win_allocate(1, np.int64)
    words = await word_window(comm, 2)
    if comm.rank == 1:
        await _abandoned(_enter(win.start([0])))
        await words.signal(0, 0, 1)
        async with win.start([0]):
            win.put(np.array([9], np.int64), 0, 0)
    if comm.rank == 0:
        await words.wait_until(0, ">=", 1)
        for _ in range(2):
            async with win.post([1]):
                pass
        assert int(win.memory[0]) == 9
    await comm.barrier()
    await free_words(words)
    await win.free()


async def unlock_awaited(comm: aiorma.Comm) -> None:
    """``await win.unlock(0)`` given up (rank 0 holds the lock, so the unlock of the queued
    epoch waits): the unlock still happens once the epoch is granted."""
    win = await comm.win_allocate(1, np.int64)
    words = await word_window(comm, 2)
    if comm.rank == 0:
        await win.lock(0, LOCK_EXCLUSIVE)
    await comm.barrier()
    if comm.rank == 1:
        win.lock(0, LOCK_EXCLUSIVE)
        win.put(np.array([5], np.int64), 0, 0)
        closing = win.unlock(0)
        await _abandoned(closing)
        await words.signal(0, 0, 1)
        await closing  # still completes: the wait was abandoned, not the unlock
    if comm.rank == 0:
        await words.wait_until(0, ">=", 1)
        await win.unlock(0)
        async with win.lock(0, LOCK_EXCLUSIVE):  # granted after rank 1's epoch: released
            assert int(win.memory[0]) == 5
    await comm.barrier()
    await free_words(words)
    await win.free()


async def fence_awaited(comm: aiorma.Comm) -> None:
    """``await win.fence()`` given up while rank 0 is late: the fence still completes, and the
    next fence epoch matches on both ranks."""
    win = await comm.win_allocate(2, np.int64)
    words = await word_window(comm, 2)
    await win.fence()
    if comm.rank == 1:
        win.put(np.array([3], np.int64), 0, 0)
        closing = win.fence()
        await _abandoned(closing)
        await words.signal(0, 0, 1)
        await closing
    else:
        await words.wait_until(0, ">=", 1)
        await win.fence()
        assert int(win.memory[0]) == 3
    win.put(np.array([4], np.int64), (comm.rank + 1) % comm.size, 1)
    await win.fence(aiorma.MODE_NOSUCCEED)
    assert int(win.memory[1]) == 4
    await free_words(words)
    await win.free()


async def wait_until_awaited(comm: aiorma.Comm) -> None:
    """``await words.wait_until(...)`` given up: no wait stays registered, and a later wait for
    the same word is met by the signal."""
    words = await word_window(comm, 2)
    if comm.rank == 0:
        await _abandoned(words.wait_until(1, ">=", 1))
        await words.signal(1, 0, 1)
        await words.wait_until(1, ">=", 1)
    else:
        await words.wait_until(0, ">=", 1)
        await words.signal(0, 1, 1)
    await comm.barrier()
    await free_words(words)


async def barrier_awaited(comm: aiorma.Comm) -> None:
    """``await comm.barrier()`` given up while rank 0 is late: the barrier still completes and
    the next collective is in step on every rank."""
    words = await word_window(comm, 2)
    if comm.rank == 1:
        held = comm.barrier()
        await _abandoned(held)
        await words.signal(0, 0, 1)
        await held
    else:
        await words.wait_until(0, ">=", 1)
        await comm.barrier()
    total = np.zeros(1, np.int64)
    await comm.allreduce(np.array([comm.rank + 1], np.int64), total, aiorma.SUM)
    assert int(total[0]) == comm.size * (comm.size + 1) // 2
    await free_words(words)


ROWS: dict[str, Row] = {
    row.__name__: row
    for row in (
        lock_opening_awaited,
        lock_block_granted_then_cancelled,
        lock_all_block_entry,
        start_block_entry,
        unlock_awaited,
        fence_awaited,
        wait_until_awaited,
        barrier_awaited,
    )
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(ROWS))
def test_cancelled_wait_leaves_nothing_behind(name: str, backend: str) -> None:
    run(ROWS[name], backend)
