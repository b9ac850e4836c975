"""Run by tests/test_collective_cancellation.py under mpiexec: a cancelled win_allocate retried."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import aiorma
from tests.test_collective_cancellation import cancelled_then_retried


async def main(comm: aiorma.Comm) -> None:
    seen = await cancelled_then_retried(comm)
    print(f"SEEN {comm.rank} {seen}", flush=True)


if __name__ == "__main__":
    aiorma.run(main)
