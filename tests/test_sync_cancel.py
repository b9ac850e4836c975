"""aiorma.sync: cancelled acquires lose no permit and leave no rank waiting for ever, and every call
takes effect at the call, awaited or not — in-process and under mpiexec, under asyncio and trio."""

from __future__ import annotations

import gc
import json
import logging
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest

import aiorma
from aiorma.sync import Counter, Event, Mutex, Semaphore

from .mpi_harness import RESULTS_DIR, launch_mpi, run_mpi_json
from .mpi_scripts import sync_cancel as script

SCRIPT = Path(script.__file__)
BACKENDS = ["asyncio", "trio"]


def check_lost_permit(records: list[dict[str, Any]]) -> None:
    assert records[1]["timeouts"] == 2  # both early acquires were abandoned
    assert records[1]["third"] is True  # and the permit rank 0 released reached the third


def check_storm(records: list[dict[str, Any]]) -> None:
    assert [r["over"] for r in records] == [0] * len(records)  # never more than PERMITS holders
    assert [r["overlap"] for r in records] == [0] * len(records)  # never two mutex holders
    assert all(r["all_permits"] for r in records), records  # no permit lost
    assert all(r["mutex_after"] for r in records), records  # no rank stuck behind the mutex
    assert records[0]["inside_after"] == 0
    assert sum(r["abandoned"] for r in records) > 0  # the storm did cancel acquires
    assert sum(r["acquired"] for r in records) > 0


@pytest.mark.timeout(60)
@pytest.mark.parametrize("backend", BACKENDS)
def test_abandoned_acquires_lose_no_permit_local(backend: str) -> None:
    check_lost_permit(aiorma.run(script.scenario, "lost_permit", nprocs=2, backend=backend))


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_abandoned_acquires_lose_no_permit_mpi() -> None:
    check_lost_permit(run_mpi_json(SCRIPT, 2, "lost_permit", "asyncio", "0", "0", timeout=100))


@pytest.mark.timeout(200)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("nprocs", "seed"), [(3, 1), (4, 2), (3, 3)])
def test_cancellation_storm_local(backend: str, nprocs: int, seed: int) -> None:
    check_storm(aiorma.run(script.scenario, "storm", seed, 25, nprocs=nprocs, backend=backend))


@pytest.mark.mpi
@pytest.mark.timeout(200)
@pytest.mark.parametrize("backend", BACKENDS)
def test_cancellation_storm_mpi(backend: str) -> None:
    check_storm(run_mpi_json(SCRIPT, 3, "storm", backend, "7", "10", timeout=180))


def _never_retrieved(text: str) -> bool:
    return "never retrieved" in text


@pytest.mark.timeout(60)
@pytest.mark.parametrize("backend", BACKENDS)
def test_free_with_abandoned_waits_reports_nothing(
    backend: str, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.ERROR)
    records = aiorma.run(script.scenario, "free_abandoned", nprocs=2, backend=backend)
    gc.collect()  # unretrieved errors are reported when their futures are collected
    assert records[1]["abandoned"] == 5
    assert not _never_retrieved(caplog.text), caplog.text
    assert not _never_retrieved(capfd.readouterr().err)


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_free_with_abandoned_waits_reports_nothing_mpi(tmp_path: Path) -> None:
    outcome = launch_mpi(
        SCRIPT, 2, "free_abandoned", "asyncio", "0", "0", timeout=100, env={RESULTS_DIR: str(tmp_path)}
    )
    assert outcome.ok, outcome.describe()
    assert json.loads((tmp_path / "rank1.json").read_text()) == {"abandoned": 5}
    assert not _never_retrieved(outcome.stderr + outcome.stdout), outcome.describe()


# ------------------------------------------------------------------ calls take effect at the call


