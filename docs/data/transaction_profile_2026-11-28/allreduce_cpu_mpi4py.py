import sys, time, numpy as np
from mpi4py import MPI
W=MPI.COMM_WORLD
nb=int(sys.argv[1]); n=nb//8
s=np.ones(n); r=np.empty(n)
for _ in range(3): W.Allreduce(s,r)
W.Barrier()
N=int(sys.argv[2])
t=time.perf_counter(); c0=time.process_time()
for _ in range(N): W.Allreduce(s,r)
dt=(time.perf_counter()-t)/N; cpu=(time.process_time()-c0)/N
print(f"rank {W.rank}: {dt*1e6:.0f} us per call, cpu {cpu*1e6:.0f} us", flush=True)
