import sys, time, statistics, asyncio
import numpy as np
import aiorma
from mpi4py import MPI

N = int(sys.argv[1]) // 8
MODE = sys.argv[2] if len(sys.argv) > 2 else "lock"

async def main(comm):
    win = await comm.win_allocate(N, np.int64)
    origin = np.ones(N, np.int64)
    ph = {"lock": [], "put": [], "unlock": [], "total": []}
    for i in range(305):
        await comm.barrier()
        if comm.rank == 0:
            t0 = time.perf_counter()
            if MODE == "lock":
                await win.lock(1, aiorma.LOCK_SHARED)
            t1 = time.perf_counter()
            win.put(origin, 1)
            t2 = time.perf_counter()
            if MODE == "lock":
                await win.unlock(1)
            else:
                await win.flush(1)
            t3 = time.perf_counter()
            if i >= 5:
                ph["lock"].append(t1 - t0); ph["put"].append(t2 - t1); ph["unlock"].append(t3 - t2); ph["total"].append(t3 - t0)
        if MODE == "lock_all" and i == 0 and comm.rank == 0:
            pass
    # MPI
    mw = MPI.Win.Allocate(N * 8, 8, comm=MPI.COMM_WORLD)
    mp = {"lock": [], "put": [], "unlock": [], "total": []}
    for i in range(305):
        MPI.COMM_WORLD.Barrier()
        if comm.rank == 0:
            t0 = time.perf_counter()
            mw.Lock(1, MPI.LOCK_SHARED)
            t1 = time.perf_counter()
            mw.Put(origin, 1)
            t2 = time.perf_counter()
            mw.Unlock(1)
            t3 = time.perf_counter()
            if i >= 5:
                mp["lock"].append(t1 - t0); mp["put"].append(t2 - t1); mp["unlock"].append(t3 - t2); mp["total"].append(t3 - t0)
    MPI.COMM_WORLD.Barrier()
    mw.Free()
    if comm.rank == 0:
        print("aiorma", {k: round(statistics.median(v) * 1e6, 1) for k, v in ph.items()})
        print("mpi   ", {k: round(statistics.median(v) * 1e6, 1) for k, v in mp.items()})
    await win.free()

aiorma.run(main)
