"""Rule 1 on the local transport: erroneous use raises a specific exception at the call, changes
nothing (engine state, local memory), and leaves the window usable."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
import pytest

import aiorma
from aiorma import (
    BXOR,
    LAND,
    LOCK_EXCLUSIVE,
    LOCK_SHARED,
    NO_OP,
    REPLACE,
    SUM,
    EpochError,
    RmaRangeError,
    RmaTypeError,
    RmaUsageError,
    WindowFreedError,
)

from .engine_net import snapshot

Check = Callable[[aiorma.Comm, aiorma.Window], Awaitable[None]]


def refused(win: aiorma.Window, exc_type: type[BaseException], call: Any, *args: Any, **kw: Any) -> None:
    """``call`` raises exactly ``exc_type``; the engine and the local memory are unchanged."""
    before = snapshot(win.engine)
    memory = win.memory.copy()
    with pytest.raises(exc_type) as caught:
        call(*args, **kw)
    assert type(caught.value) is exc_type, repr(caught.value)
    assert snapshot(win.engine) == before
    assert np.array_equal(win.memory, memory)


def run2(check: Check, dtype: type = np.int64) -> None:
    """Run ``check`` on both ranks of a fresh 8-element window, then prove the window still works."""

    async def main(comm: aiorma.Comm) -> Any:
        win = await comm.win_allocate(8, dtype)
        await check(comm, win)
        await win.fence()
        win.put(np.full(1, 10 + comm.rank, dtype), 1 - comm.rank, 7)
        await win.fence(aiorma.MODE_NOSUCCEED)
        value = win.memory[7].item()
        await win.free()
        return value

    assert aiorma.run(main, nprocs=2) == [11, 10]


def ones(n: int = 1, dtype: type = np.int64) -> np.ndarray:
    return np.ones(n, dtype)


def test_rma_outside_an_epoch() -> None:
    async def check(comm: aiorma.Comm, win: aiorma.Window) -> None:
        o = 1 - comm.rank
        refused(win, EpochError, win.put, ones(), o, 0)
        refused(win, EpochError, win.get, ones(), o, 0)
        refused(win, EpochError, win.accumulate, ones(), o, 0, SUM)
        refused(win, EpochError, win.get_accumulate, ones(), ones(), o, 0, SUM)
        refused(win, EpochError, win.fetch_and_op, ones(), ones(), o, 0, SUM)
        refused(win, EpochError, win.compare_and_swap, ones(), ones(), ones(), o, 0)

    run2(check)


def test_closing_calls_without_opening() -> None:
    async def check(comm: aiorma.Comm, win: aiorma.Window) -> None:
        o = 1 - comm.rank
        refused(win, EpochError, win.complete)
        refused(win, EpochError, win.wait)
        refused(win, EpochError, win.test)
        refused(win, EpochError, win.unlock, o)
        refused(win, EpochError, win.unlock_all)
        refused(win, EpochError, win.flush, o)
        refused(win, EpochError, win.flush_local, o)
        refused(win, EpochError, win.flush_all)
        refused(win, EpochError, win.flush_local_all)

    run2(check)


def test_second_start_before_complete() -> None:
    async def check(comm: aiorma.Comm, win: aiorma.Window) -> None:
        o = 1 - comm.rank
        win.post([o])
        win.start([o])
        refused(win, EpochError, win.start, [o])
        refused(win, EpochError, win.post, [o])
        win.put(np.full(1, 5, np.int64), o, 0)
        await win.complete()
        await win.wait()
        assert win.memory[0] == 5

    run2(check)


def test_second_lock_of_the_same_rank() -> None:
    async def check(comm: aiorma.Comm, win: aiorma.Window) -> None:
        o = 1 - comm.rank
        await win.lock(o, LOCK_SHARED)
        refused(win, EpochError, win.lock, o, LOCK_SHARED)
        refused(win, EpochError, win.lock, o, LOCK_EXCLUSIVE)
        refused(win, EpochError, win.lock_all)
        refused(win, EpochError, win.fence)
        await win.unlock(o)

    run2(check)


def test_free_with_an_open_epoch_containing_rma() -> None:
    async def check(comm: aiorma.Comm, win: aiorma.Window) -> None:
        o = 1 - comm.rank
        win.lock(o)
        win.accumulate(ones(), o, 1, SUM)
        refused(win, EpochError, win.free)
        assert win.freed is False
        await win.unlock(o)
        await comm.barrier()
        assert win.memory[1] == 1

    run2(check)


def test_out_of_range_rank_displacement_and_length() -> None:
    async def check(comm: aiorma.Comm, win: aiorma.Window) -> None:
        o = 1 - comm.rank
        await win.lock(o)
        for target in (2, -1, np.int64(7), 1.0, "1", None):
            refused(win, RmaRangeError, win.put, ones(), target, 0)
        for disp in (-1, 8, 100, 1.0, None):
            refused(win, RmaRangeError, win.put, ones(), o, disp)
            refused(win, RmaRangeError, win.fetch_and_op, ones(), ones(), o, disp)
        refused(win, RmaRangeError, win.put, ones(9), o, 0)  # too long
        refused(win, RmaRangeError, win.put, ones(2), o, 7)  # runs off the end
        refused(win, RmaRangeError, win.get, ones(9), o, 0)
        refused(win, RmaRangeError, win.accumulate, ones(3), o, 6, SUM)
        refused(win, RmaRangeError, win.lock, 2)
        refused(win, RmaRangeError, win.flush, -1)
        refused(win, RmaRangeError, win.post, [0, 2])
        refused(win, RmaRangeError, win.start, [-1])
        win.put(ones(8), o, 0)  # exactly the whole window is fine
        await win.unlock(o)

    run2(check)


def test_dtype_and_buffer_mismatches() -> None:
    async def check(comm: aiorma.Comm, win: aiorma.Window) -> None:
        o = 1 - comm.rank
        await win.lock(o)
        refused(win, RmaTypeError, win.put, np.ones(1, np.float64), o, 0)
        refused(win, RmaTypeError, win.put, np.ones(1, np.int32), o, 0)
        refused(win, RmaTypeError, win.put, [1.5], o, 0)
        refused(win, RmaTypeError, win.put, "abc", o, 0)
        refused(win, RmaTypeError, win.get, np.ones(1, np.float64), o, 0)
        refused(win, RmaTypeError, win.get, [0], o, 0)
        readonly = ones(2)
        readonly.flags.writeable = False
        refused(win, RmaTypeError, win.get, readonly, o, 0)
        refused(win, RmaTypeError, win.get, ones(4)[::2], o, 0)  # not contiguous
        refused(win, RmaTypeError, win.get_accumulate, ones(2), ones(3), o, 0, SUM)
        refused(win, RmaTypeError, win.fetch_and_op, ones(2), ones(2), o, 0, SUM)
        refused(win, RmaTypeError, win.fetch_and_op, ones(), np.ones(1, np.float64), o, 0, SUM)
        refused(win, RmaTypeError, win.compare_and_swap, ones(), ones(2), ones(), o, 0)
        win.put([3, 4], o, 0)  # a list of Python ints is cast to the window's int64
        await win.unlock(o)
        await comm.barrier()
        assert win.memory[:2].tolist() == [3, 4]

    run2(check)


def test_op_rules() -> None:
    async def check(comm: aiorma.Comm, win: aiorma.Window) -> None:
        o = 1 - comm.rank
        f = np.ones(1, np.float64)
        await win.lock(o)
        refused(win, RmaTypeError, win.accumulate, f, o, 0, BXOR)
        refused(win, RmaTypeError, win.accumulate, f, o, 0, LAND)
        refused(win, RmaTypeError, win.fetch_and_op, f, f.copy(), o, 0, BXOR)
        refused(win, RmaTypeError, win.compare_and_swap, f, f.copy(), f.copy(), o, 0)
        refused(win, RmaUsageError, win.accumulate, f, o, 0, NO_OP)
        refused(win, RmaUsageError, win.accumulate, f, o, 0, 99)
        refused(win, RmaUsageError, win.get_accumulate, f, f.copy(), o, 0, "sum")
        win.get_accumulate(f, f.copy(), o, 0, NO_OP)  # NO_OP is fine where it fetches
        win.accumulate(np.full(1, 2.5), o, 2, REPLACE)
        await win.unlock(o)
        await comm.barrier()
        assert win.memory[2] == 2.5

    run2(check, np.float64)


def test_bad_assertions_and_lock_types() -> None:
    async def check(comm: aiorma.Comm, win: aiorma.Window) -> None:
        o = 1 - comm.rank
        refused(win, RmaUsageError, win.fence, 1 << 9)
        refused(win, RmaUsageError, win.fence, -1)
        refused(win, RmaUsageError, win.fence, 1.0)
        refused(win, RmaUsageError, win.post, [o], 32)
        refused(win, RmaUsageError, win.start, [o], 1 << 40)
        refused(win, RmaUsageError, win.lock, o, LOCK_EXCLUSIVE, 64)
        refused(win, RmaUsageError, win.lock, o, 3)
        refused(win, RmaUsageError, win.lock_all, 128)
        refused(win, RmaUsageError, win.post, [o, o])
        refused(win, RmaUsageError, win.start, "x")

    run2(check)


def test_calls_after_free_raise_window_freed() -> None:
    async def main(comm: aiorma.Comm) -> Any:
        o = 1 - comm.rank
        win = await comm.win_allocate(4, np.int64)
        freeing = win.free()
        calls = [
            (win.put, (ones(), o, 0)),
            (win.get, (ones(), o, 0)),
            (win.accumulate, (ones(), o, 0, SUM)),
            (win.fence, ()),
            (win.post, ([o],)),
            (win.lock, (o,)),
            (win.lock_all, ()),
            (win.free, ()),
        ]
        for call, args in calls:  # while the free is in progress
            refused(win, WindowFreedError, call, *args)
        await freeing
        assert win.freed is True
        for call, args in [*calls, (win.test, ()), (win.unlock, (o,)), (win.flush, (o,))]:
            refused(win, WindowFreedError, call, *args)
        # other windows are unaffected
        win2 = await comm.win_allocate(4, np.int64)
        await win2.lock(o)
        win2.put(np.full(1, 40 + comm.rank, np.int64), o, 0)
        await win2.unlock(o)
        await comm.barrier()
        value = win2.memory[0].item()
        await win2.free()
        return value

    assert aiorma.run(main, nprocs=2) == [41, 40]


def test_bad_info_refused_at_window_creation() -> None:
    async def main(comm: aiorma.Comm) -> Any:
        bad: list[Any] = [
            {"MPI_WIN_BOGUS": "1"},
            {"access_after_access": True},
            {"MPI_WIN_ACCESS_AFTER_ACCESS_REORDER": "maybe"},
            {"MPI_WIN_EXPOSURE_AFTER_ACCESS_REORDER": "2"},
            42,
            ["MPI_WIN_ACCESS_AFTER_ACCESS_REORDER"],
        ]
        for info in bad:
            with pytest.raises(RmaUsageError) as caught:
                await comm.win_allocate(4, np.int64, info=info)
            assert type(caught.value) is RmaUsageError
            with pytest.raises(RmaUsageError):
                await comm.win_create(np.zeros(4, np.int64), info=info)
        win = await comm.win_allocate(4, np.int64, info={"MPI_WIN_ACCESS_AFTER_ACCESS_REORDER": "1"})
        assert win.win_id == 2  # the refused calls consumed no window id (the Comm's own is 1)
        assert win.engine.info == aiorma.Info(access_after_access_reorder=True)
        await win.free()
        return win.win_id

    assert aiorma.run(main, nprocs=2) == [2, 2]


def test_numpy_integer_ranks_accepted_by_sync_calls_as_by_rma() -> None:
    async def check(comm: aiorma.Comm, win: aiorma.Window) -> None:
        o = np.int64(1 - comm.rank)
        refused(win, EpochError, win.put, ones(), o, 0)
        await win.lock(o)
        win.put(ones(), o, 0)
        await win.flush(o)
        await win.unlock(o)

    run2(check)
