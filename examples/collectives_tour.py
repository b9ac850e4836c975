"""The collectives on RMA windows: each returns a Request, several may be in flight at once.

    mpiexec -n 4 python examples/collectives_tour.py
    python examples/collectives_tour.py --local 3
"""

from __future__ import annotations

import argparse

import numpy as np

import aiorma


# --8<-- [start:tour]
async def main(comm: aiorma.Comm) -> str:
    rank, size = comm.rank, comm.size
    mine = np.full(4, rank, np.int64)

    total = np.zeros(4, np.int64)
    summed = comm.allreduce(mine, total, aiorma.SUM)      # takes effect now, returns a Request
    everyone = np.zeros(4 * size, np.int64)
    gathered = comm.allgather(mine, everyone)             # a second collective in flight
    await summed
    await gathered

    message = np.arange(8, dtype=np.float64) if rank == 0 else np.zeros(8)
    await comm.bcast(message, root=0)

    outgoing = np.arange(size, dtype=np.int64) + 100 * rank   # block j goes to rank j
    incoming = np.zeros(size, np.int64)
    await comm.alltoall(outgoing, incoming)
    await comm.barrier()

    assert (total == sum(range(size))).all()
    assert (everyone == np.repeat(np.arange(size), 4)).all()
    assert (message == np.arange(8)).all()
    assert (incoming == 100 * np.arange(size) + rank).all()
    return f"rank {rank}: allreduce {total[0]}, allgather, bcast, alltoall verified"
# --8<-- [end:tour]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="a tour of aiorma's collectives")
    parser.add_argument("--local", type=int, metavar="N", help="run N ranks in this process")
    options = parser.parse_args()
    if options.local:
        print("\n".join(aiorma.run(main, nprocs=options.local)))
    else:
        print(aiorma.run(main), flush=True)
