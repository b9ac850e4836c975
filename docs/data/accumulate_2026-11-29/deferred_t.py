import sys, time, faulthandler, numpy as np, aiorma
faulthandler.dump_traceback_later(60, exit=True)
N = int(sys.argv[1])
import gc, os
if os.environ.get("NOGC"): gc.disable()
async def main(comm):
    win = await comm.win_allocate(4096, np.int64)
    vals = np.ones(32, np.int64)
    await comm.barrier()
    for rep in range(3):
        if comm.rank == 1:
            await win.lock(1, aiorma.LOCK_EXCLUSIVE)
            await comm.barrier(); await comm.barrier()
            await win.unlock(1)
            await comm.barrier()
            await comm.barrier()  # rank 0's inline loop done
        else:
            await comm.barrier()
            t0 = time.perf_counter(); c0 = time.process_time()
            reqs = []
            for _ in range(N):
                reqs.append(win.lock(1, aiorma.LOCK_EXCLUSIVE)); reqs.append(win.accumulate(vals, 1, 64, aiorma.SUM)); reqs.append(win.unlock(1))
            t1 = time.perf_counter(); c1 = time.process_time()
            await comm.barrier()
            t2 = time.perf_counter(); c2 = time.process_time()
            for r in reqs:
                await r
            t3 = time.perf_counter(); c3 = time.process_time()
            await comm.barrier()
            # inline (uncontended) for comparison
            t4 = time.perf_counter(); c4 = time.process_time()
            for _ in range(N):
                await win.lock(1, aiorma.LOCK_EXCLUSIVE); win.accumulate(vals, 1, 64, aiorma.SUM); await win.unlock(1)
            t5 = time.perf_counter(); c5 = time.process_time()
            await comm.barrier()
            print(f"issue {1e6*(t1-t0)/N:.1f} us/tx (cpu {1e6*(c1-c0)/N:.1f}), drain {1e6*(t3-t2)/N:.1f} us/tx (cpu {1e6*(c3-c2)/N:.1f}), inline {1e6*(t5-t4)/N:.1f} us/tx (cpu {1e6*(c5-c4)/N:.1f})", flush=True)
    await comm.barrier()
    await win.free()
aiorma.run(main)
