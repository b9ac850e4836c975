"""Control-word atomics from every rank at once on the same words: no update lost.

Every rank, concurrently, adds 1 to rank 0's word 0 ``ADDS`` times (fetch-and-add), raises word 1
by one ``CASES`` times with compare-and-swap loops, swaps its own marks into word 2, and raises
word 3 with max fetches; after a barrier rank 0 checks the sums are exact, and every rank checks
that the old values it fetched from word 0 are distinct (each add saw a different count) and that
the swaps hand on every mark exactly once.  Then rank 0 looks at its control words without a poll
(``look_control``) after rank 1 added to one.  Also reports which kind of atomic served the words (MPI's
calls recorded on the control window, or none: the CPU's own), for the test to compare with what the
endpoint should have chosen.

Run by tests/test_transport_mpi.py as ``mpiexec -n N python control_atomics.py``; each rank writes
its result with tests.mpi_harness.write_rank_result.
"""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from pathlib import Path

import numpy as np
from mpi4py import MPI

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from aiorma.engine.control import AtomicOp
from aiorma.transport.mpi import MpiEndpoint
from tests.mpi_harness import write_rank_result
from tests.mpi_scripts.transport_smoke import RecordingSink, RecordingWin, poll_until

WIN = 7
ADDS, CASES, SWAPS, MAXES = 2000, 300, 300, 300


async def fetch(ep: MpiEndpoint, sink: RecordingSink, token: int, index: int, op: AtomicOp, value: int,
                compare: int = 0) -> int:  # fmt: skip
    old = ep.control_fetch(WIN, token, 0, index, op, value, compare)
    if old is None:  # another node: answered by the poll
        await poll_until(ep, lambda: token in sink.fetches)
        old = sink.fetches.pop(token)
    return old


async def main() -> None:
    ep = MpiEndpoint(MPI.COMM_WORLD)
    sink = RecordingSink()
    ep.attach(sink)
    rank, size = ep.rank, ep.size
    await ep.create_window(WIN, None, 1, np.dtype("i8"), 8)
    window = ep._windows[WIN]
    window.ctrl = RecordingWin(window.ctrl)
    await asyncio.get_running_loop().run_in_executor(None, MPI.COMM_WORLD.Barrier)

    tokens = iter(range(1 << 30))
    added = [await fetch(ep, sink, next(tokens), 0, AtomicOp.SUM, 1) for _ in range(ADDS)]
    for _ in range(CASES):
        old = await fetch(ep, sink, next(tokens), 1, AtomicOp.NO_OP, 0)
        while (seen := await fetch(ep, sink, next(tokens), 1, AtomicOp.CAS, old + 1, old)) != old:
            old = seen
    # Marks rank * SWAPS + 1 ... (rank + 1) * SWAPS: each swap takes one mark out of the word.
    taken = [
        await fetch(ep, sink, next(tokens), 2, AtomicOp.REPLACE, rank * SWAPS + i + 1) for i in range(SWAPS)
    ]
    for i in range(MAXES):
        await fetch(ep, sink, next(tokens), 3, AtomicOp.MAX, i * size + rank)
    calls = sorted(set(window.ctrl.calls))
    window.ctrl = window.ctrl.win

    await asyncio.get_running_loop().run_in_executor(None, MPI.COMM_WORLD.Barrier)
    final = None
    if rank == 0:  # its own words, after every rank's last atomic (the barrier)
        window.ctrl.Sync()
        final = window.control[:4].tolist()
    last = await fetch(ep, sink, next(tokens), 2, AtomicOp.NO_OP, 0)
    all_taken = MPI.COMM_WORLD.gather(taken, root=0)
    all_added = MPI.COMM_WORLD.gather(added, root=0)
    report = {
        "rank": rank,
        "calls": calls,
        "cpu_atomics": window.control_addresses is not None,
        "mapped": all(words is not None for words in window.shared_control),
        "maps_memory": "MPICH" in MPI.Get_library_version(),
        "adds_distinct": len(set(added)) == len(added),
    }
    if rank == 0:
        assert final is not None and all_taken is not None and all_added is not None
        marks = sorted([m for got in all_taken for m in got if m] + [last])
        report["marks_twice"] = sorted(m for m, n in Counter(marks).items() if n > 1)[:10]
        report["marks_missing"] = sorted(set(range(1, size * SWAPS + 1)) - set(marks))[:10]
        report.update(
            final=final,
            expected=[size * ADDS, size * CASES, None, (MAXES - 1) * size + size - 1],
            marks_once=marks == list(range(1, size * SWAPS + 1)),
            adds_all=sorted(a for got in all_added for a in got) == list(range(size * ADDS)),
        )
    # A look at one window's control words without a poll (look_control): after every rank's
    # atomics above (the barrier), rank 1 adds to rank 0's word 4; rank 0 looks once, and again.
    ep.poll()  # what the atomics above changed, seen: only rank 1's add is new to the look
    sink.changed.clear()
    await asyncio.get_running_loop().run_in_executor(None, MPI.COMM_WORLD.Barrier)
    if rank == 1:
        ep.control_write(WIN, 0, 4, AtomicOp.SUM, 1)
        await poll_until(ep, lambda: not ep._writes)  # another node: complete when rank 0 served it
    await asyncio.get_running_loop().run_in_executor(None, MPI.COMM_WORLD.Barrier)
    if rank == 0:
        looked, reported, again = ep.look_control(WIN), list(sink.changed), ep.look_control(WIN)
        if not looked:  # nothing mapped: a poll finds it
            await poll_until(ep, lambda: WIN in sink.changed)
        word = int(window.control[4])
        report["look"] = {"looked": looked, "reported": reported, "again": again, "word": word}
    await asyncio.get_running_loop().run_in_executor(None, MPI.COMM_WORLD.Barrier)
    await ep.free_window(WIN)
    await ep.close()
    write_rank_result(rank, report)


if __name__ == "__main__":
    asyncio.run(main())
