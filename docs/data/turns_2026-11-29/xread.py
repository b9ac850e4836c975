import os, time, statistics, numpy as np, sys
from mpi4py import MPI
from aiorma.transport.mpi.cross_memory import ProcessMemoryReader
comm = MPI.COMM_WORLD; r = comm.rank
N = int(sys.argv[1]); IT = 300
src = np.ones(N, np.uint8); out = np.zeros(N, np.uint8)
info = comm.bcast((os.getpid(), src.ctypes.data), root=0)
rd = ProcessMemoryReader(); ts = []
for i in range(IT):
    if r == 0: src[::64] = i & 0xFF   # the sender touched its buffer (as an application would)
    comm.Barrier()
    t = time.perf_counter()
    if r == 1: rd.read(info[0], info[1], out)
    ts.append(time.perf_counter() - t)
    comm.Barrier()
if r == 1: print("%d B cross-process readv %.1f us" % (N, statistics.median(ts) * 1e6))
