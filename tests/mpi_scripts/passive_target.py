"""Truly passive target, run on every rank by tests/test_passive_target_mpi.py.

Rank 0 busy-loops in pure Python — never awaiting, never calling ``aiorma.progress()`` — until
its own window memory shows ``TOTAL`` updates (giving up after ``GIVE_UP`` seconds; both can be
given as arguments: ``passive_target.py [TOTAL [GIVE_UP]]``).  Every other rank runs
exclusive lock / accumulate / unlock epochs into it (awaited: the blocking form) until its share
of ``TOTAL`` is done.  Each rank writes its result (write_rank_result: mpiexec interleaves the
ranks' stdout): the target what it saw and the final count, an origin how long its epochs took.
Nothing of rank 0's CPU is available to the origins while they run.
"""

from __future__ import annotations

import asyncio
import sys
import time

import numpy as np

import aiorma
from tests.mpi_harness import write_rank_result

TOTAL = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
GIVE_UP = float(sys.argv[2]) if len(sys.argv) > 2 else 30.0


async def main(comm: aiorma.Comm) -> None:
    win = await comm.win_allocate(4, np.int64)
    await comm.barrier()
    if comm.rank == 0:
        started = time.perf_counter()
        memory = win.memory
        while memory[0] < TOTAL and time.perf_counter() - started < GIVE_UP:
            pass  # pure Python: no await, no aiorma call
        report = {"rank": 0, "seen": int(memory[0]), "busy_s": time.perf_counter() - started}
    else:
        # Let rank 0 get into its loop first: leaving the barrier, its await may still poll for a
        # moment, and an epoch served then (one CI run saw 1 update in the control case, whose
        # point is that nothing is served while rank 0 computes) is not what is measured.
        await asyncio.sleep(0.1)
        origins = comm.size - 1
        share = TOTAL // origins + (1 if comm.rank - 1 < TOTAL % origins else 0)
        one = np.ones(1, np.int64)
        times = []
        for _ in range(share):
            begin = time.perf_counter()
            await win.lock(0, aiorma.LOCK_EXCLUSIVE)
            win.accumulate(one, 0, 0, aiorma.SUM)
            await win.unlock(0)
            times.append(time.perf_counter() - begin)
        report = {
            "rank": comm.rank,
            "epochs": share,
            "median_us": 1e6 * float(np.median(times)),
            "max_ms": 1e3 * max(times),
        }
    await comm.barrier()
    if comm.rank == 0:
        report["final"] = int(win.memory[0])
    write_rank_result(comm.rank, report)
    await win.free()


if __name__ == "__main__":
    sys.exit(aiorma.run(main))
