"""An asyncio program that already exists adopts aiorma for one part of its work.

    mpiexec -n 4 python examples/service.py --rounds 20
    python examples/service.py            # one process works too

The program starts the usual way, with ``asyncio.run``, and runs a periodic heartbeat task the
whole time.  It splits ``MPI.COMM_WORLD`` with plain mpi4py: the even ranks open aiorma on their
sub-communicator with ``async with aiorma.connect(evens)`` and keep a shared counter table in a
window (each round every even rank adds to every slot under an exclusive lock, then all read it
back); the odd ranks meanwhile exchange messages with plain mpi4py on their own sub-communicator.
Blocking MPI calls run in a worker thread (``anyio.to_thread.run_sync``) so the heartbeat and
aiorma's progress keep running.  Each rank prints one line ``rank R: ...`` with what it checked.
"""

from __future__ import annotations

import argparse
import asyncio
import time

import anyio
import numpy as np
from mpi4py import MPI

import aiorma

SLOTS = 8


async def heartbeat(beats: list[float], period: float) -> None:
    """The service's own periodic task: it must keep its rhythm whatever aiorma does."""
    while True:
        beats.append(time.monotonic())
        await asyncio.sleep(period)


async def shared_counters(evens: MPI.Intracomm, rounds: int) -> str:
    """The aiorma part: every even rank adds its (sub-)rank + 1 to every slot of the table on
    sub-rank 0, ``rounds`` times, each update under an exclusive lock."""
    async with aiorma.connect(evens) as comm:
        table = await comm.win_allocate(SLOTS, np.int64)
        mine = np.full(SLOTS, comm.rank + 1, np.int64)
        for _ in range(rounds):
            table.lock(0, aiorma.LOCK_EXCLUSIVE)
            table.accumulate(mine, 0, 0, aiorma.SUM)
            await table.unlock(0)
        await comm.barrier()
        seen = np.zeros(SLOTS, np.int64)
        table.lock(0, aiorma.LOCK_SHARED)
        table.get(seen, 0, 0)
        await table.unlock(0)
        await table.free()
        expected = rounds * comm.size * (comm.size + 1) // 2
        assert (seen == expected).all(), (seen, expected)
        return f"aiorma on {comm.size} even rank(s): every slot = {expected}, as expected"


async def plain_mpi(odds: MPI.Intracomm, rounds: int) -> str:
    """The rest of the program: mpi4py point-to-point in a ring, and a collective."""
    right, left = (odds.rank + 1) % odds.size, (odds.rank - 1) % odds.size
    token = 0
    for _ in range(rounds):
        # isend/irecv polled from the loop: nothing blocks the event loop.
        send = odds.isend(token + 1, dest=right, tag=3)
        recv = odds.irecv(source=left, tag=3)
        while True:
            done, value = recv.test()
            if done:
                token = value
                break
            await asyncio.sleep(0.0005)
        send.wait()
    total = await anyio.to_thread.run_sync(odds.allreduce, token)  # blocking call: in a thread
    assert token == rounds and total == rounds * odds.size
    return f"mpi4py ring on {odds.size} odd rank(s): token {token}, sum {total}"


async def main(rounds: int, period: float) -> None:
    world = MPI.COMM_WORLD
    beats: list[float] = []
    pulse = asyncio.create_task(heartbeat(beats, period))
    # Split and Free are collective: like every blocking MPI call, they run in a worker thread.
    part = await anyio.to_thread.run_sync(world.Split, world.rank % 2, world.rank)
    try:
        if world.rank % 2 == 0:
            what = await shared_counters(part, rounds)
        else:
            what = await plain_mpi(part, rounds)
        await anyio.to_thread.run_sync(world.Barrier)
    finally:
        pulse.cancel()
        await anyio.to_thread.run_sync(part.Free)
    gaps = np.diff(beats) if len(beats) > 1 else np.zeros(1)
    print(f"rank {world.rank}: {what}; heartbeat {len(beats)} beats, longest gap {gaps.max() * 1e3:.1f} ms",
          flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="aiorma inside an asyncio program, on even ranks only")
    parser.add_argument("--rounds", type=int, default=50, help="updates per even rank (default 50)")
    parser.add_argument("--period", type=float, default=0.005, help="heartbeat period in seconds")
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.period))
