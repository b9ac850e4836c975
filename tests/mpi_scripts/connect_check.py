"""aiorma.connect inside a running asyncio loop, run on every rank by tests/test_connect.py.

Checks, on each rank: the errors at the call (no communicator, COMM_NULL, an intercommunicator,
a second concurrent connect on one communicator); two connects open at once, on COMM_WORLD and on
a Split of it, each doing RMA and a collective; the program's own mpi4py traffic (point-to-point
with the same tags, and collectives) on COMM_WORLD while aiorma runs on it; and that leaving the
block stops every thread aiorma started and leaves no task behind, so a second connect works.
Each rank writes its findings for the test (tests/mpi_harness.write_rank_result).
"""

from __future__ import annotations

import asyncio
import threading

import anyio
import numpy as np
from mpi4py import MPI

import aiorma
from aiorma import CommClosedError, RmaUsageError
from tests.mpi_harness import write_rank_result

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()


def refused(call, *args) -> str | None:
    """The exception class a call raised at once, or None."""
    try:
        call(*args)
    except RmaUsageError as exc:
        return type(exc).__name__
    return None


async def ring_and_sum(comm: aiorma.Comm) -> dict:
    """A fence epoch putting our rank into the right neighbour, then an allreduce."""
    win = await comm.win_allocate(1, np.int64)
    await win.fence()
    win.put(np.array([comm.rank], np.int64), (comm.rank + 1) % comm.size, 0)
    await win.fence()
    got = int(win.memory[0])
    await win.free()
    total = np.zeros(1)
    await comm.allreduce(np.array([float(comm.rank)]), total)
    return {"left": got, "expected_left": (comm.rank - 1) % comm.size, "sum": float(total[0])}


async def user_traffic() -> dict:
    """The program's own mpi4py messages, with the tags aiorma might use, polled from the loop."""
    sends = [world.isend(("hello", rank), dest=(rank + 1) % size, tag=tag) for tag in (0, 1, 7)]
    recvs = [world.irecv(source=(rank - 1) % size, tag=tag) for tag in (0, 1, 7)]
    got = []
    for request in recvs:
        while True:
            done, message = request.test()
            if done:
                got.append(message)
                break
            await asyncio.sleep(0.001)
    for request in sends:
        while not request.Test():
            await asyncio.sleep(0.001)
    # A blocking user collective belongs in a thread, so the loop keeps making progress.
    total = await anyio.to_thread.run_sync(world.allreduce, rank)
    return {"messages": [list(m) for m in got], "user_sum": total}


async def main() -> dict:
    result: dict = {"rank": rank}
    result["not_a_comm"] = refused(aiorma.connect, "COMM_WORLD")
    result["comm_null"] = refused(aiorma.connect, MPI.COMM_NULL)
    half = world.Split(rank % 2, rank)
    if size >= 2:
        inter = half.Create_intercomm(0, world, 1 - rank % 2, tag=5)  # leaders: world ranks 0 and 1
        result["intercomm"] = refused(aiorma.connect, inter)
        inter.Free()

    async with aiorma.connect() as comm:
        result["twice"] = refused(aiorma.connect, world)
        result["twice_default"] = refused(aiorma.connect)
        async with aiorma.connect(half) as sub:
            ours, theirs, traffic = await asyncio.gather(
                ring_and_sum(comm), ring_and_sum(sub), user_traffic()
            )
        result["world"] = ours
        result["half"] = theirs
        result["half_size"] = sub.size
        result["traffic"] = traffic
        win = await comm.win_allocate(4)  # left open: leaving the block frees it
    try:
        win.put(np.zeros(1), 0, 0)
    except CommClosedError:
        result["closed_after"] = True

    # Everything aiorma started has stopped: its worker threads end shortly after the block.
    # (The loop's own default executor and anyio's worker pool stay: they are the program's.)
    for _ in range(200):
        ours = [t.name for t in threading.enumerate() if t.name.startswith("aiorma")]
        if not ours:
            break
        await asyncio.sleep(0.01)
    result["threads_left"] = ours
    result["tasks_left"] = len(asyncio.all_tasks()) - 1

    async with aiorma.connect() as comm:  # a second time works
        result["again"] = await ring_and_sum(comm)
    half.Free()
    return result


write_rank_result(rank, asyncio.run(main()))
