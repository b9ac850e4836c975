"""Fair awaiting under mpiexec: a task that awaits aiorma calls in a loop leaves the event loop to
a 5 ms timer beside it.  Rank 0 runs ``lock(me, SHARED); get; await unlock(me)`` for
``DURATION`` seconds next to a ticker that sleeps to absolute 5 ms deadlines; it writes the
ticks counted and expected as its result.  The other ranks wait at a barrier."""

from __future__ import annotations

import asyncio
import sys
import time

import numpy as np

import aiorma
from tests.mpi_harness import write_rank_result

PERIOD = 0.005
DURATION = 0.5


async def main(comm: aiorma.Comm) -> None:
    win = await comm.win_allocate(4, np.int64)
    await comm.barrier()
    if comm.rank == 0:
        me = comm.rank
        out = np.zeros(1, np.int64)
        stop = asyncio.Event()
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            due = time.perf_counter()
            while not stop.is_set():
                due += PERIOD
                await asyncio.sleep(max(0.0, due - time.perf_counter()))
                ticks += 1

        task = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        start = time.perf_counter()
        epochs = 0
        while time.perf_counter() - start < DURATION:
            win.lock(me, aiorma.LOCK_SHARED)
            win.get(out, me, 0)
            await win.unlock(me)
            epochs += 1
        elapsed = time.perf_counter() - start
        stop.set()
        await task
        write_rank_result(0, {"ticks": ticks, "expected": elapsed / PERIOD, "epochs": epochs})
    else:
        write_rank_result(comm.rank, {})
    await comm.barrier()
    await win.free()


if __name__ == "__main__":
    aiorma.run(main)
    sys.exit(0)
