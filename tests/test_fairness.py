"""Fair awaiting: a task that awaits aiorma calls in a loop never starves its rank's other tasks,
timers or in-process peers (Request.__await__ yields at least once per FAIR_SLICE).

Each test failed before fair awaiting existed: a Request finished inside its call never yielded,
so the timer ticked 0 times beside the loop, and the in-process writer below never ran.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import aiorma

from .fairness_probe import reader_loop_beside_a_timer
from .mpi_harness import run_mpi_json

SCRIPT = Path(__file__).parent / "mpi_scripts" / "fair_awaiting.py"


@pytest.mark.timeout(60)
def test_timer_keeps_ticking_beside_an_awaiting_loop_local() -> None:
    async def main(comm: aiorma.Comm) -> Any:
        win = await comm.win_allocate(4, np.int64)
        ticks, expected, _epochs = await reader_loop_beside_a_timer(win, comm.rank, 0.5)
        await win.free()
        return ticks, expected

    [(ticks, expected)] = aiorma.run(main, nprocs=1)
    assert ticks >= 0.8 * expected, (ticks, expected)


@pytest.mark.timeout(60)
def test_timer_keeps_ticking_beside_three_ranks_awaiting_local() -> None:
    """Three in-process ranks loop on awaited epochs, each beside its own 5 ms timer: each
    timer keeps >= 60 % of its ticks.  Awaiting resumes from a timer due now, so a timer that
    fell due during a rank's slice runs before that rank's next slice (a bare yield resumed
    the rank first: 41 % of the ticks, 97 -> 70 % at one rank)."""

    async def main(comm: aiorma.Comm) -> Any:
        win = await comm.win_allocate(4, np.int64)
        ticks, expected, _epochs = await reader_loop_beside_a_timer(win, comm.rank, 0.5)
        await comm.barrier()
        await win.free()
        return ticks / expected

    shares = aiorma.run(main, nprocs=3)
    assert min(shares) >= 0.6, shares


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_timer_keeps_ticking_beside_an_awaiting_loop_mpi() -> None:
    report = run_mpi_json(SCRIPT, 2, timeout=100)[0]
    assert report["epochs"] > 0
    assert report["ticks"] >= 0.8 * report["expected"], report


@pytest.mark.timeout(60)
def test_reader_loop_does_not_hang_a_writers_exclusive_lock() -> None:
    """3 in-process ranks: rank 0 loops on shared-lock epochs on its own window until rank 1's
    exclusive lock on it has been granted and released; rank 2 idles.  Without fairness rank 0
    never gives up the loop, rank 1 never runs, and the job hangs."""

    async def main(comm: aiorma.Comm) -> Any:
        win = await comm.win_allocate(4, np.int64)
        await comm.barrier()
        if comm.rank == 0:
            out = np.zeros(1, np.int64)
            async with asyncio.timeout(20):
                while out[0] != 7:
                    win.lock(0, aiorma.LOCK_SHARED)
                    win.get(out, 0, 0)
                    await win.unlock(0)
        elif comm.rank == 1:
            await asyncio.sleep(0.01)  # let the reader loop get going first
            async with asyncio.timeout(20):
                await win.lock(0, aiorma.LOCK_EXCLUSIVE)
                win.put(np.array([7], np.int64), 0, 0)
                await win.unlock(0)
        await comm.barrier()
        value = int(win.memory[0]) if comm.rank == 0 else None
        await win.free()
        return value

    results = aiorma.run(main, nprocs=3)
    assert results[0] == 7
