"""Bad input refused at the call (docs/semantics.md rule 1, *Validated at the call*): rank and
displacement types, values that do not fit the window's dtype, huge allocations and a closed Comm.
Each refusal raises a typed ``RmaUsageError`` and changes nothing; the window stays usable
(``run2`` proves it after each check).
Complements tests/test_errors.py; the MPI half is tests/mpi_scripts/validation_check.py."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import aiorma
from aiorma import SUM, CommClosedError, RmaMemoryError, RmaRangeError, RmaTypeError, RmaUsageError

from .engine_net import snapshot
from .mpi_harness import run_mpi
from .test_errors import refused, run2

SCRIPT = Path(__file__).parent / "mpi_scripts" / "validation_check.py"


def one(dtype: type = np.int64, value: int = 1) -> np.ndarray:
    return np.full(1, value, dtype)


def test_bool_ranks_refused_by_every_call() -> None:
    async def check(comm: aiorma.Comm, win: aiorma.Window) -> None:
        await win.lock_all()
        for bad in (True, False, np.True_, np.False_):
            refused(win, RmaRangeError, win.put, one(), bad, 0)
            refused(win, RmaRangeError, win.get, one(), bad, 0)
            refused(win, RmaRangeError, win.accumulate, one(), bad, 0, SUM)
            refused(win, RmaRangeError, win.get_accumulate, one(), one(), bad, 0, SUM)
            refused(win, RmaRangeError, win.fetch_and_op, one(), one(), bad, 0, SUM)
            refused(win, RmaRangeError, win.compare_and_swap, one(), one(), one(), bad, 0)
            refused(win, RmaRangeError, win.flush, bad)
            refused(win, RmaRangeError, win.flush_local, bad)
        refused(win, RmaRangeError, win.flush, None)  # not a flush_all in disguise
        refused(win, RmaRangeError, win.flush_local, None)
        win.put(one(), np.uint64(1 - comm.rank), np.uint8(0))  # numpy integers are ranks
        await win.unlock_all()
        for bad in (True, np.True_):
            refused(win, RmaRangeError, win.lock, bad)
            refused(win, RmaRangeError, win.unlock, bad)
            refused(win, RmaRangeError, win.post, [bad])
            refused(win, RmaRangeError, win.start, [0, bad])

    run2(check)


def test_assertions_are_integers_not_bools() -> None:
    """An assertion is MODE_* flags as an int or a numpy integer (``np.int32(MODE_NOPRECEDE)``
    from an array of them); a bool is not one, though Python counts it as an int."""

    async def check(comm: aiorma.Comm, win: aiorma.Window) -> None:
        for bad in (True, False, np.True_, 1.0, None, "0", np.int64(1 << 20)):
            refused(win, RmaUsageError, win.fence, bad)
            refused(win, RmaUsageError, win.lock_all, bad)
            refused(win, RmaUsageError, win.lock, 1 - comm.rank, aiorma.LOCK_SHARED, bad)
            refused(win, RmaUsageError, win.post, [1 - comm.rank], bad)
            refused(win, RmaUsageError, win.start, [1 - comm.rank], bad)
        await win.fence(np.int32(aiorma.MODE_NOPRECEDE))
        await win.fence(np.int64(aiorma.MODE_NOSUCCEED))
        await win.lock(1 - comm.rank, aiorma.LOCK_SHARED, np.uint8(aiorma.MODE_NOCHECK))
        await win.unlock(1 - comm.rank)
        await asyncio.gather(win.post([1 - comm.rank], np.int16(0)), win.start([1 - comm.rank], np.int64(0)))
        await asyncio.gather(win.complete(), win.wait())

    run2(check)


def test_huge_and_odd_displacements_refused() -> None:
    async def check(comm: aiorma.Comm, win: aiorma.Window) -> None:
        o = 1 - comm.rank
        await win.lock(o)
        top = 2**64 - 1
        huge = (np.uint64(top), top, 2**63, np.int64(2**63 - 1), np.uint64(2**63), 2**100)
        for disp in (*huge, True, np.True_):
            refused(win, RmaRangeError, win.put, one(), o, disp)
            refused(win, RmaRangeError, win.get, one(), o, disp)
            refused(win, RmaRangeError, win.accumulate, one(), o, disp, SUM)
            refused(win, RmaRangeError, win.get_accumulate, one(), one(), o, disp, SUM)
            refused(win, RmaRangeError, win.fetch_and_op, one(), one(), o, disp)
            refused(win, RmaRangeError, win.compare_and_swap, one(), one(), one(), o, disp)
        # disp + count would wrap to 1 in uint64 arithmetic
        refused(win, RmaRangeError, win.put, np.ones(2, np.int64), o, np.uint64(top))
        win.put(one(), o, np.uint64(7))
        await win.unlock(o)

    run2(check)


def test_values_that_do_not_fit_an_int32_window_are_refused() -> None:
    async def check(comm: aiorma.Comm, win: aiorma.Window) -> None:
        o = 1 - comm.rank
        i32 = one(np.int32)
        await win.lock(o)
        for bad in (2**40, np.int64(2**40), [2**40], [1, 2**40], np.int64(-(2**31) - 1), 2**63, [2**31]):
            refused(win, RmaTypeError, win.put, bad, o, 0)
            refused(win, RmaTypeError, win.accumulate, bad, o, 0, SUM)
        refused(win, RmaTypeError, win.get_accumulate, [2**40], i32.copy(), o, 0, SUM)
        refused(win, RmaTypeError, win.fetch_and_op, 2**40, i32.copy(), o, 0, SUM)
        refused(win, RmaTypeError, win.compare_and_swap, 2**40, 0, i32.copy(), o, 0)
        refused(win, RmaTypeError, win.compare_and_swap, 0, 2**40, i32.copy(), o, 0)
        refused(win, RmaTypeError, win.put, 1.0, o, 0)  # floats never go into an integer window
        refused(win, RmaTypeError, win.put, np.float32(1), o, 0)
        refused(win, RmaTypeError, win.put, np.ones(1, np.int64), o, 0)  # arrays must match exactly
        win.put([2**31 - 1, -(2**31)], o, 0)  # the extremes fit
        win.put(np.int64(5), o, 2)
        win.put(np.int16(-6), o, 3)
        await win.unlock(o)
        await comm.barrier()
        assert win.memory[:4].tolist() == [2**31 - 1, -(2**31), 5, -6]

    run2(check, np.int32)


def test_values_that_do_not_fit_small_windows_are_refused() -> None:
    async def int8(comm: aiorma.Comm, win: aiorma.Window) -> None:
        o = 1 - comm.rank
        await win.lock(o)
        for bad in (128, -129, np.int16(300), [0, 200], np.uint8(255)):
            refused(win, RmaTypeError, win.put, bad, o, 0)
        win.put([127, -128], o, 0)
        win.put(np.int16(100), o, 2)
        await win.unlock(o)
        await comm.barrier()
        assert win.memory[:3].tolist() == [127, -128, 100]

    async def float32(comm: aiorma.Comm, win: aiorma.Window) -> None:
        o = 1 - comm.rank
        await win.lock(o)
        for bad in (1e300, [1.0, -1e39], np.float64(4e38), 10**39):
            refused(win, RmaTypeError, win.put, bad, o, 0)
        refused(win, RmaTypeError, win.put, 1j, o, 0)
        win.put([1.5, 3e38, float("inf")], o, 0)  # an infinity is not an overflow
        win.put(2**40, o, 3)
        await win.unlock(o)
        await comm.barrier()
        assert win.memory[:4].tolist() == [1.5, np.float32(3e38), float("inf"), 2.0**40]

    run2(int8, np.int8)
    run2(float32, np.float32)


def test_huge_allocation_refused_before_anything_collective() -> None:
    physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")

    async def main(comm: aiorma.Comm) -> Any:
        too_many = [10**12, physical // 8 + 1, np.uint64(2**64 - 1), 2**70]
        for count in too_many:
            with pytest.raises(RmaMemoryError) as caught:
                await comm.win_allocate(count, np.float64)
            assert isinstance(caught.value, MemoryError) and isinstance(caught.value, RmaUsageError)
        for count in (True, 2.0, None, -1, np.int64(-1)):
            with pytest.raises(RmaUsageError) as caught2:
                await comm.win_allocate(count)
            assert type(caught2.value) is RmaUsageError
        for dtype in ("no such dtype", 3.5):
            with pytest.raises(RmaTypeError):
                await comm.win_allocate(4, dtype)
        win = await comm.win_allocate(np.uint64(4), np.int64)
        assert win.win_id == 2  # the refused calls consumed no window id (the Comm's own is 1)
        await win.lock(1 - comm.rank)
        win.put(one(value=3 + comm.rank), 1 - comm.rank, 3)
        await win.unlock(1 - comm.rank)
        await comm.barrier()
        value = win.memory[3].item()
        await win.free()
        return value

    assert aiorma.run(main, nprocs=2) == [4, 3]


def test_calls_after_the_comm_closed_are_refused() -> None:
    kept: list[tuple[aiorma.Comm, aiorma.Window]] = []

    async def main(comm: aiorma.Comm) -> None:
        win = await comm.win_allocate(4, np.int64)
        kept.append((comm, win))  # never freed: still open when aiorma.run closes the Comm

    aiorma.run(main, nprocs=2)

    async def after() -> None:
        for comm, win in kept:
            o = 1 - comm.rank
            calls: list[tuple[Any, tuple[Any, ...]]] = [
                (win.put, (one(), o, 0)),
                (win.get, (one(), o, 0)),
                (win.accumulate, (one(), o, 0, SUM)),
                (win.get_accumulate, (one(), one(), o, 0)),
                (win.fetch_and_op, (one(), one(), o, 0)),
                (win.compare_and_swap, (one(), one(), one(), o, 0)),
                (win.fence, ()),
                (win.post, ([o],)),
                (win.start, ([o],)),
                (win.complete, ()),
                (win.wait, ()),
                (win.test, ()),
                (win.lock, (o,)),
                (win.unlock, (o,)),
                (win.lock_all, ()),
                (win.unlock_all, ()),
                (win.flush, (o,)),
                (win.flush_local, (o,)),
                (win.flush_all, ()),
                (win.flush_local_all, ()),
                (win.free, ()),
            ]
            for call, args in calls:
                refused(win, CommClosedError, call, *args)
            before = snapshot(win.engine)
            with pytest.raises(CommClosedError):
                await comm.win_allocate(4, np.int64)
            with pytest.raises(CommClosedError):
                await comm.win_create(np.zeros(4, np.int64))
            assert snapshot(win.engine) == before

    asyncio.run(asyncio.wait_for(after(), 10))


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_validation_under_mpi() -> None:
    result = run_mpi(SCRIPT, 2, timeout=100)
    # the ranks' lines may interleave on the shared stdout
    assert sorted(re.findall(r"OK (\d+)", result.stdout)) == ["0", "1"], result.stdout + result.stderr
