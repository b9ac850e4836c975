import sys, time, statistics
import numpy as np
import aiorma
N = int(sys.argv[1]) // 8
async def main(comm):
    win = await comm.win_allocate(N, np.int64)
    origin = np.ones(N, np.int64)
    a, b, c, t = [], [], [], []
    for i in range(305):
        await comm.barrier()
        t0 = time.perf_counter()
        await win.fence(aiorma.MODE_NOPRECEDE)
        t1 = time.perf_counter()
        if comm.rank == 0:
            win.put(origin, 1)
        t2 = time.perf_counter()
        await win.fence(aiorma.MODE_NOSUCCEED)
        t3 = time.perf_counter()
        if i >= 5:
            a.append(t1 - t0); b.append(t2 - t1); c.append(t3 - t2); t.append(t3 - t0)
    med = lambda v: round(statistics.median(v) * 1e6, 1)
    print(comm.rank, "open", med(a), "put", med(b), "close", med(c), "total", med(t), flush=True)
    await comm.barrier()
    await win.free()
aiorma.run(main)
