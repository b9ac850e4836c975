import sys, time, statistics
import numpy as np
import aiorma
from mpi4py import MPI
N = 1
async def main(comm):
    win = await comm.win_allocate(N, np.int64)
    origin = np.ones(N, np.int64)
    A = []; B = []
    await comm.barrier()
    for i in range(2005):
        if comm.rank == 0:
            await win.start([1]); a = time.perf_counter()
            win.put(origin, 1)
            b = time.perf_counter()
            await win.complete()
            A.append(a); B.append(b)
        else:
            t = time.perf_counter()
            await win.post([0]); a = time.perf_counter()
            await win.wait(); b = time.perf_counter()
            A.append((t, a)); B.append(b)
    other = MPI.COMM_WORLD.gather((A, B), root=0)
    if comm.rank == 0:
        (A0, B0), (A1, B1) = other
        d1 = [A0[i] - A1[i][1] for i in range(100, 2005)]  # start return - post return
        d0 = [A0[i] - A1[i][0] for i in range(100, 2005)]  # start return - post call
        d2 = [B1[i] - B0[i] for i in range(100, 2005)]  # wait return - put return
        med = lambda v: round(statistics.median(v) * 1e6, 1)
        print("start-ret after post-call", med(d0), "after post-ret", med(d1), "wait-ret after put-ret", med(d2))
    await comm.barrier()
    await win.free()
aiorma.run(main)
