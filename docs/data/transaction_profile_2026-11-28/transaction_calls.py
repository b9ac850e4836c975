import time, numpy as np, aiorma, sys, asyncio
async def main(comm):
    win = await comm.win_allocate(4096, np.int64)
    vals = np.ones(32, np.int64)
    rng = np.random.default_rng(comm.rank)
    mode=sys.argv[1]
    targets = rng.integers(0, comm.size, 20000).tolist() if mode=="rand" else [comm.rank]*20000 if mode=="self" else [(comm.rank+1)%comm.size]*20000
    await comm.barrier()
    pc = time.perf_counter
    tl = ta = tu = tw = 0.0
    waits = 0
    t0 = pc()
    for t in targets:
        a = pc(); win.lock(t); b = pc(); win.accumulate(vals, t, 64, aiorma.SUM); c = pc(); r = win.unlock(t); d = pc()
        if not r.done(): waits += 1
        await r; e = pc()
        tl += b-a; ta += c-b; tu += d-c; tw += e-d
    N = len(targets)
    tot = pc()-t0
    print(f"rank {comm.rank}: per tx {tot/N*1e6:.1f} lock {tl/N*1e6:.1f} acc {ta/N*1e6:.1f} unlock {tu/N*1e6:.1f} await {tw/N*1e6:.1f} pending-at-await {waits/N:.2f} loop-rest {(tot-tl-ta-tu-tw)/N*1e6:.1f}", flush=True)
    await comm.barrier()
    await win.free()
aiorma.run(main)
