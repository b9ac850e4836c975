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


@pytest.mark.timeout(60)
def test_a_late_slot_read_does_not_take_a_later_tickets_slot() -> None:
    """The interleaving behind a hang seen across two emulated nodes, replayed in-process: rank 2
    takes ticket 2 (no permit free) and reads its slot, but the answer (the slot still empty)
    reaches it only much later, as an answer from another node may.  Meanwhile ticket 2 is served
    (its slot marked), tickets 3 and 4 pass, and rank 0 registers ticket 5 in the same slot.  When
    rank 2's compare-and-swap then finds ticket 5 there, ticket 2 was necessarily served (a rank
    holds one unserved ticket at a time, so ticket 5 cannot be taken before 2 is served): rank 2
    must take its permit, not overwrite ticket 5's registration — which left rank 0 waiting for a
    wake-up that never came."""
    import asyncio

    from aiorma.sync import Semaphore

    late_read = asyncio.Event()  # rank 2's slot read has been made; its answer is held back
    answer = asyncio.Event()  # let the answer through
    comm_events = [asyncio.Event() for _ in range(3)]  # the ranks' steps, in order
    original = Semaphore._atomic
    held: list[asyncio.Task[None]] = []  # the held-back answer's task (kept referenced)

    def atomic(self: Semaphore, disp: int, value: int, op: Any, then: Any, failed: Any) -> None:
        if self._win.rank == 2 and disp >= Semaphore.SLOTS and not late_read.is_set():
            late_read.set()

            def later(old: int) -> None:
                held.append(asyncio.get_running_loop().create_task(deliver(old)))

            async def deliver(old: int) -> None:
                await answer.wait()
                then(old)

            return original(self, disp, value, op, later, failed)
        return original(self, disp, value, op, then, failed)

    async def until(check: Any) -> None:
        async with asyncio.timeout(5):
            while not check():
                await asyncio.sleep(0.001)

    async def main(comm: aiorma.Comm) -> str:
        sem = await Semaphore.create(comm, 2)
        slots = sem._win.memory[Semaphore.SLOTS :]  # read on rank 0, the root
        if comm.rank == 0:
            await sem.acquire()  # ticket 0
            comm_events[0].set()
            await late_read.wait()
            await sem.release()  # serves ticket 2: rank 2 has not registered, so its slot is marked
            acquired = sem.acquire()  # ticket 3: none free, registers
            await until(lambda: slots[0] != 0)
            comm_events[1].set()
            await asyncio.wait_for(acquired, 5)
            await until(lambda: slots[1] != 0)  # rank 1 registered ticket 4
            await sem.release()  # serves 4
            acquired = sem.acquire()  # ticket 5: registers in ticket 2's slot
            await until(lambda: slots[2] == 2 * (6 * comm.size + 0))
            answer.set()
            comm_events[2].set()
            await asyncio.wait_for(acquired, 5)
            await sem.release()
        elif comm.rank == 1:
            await comm_events[0].wait()
            await sem.acquire()  # ticket 1
            await comm_events[1].wait()
            await sem.release()  # serves 3, rank 0's
            acquired = sem.acquire()  # ticket 4
            await asyncio.wait_for(acquired, 5)
            await comm_events[2].wait()
            await sem.release()  # serves 5, rank 0's
        else:
            await comm_events[0].wait()
            await asyncio.sleep(0.01)
            await asyncio.wait_for(sem.acquire(), 5)  # ticket 2
            await sem.release()
        await comm.barrier()
        await sem.free()
        return "done"

    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(Semaphore, "_atomic", atomic)
        assert aiorma.run(main, nprocs=3) == ["done"] * 3
