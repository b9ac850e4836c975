"""A collective entered late: rank 1 computes 2 ms (a blocking sleep, no await) before each call,
rank 0 waits for it.  Prints, per rank, the median time of the call and of its await.

    mpiexec -n 2 python late_arrival.py barrier|allreduce   (the wheel's mpiexec: .venv/bin/mpiexec)
"""

import statistics
import sys
import time

import numpy as np

import aiorma

N = 300
WHAT = sys.argv[1] if len(sys.argv) > 1 else "barrier"


async def main(comm):
    send, recv = np.ones(1), np.empty(1)
    call = (lambda: comm.barrier()) if WHAT == "barrier" else (lambda: comm.allreduce(send, recv))
    calls, awaits = [], []
    for _ in range(N):
        if comm.rank == 1:
            time.sleep(0.002)
        t0 = time.perf_counter()
        request = call()
        t1 = time.perf_counter()
        await request
        t2 = time.perf_counter()
        calls.append(t1 - t0)
        awaits.append(t2 - t1)
    print(
        f"rank {comm.rank} {WHAT}: call {1e6 * statistics.median(calls[50:]):.1f} µs, "
        f"await {1e6 * statistics.median(awaits[50:]):.1f} µs",
        flush=True,
    )


aiorma.run(main)
