"""Cancelled acquires of aiorma.sync's Mutex and Semaphore lose nothing and leave no rank stuck
(run by tests/test_sync_cancel.py in-process and under mpiexec, under asyncio and trio).

Written with anyio only, so the same scenario runs on both backends.  Each scenario returns what
this rank saw; the test checks it.

* ``lost_permit`` (2 ranks): Semaphore(1) held by rank 0; rank 1 abandons two acquires (timeouts),
  then makes a third without a deadline; rank 0 releases: the third must get the permit.
* ``storm`` (3-4 ranks): every rank's tasks acquire a Semaphore(2) and a Mutex under random
  timeouts, hold them for a random while, release.  Afterwards every rank, in turn, must still get
  every permit and the mutex; the number of holders never exceeded the permits.
* ``free_abandoned`` (2 ranks): rank 1 abandons acquires while rank 0 keeps the permit, and the
  semaphore is freed with the abandoned wait still parked.
"""

from __future__ import annotations

import random
import sys
from typing import Any

import anyio

import aiorma
from aiorma.sync import Counter, Mutex, Semaphore

#: Seconds any single wait that should succeed may take before the scenario calls it stuck.
PATIENCE = 10.0
PERMITS = 2


async def lost_permit(comm: aiorma.Comm) -> dict[str, Any]:
    sem = await Semaphore.create(comm, 1)
    seen: dict[str, Any] = {"timeouts": 0, "third": None}
    if comm.rank == 0:
        await sem.acquire()
    await comm.barrier()
    if comm.rank == 1:
        for _ in range(2):
            with anyio.move_on_after(0.2) as scope:
                await sem.acquire()
            seen["timeouts"] += scope.cancelled_caught

        async def third() -> None:
            with anyio.move_on_after(PATIENCE) as scope:
                await sem.acquire()
            seen["third"] = not scope.cancelled_caught

        async with anyio.create_task_group() as group:
            group.start_soon(third)
            await anyio.sleep(0.05)  # the third acquire is in line before rank 0 releases
            await comm.barrier()
        if seen["third"]:
            await sem.release()
    else:
        await comm.barrier()
        await anyio.sleep(0.05)
        await sem.release()
    await comm.barrier()
    await sem.free()
    return seen


async def storm(comm: aiorma.Comm, seed: int, rounds: int) -> dict[str, Any]:
    """Random timeouts on acquires; returns the overlaps seen and whether every rank could still
    take every permit and the mutex afterwards."""
    rng = random.Random(seed * 1000 + comm.rank)
    sem = await Semaphore.create(comm, PERMITS)
    mutex = await Mutex.create(comm)
    inside = await Counter.create(comm)  # holders right now: 1 per mutex holder, 1000 per permit
    seen: dict[str, Any] = {"over": 0, "overlap": 0, "acquired": 0, "abandoned": 0}

    async def hold() -> None:
        await anyio.sleep(rng.choice([0, 0, rng.uniform(0, 0.003)]))

    async def worker() -> None:
        for _ in range(rounds):
            for lock, weight, limit, key in ((sem, 1000, PERMITS, "over"), (mutex, 1, 1, "overlap")):
                with anyio.move_on_after(rng.uniform(0, 0.006)) as scope:
                    await lock.acquire()
                if scope.cancelled_caught:
                    seen["abandoned"] += 1
                    continue
                seen["acquired"] += 1
                before = await inside.next(weight)
                seen[key] += (before // weight) % 1000 >= limit
                await hold()
                await inside.next(-weight)
                await lock.release()

    await comm.barrier()
    async with anyio.create_task_group() as group:
        for _ in range(2):
            group.start_soon(worker)
    await comm.barrier()

    # Afterwards: each rank in turn takes every permit at once, and the mutex.
    seen["all_permits"] = seen["mutex_after"] = None
    for turn in range(comm.size):
        if comm.rank == turn:
            with anyio.move_on_after(PATIENCE) as scope:
                for _ in range(PERMITS):
                    await sem.acquire()
            seen["all_permits"] = not scope.cancelled_caught
            if seen["all_permits"]:
                for _ in range(PERMITS):
                    await sem.release()
            with anyio.move_on_after(PATIENCE) as scope:
                await mutex.acquire()
            seen["mutex_after"] = not scope.cancelled_caught
            if seen["mutex_after"]:
                await mutex.release()
        await comm.barrier()
    seen["inside_after"] = await inside.value()
    await comm.barrier()
    for thing in (sem, mutex, inside):
        await thing.free()
    return seen


async def free_abandoned(comm: aiorma.Comm) -> dict[str, Any]:
    sem = await Semaphore.create(comm, 1)
    if comm.rank == 0:
        await sem.acquire()
    await comm.barrier()
    abandoned = 0
    if comm.rank == 1:
        for _ in range(5):
            with anyio.move_on_after(0.02) as scope:
                await sem.acquire()
            abandoned += scope.cancelled_caught
    await comm.barrier()
    await sem.free()  # rank 1's abandoned wait is still parked: it fails quietly
    return {"abandoned": abandoned}


async def scenario(comm: aiorma.Comm, name: str, seed: int = 0, rounds: int = 0) -> dict[str, Any]:
    with anyio.fail_after(120):
        if name == "lost_permit":
            return await lost_permit(comm)
        if name == "storm":
            return await storm(comm, seed, rounds)
        return await free_abandoned(comm)


if __name__ == "__main__":
    from tests.mpi_harness import write_rank_result

    name, backend, seed, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

    async def mpi_main(comm: aiorma.Comm) -> None:
        write_rank_result(comm.rank, await scenario(comm, name, seed, rounds))

    aiorma.run(mpi_main, backend=backend)
    sys.exit(0)
