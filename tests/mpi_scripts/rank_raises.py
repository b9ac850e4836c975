"""Rank 1 raises after a fence while its peers wait in the next one (run by
tests/test_failures_mpi_output.py): aiorma.run must show rank 1's traceback, then end the job."""

from __future__ import annotations

import numpy as np

import aiorma


async def main(comm: aiorma.Comm) -> None:
    win = await comm.win_allocate(4, np.int64)
    await win.fence()
    if comm.rank == 1:
        raise ValueError("rank 1 failed on purpose")
    await win.fence()
    await win.fence()


if __name__ == "__main__":
    aiorma.run(main)
