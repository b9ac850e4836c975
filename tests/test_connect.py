"""aiorma.connect and connect_local: aiorma inside the caller's running event loop."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import aiorma
from aiorma import CommClosedError, RmaUsageError, TransportError

from .mpi_harness import run_mpi_json

SCRIPTS = Path(__file__).parent / "mpi_scripts"


async def fence_ring(comm: aiorma.Comm) -> int:
    win = await comm.win_allocate(1, np.int64)
    await win.fence()
    win.put(np.array([comm.rank], np.int64), (comm.rank + 1) % comm.size, 0)
    await win.fence()
    got = int(win.memory[0])
    await win.free()
    return got


async def test_connect_local_runs_ranks_inside_the_callers_loop() -> None:
    ticks = 0

    async def heartbeat() -> None:  # the program's own task keeps running alongside
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.001)

    beat = asyncio.create_task(heartbeat())
    async with aiorma.connect_local(3) as comms:
        assert [c.rank for c in comms] == [0, 1, 2]
        assert await asyncio.gather(*(fence_ring(c) for c in comms)) == [2, 0, 1]
        totals = [np.zeros(1) for _ in comms]
        sums = (c.allreduce(np.array([c.rank + 1.0]), t) for c, t in zip(comms, totals, strict=True))
        await asyncio.gather(*sums)
        assert [t[0] for t in totals] == [6.0] * 3
    beat.cancel()
    assert ticks > 0
    # Nothing of aiorma's is left on the loop.
    assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == [beat] or beat.done()


async def test_leaving_frees_and_fails_what_is_pending() -> None:
    async with aiorma.connect_local(2) as comms:
        wins = await asyncio.gather(*(c.win_allocate(2) for c in comms))
        # Rank 0 starts an access epoch that rank 1 never exposes: its complete() stays pending.
        wins[0].start([1])
        wins[0].put(np.ones(1), 1, 0)
        pending = wins[0].complete()
    with pytest.raises(CommClosedError):
        await pending
    with pytest.raises(CommClosedError):
        wins[1].put(np.ones(1), 0, 0)
    with pytest.raises(CommClosedError):
        await comms[0].win_allocate(1)


async def test_an_exception_leaves_without_anything_collective() -> None:
    with pytest.raises(ZeroDivisionError):
        async with aiorma.connect_local(2) as comms:
            wins = await asyncio.gather(*(c.win_allocate(1) for c in comms))
            await asyncio.gather(*(w.fence() for w in wins))
            wins[0].put(np.ones(1), 1, 0)
            waiting = wins[0].fence()  # waits for rank 1, which never fences again
            assert not waiting.done()
            raise ZeroDivisionError
    with pytest.raises(TransportError):
        await waiting


async def test_connect_local_refuses_bad_sizes() -> None:
    for bad in (0, -1, True, 2.0, "2"):
        with pytest.raises(RmaUsageError):
            aiorma.connect_local(bad)  # type: ignore[arg-type]


def test_run_is_a_wrapper_that_still_works() -> None:
    assert aiorma.run(fence_ring, nprocs=3) == [2, 0, 1]


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs", [1, 3, 4])
def test_connect_on_mpi(nprocs: int) -> None:
    results = run_mpi_json(SCRIPTS / "connect_check.py", nprocs, timeout=120)
    assert [r["rank"] for r in results] == list(range(nprocs))
    # The Split's ranks count from 0 in each half.
    half_total = {g: float(sum(range(len(range(g, nprocs, 2))))) for g in (0, 1)}
    for r in results:
        rank = r["rank"]
        assert r["not_a_comm"] == r["comm_null"] == "CommunicatorError"
        assert r.get("intercomm", "CommunicatorError") == "CommunicatorError"
        assert r["twice"] == r["twice_default"] == "AlreadyConnectedError"
        for key in ("world", "again"):
            assert r[key]["left"] == r[key]["expected_left"]
            assert r[key]["sum"] == float(sum(range(nprocs)))
        assert r["half"]["left"] == r["half"]["expected_left"]
        assert r["half"]["sum"] == half_total[rank % 2]
        assert r["traffic"]["messages"] == [["hello", (rank - 1) % nprocs]] * 3
        assert r["traffic"]["user_sum"] == sum(range(nprocs))
        assert r["closed_after"] is True
        assert r["threads_left"] == []
        assert r["tasks_left"] == 0


@pytest.mark.mpi
def test_connect_needs_mpi_initialised_and_not_finalized() -> None:
    script = """
import asyncio, mpi4py
mpi4py.rc.initialize = False
mpi4py.rc.finalize = False
from mpi4py import MPI
import aiorma
for when in ("before Init", "after Finalize"):
    try:
        aiorma.connect()
    except aiorma.MpiStateError as exc:
        print(when, "refused:", exc)
    if when == "before Init":
        MPI.Init_thread(MPI.THREAD_MULTIPLE)
        MPI.Finalize()
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "before Init refused: connect: MPI is not initialised" in result.stdout
    assert "after Finalize refused: connect: MPI is already finalized" in result.stdout


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs", [1, 2])
def test_progress_driven_while_connect_closes(nprocs: int) -> None:
    """``aiorma.progress()`` called without pause by another task while ``connect`` closes:
    the close (its collectives thread freeing the windows) and the process end cleanly."""
    results = run_mpi_json(SCRIPTS / "progress_during_close.py", nprocs, timeout=120)
    assert all(r["during_close"] > 0 for r in results), results  # progress really ran meanwhile


@pytest.mark.mpi
@pytest.mark.parametrize(("nprocs", "rounds"), [(1, 3000), (2, 200)])
def test_connects_create_and_free_windows_at_once(nprocs: int, rounds: int) -> None:
    """Four connects in one process creating and freeing windows as fast as they can, all at
    once: the MPI calls that create and free windows never run in two threads at once (MPICH's
    are not thread-safe: without aiorma.transport.window_lifecycle the one-rank run died of
    SIGSEGV in 4 runs of 6, in a Win_free or, with an empty stderr, in MPI_Finalize at exit), and
    connects contending for the same ranks take turns without a deadlock."""
    results = run_mpi_json(SCRIPTS / "connects_churn.py", nprocs, str(rounds), "4", timeout=180)
    assert [r["made"] for r in results] == [[rounds] * 4] * nprocs
