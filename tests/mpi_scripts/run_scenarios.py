"""Run every shared scenario meant for this many ranks, in order, on the MPI transport.

Started by tests/test_scenarios_mpi.py as ``mpiexec -n N python run_scenarios.py``; each rank
prints ``PASS <scenario> <rank>`` after each scenario.  A failing rank aborts the whole job (that
is what aiorma.run does under MPI), so a failure can never leave the others hanging.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import aiorma
from tests.scenarios import SCENARIOS, runs_with


async def main(comm: aiorma.Comm) -> None:
    for name, (fn, _sizes) in SCENARIOS.items():
        if not runs_with(name, comm.size):
            continue
        async with asyncio.timeout(60):
            await fn(comm)
        print(f"PASS {name} {comm.rank}", flush=True)


if __name__ == "__main__":
    aiorma.run(main)
