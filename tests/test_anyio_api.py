"""The public API under anyio's pytest plugin, on both of its backends (asyncio and trio): aiorma's
ranks run inside an event loop that anyio's runner owns — under trio with aiorma's asyncio
machinery hosted in the trio run (aiorma._core.host) — and anyio's cancel scopes (``anyio.fail_after``)
bound every wait."""

from __future__ import annotations

import anyio
import numpy as np
import pytest

import aiorma
from aiorma.runtime import run_ranks
from aiorma.transport.local import LocalNetwork

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def ring_and_locks(comm: aiorma.Comm) -> list[int]:
    win = await comm.win_allocate(comm.size, np.int64)
    right = (comm.rank + 1) % comm.size
    with anyio.fail_after(5):
        await win.fence()
        win.put(np.array([comm.rank + 1], np.int64), right, comm.rank)
        await win.fence(aiorma.MODE_NOSUCCEED)
        await win.lock(right, aiorma.LOCK_EXCLUSIVE)
        win.accumulate(np.ones(1, np.int64), right, right, aiorma.SUM)
        await win.unlock(right)
        await comm.barrier()
    seen = win.memory.tolist()
    await win.free()
    return seen


async def test_epochs_inside_anyio() -> None:
    with anyio.fail_after(10):
        results = await run_ranks(ring_and_locks, (), LocalNetwork(3))
    for rank, memory in enumerate(results):
        left = (rank - 1) % 3
        assert memory[left] == left + 1  # the left neighbour's put
        assert memory[rank] == 1  # the left neighbour's locked accumulate


async def test_fail_after_abandons_a_wait_without_withdrawing_it() -> None:
    async def main(comm: aiorma.Comm) -> bool:
        win = await comm.win_allocate(2, np.int64)
        if comm.rank == 0:
            start = win.start([1])  # rank 1 posts only after rank 0 gave up waiting
            with pytest.raises(TimeoutError), anyio.fail_after(0.01):
                await start
            await comm.barrier()
            win.put(np.full(2, 7, np.int64), 1)
            await win.complete()
            done = start.done()
        else:
            await comm.barrier()
            await win.post([0])
            await win.wait()
            done = win.memory.tolist() == [7, 7]
        await win.free()
        return done

    with anyio.fail_after(10):
        assert await run_ranks(main, (), LocalNetwork(2)) == [True, True]


async def test_connect_local_inside_an_anyio_task_group() -> None:
    """aiorma.connect_local opened inside anyio's runner, each rank a task of the group."""

    async def ring(comm: aiorma.Comm) -> None:
        win = await comm.win_allocate(1, np.int64)
        with anyio.fail_after(5):
            await win.fence()
            win.put(np.array([comm.rank], np.int64), (comm.rank + 1) % comm.size, 0)
            await win.fence()
        results[comm.rank] = int(win.memory[0])
        await win.free()

    results = [-1, -1, -1]
    async with aiorma.connect_local(3) as comms, anyio.create_task_group() as group:
        for comm in comms:
            group.start_soon(ring, comm)
    assert results == [2, 0, 1]
