"""Fair awaiting under mpiexec (run by tests/test_fairness.py): rank 0 loops on awaited shared-lock
epochs for half a second beside a 5 ms timer and writes the ticks counted and expected; the other
ranks wait at a barrier."""

from __future__ import annotations

import numpy as np

import aiorma
from tests.fairness_probe import reader_loop_beside_a_timer
from tests.mpi_harness import write_rank_result


async def main(comm: aiorma.Comm) -> None:
    win = await comm.win_allocate(4, np.int64)
    await comm.barrier()
    if comm.rank == 0:
        ticks, expected, epochs = await reader_loop_beside_a_timer(win, comm.rank, 0.5)
        write_rank_result(0, {"ticks": ticks, "expected": expected, "epochs": epochs})
    else:
        write_rank_result(comm.rank, {})
    await comm.barrier()
    await win.free()


if __name__ == "__main__":
    aiorma.run(main)
