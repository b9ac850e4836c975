"""A tour of aiorma on several ranks: fence, GATS and lock epochs, blocking and nonblocking.

    ./dev/example.sh                      # 4 ranks under the mpich wheel's mpiexec
    mpiexec -n 4 python examples/quickstart.py
    python examples/quickstart.py --local 4   # 4 ranks in this process

Every step checks its result exactly; rank 0 prints what each rank verified.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import aiorma

BLOCK = 1024


async def main(comm: aiorma.Comm) -> list[str]:
    rank, size = comm.rank, comm.size
    left, right = (rank - 1) % size, (rank + 1) % size
    report = []

    # 1. Fence epochs, nonblocking: the closing fence's Request is kept while we compute.
    win = await comm.win_allocate(BLOCK, np.float64)
    await win.fence(aiorma.MODE_NOPRECEDE)
    win.put(np.full(BLOCK, rank, np.float64), right, 0)
    closing = win.fence(aiorma.MODE_NOSUCCEED)  # the epoch is closed here, at the call
    t0 = time.perf_counter()
    local = np.linalg.norm(np.random.default_rng(rank).standard_normal((200, 200)))  # overlap
    await closing  # now the neighbour's block is ours to read
    assert np.all(win.memory == left) and local > 0
    report.append(f"fence: block from rank {left} arrived while computing ({time.perf_counter() - t0:.4f} s)")

    # 2. GATS: the symmetric exchange every halo code uses; `await win.complete()` reads naturally.
    group = sorted({left, right})
    win.post(group)
    win.start(group)
    win.put(np.full(1, 10.0 * rank), right, 0)
    win.put(np.full(1, 10.0 * rank + 1), left, 1)
    await win.complete()
    await win.wait()
    assert win.memory[0] == 10.0 * left and win.memory[1] == 10.0 * right + 1
    halo = win.memory[:2]
    report.append(f"gats: halo values {halo[0]:.0f} (from {left}) and {halo[1]:.0f} (from {right})")

    # 3. Passive target: a shared ticket counter on rank 0.
    counter = await comm.win_allocate(1, np.int64)
    ticket = np.zeros(1, np.int64)
    counter.lock(0, aiorma.LOCK_SHARED)
    counter.fetch_and_op(np.array([1]), ticket, 0, 0, aiorma.SUM)
    await counter.unlock(0)
    await comm.barrier()
    if rank == 0:
        assert counter.memory[0] == size
    assert 0 <= ticket[0] < size
    report.append(f"lock: drew ticket {ticket[0]} of {size}")

    await win.free()
    await counter.free()
    return report


def print_report(reports: list[list[str]]) -> None:
    for rank, lines in enumerate(reports):
        for line in lines:
            print(f"[rank {rank}] {line}")
    print(f"verified on {len(reports)} ranks")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--local", type=int, metavar="N", help="run N ranks in-process instead of MPI")
    options = parser.parse_args()
    if options.local:
        print_report(aiorma.run(main, nprocs=options.local))
    else:
        from mpi4py import MPI

        mine = aiorma.run(main)
        everyone = MPI.COMM_WORLD.gather(mine, root=0)
        if MPI.COMM_WORLD.rank == 0:
            print_report(everyone)
