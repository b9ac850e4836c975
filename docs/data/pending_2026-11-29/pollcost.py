import sys, time, numpy as np, aiorma
W = int(sys.argv[1])
async def main(comm):
    wins = [await comm.win_allocate(4096, np.int64) for _ in range(W)]
    await comm.barrier()
    d = comm.world.driver
    if comm.rank == 0:
        N = 100000
        t0 = time.perf_counter()
        for _ in range(N): d.poll_turn()
        t1 = time.perf_counter()
        ep = d.endpoint
        t2 = time.perf_counter()
        for _ in range(N): ep._probe_comm.Iprobe(-1, -1) if hasattr(ep, "_probe_comm") else None
        t3 = time.perf_counter()
        print(f"{W} windows: poll_turn {1e6*(t1-t0)/N:.2f} us; Iprobe alone {1e6*(t3-t2)/N:.2f} us; watched {len(ep._watched)}", flush=True)
    await comm.barrier()
    for w in wins: await w.free()
aiorma.run(main)
