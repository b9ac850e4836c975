"""The in-process transport under random op delays keeps MPI's default ``accumulate_ordering``
(rar, raw, war, waw): accumulate-family calls (accumulate, get_accumulate, fetch_and_op,
compare_and_swap) from one origin to one target of a window apply in call order.  Puts and gets
stay free to reorder, as MPI allows."""

from __future__ import annotations

import asyncio
import random

import numpy as np

import aiorma
from aiorma import LOCK_EXCLUSIVE, LOCK_SHARED, REPLACE, SUM
from aiorma.transport.base import RmaOp

CALLS = 60


def random_delays(seed: int, spread: float = 0.004):
    rng = random.Random(seed)

    def op_delay(_origin: int, _op: RmaOp) -> float:
        return rng.choice([0.0, rng.uniform(0.0, spread)])

    return op_delay


def test_fetch_and_op_applies_in_call_order_under_random_delays() -> None:
    async def main(comm: aiorma.Comm) -> list[int]:
        win = await comm.win_allocate(1, np.int64)
        fetched = np.full(CALLS, -1, np.int64)
        if comm.rank == 0:
            async with asyncio.timeout(10):
                await win.lock(1, LOCK_SHARED)
                one = np.ones(1, np.int64)
                requests = [win.fetch_and_op(one, fetched[i : i + 1], 1, 0, SUM) for i in range(CALLS)]
                for request in requests:
                    await request
                await win.unlock(1)
        await comm.barrier()
        final = int(win.memory[0])
        await win.free()
        return [*fetched.tolist(), final]

    for seed in range(3):
        values = aiorma.run(main, nprocs=2, op_delay=random_delays(seed))
        assert values[0][:CALLS] == list(range(CALLS)), f"seed {seed}"
        assert values[1][CALLS] == CALLS


def test_accumulate_family_keeps_call_order_per_target_and_window() -> None:
    """accumulate REPLACE, get_accumulate and compare_and_swap interleaved towards two targets: each
    target sees its own sequence in call order (the last write wins, every fetch sees its
    predecessor's write)."""

    async def main(comm: aiorma.Comm) -> tuple[list[int], int]:
        win = await comm.win_allocate(2, np.int64)
        seen: list[int] = []
        if comm.rank == 0:
            async with asyncio.timeout(10):
                await win.lock_all()
                pending = []
                for i in range(1, CALLS + 1):
                    for target in (1, 2):
                        out = np.zeros(1, np.int64)
                        if i % 3 == 0:
                            pending.append((win.get_accumulate(np.full(1, i), out, target, 0, REPLACE), out))
                        elif i % 3 == 1:
                            swap = win.compare_and_swap(np.full(1, i), np.full(1, i - 1), out, target, 0)
                            pending.append((swap, out))
                        else:
                            pending.append((win.accumulate(np.full(1, i), target, 0, REPLACE), None))
                        win.put(np.full(1, i), target, 1)  # unordered traffic in between
                for request, out in pending:
                    await request
                    if out is not None:
                        seen.append(int(out[0]))
                await win.unlock_all()
        await comm.barrier()
        final = int(win.memory[0])
        await win.free()
        return seen, final

    values = aiorma.run(main, nprocs=3, op_delay=random_delays(7))
    seen, _ = values[0]
    # every fetching call saw the value written by the call just before it (same target)
    expected = [i - 1 for i in range(1, CALLS + 1) if i % 3 != 2 for _target in (1, 2)]
    assert seen == expected
    assert [values[r][1] for r in (1, 2)] == [CALLS, CALLS]


def test_zero_delay_accumulate_waits_for_a_delayed_one() -> None:
    """An op with no delay of its own must not overtake a delayed accumulate to the same target;
    a put may (MPI does not order puts)."""

    def op_delay(_origin: int, op: RmaOp) -> float:
        return 0.05 if op.origin is not None and int(op.origin[0]) == 1 else 0.0

    async def main(comm: aiorma.Comm) -> list[int]:
        win = await comm.win_allocate(2, np.int64)
        if comm.rank == 0:
            async with asyncio.timeout(10):
                await win.lock(1, LOCK_EXCLUSIVE)
                first = win.accumulate(np.full(1, 1), 1, 0, REPLACE)  # delayed
                second = win.accumulate(np.full(1, 2), 1, 0, REPLACE)  # no delay: must come after
                win.put(np.full(1, 1), 1, 1)  # delayed put
                put = win.put(np.full(1, 2), 1, 1)  # undelayed put: applies at once
                assert put.done()
                await first
                await second
                await win.unlock(1)
        await comm.barrier()
        memory = win.memory.tolist()
        await win.free()
        return memory

    assert aiorma.run(main, nprocs=2, op_delay=op_delay)[1] == [2, 1]


def test_accumulate_ordering_does_not_cross_targets() -> None:
    """Ordering is per (origin, target, window): a slow accumulate to rank 1 does not hold back one to
    rank 2."""

    def op_delay(_origin: int, op: RmaOp) -> float:
        return 0.3 if op.target == 1 else 0.0

    async def main(comm: aiorma.Comm) -> bool:
        win = await comm.win_allocate(1, np.int64)
        fast_done_first = True
        if comm.rank == 0:
            async with asyncio.timeout(10):
                await win.lock_all()
                slow = win.accumulate(np.ones(1, np.int64), 1, 0, SUM)
                fast = win.accumulate(np.ones(1, np.int64), 2, 0, SUM)
                fast_done_first = fast.done() and not slow.done()
                await slow
                await win.unlock_all()
        await comm.barrier()
        await win.free()
        return fast_done_first

    assert aiorma.run(main, nprocs=3, op_delay=op_delay)[0]
