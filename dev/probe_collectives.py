"""Long, steady timing of the eight collectives at 8 bytes, for A/B runs of two trees.

    mpiexec -n 2 python dev/probe_collectives.py OUT.json [ITERATIONS]

Each collective runs ITERATIONS times (default 2000) after 100 warm-up calls, awaited one by one
through the public API; rank 0 writes {collective: µs per call} to OUT.json.  Unlike
``python -m aiorma.bench collectives`` it does not interleave MPI's own collectives or size its
loops from a budget, so a run is one steady sample per collective.  Used for
docs/benchmarks.md (2026-11-27, later): run it alternately from two checkouts
(``PYTHONPATH=<tree>``) and compare the medians.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import numpy as np

import aiorma


async def main(comm: aiorma.Comm, out: str, iterations: int) -> None:
    size, rank = comm.size, comm.rank
    one, result = np.full(1, 1.0 + rank), np.zeros(1)
    everyone = np.zeros(size)
    blocks, swapped = np.full(size, float(rank)), np.zeros(size)
    scattered = np.arange(size, dtype=np.float64)
    calls: dict[str, Any] = {
        "barrier": lambda: comm.barrier(),
        "bcast": lambda: comm.bcast(result, 0),
        "reduce": lambda: comm.reduce(one, result, root=0),
        "allreduce": lambda: comm.allreduce(one, result),
        "allgather": lambda: comm.allgather(one, everyone),
        "gather": lambda: comm.gather(one, everyone, 0),
        "scatter": lambda: comm.scatter(scattered, result, 0),
        "alltoall": lambda: comm.alltoall(blocks, swapped),
    }
    times = {}
    for name, call in calls.items():
        for _ in range(100):
            await call()
        await comm.barrier()
        start = time.perf_counter()
        for _ in range(iterations):
            await call()
        times[name] = (time.perf_counter() - start) / iterations * 1e6
    await comm.barrier()
    if rank == 0:
        with open(out, "w") as file:
            json.dump(times, file)


if __name__ == "__main__":
    aiorma.run(main, sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 2000)
