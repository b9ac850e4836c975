"""The public API written only with anyio, so the same program runs under asyncio and under trio
(run by tests/test_any_loop.py in-process and under mpiexec, on both backends): every epoch kind
and RMA call, the eight collectives, notified puts, the synchronization objects, and cancel scopes
that abandon a wait.  Each rank returns what it saw; the test compares it with what must be.

    mpiexec -n 3 python tests/mpi_scripts/any_loop.py trio
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import numpy as np

import aiorma
from aiorma.sync import Counter, Event, Mutex, Semaphore


async def main(comm: aiorma.Comm) -> dict[str, Any]:
    rank, size = comm.rank, comm.size
    left, right = (rank - 1) % size, (rank + 1) % size
    seen: dict[str, Any] = {}
    with anyio.fail_after(60):
        win = await comm.win_allocate(3 * size + 4, np.int64)

        # fence, lock, PSCW (async with), lock_all with get and atomics
        await win.fence()
        win.put(np.array([rank + 1], np.int64), right, rank)
        await win.fence(aiorma.MODE_NOSUCCEED)
        async with win.lock(right, aiorma.LOCK_EXCLUSIVE):
            win.accumulate(np.array([10], np.int64), right, size + rank, aiorma.SUM)
        await comm.barrier()
        async with win.post([left]), win.start([right]):
            win.put(np.array([rank + 100], np.int64), right, 2 * size + rank)
        got = np.zeros(1, np.int64)
        old = np.zeros(1, np.int64)
        swapped = np.zeros(1, np.int64)
        async with win.lock_all():
            win.get(got, right, rank)  # what the first fence put there
            await win.flush(right)
            await win.fetch_and_op(np.array([1], np.int64), old, 0, 3 * size, aiorma.SUM)
            await win.compare_and_swap(np.array([rank]), np.array([-1]), swapped, 0, 3 * size + 1)
        await comm.barrier()
        seen["memory"] = win.memory[: 3 * size].tolist()
        seen["got"] = int(got[0])
        seen["tickets"] = int(win.memory[3 * size]) if rank == 0 else None

        # the eight collectives
        out = np.zeros(1)
        await comm.allreduce(np.array([float(rank)]), out)
        seen["allreduce"] = float(out[0])
        buf = np.array([42.0 if rank == 0 else 0.0])
        await comm.bcast(buf, 0)
        seen["bcast"] = float(buf[0])
        total = np.zeros(1)
        await comm.reduce(np.array([1.0]), total if rank == 0 else None, aiorma.SUM, 0)
        seen["reduce"] = float(total[0]) if rank == 0 else None
        blocks = np.zeros(size)
        await comm.allgather(np.array([float(rank)]), blocks)
        seen["allgather"] = blocks.tolist()
        gathered = np.zeros(size)
        await comm.gather(np.array([float(rank)]), gathered if rank == 0 else None, 0)
        seen["gather"] = gathered.tolist() if rank == 0 else None
        part = np.zeros(1)
        await comm.scatter(np.arange(size, dtype=float) * 2 if rank == 0 else None, part, 0)
        seen["scatter"] = float(part[0])
        mixed = np.zeros(size)
        await comm.alltoall(np.arange(size, dtype=float) + 10 * rank, mixed)
        seen["alltoall"] = mixed.tolist()
        await comm.barrier()

        # notified put around the ring
        words = await comm.win_allocate(size, np.int64)
        async with win.lock_all(), words.lock_all():
            sent = win.put_signal(np.array([rank + 7], np.int64), right, 3 * size + 2, words, rank, 1)
            await words.wait_until(left, "==", 1)
            seen["notified"] = int(win.memory[3 * size + 2])
            await sent

        # cancel scopes abandon a wait, not the operation: rank 0's start waits for a post that
        # rank 1 makes only after rank 0 gave up waiting
        if size > 1:
            await comm.barrier()
            if rank == 0:
                start = win.start([1])
                with anyio.move_on_after(0.02) as scope:
                    await start
                seen["abandoned"] = scope.cancelled_caught
                await comm.barrier()
                win.put(np.array([5], np.int64), 1, 3 * size + 3)
                await win.complete()
            elif rank == 1:
                await comm.barrier()
                async with win.post([0]):
                    pass
                seen["after_cancel"] = int(win.memory[3 * size + 3])
            else:
                await comm.barrier()

        # synchronization objects, two tasks per rank
        counter = await Counter.create(comm)
        mutex = await Mutex.create(comm)
        permits = await Semaphore.create(comm, 1)
        event = await Event.create(comm)
        inside = [0]
        overlaps = [0]

        async def worker() -> None:
            for _ in range(5):
                await counter.next()
                async with mutex:
                    inside[0] += 1
                    overlaps[0] += inside[0] > 1
                    await anyio.sleep(0)
                    inside[0] -= 1
                async with permits:
                    await anyio.sleep(0)

        async with anyio.create_task_group() as group:
            group.start_soon(worker)
            group.start_soon(worker)
        await comm.barrier()
        seen["count"] = await counter.value()
        seen["overlaps"] = overlaps[0]
        if rank == size - 1:
            await event.set()
        await event.wait()
        seen["event"] = event.is_set()
        await comm.barrier()
        for thing in (counter, mutex, permits, event):
            await thing.free()
        await words.free()
        await win.free()
    return seen


def expected(rank: int, size: int) -> dict[str, Any]:
    """What :func:`main` must see on ``rank`` of ``size``."""
    left = (rank - 1) % size
    memory = [0] * (3 * size)
    memory[left] = left + 1
    memory[size + left] = 10
    memory[2 * size + left] = left + 100
    out: dict[str, Any] = {
        "memory": memory,
        "got": rank + 1,
        "tickets": size if rank == 0 else None,
        "allreduce": float(sum(range(size))),
        "bcast": 42.0,
        "reduce": float(size) if rank == 0 else None,
        "allgather": [float(r) for r in range(size)],
        "gather": [float(r) for r in range(size)] if rank == 0 else None,
        "scatter": 2.0 * rank,
        "alltoall": [float(rank + 10 * r) for r in range(size)],
        "notified": left + 7,
        "count": 10 * size,
        "overlaps": 0,
        "event": True,
    }
    if size > 1 and rank == 0:
        out["abandoned"] = True
    if size > 1 and rank == 1:
        out["after_cancel"] = 5
    return out


if __name__ == "__main__":
    from tests.mpi_harness import write_rank_result

    async def mpi_main(comm: aiorma.Comm) -> None:
        write_rank_result(comm.rank, await main(comm))

    aiorma.run(mpi_main, backend=sys.argv[1] if len(sys.argv) > 1 else "asyncio")
    sys.exit(0)
