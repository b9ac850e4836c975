import sys, time, statistics
import numpy as np
import aiorma
N = int(sys.argv[1]); IT = 1000
async def main(comm):
    win = await comm.win_allocate(N, np.int64)
    origin = np.ones(N, np.int64)
    a=[];b=[];c=[]
    await comm.barrier()
    for _ in range(IT):
        t0 = time.perf_counter()
        await win.fence(aiorma.MODE_NOPRECEDE)
        t1 = time.perf_counter()
        if comm.rank == 0: win.put(origin, 1)
        t2 = time.perf_counter()
        await win.fence(aiorma.MODE_NOSUCCEED)
        t3 = time.perf_counter()
        a.append(t1-t0); b.append(t2-t1); c.append(t3-t2)
    await comm.barrier()
    await win.free()
    m = lambda x: statistics.median(x)*1e6
    print("rank %d %d B: fence1 %.1f put %.1f fence2 %.1f total %.1f" % (comm.rank, N*8, m(a), m(b), m(c), m(a)+m(b)+m(c)))
aiorma.run(main)
