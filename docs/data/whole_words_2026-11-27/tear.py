"""Raw mpi4py: are int64 words torn between emulated nodes? mode put|acc, words per write, seconds."""
import sys, time
import numpy as np
from mpi4py import MPI
mode, nwords, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
comm = MPI.COMM_WORLD
rank = comm.Get_rank()
win = MPI.Win.Allocate(8 * (nwords + 1), 8, comm=comm)
mem = np.frombuffer(win.tomemory(), np.uint64)
mem[:] = 0
win.Lock_all(MPI.MODE_NOCHECK)
comm.Barrier()
stop = time.time() + secs
if rank == 0:
    k = 0
    buf = np.empty(nwords, np.uint64)
    writes = 0
    while time.time() < stop:
        k = k % 255 + 1
        buf[:] = np.uint64(0x0101010101010101 * k)
        if mode == "put":
            win.Put([buf, MPI.INT64_T], 1, (0, nwords, MPI.INT64_T))
        else:
            win.Accumulate([buf, MPI.INT64_T], 1, (0, nwords, MPI.INT64_T), MPI.REPLACE)
        win.Flush(1)
        writes += 1
    done = np.ones(1, np.uint64)
    win.Accumulate([done, MPI.INT64_T], 1, (nwords, 1, MPI.INT64_T), MPI.REPLACE)
    win.Flush(1)
    print(f"writer {mode} {nwords}w writes={writes}", flush=True)
else:
    reads = torn = 0
    st = MPI.Status()
    i = 0
    while True:
        words = mem[:nwords].copy()
        reads += 1
        lo = words & np.uint64(0xFF)
        bad = words != lo * np.uint64(0x0101010101010101)
        torn += int(bad.sum())
        i += 1
        if i % 16 == 0:
            comm.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG, st)
            win.Sync()
            if mem[nwords] == 1:
                break
    print(f"reader {mode} {nwords}w reads={reads} torn_words={torn}", flush=True)
win.Unlock_all()
comm.Barrier()
win.Free()
