import sys, time, statistics, numpy as np
import aiorma, os, attrs
import aiorma.collectives.landing as L
if os.environ.get("SC"): L.DEFAULT_CONFIG = attrs.evolve(L.DEFAULT_CONFIG, single_copy_bytes=int(os.environ["SC"]))
from mpi4py import MPI
IT = 200
async def main(comm):
    mc = MPI.COMM_WORLD
    for N in [int(x) for x in os.environ.get("SIZES", "262144,1048576,4194304").split(",")]:
        buf = np.ones(N, np.uint8)
        ts = []; tm = []; tb = []
        for i in range(IT):
            mc.Barrier(); t = time.perf_counter(); mc.Bcast(buf, 0); tm.append(time.perf_counter() - t)
            mc.Barrier(); t = time.perf_counter(); await comm.bcast(buf, 0); ts.append(time.perf_counter() - t)
            mc.Barrier(); t = time.perf_counter(); np.copyto(buf, buf[::-1]) if False else buf.copy(); tb.append(time.perf_counter() - t)
        r = mc.gather((statistics.median(tm)*1e6, statistics.median(ts)*1e6, statistics.median(tb)*1e6))
        if comm.rank == 0:
            print("%8d B  mpi r0 %.0f r1 %.0f | aiorma r0 %.0f r1 %.0f | one copy %.0f us" % (N, r[0][0], r[1][0], r[0][1], r[1][1], r[0][2]))
aiorma.run(main)
