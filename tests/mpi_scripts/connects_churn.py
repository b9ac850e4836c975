"""Several aiorma.connect open at once in one process (COMM_WORLD and Dups of it), each creating
and freeing windows as fast as it can, all at the same time; run by tests/test_connect.py.

Arguments: rounds (windows per connect), connects.  Each MpiEndpoint runs its window collectives
in its own thread, so without aiorma.transport.window_lifecycle those threads call
MPI_Win_allocate (and MPI_Win_free) at the same moment, which MPICH 5 (ch4:ucx) does not survive:
its internal state is corrupted and the process dies of SIGSEGV in a later Win_free or, with an
empty stderr, in MPI_Finalize at exit.  Each rank writes how many windows each connect made.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys

import numpy as np
from mpi4py import MPI

import aiorma
from tests.mpi_harness import write_rank_result

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 200
CONNECTS = int(sys.argv[2]) if len(sys.argv) > 2 else 4
world = MPI.COMM_WORLD
rank = world.Get_rank()


async def churn(comm: aiorma.Comm) -> int:
    """Windows made and freed one after another."""
    made = 0
    for _ in range(ROUNDS):
        win = await comm.win_allocate(4, np.int64)
        await win.free()
        made += 1
    return made


async def main() -> dict:
    # Dups: more communicators over the same ranks, one connect (one collectives thread) each.
    others = [world.Dup() for _ in range(CONNECTS - 1)]
    async with contextlib.AsyncExitStack() as stack:
        comms = [await stack.enter_async_context(aiorma.connect(c)) for c in (world, *others)]
        made = await asyncio.gather(*(churn(comm) for comm in comms))
    for other in others:
        other.Free()
    return {"rank": rank, "made": made}


write_rank_result(rank, asyncio.run(main()))
