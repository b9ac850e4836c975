"""The accumulate family from every rank at once on the same elements: no update lost.

Every rank, concurrently, on rank 0's memory: fetch-and-op SUM on an int64 element ``ADDS`` times
(the old values it sees must be distinct across ranks), accumulate SUM of 1.0 into a float64
element, compare-and-swap loops raising an int32 element by
one, get_accumulate MAX into a uint16 element, and BXOR of its own bit into a uint8 element twice
(back to zero).  After a barrier rank 0 checks the totals.  Also reports which served the data
window's accumulates — MPI's calls recorded on the data window, or none: the transport's own loop
under the target's gate — for the test
to compare with what the endpoint should have chosen.

Run by tests/test_transport_mpi.py as ``mpiexec -n N python data_atomics.py``; each rank writes its
result with tests.mpi_harness.write_rank_result.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import numpy as np
from mpi4py import MPI

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from aiorma.constants import Op
from aiorma.transport.base import RmaKind, RmaOp
from aiorma.transport.mpi import MpiEndpoint
from tests.mpi_harness import write_rank_result
from tests.mpi_scripts.transport_smoke import RecordingSink, RecordingWin, poll_until

ADDS, CASES, MAXES = 1000, 200, 200
#: One window per element type: its win_id, by dtype.
WINDOWS = {"i8": 11, "f8": 12, "i4": 13, "u2": 14, "u1": 15, "c16": 16}


async def main() -> None:
    ep = MpiEndpoint(MPI.COMM_WORLD)
    sink = RecordingSink()
    ep.attach(sink)
    rank, size = ep.rank, ep.size
    windows = {}
    for name, win_id in WINDOWS.items():
        await ep.create_window(win_id, None, 4, np.dtype(name), 4)
        windows[name] = window = ep._windows[win_id]
        window.win = RecordingWin(window.win)
    await asyncio.get_running_loop().run_in_executor(None, MPI.COMM_WORLD.Barrier)

    tokens = iter(range(1, 1 << 30))

    async def apply(
        name: str, kind: RmaKind, disp: int, origin: np.ndarray | None, result: np.ndarray | None = None,
        compare: np.ndarray | None = None, op: Op = Op.REPLACE,
    ) -> None:  # fmt: skip
        """``kind`` on element ``disp`` of rank 0's window ``name``, issued and flushed: complete at
        once on the transport's own path, else by the poll."""
        win_id, token = WINDOWS[name], next(tokens)
        if not ep.issue(win_id, token, RmaOp(kind, 0, disp, origin, result, compare, op)):
            await poll_until(ep, lambda: ("op", win_id, token) in sink.events)
        if not ep.flush(win_id, 0, token):
            await poll_until(ep, lambda: ("flushed", win_id, 0, token) in sink.events)

    one_i8, old_i8 = np.ones(1, "i8"), np.zeros(1, "i8")
    added = []
    for _ in range(ADDS):
        await apply("i8", RmaKind.FETCH_AND_OP, 1, one_i8, old_i8, op=Op.SUM)
        added.append(int(old_i8[0]))
        await apply("f8", RmaKind.ACCUMULATE, 2, np.ones(1, "f8"), op=Op.SUM)
    seen = np.zeros(1, "i4")
    for _ in range(CASES):
        await apply("i4", RmaKind.GET_ACCUMULATE, 3, None, seen, op=Op.NO_OP)
        while True:
            old = seen.copy()
            await apply("i4", RmaKind.COMPARE_AND_SWAP, 3, old + 1, seen, old)
            if seen[0] == old[0]:
                break
    got = np.zeros(1, "u2")
    for i in range(MAXES):
        await apply("u2", RmaKind.GET_ACCUMULATE, 0, np.array([i * size + rank], "u2"), got, op=Op.MAX)
    bit = np.array([1 << rank], "u1")
    for _ in range(2):
        await apply("u1", RmaKind.ACCUMULATE, 1, bit, op=Op.BXOR)
    await apply("c16", RmaKind.ACCUMULATE, 0, np.ones(1, "c16"), op=Op.SUM)
    calls = {name: sorted(set(window.win.calls)) for name, window in windows.items()}
    cpu = {name: window.data_addresses is not None for name, window in windows.items()}
    for window in windows.values():
        window.win = window.win.win

    await asyncio.get_running_loop().run_in_executor(None, MPI.COMM_WORLD.Barrier)
    all_added = MPI.COMM_WORLD.gather(added, root=0)
    report = {
        "rank": rank,
        "calls": calls,
        "cpu": cpu,
        "mapped": all(view is not None for view in windows["i8"].shared),
        "maps_memory": "MPICH" in MPI.Get_library_version(),
    }
    if rank == 0:
        assert all_added is not None
        for window in windows.values():
            window.win.Sync()
        memory = {name: window.memory.tolist() for name, window in windows.items() if name != "c16"}
        report.update(
            final=[memory["i8"][1], memory["f8"][2], memory["i4"][3], memory["u2"][0], memory["u1"][1]],
            expected=[size * ADDS, float(size * ADDS), size * CASES, (MAXES - 1) * size + size - 1, 0],
            complex_sum=[float(windows["c16"].memory[0].real), float(windows["c16"].memory[0].imag)],
            adds_all=sorted(a for got in all_added for a in got) == list(range(size * ADDS)),
        )
    await asyncio.get_running_loop().run_in_executor(None, MPI.COMM_WORLD.Barrier)
    for win_id in WINDOWS.values():
        await ep.free_window(win_id)
    await ep.close()
    write_rank_result(rank, report)


if __name__ == "__main__":
    asyncio.run(main())
