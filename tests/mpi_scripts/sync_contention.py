"""The synchronization objects under contention (run by tests/test_sync.py in-process at 3 and 5
ranks and under mpiexec): every rank hammers a Counter, a Mutex and a Semaphore at once, then
ranks queue one by one behind a holder to show the FIFO order.  Each rank returns what it saw;
the test checks no lost count, no double holder, FIFO order.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import numpy as np

import aiorma
from aiorma.sync import Counter, Event, Mutex, Semaphore

COUNTS, SECTIONS, PERMITS = 40, 15, 2
STAGGER = 0.05  # seconds between the ranks queueing in the FIFO checks


async def main(comm: aiorma.Comm) -> dict[str, Any]:
    counter = await Counter.create(comm, start=100)
    mutex = await Mutex.create(comm)
    semaphore = await Semaphore.create(comm, PERMITS)
    occupancy = await Counter.create(comm)  # holders inside a critical section right now
    shared = await comm.win_allocate(1, np.int64)  # rank 0: a value changed non-atomically
    event = await Event.create(comm)
    seen: dict[str, Any] = {"counts": [], "mutex_overlap": 0, "semaphore_over": 0}

    async def count() -> None:
        for _ in range(COUNTS):
            seen["counts"].append(await counter.next())

    async def critical_sections() -> None:
        for _ in range(SECTIONS):
            async with mutex:
                seen["mutex_overlap"] += await occupancy.next(1) != 0
                value = np.zeros(1, np.int64)
                async with shared.lock(0, aiorma.LOCK_SHARED):
                    shared.get(value, 0, 0)
                await asyncio.sleep(0)  # widen the window a second holder would need
                async with shared.lock(0, aiorma.LOCK_SHARED):
                    shared.put(value + 1, 0, 0)
                await occupancy.next(-1)

    async def permits() -> None:
        for _ in range(SECTIONS):
            async with semaphore:
                seen["semaphore_over"] += await occupancy.next(1000) >= 1000 * PERMITS
                await asyncio.sleep(0.001)
                await occupancy.next(-1000)

    await comm.barrier()
    await asyncio.gather(count(), critical_sections())
    await comm.barrier()
    await permits()
    await comm.barrier()

    # FIFO: rank 0 holds; ranks 1, 2, ... ask one after the other; the order they get it in.
    order = await Counter.create(comm)
    for name, lock in (("mutex_order", mutex), ("semaphore_order", None)):
        single = await Semaphore.create(comm, 1) if lock is None else lock
        if comm.rank == 0:
            await single.acquire()
        await comm.barrier()
        if comm.rank:
            await asyncio.sleep(STAGGER * comm.rank)
            await single.acquire()
            seen[name] = await order.next()
            await single.release()
        else:
            await asyncio.sleep(STAGGER * (comm.size + 1))
            await single.release()
        await comm.barrier()
        if lock is None:
            await single.free()

    if comm.rank == comm.size - 1:
        await asyncio.sleep(0.02)
        await event.set()
    await asyncio.wait_for(event.wait(), 10)
    seen["event"] = event.is_set()
    await comm.barrier()
    seen["shared"] = int(shared.memory[0]) if comm.rank == 0 else None
    seen["final_count"] = await counter.value()
    await comm.barrier()
    for thing in (counter, mutex, semaphore, occupancy, order, event):
        await thing.free()
    await shared.free()
    return seen


if __name__ == "__main__":
    from tests.mpi_harness import write_rank_result

    async def mpi_main(comm: aiorma.Comm) -> None:
        write_rank_result(comm.rank, await main(comm))

    aiorma.run(mpi_main)
    sys.exit(0)
