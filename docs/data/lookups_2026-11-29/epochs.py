import sys, numpy as np, aiorma
N = int(sys.argv[2]); kind = sys.argv[1]
async def main(comm):
    win = await comm.win_allocate(8, np.int64)
    data = np.ones(1, np.int64)
    await comm.barrier()
    if kind == "lock":
        if comm.rank == 0:
            for _ in range(N):
                await win.lock(1, aiorma.LOCK_EXCLUSIVE); win.put(data, 1, 0); await win.unlock(1)
    elif kind == "fence":
        for _ in range(N):
            await win.fence(aiorma.MODE_NOPRECEDE)
            if comm.rank == 0: win.put(data, 1, 0)
            await win.fence(aiorma.MODE_NOSUCCEED)
    elif kind == "pscw":
        for _ in range(N):
            if comm.rank == 0:
                await win.start([1]); win.put(data, 1, 0); await win.complete()
            else:
                await win.post([0]); await win.wait()
    elif kind == "lockall":
        await win.lock_all()
        if comm.rank == 0:
            for _ in range(N):
                win.put(data, 1, 0); await win.flush(1)
        await win.unlock_all()
    await comm.barrier()
    await win.free()
aiorma.run(main)
