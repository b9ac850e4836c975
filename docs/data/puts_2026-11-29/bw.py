import sys, time, statistics
import numpy as np
import aiorma
from mpi4py import MPI
N = int(sys.argv[1]) // 8
async def main(comm):
    win = await comm.win_allocate(N, np.int64)
    origin = np.ones(N, np.int64)
    a = []; m = []
    mw = MPI.Win.Allocate(N * 8, 8, comm=MPI.COMM_WORLD)
    for i in range(205):
        MPI.COMM_WORLD.Barrier()
        if comm.rank == 0:
            t0 = time.perf_counter()
            mw.Lock(1, MPI.LOCK_SHARED)
            for _ in range(32): mw.Put(origin, 1)
            mw.Unlock(1)
            m.append(time.perf_counter() - t0)
        await comm.barrier()
        if comm.rank == 0:
            t0 = time.perf_counter()
            await win.lock(1, aiorma.LOCK_SHARED)
            for _ in range(32): win.put(origin, 1)
            await win.unlock(1)
            a.append(time.perf_counter() - t0)
    if comm.rank == 0:
        print("mpi %.1f aiorma %.1f ratio %.2f" % (statistics.median(m)*1e6, statistics.median(a)*1e6, statistics.median(a)/statistics.median(m)))
    MPI.COMM_WORLD.Barrier()
    mw.Free()
    await win.free()
aiorma.run(main)
