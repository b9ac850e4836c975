import sys, time, numpy as np, aiorma
from mpi4py import MPI
W = MPI.COMM_WORLD
CASES = {  # every allreduce algorithm against MPI_Allreduce, 3 interleaved rounds, median ratio
  "allreduce": ["recursive_doubling", "ring", "direct", "halving_doubling"],
  "allgather": ["recursive_doubling", "bruck", "ring", "direct"],
  "alltoall": ["direct", "pairwise"],
  "bcast": ["knomial", "binomial", "scatter_allgather", "scatter_allgather_direct"],
}
async def main(comm):
    sizes = [int(s) for s in sys.argv[1].split(",")]
    which = sys.argv[2].split(",") if len(sys.argv) > 2 else list(CASES)
    p = comm.size
    for coll in which:
        for nb in sizes:
            n = nb // 8
            if coll in ("allreduce", "bcast"):
                s = np.ones(n); r = np.empty(n)
            elif coll == "allgather":
                s = np.ones(n); r = np.empty(n * p)
            else:
                s = np.ones(n * p); r = np.empty(n * p)
            def mpi():
                if coll == "allreduce": W.Allreduce(s, r)
                elif coll == "allgather": W.Allgather(s, r)
                elif coll == "alltoall": W.Alltoall(s, r)
                else: W.Bcast(s, 0)
            async def ours(alg):
                if coll == "allreduce": await comm.allreduce(s, r, algorithm=alg)
                elif coll == "allgather": await comm.allgather(s, r, algorithm=alg)
                elif coll == "alltoall": await comm.alltoall(s, r, algorithm=alg)
                else: await comm.bcast(s, 0, algorithm=alg)
            res = {}
            iters = 10 if nb <= 1 << 20 else 5
            for rnd in range(3):
                for alg in ["mpi"] + CASES[coll]:
                    W.Barrier()
                    if alg == "mpi":
                        mpi(); t = time.perf_counter()
                        for _ in range(iters): mpi()
                    else:
                        await ours(alg); await comm.barrier(); t = time.perf_counter()
                        for _ in range(iters): await ours(alg)
                    dt = (time.perf_counter() - t) / iters
                    dt = W.allreduce(dt, op=MPI.MAX)
                    res.setdefault(alg, []).append(dt)
            if comm.rank == 0:
                m = sorted(res["mpi"])[1]
                print(f"{p} ranks {coll:9s} {nb:8d}: mpi {m*1e6:8.0f} us | " + "  ".join(f"{a} {sorted(v)[1]/m:.2f}" for a, v in res.items() if a != "mpi"), flush=True)
aiorma.run(main)
