"""No call blocks the event loop, even into ``win_create`` memory (run by
tests/test_win_create_loop_mpi.py on 2 ranks).

MPICH serves RMA into user memory (``Win.Create``) by active messages that need the target's
progress, so such calls may take as long as the target takes to poll.  Rank 0 runs a heartbeat
task (1 ms sleeps, recording the longest gap) while it does compare-and-swaps and flushes into
rank 1's user array; then rank 1 stops itself (SIGSTOP) inside the epoch and rank 0's next flush
must time out on schedule under ``asyncio.timeout`` instead of freezing the loop.  Rank 0 then
resumes rank 1 (SIGCONT) and both finish.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time

import numpy as np

import aiorma
from tests.mpi_harness import write_rank_result


async def heartbeat(gaps: list[float], stop: asyncio.Event) -> None:
    last = time.perf_counter()
    while not stop.is_set():
        await asyncio.sleep(0.001)
        now = time.perf_counter()
        gaps.append(now - last)
        last = now


async def main(comm: aiorma.Comm) -> None:
    user = np.zeros(8, np.int64)
    win = await comm.win_create(user)
    pids = np.zeros(2, np.int64)
    await comm.allgather(np.array([os.getpid()], np.int64), pids)
    await win.lock_all()
    await comm.barrier()
    if comm.rank == 0:
        gaps: list[float] = []
        stop = asyncio.Event()
        beat = asyncio.create_task(heartbeat(gaps, stop))
        one, old = np.ones(1, np.int64), np.zeros(1, np.int64)
        for i in range(50):
            await win.compare_and_swap(np.array([i + 1], np.int64), np.array([i], np.int64), old, 1, 0)
            await win.flush(1)
        swapped = int(old[0])
        win.put(one, 1, 1)
        await win.flush(1)
        await comm.barrier()  # rank 1 stops itself after this
        await asyncio.sleep(0.2)
        win.put(one, 1, 2)
        began = time.perf_counter()
        try:
            async with asyncio.timeout(1.0):
                await win.flush(1)
            outcome = "completed"
        except TimeoutError:
            outcome = "timed out"
        waited = time.perf_counter() - began
        os.kill(int(pids[1]), signal.SIGCONT)
        stop.set()
        await beat
        write_rank_result(
            0, {"last_cas_old": swapped, "max_gap_ms": 1e3 * max(gaps), "flush": outcome, "waited_s": waited}
        )
    else:
        await comm.barrier()
        os.kill(os.getpid(), signal.SIGSTOP)  # resumed by rank 0
    await win.unlock_all()
    await win.free()
    if comm.rank == 1:
        write_rank_result(1, {"user": user.tolist()})


if __name__ == "__main__":
    aiorma.run(main)
