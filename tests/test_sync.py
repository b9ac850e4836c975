"""aiorma.sync under contention: no lost count, no double holder, FIFO where promised — in-process
at 3 and 5 ranks, under mpiexec at 4, and across two emulated nodes at 3."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import aiorma
from aiorma.bench._launch import emulation_unavailable

from .mpi_harness import run_mpi_json
from .mpi_scripts import sync_contention as script

SCRIPT = Path(script.__file__)


def check(records: list[dict[str, Any]]) -> None:
    size = len(records)
    counts = sorted(c for r in records for c in r["counts"])
    assert counts == list(range(100, 100 + size * script.COUNTS))  # every next() distinct, none lost
    assert records[0]["final_count"] == 100 + size * script.COUNTS
    assert [r["mutex_overlap"] for r in records] == [0] * size  # never two holders
    assert records[0]["shared"] == size * script.SECTIONS  # no lost update under the mutex
    assert [r["semaphore_over"] for r in records] == [0] * size  # never more than PERMITS holders
    # ranks 1, 2, ... queued in that order behind rank 0 and were served in that order
    assert [r["mutex_order"] for r in records[1:]] == list(range(size - 1))
    assert [r["semaphore_order"] - (size - 1) for r in records[1:]] == list(range(size - 1))
    assert all(r["event"] for r in records)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("nprocs", [3, 5])
def test_sync_objects_local(nprocs: int) -> None:
    check(aiorma.run(script.main, nprocs=nprocs))


@pytest.mark.mpi
@pytest.mark.timeout(200)
@pytest.mark.parametrize("emulate_nodes", [0, 2], ids=["one_node", "two_nodes"])
def test_sync_objects_mpi(emulate_nodes: int) -> None:
    if emulate_nodes and (reason := emulation_unavailable()) is not None:
        pytest.skip(reason)
    check(run_mpi_json(SCRIPT, 4 if not emulate_nodes else 3, timeout=180, emulate_nodes=emulate_nodes))


@pytest.mark.timeout(60)
def test_bad_arguments_raise_at_the_call() -> None:
    from aiorma.sync import Counter, Mutex, Semaphore

    async def main(comm: aiorma.Comm) -> None:
        with pytest.raises(aiorma.RmaUsageError):
            await Counter.create(comm, root=comm.size)
        with pytest.raises(aiorma.RmaUsageError):
            await Semaphore.create(comm, -1)
        mutex = await Mutex.create(comm)
        with pytest.raises(aiorma.RmaUsageError):
            await mutex.release()  # not held
        await mutex.free()

    aiorma.run(main, nprocs=2)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["mutex", "semaphore"])
def test_cancelled_acquire_gives_the_grant_back(kind: str) -> None:
    """Rank 1 gives up waiting (a timeout); the grant it was queued for is released when it
    comes, so rank 2, queued behind it, still gets in."""
    import asyncio

    from aiorma.sync import Mutex, Semaphore

    async def main(comm: aiorma.Comm) -> bool:
        lock = await Mutex.create(comm) if kind == "mutex" else await Semaphore.create(comm, 1)
        if comm.rank == 0:
            await lock.acquire()
        await comm.barrier()
        got = False
        if comm.rank == 1:
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.05):
                    await lock.acquire()
        elif comm.rank == 2:
            await asyncio.sleep(0.02)  # queued behind rank 1
            await asyncio.wait_for(lock.acquire(), 5)
            got = True
            await lock.release()
        else:
            await asyncio.sleep(0.1)
            await lock.release()
        await comm.barrier()
        await asyncio.sleep(0.01)  # rank 1's abandoned grant is given back
        await lock.free()
        return got

    assert aiorma.run(main, nprocs=3) == [False, False, True]
