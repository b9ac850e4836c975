"""Ranks 1.. give up awaiting a barrier that rank 0 never calls, and every rank returns (run by
tests/test_failures_mpi_output.py and, in-process, tests/test_failures.py): aiorma.run must end
with CollectiveMismatch on every rank instead of waiting for ever at exit."""

from __future__ import annotations

import asyncio

import aiorma


async def main(comm: aiorma.Comm) -> str:
    if comm.rank != 0:
        try:
            async with asyncio.timeout(0.2):
                await comm.barrier()
        except TimeoutError:
            return "gave up"
    return "never called it"


if __name__ == "__main__":
    aiorma.run(main)
