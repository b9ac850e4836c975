"""A rank that leaves ``aiorma.connect`` by an exception tells its peers (run by
tests/test_departure_mpi.py on 3 ranks): rank 1 raises right after ``win_allocate`` while ranks 0
and 2 await two fences under a 15 s timeout.  With the argument ``late``, rank 2 first blocks for
half a second without polling, so that when it looks, rank 0 has left too (because of rank 1):
it must still name rank 1.  With ``calls``, rank 0 instead leaves epochs open and then tries
every kind of call on the failed windows (tests/test_failures.py: calls_on_a_failed_window).
Each rank writes what happened to it."""

from __future__ import annotations

import asyncio
import sys
import time

import numpy as np
from mpi4py import MPI

import aiorma
from tests.mpi_harness import write_rank_result
from tests.test_failures import Boom, calls_on_a_failed_window


async def main(late: bool, calls: bool) -> dict[str, object]:
    rank = MPI.COMM_WORLD.Get_rank()
    began = 0.0
    seen: dict[str, object] = {}
    try:
        async with aiorma.connect(MPI.COMM_WORLD) as comm:
            if calls:
                try:  # leaving connect then raises the peer's failure: the calls' outcome counts
                    seen["calls"] = await calls_on_a_failed_window(comm, failing=1)
                    return seen
                except Boom as error:
                    raise ValueError(str(error)) from error
            win = await comm.win_allocate(4, np.int64)
            began = time.perf_counter()
            if rank == 1:
                raise ValueError("rank 1 leaves on purpose")
            if rank == 2 and late:
                time.sleep(0.5)  # blocks the loop: no poll until both notices are in
            async with asyncio.timeout(15):
                await win.fence()
                await win.fence()
    except aiorma.PeerFailed as failure:
        if seen:
            return seen
        return {
            "error": "PeerFailed",
            "rank": failure.rank,
            "cause": str(failure.cause),
            "after_s": time.perf_counter() - began,
        }
    except TimeoutError:
        return {"error": "timeout", "after_s": time.perf_counter() - began}
    except ValueError as error:
        return {"error": "ValueError", "message": str(error)}
    return {"error": None}


if __name__ == "__main__":
    result = asyncio.run(main("late" in sys.argv[1:], "calls" in sys.argv[1:]))
    write_rank_result(MPI.COMM_WORLD.Get_rank(), result)
