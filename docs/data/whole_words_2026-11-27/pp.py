"""Raw mpi4py ping-pong of one int64 flag word between 2 ranks: put+flush vs accumulate(REPLACE)+flush."""
import sys, time
import numpy as np
from mpi4py import MPI
comm = MPI.COMM_WORLD; rank = comm.Get_rank(); peer = 1 - rank
win = MPI.Win.Allocate(8, 8, comm=comm)
mem = np.frombuffer(win.tomemory(), np.int64); mem[:] = 0
win.Lock_all(MPI.MODE_NOCHECK); comm.Barrier()
pc = comm.Dup(); st = MPI.Status()
buf = np.zeros(1, np.int64)
def run(mode, n, base):
    for i in range(1, n + 1):
        v = base + i
        if rank == 0:
            buf[0] = v
            if mode == "put": win.Put([buf, MPI.INT64_T], peer, (0, 1, MPI.INT64_T))
            elif mode == "acc": win.Accumulate([buf, MPI.INT64_T], peer, (0, 1, MPI.INT64_T), MPI.REPLACE)
            else:
                r = win.Raccumulate([buf, MPI.INT64_T], peer, (0, 1, MPI.INT64_T), MPI.REPLACE)
            if mode != "racc": win.Flush(peer)
            while mem[0] != v: pc.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG, st)
            if mode == "racc": r.Wait()
        else:
            while mem[0] != v: pc.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG, st)
            buf[0] = v
            if mode == "put": win.Put([buf, MPI.INT64_T], peer, (0, 1, MPI.INT64_T))
            elif mode == "acc": win.Accumulate([buf, MPI.INT64_T], peer, (0, 1, MPI.INT64_T), MPI.REPLACE)
            else: r = win.Raccumulate([buf, MPI.INT64_T], peer, (0, 1, MPI.INT64_T), MPI.REPLACE)
            if mode != "racc": win.Flush(peer)
            else: r.Wait()
base = 0
for rnd in range(3):
    for mode in ("put", "acc", "racc"):
        comm.Barrier(); n = 2000
        t = time.perf_counter(); run(mode, n, base); dt = time.perf_counter() - t
        base += n
        if rank == 0: print(f"{mode:5s} half-rtt {dt / n / 2 * 1e6:7.2f} us", flush=True)
win.Unlock_all(); comm.Barrier(); win.Free()
