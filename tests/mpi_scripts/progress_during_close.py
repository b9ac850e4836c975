"""A task drives ``aiorma.progress()`` without pause while ``connect`` closes (run by
tests/test_connect.py): progress must leave an endpoint that is closing alone — its windows are
being freed by the collectives thread — and the process must end cleanly.  Each rank writes how
many progress calls ran during the close."""

from __future__ import annotations

import asyncio

import numpy as np
from mpi4py import MPI

import aiorma
from tests.mpi_harness import write_rank_result


async def main() -> dict[str, object]:
    calls = 0
    stop = False

    async def driving() -> None:
        nonlocal calls
        while not stop:
            aiorma.progress()
            calls += 1
            await asyncio.sleep(0)

    for _ in range(5):
        async with aiorma.connect(MPI.COMM_WORLD) as comm:
            wins = [await comm.win_allocate(16, np.int64) for _ in range(3)]
            await wins[0].fence()
            wins[0].put(np.ones(4, np.int64), (comm.rank + 1) % comm.size, 0)
            await wins[0].fence(aiorma.MODE_NOSUCCEED)
            driver = asyncio.get_running_loop().create_task(driving())
            await asyncio.sleep(0.01)
            before = calls
        # leaving the block closed it (wins left open are freed there) while ``driving`` ran
        during = calls - before
        stop = True
        await driver
        stop = False
    return {"during_close": during}


if __name__ == "__main__":
    result = asyncio.run(main())
    write_rank_result(MPI.COMM_WORLD.Get_rank(), result)
