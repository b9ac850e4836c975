"""Run the seeded random programs of tests/random_program.py under mpiexec; each rank writes
{seed: {"rank", "memory", "gets"}} as its result (run by tests/test_thin_equivalence.py)."""

from __future__ import annotations

import sys

import aiorma
from tests.mpi_harness import write_rank_result
from tests.random_program import make_program, run_program


async def main(comm: aiorma.Comm, seeds: list[int]) -> None:
    outcomes = {seed: await run_program(comm, make_program(seed, comm.size)) for seed in seeds}
    write_rank_result(comm.rank, outcomes)


if __name__ == "__main__":
    aiorma.run(main, [int(s) for s in sys.argv[1:]])
