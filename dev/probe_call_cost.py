"""What a small collective costs inside its call: Python calls and time, for A/B runs of two trees.

    mpiexec -n 2 python dev/probe_call_cost.py [ITERATIONS] [COLLECTIVE ...] [--persistent]

For barrier, an 8-byte bcast and an 8-byte allreduce (or the COLLECTIVEs named: also allgather,
reduce, gather, scatter, alltoall of 8-byte blocks), each awaited ITERATIONS times (default
4000) after 300 warm-up calls: the median time of the *call* alone (the work it does before it
returns a Request — all of it, when the peer's message has landed), the Python calls made inside
every tenth call (counted by ``sys.setprofile``: function calls and C calls), and the time per
collective including the await.  ``--persistent`` starts ``*_init`` forms instead.  Rank 0 prints
one line.  The call's median and its call count move far less with the machine's noise than the
loop's time does (docs/benchmarks.md, *Exchange programs*).
"""

from __future__ import annotations

import functools
import sys
import time
from typing import Any

import numpy as np

import aiorma


async def main(comm: aiorma.Comm, iterations: int, persistent: bool, names: list[str]) -> None:
    one, result = np.full(1, 1.0 + comm.rank), np.zeros(1)
    blocks, gathered = np.full(comm.size, 1.0 + comm.rank), np.zeros(comm.size)
    arguments: dict[str, tuple[Any, ...]] = {
        "barrier": (),
        "bcast": (result, 0),
        "allreduce": (one, result),
        "reduce": (one, result),
        "allgather": (one, gathered),
        "gather": (one, gathered, 0),
        "scatter": (blocks, result, 0),
        "alltoall": (blocks, gathered),
    }
    only = [name for name in names if name in arguments] or list(arguments)[:3]
    form = "{}_init" if persistent else "{}"
    made = {name: getattr(comm, form.format(name))(*arguments[name]) for name in only} if persistent else {}
    calls: dict[str, Any] = {
        name: made[name].start if persistent else functools.partial(getattr(comm, name), *arguments[name])
        for name in only
    }
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
    numbers = [a for a in args if a.isdigit()]
    names = [a for a in args if not a.isdigit()]
    aiorma.run(main, int(numbers[0]) if numbers else 4000, "--persistent" in sys.argv, names)
