"""Cancelling a collective window creation on one rank keeps the ranks in step (issue: "cancelling
a collective call desynchronizes the ranks").

Contract (``Comm._collective_window``): the creation completes in the background; the next
``win_create``/``win_allocate`` on that Comm must be the same call and returns that window.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import aiorma
from aiorma.runtime import run_ranks
from aiorma.transport.local import LocalNetwork

from .mpi_harness import run_mpi

SCRIPT = Path(__file__).parent / "mpi_scripts" / "cancelled_creation.py"


async def cancelled_then_retried(comm: aiorma.Comm) -> list[int]:
    """Rank 0 gives up on win_allocate after 1 ms, while rank 1 joins 100 ms late; rank 0 then
    makes the same call again and both use the window."""
    await comm.barrier()  # both start together: rank 1 is then surely 100 ms behind
    if comm.rank == 0:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.001):
                await comm.win_allocate(4, np.int64)
        with pytest.raises(aiorma.EpochError):  # not the same call: refused, nothing changed
            await comm.win_allocate(8, np.int64)
        win = await comm.win_allocate(4, np.int64)  # claims the window created meanwhile
    else:
        await asyncio.sleep(0.1)
        win = await comm.win_allocate(4, np.int64)
    await win.fence()
    win.put(np.full(2, comm.rank + 10, np.int64), 1 - comm.rank)
    await win.fence(aiorma.MODE_NOSUCCEED)
    seen = win.memory[:2].tolist()
    other = await comm.win_allocate(2, np.int64)  # the sequence of collective calls is in step
    await other.free()
    await win.free()
    return seen


def test_cancelled_win_allocate_local() -> None:
    async def go() -> Any:
        async with asyncio.timeout(10):  # before the contract: the retry hung on every rank
            return await run_ranks(cancelled_then_retried, (), LocalNetwork(2))

    assert asyncio.run(go()) == [[11, 11], [10, 10]]


@pytest.mark.mpi
@pytest.mark.timeout(60)
def test_cancelled_win_allocate_mpi() -> None:
    result = run_mpi(SCRIPT, 2, timeout=50)
    # Ranks share stdout, so their lines can interleave mid-line: match tokens, not lines.
    seen = sorted(re.findall(r"SEEN (\d) (\[\d+, \d+\])", result.stdout))
    assert seen == [("0", "[11, 11]"), ("1", "[10, 10]")], result.stdout
