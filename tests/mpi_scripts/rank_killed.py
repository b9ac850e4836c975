"""A rank dies without leaving aiorma (run by tests/test_liveness_mpi.py on 4 ranks, each under
a shell that outlives it, so the launcher does not end the job): rank 1 takes rank 0's exclusive
lock, then kills itself with SIGKILL while rank 0 waits in a fence, rank 2 in the wait of an
exposure to rank 1 and rank 3 for the lock rank 1 holds.  Each survivor must fail with
PeerFailed naming rank 1 and leave ``connect`` without hanging; each rank writes what happened
(rank 1 when it died).  Survivors end with ``os._exit``: MPI_Finalize with a dead rank is the MPI
library's business, not this test's."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import numpy as np
from mpi4py import MPI

import aiorma
from tests.mpi_harness import leave_after_a_death, write_rank_result


async def main() -> dict[str, object]:
    rank = MPI.COMM_WORLD.Get_rank()
    result: dict[str, object] = {}
    try:
        async with aiorma.connect(MPI.COMM_WORLD) as comm:
            fences = await comm.win_allocate(1, np.int64)
            exposures = await comm.win_allocate(1, np.int64)
            locks = await comm.win_allocate(1, np.int64)
            await fences.fence()
            if rank == 1:
                await locks.lock(0, aiorma.LOCK_EXCLUSIVE)
            await comm.barrier()
            if rank == 1:
                write_rank_result(rank, {"killed_at": time.time()})
                os.kill(os.getpid(), signal.SIGKILL)
            waits = {
                0: lambda: fences.fence(),
                2: lambda: (exposures.post([1]), exposures.wait())[1],
                3: lambda: locks.lock(0, aiorma.LOCK_EXCLUSIVE),
            }
            async with asyncio.timeout(30):
                await waits[rank]()
            result["error"] = None  # the wait completed: wrong
    except aiorma.PeerFailed as failure:
        result.update(error="PeerFailed", rank=failure.rank, cause=str(failure.cause), at=time.time())
    except TimeoutError:
        result.update(error="timeout", at=time.time())
    result["left_at"] = time.time()  # connect was left (it did not hang)
    return result


if __name__ == "__main__":
    leave_after_a_death(MPI.COMM_WORLD.Get_rank(), asyncio.run(main()))
