"""Time the copying collectives at 1 and 4 MiB with a given single-copy threshold, in one run:

    mpiexec -n RANKS python probe_threshold.py SINGLE_COPY_BYTES

Sets ``LandingConfig(single_copy_bytes=SINGLE_COPY_BYTES)`` (and the same threshold where ranks
share cores), then awaits each collective 60 times at 1 MiB and 20 at 4 MiB after 5 warm-up
calls; rank 0 prints µs per call.  Run alternately with two thresholds and compare the medians
(docs/benchmarks.md, *Large messages in one copy*: 0 vs 512 KiB at 2 ranks, 512 KiB vs 2 MiB at 4).
"""

import json
import sys
import time

import numpy as np

import aiorma
from aiorma.collectives import landing

threshold = int(sys.argv[1])
landing.DEFAULT_CONFIG = landing.LandingConfig(single_copy_bytes=threshold, single_copy_bytes_shared_cores=threshold)


async def main(comm: aiorma.Comm) -> None:
    times = {}
    for nbytes in (1 << 20, 4 << 20):
        count = nbytes // 8
        buf, one = np.ones(count), np.zeros(count)
        blocks, out = np.ones(count * comm.size), np.zeros(count * comm.size)
        calls = {
            "bcast": lambda: comm.bcast(buf, 0),
            "allgather": lambda: comm.allgather(buf, out),
            "alltoall": lambda: comm.alltoall(blocks, out),
            "scatter": lambda: comm.scatter(blocks, one, 0),
            "gather": lambda: comm.gather(buf, out, 0),
            "allreduce": lambda: comm.allreduce(buf, one),
        }
        for name, call in calls.items():
            for _ in range(5):
                await call()
            await comm.barrier()
            repeats = 60 if nbytes < (4 << 20) else 20
            start = time.perf_counter()
            for _ in range(repeats):
                await call()
            await comm.barrier()
            times[f"{name}_{nbytes >> 20}M"] = round((time.perf_counter() - start) / repeats * 1e6, 1)
    if comm.rank == 0:
        print(threshold, json.dumps(times))


aiorma.run(main)
