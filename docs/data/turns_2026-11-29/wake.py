import sys, time, statistics
import numpy as np
import aiorma
from mpi4py import MPI
DELAY = float(sys.argv[1]) * 1e-6; IT = 300
async def main(comm):
    win = await comm.win_allocate(1, np.int64)
    ts = []
    for _ in range(IT):
        await comm.barrier()
        if comm.rank == 1:
            t = time.perf_counter()
            while time.perf_counter() - t < DELAY: pass
            t = time.perf_counter()
            r = win.post([0])
            await win.wait()
            ts.append(t)
        else:
            r = win.start([1])
            await r
            ts.append(time.perf_counter())
            await win.complete()
    both = MPI.COMM_WORLD.gather(ts, root=0)
    await win.free()
    if comm.rank == 0:
        d = [(a - b) * 1e6 for a, b in zip(both[0], both[1])]
        print("delay %4.0f us: post -> start resumes median %.1f us, p90 %.1f" % (DELAY*1e6, statistics.median(d), sorted(d)[int(.9*len(d))]))
aiorma.run(main, backend=sys.argv[2] if len(sys.argv) > 2 else "asyncio")
