import time, statistics, numpy as np, sys
from mpi4py import MPI
comm = MPI.COMM_WORLD; r = comm.rank
N = int(sys.argv[1]); C = int(sys.argv[2]); K = int(sys.argv[3]); IT = 300
win = MPI.Win.Allocate_shared(K * C + 128 if r == 1 else 0, 1, comm=comm)
buf, _ = win.Shared_query(1)
mem = np.frombuffer(buf, np.uint8)
flag = mem[:8].view(np.int64); credit = mem[64:72].view(np.int64)
cells = mem[128:128 + K * C].reshape(K, C)
src = np.ones(N, np.uint8); out = np.zeros(N, np.uint8)
ts = []; seq = 0
for i in range(1, IT + 1):
    comm.Barrier()
    t = time.perf_counter()
    base = seq
    for lo in range(0, N, C):
        seq += 1
        cell = cells[(seq - 1) % K]
        if r == 0:
            while credit[0] < seq - K: pass
            np.copyto(cell[: min(C, N - lo)], src[lo:lo + C]); flag[0] = seq
        else:
            while flag[0] < seq: pass
            np.copyto(out[lo:lo + C], cell[: min(C, N - lo)]); credit[0] = seq
    ts.append(time.perf_counter() - t)
res = comm.gather(statistics.median(ts) * 1e6)
if r == 0: print("%d B in %d B cells x%d: root %.1f us, receiver %.1f us" % (N, C, K, res[0], res[1]))
win.Free()