@pytest.mark.timeout(60)
@pytest.mark.parametrize("backend", BACKENDS)
def test_calls_not_awaited_still_take_effect(backend: str) -> None:
    """Counter.next, Mutex.acquire/release, Semaphore.release and Event.set, called without await
    on rank 0, are seen by rank 1."""

    async def eventually(check: Any) -> bool:
        with anyio.move_on_after(5):
            while not await check():
                await anyio.sleep(0.005)
            return True
        return False

    async def main(comm: aiorma.Comm) -> dict[str, Any]:
        counter = await Counter.create(comm)
        mutex = await Mutex.create(comm, root=1)
        sem = await Semaphore.create(comm, 0)
        event = await Event.create(comm)
        seen: dict[str, Any] = {}
        if comm.rank == 0:
            counter.next(5)  # no await
            mutex.acquire()  # no await

            async def locked() -> bool:
                return mutex.locked()

            seen["locked"] = await eventually(locked)
        await comm.barrier()
        if comm.rank == 1:

            async def counted() -> bool:
                return await counter.value() == 5

            seen["counted"] = await eventually(counted)
            with anyio.move_on_after(0.1) as scope:
                await mutex.acquire()  # rank 0 holds it
            seen["mutex_busy"] = scope.cancelled_caught
        await comm.barrier()
        if comm.rank == 0:
            mutex.release()  # no await
            sem.release()  # no await
            event.set()  # no await
        else:
            with anyio.move_on_after(5) as scope:
                await mutex.acquire()
                await sem.acquire()
                await event.wait()
            seen["after_release"] = not scope.cancelled_caught
            await mutex.release()
            await sem.release()
        await comm.barrier()
        seen["event"] = event.is_set()
        for thing in (counter, mutex, sem, event):
            await thing.free()
        return seen

    assert aiorma.run(main, nprocs=2, backend=backend) == [
        {"locked": True, "event": True},
        {"counted": True, "mutex_busy": True, "after_release": True, "event": True},
    ]


@pytest.mark.timeout(60)
def test_calls_return_requests() -> None:
    """Every call of a synchronization object is an aiorma Request (never a coroutine that would
    do nothing until awaited); Counter.next's result is the old value as an int."""

    async def main(comm: aiorma.Comm) -> list[Any]:
        counter = await Counter.create(comm, start=10)
        mutex = await Mutex.create(comm)
        sem = await Semaphore.create(comm, 1)
        event = await Event.create(comm)
        requests = []
        if comm.rank == 0:
            requests = [counter.next(3), counter.value(), mutex.acquire(), sem.acquire(), event.set()]
            kinds = [isinstance(r, aiorma.Request) for r in requests]
            values = [await r for r in requests]
            more = [mutex.release(), sem.release(), event.clear()]
            kinds += [isinstance(r, aiorma.Request) for r in more]
            for request in more:
                await request
        await comm.barrier()
        frees = [thing.free() for thing in (counter, mutex, sem, event)]
        for request in frees:
            assert isinstance(request, aiorma.Request)
            await request
        if comm.rank == 0:
            return [kinds, values[:2], type(values[0]).__name__]
        return []

    results = aiorma.run(main, nprocs=2)
    assert results[0] == [[True] * 8, [10, 13], "int"]


@pytest.mark.timeout(60)
def test_bad_input_refused_at_the_call() -> None:
    async def main(comm: aiorma.Comm) -> None:
        counter = await Counter.create(comm)
        with pytest.raises(aiorma.RmaTypeError):
            counter.next(1.5)  # type: ignore[arg-type]
        with pytest.raises(aiorma.RmaTypeError):
            counter.next(np.float64(1))  # type: ignore[arg-type]
        with pytest.raises(aiorma.RmaTypeError):
            counter.next(True)
        await comm.barrier()
        assert await counter.value() == 0  # nothing changed
        await comm.barrier()
        await counter.free()
        with pytest.raises(aiorma.WindowFreedError):
            counter.next(1)
        mutex = await Mutex.create(comm)
        await mutex.free()
        with pytest.raises(aiorma.WindowFreedError):
            mutex.acquire()
        sem = await Semaphore.create(comm, 1)
        await sem.free()
        with pytest.raises(aiorma.WindowFreedError):
            sem.acquire()

    aiorma.run(main, nprocs=2)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["mutex", "semaphore"])
def test_cancelled_after_the_grant_gives_it_back(backend: str, kind: str) -> None:
    """An acquire granted at once whose await is cancelled anyway (at the await's fairness
    checkpoint) is given back: the caller was told it does not hold it, so nobody does."""
    import time

    async def main(comm: aiorma.Comm) -> list[bool]:
        lock = await Mutex.create(comm) if kind == "mutex" else await Semaphore.create(comm, 1)
        acquired = lock.acquire()
        granted_at_once = acquired.done()
        with anyio.CancelScope() as scope:
            scope.cancel()
            time.sleep(2 * aiorma.request.FAIR_SLICE)  # the await checkpoints: the cancel lands
            await acquired
        with anyio.move_on_after(5) as again:
            await lock.acquire()  # the permit (the lock) was given back
        await lock.release()
        await lock.free()
        return [granted_at_once, scope.cancelled_caught, not again.cancelled_caught]

    assert aiorma.run(main, nprocs=1, backend=backend) == [[True, True, True]]
