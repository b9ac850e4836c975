"""What a small collective costs inside its call: Python calls and time, for A/B runs of two trees.

    mpiexec -n 2 python dev/probe_call_cost.py [ITERATIONS] [--persistent]

For barrier, an 8-byte bcast and an 8-byte allreduce, each awaited ITERATIONS times (default
4000) after 300 warm-up calls: the median time of the *call* alone (the work it does before it
returns a Request — all of it, when the peer's message has landed), the Python calls made inside
every tenth call (counted by ``sys.setprofile``: function calls and C calls), and the time per
collective including the await.  ``--persistent`` starts ``*_init`` forms instead.  Rank 0 prints
one line.  The call's median and its call count move far less with the machine's noise than the
loop's time does (docs/benchmarks.md, *Exchange programs*).
"""

from __future__ import annotations

import sys
import time
from typing import Any

import numpy as np

import aiorma


async def main(comm: aiorma.Comm, iterations: int, persistent: bool) -> None:
    one, result = np.full(1, 1.0 + comm.rank), np.zeros(1)
    calls: dict[str, Any] = {
        "barrier": lambda: comm.barrier(),
        "bcast": lambda: comm.bcast(result, 0),
        "allreduce": lambda: comm.allreduce(one, result),
    }
    if persistent:
        inits = {
            "barrier": comm.barrier_init(),
            "bcast": comm.bcast_init(result, 0),
            "allreduce": comm.allreduce_init(one, result),
        }
        calls = {name: init.start for name, init in inits.items()}
    counted = [0]

    def count(frame: object, event: str, arg: object) -> None:
        if event in ("call", "c_call"):
            counted[0] += 1

    report = []
    for name, call in calls.items():
        for _ in range(300):
            await call()
        await comm.barrier()
        durations, counted[0] = [], 0
        start = time.perf_counter()
        for i in range(iterations):
            began = time.perf_counter()
            if i % 10 == 0:
                sys.setprofile(count)
            request = call()
            if i % 10 == 0:
                sys.setprofile(None)
            durations.append(time.perf_counter() - began)
            await request
        total = (time.perf_counter() - start) / iterations * 1e6
        await comm.barrier()
        durations.sort()
        median = durations[len(durations) // 2] * 1e6
        per_call = counted[0] / (iterations / 10)
        report.append(f"{name}: call {median:.1f} us, {per_call:.0f} calls, {total:.1f} us each")
    if comm.rank == 0:
        print(" | ".join(report))


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    aiorma.run(main, int(args[0]) if args else 4000, "--persistent" in sys.argv)
