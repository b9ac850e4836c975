"""An error inside progress fails the window for good instead of vanishing (run by
tests/test_progress_failure_mpi.py on 1 rank under mpiexec).

The rank opens an access epoch that waits for a grant nobody will give, then makes the MPI call
inside the endpoint's poll raise, as a broken MPI would.  The waiting Request must raise that
error within seconds (not hang), and every later call on the window must raise it too.
"""

from __future__ import annotations

import asyncio
import json
import os

import numpy as np

import aiorma
from aiorma.errors import RmaFailure


async def main(comm: aiorma.Comm) -> None:
    win = await comm.win_allocate(4, np.int64)
    endpoint = comm.world.endpoint
    start = win.start([0])  # no post: it waits for its grant
    assert not start.done()

    class BrokenComm:
        """The communicator the endpoint's poll drives MPI progress on, failing as a broken MPI
        would.  (The endpoint is compiled: its methods cannot be replaced, its fields can.)"""

        def Iprobe(self, *args: object) -> bool:
            raise RuntimeError("injected: MPI reported an error")

    endpoint._probe_comm = BrokenComm()  # type: ignore[attr-defined]
    report = {}
    try:
        async with asyncio.timeout(5):
            await start
    except TimeoutError:
        report["outcome"] = "hung"
    except RmaFailure as error:
        report["outcome"] = type(error).__name__
        report["message"] = str(error)
    try:
        win.fence()
        report["later"] = "accepted"
    except RmaFailure as error:
        report["later"] = type(error).__name__
    print(json.dumps(report), flush=True)
    # aiorma.run would close the broken Comm (collectively, through the broken poll): end here,
    # finalizing MPI itself first (Open MPI's launcher fails a job whose rank exits without it).
    from mpi4py import MPI

    MPI.Finalize()
    os._exit(0)


if __name__ == "__main__":
    aiorma.run(main)
