"""Bad input refused at the call under MPI: ``mpiexec -n 2 python validation_check.py``.

Each rank prints ``OK <rank>`` when every check passed.  Before validation, the np.uint64
displacement was sent to MPI (the following unlock never completed), 2**40 was wrapped into the
int32 window, and win_allocate(10**12) got the process killed.  A failing rank aborts the job.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import aiorma
from aiorma import SUM, RmaMemoryError, RmaRangeError, RmaTypeError


def refused(exc_type: type[BaseException], call: object, *args: object) -> None:
    try:
        call(*args)  # type: ignore[operator]
    except exc_type:
        return
    raise AssertionError(f"{call}{args} was accepted")


async def main(comm: aiorma.Comm) -> None:
    o = 1 - comm.rank
    for count in (10**12, 2**70):  # same arguments on every rank: every rank raises, none enters
        refused_alloc = False
        try:
            await comm.win_allocate(count, np.float64)
        except RmaMemoryError:
            refused_alloc = True
        assert refused_alloc, count
    win = await comm.win_allocate(8, np.int32)
    result = np.zeros(1, np.int32)
    await win.lock(o)
    for disp in (np.uint64(2**64 - 1), 2**64 - 1, np.uint64(2**63), True):
        refused(RmaRangeError, win.put, np.ones(1, np.int32), o, disp)
        refused(RmaRangeError, win.accumulate, np.ones(1, np.int32), o, disp, SUM)
        refused(RmaRangeError, win.fetch_and_op, np.ones(1, np.int32), result, o, disp)
    refused(RmaRangeError, win.put, np.ones(1, np.int32), True, 0)
    for value in (2**40, np.int64(2**40), [2**40], [-(2**31) - 1]):
        refused(RmaTypeError, win.put, value, o, 0)
        refused(RmaTypeError, win.accumulate, value, o, 0, SUM)
    win.put(np.int64(2**31 - 1), o, 0)
    win.put([-(2**31), 5], o, 1)
    await win.unlock(o)
    await comm.barrier()
    assert win.memory[:3].tolist() == [2**31 - 1, -(2**31), 5], win.memory
    await win.free()
    print(f"OK {comm.rank}", flush=True)


if __name__ == "__main__":
    aiorma.run(main)
