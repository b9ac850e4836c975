"""A rank killed after it sent a large message by reference (run by tests/test_single_copy.py on 2
ranks, each under a shell that outlives it, with the liveness ring off so that nothing else tells
rank 0 first): rank 1 starts a 4 MiB bcast — its address goes out inside the call — and kills
itself with SIGKILL; rank 0 joins the bcast later and reads rank 1's memory, which is gone.  Rank
0 must fail with PeerFailed naming rank 1 (not a bare transport error) and leave ``connect``
without hanging.  Each rank writes what happened; rank 0 ends with ``os._exit`` (MPI_Finalize
with a dead rank is the MPI library's business, not this test's)."""

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
    data = np.arange(1 << 19, dtype=np.float64) if rank == 1 else np.zeros(1 << 19)
    try:
        async with aiorma.connect(MPI.COMM_WORLD) as comm:
            await comm.barrier()
            if rank == 1:
                request = comm.bcast(data, 1)
                write_rank_result(rank, {"killed_at": time.time(), "done": request.done()})
                os.kill(os.getpid(), signal.SIGKILL)
            await asyncio.sleep(0.5)  # rank 1 is gone by now
            async with asyncio.timeout(30):
                await comm.bcast(data, 1)
            result["error"] = None  # the bcast completed: wrong
    except aiorma.PeerFailed as failure:
        result.update(error="PeerFailed", rank=failure.rank, cause=str(failure.cause), at=time.time())
    except Exception as error:
        result.update(error=type(error).__name__, message=str(error))
    result["left_at"] = time.time()
    return result


if __name__ == "__main__":
    leave_after_a_death(MPI.COMM_WORLD.Get_rank(), asyncio.run(main()))
