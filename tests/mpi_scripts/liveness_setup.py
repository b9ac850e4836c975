"""RingLiveness when one rank cannot connect to its successor (run by tests/test_liveness_mpi.py
on 3 ranks): rank 1's connect fails, so it closes what it has; no rank may then report a death
(rank 1's closed end must not read as one), and an orderly close reports none either.  With
``kill``, rank 2 then dies and its neighbours must report it."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
import time

from mpi4py import MPI

from aiorma.transport import liveness
from tests.mpi_harness import write_rank_result

RINGS: list[liveness.RingLiveness] = []


async def main(kill: bool) -> dict[str, object]:
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    hosts = comm.allgather(socket.gethostname())
    if rank == 1:

        def refuse(*_args: object, **_kwargs: object) -> socket.socket:
            raise OSError("no route (on purpose)")

        liveness.socket.create_connection = refuse  # type: ignore[assignment]
    ring = liveness.RingLiveness(comm, hosts)
    RINGS.append(ring)  # alive until the process ends (a collected one closes its sockets)
    deaths: list[int] = []
    ring.watch(asyncio.get_running_loop(), deaths.append)
    comm.Barrier()
    if kill and rank == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    await asyncio.sleep(0.5)
    result = {"neighbours": ring.neighbours, "deaths": sorted(set(deaths))}
    if not kill:
        comm.Barrier()
        ring.close()
        await asyncio.sleep(0.2)
        result["after_close"] = sorted(set(deaths))
    return result


if __name__ == "__main__":
    outcome = asyncio.run(main("kill" in sys.argv[1:]))
    write_rank_result(MPI.COMM_WORLD.Get_rank(), outcome)
    time.sleep(0.5)  # no survivor ends (closing its connections) while another still records
    sys.stdout.flush()
    os._exit(0)
