import sys, time, statistics
import numpy as np
import aiorma
N = int(sys.argv[1]) // 8
async def main(comm):
    win = await comm.win_allocate(N, np.int64)
    origin = np.ones(N, np.int64)
    ph = {}
    def rec(k, v): ph.setdefault(k, []).append(v)
    await comm.barrier()
    for i in range(2005):
        t0 = time.perf_counter()
        if comm.rank == 0:
            await win.start([1]); t1 = time.perf_counter()
            win.put(origin, 1); t2 = time.perf_counter()
            await win.complete(); t3 = time.perf_counter()
            if i > 4: rec("start", t1 - t0); rec("put", t2 - t1); rec("complete", t3 - t2); rec("total", t3 - t0)
        else:
            await win.post([0]); t1 = time.perf_counter()
            await win.wait(); t2 = time.perf_counter()
            if i > 4: rec("post", t1 - t0); rec("wait", t2 - t1); rec("total", t2 - t0)
    print(comm.rank, {k: round(statistics.median(v) * 1e6, 1) for k, v in ph.items()}, flush=True)
    await comm.barrier()
    await win.free()
aiorma.run(main)
