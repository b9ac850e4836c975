import sys, numpy as np, aiorma
N = int(sys.argv[2]); mode = sys.argv[1]
async def main(comm):
    win = await comm.win_allocate(4096, np.int64)
    vals = np.ones(32, np.int64)
    await comm.barrier()
    if comm.rank == 0:
        for _ in range(N):
            await win.lock(1, aiorma.LOCK_EXCLUSIVE); win.accumulate(vals, 1, 64, aiorma.SUM); await win.unlock(1)
    await comm.barrier()
    await win.free()
aiorma.run(main)
