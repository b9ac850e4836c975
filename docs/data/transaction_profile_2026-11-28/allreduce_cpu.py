import sys, time, numpy as np, aiorma
async def main(comm):
    nb=int(sys.argv[1]); alg=sys.argv[2]; n=nb//8
    s=np.ones(n); r=np.empty(n)
    for _ in range(3): await comm.allreduce(s, r, algorithm=alg)
    await comm.barrier()
    t=time.perf_counter(); c0=time.process_time()
    N=int(sys.argv[3])
    for _ in range(N): await comm.allreduce(s, r, algorithm=alg)
    dt=(time.perf_counter()-t)/N; cpu=(time.process_time()-c0)/N
    print(f"rank {comm.rank}: {dt*1e6:.0f} us per call, cpu {cpu*1e6:.0f} us", flush=True)
aiorma.run(main)
