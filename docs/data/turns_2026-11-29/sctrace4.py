import os, sys, time, statistics, numpy as np, attrs
import aiorma
import aiorma.collectives.landing as L
from aiorma.transport.mpi import cross_memory as CM
from mpi4py import MPI
L.DEFAULT_CONFIG = attrs.evolve(L.DEFAULT_CONFIG, single_copy_bytes=int(os.environ.get("SC", 262144)))
IT = 200
ev = []
orig = CM.ProcessMemoryReader.read
def read(self, pid, address, out):
    ev.append(("read", time.perf_counter())); orig(self, pid, address, out); ev.append(("read/end", time.perf_counter()))
CM.ProcessMemoryReader.read = read
async def main(comm):
    mc = MPI.COMM_WORLD
    for N in (16, 65536, 262144):
        buf = np.ones(N, np.uint8)
        rows = []
        for i in range(IT):
            mc.Barrier()
            ev.clear()
            t = time.perf_counter(); req = comm.bcast(buf, 0); ev.append(("returned", time.perf_counter())); await req; ev.append(("done", time.perf_counter()))
            rows.append([(n, (x - t) * 1e6) for n, x in ev])
        allr = mc.gather(rows[IT // 2:])
        if comm.rank == 0:
            for r in (0, 1):
                keys = [n for n, _ in allr[r][-1]]
                med = [statistics.median(row[j][1] for row in allr[r] if len(row) == len(keys)) for j in range(len(keys))]
                print(N, "rank", r, " ".join("%s@%.0f" % (k, m) for k, m in zip(keys, med)))
aiorma.run(main)
