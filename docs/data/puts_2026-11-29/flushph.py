import sys, time, statistics
import numpy as np
import aiorma
N = int(sys.argv[1]) // 8
async def main(comm):
    win = await comm.win_allocate(N, np.int64)
    origin = np.ones(N, np.int64)
    await win.lock_all()
    a, b = [], []
    for i in range(300):
        await comm.barrier()
        if comm.rank == 0:
            t0 = time.perf_counter()
            r = win.put(origin, 1)
            t1 = time.perf_counter()
            await win.flush(1)
            t2 = time.perf_counter()
            a.append(t1 - t0); b.append(t2 - t1)
    if comm.rank == 0:
        print("put", round(statistics.median(a) * 1e6, 1), "flush", round(statistics.median(b) * 1e6, 1), "done-at-put", r.done() if hasattr(r, "done") else "?")
    await win.unlock_all()
    await comm.barrier()
    await win.free()
aiorma.run(main)
