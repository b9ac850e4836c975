"""``async with`` for what a program opens and closes: the Request of lock, lock_all, start and
post is an async context manager whose exit makes the closing call and awaits its completion —
also when the block raises or is cancelled — while the plain calls keep returning Requests."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

import aiorma


def run(main: Any, nprocs: int = 2) -> list[Any]:
    return aiorma.run(main, nprocs=nprocs)


@pytest.mark.timeout(60)
def test_lock_block_unlocks_and_completes() -> None:
    async def main(comm: aiorma.Comm) -> Any:
        win = await comm.win_allocate(4, np.int64)
        await comm.barrier()
        if comm.rank == 0:
            async with win.lock(1, aiorma.LOCK_EXCLUSIVE) as opened:
                assert opened.done()
                win.put(np.array([7, 8], np.int64), 1, 0)
            assert win.engine.open_epochs() == []  # unlocked on the way out
        await comm.barrier()
        seen = win.memory[:2].tolist()
        await win.free()
        return seen

    assert run(main)[1] == [7, 8]


@pytest.mark.timeout(60)
def test_exception_inside_still_closes_the_epoch() -> None:
    async def main(comm: aiorma.Comm) -> Any:
        win = await comm.win_allocate(4, np.int64)
        if comm.rank == 0:
            with pytest.raises(ValueError, match="inside"):
                async with win.lock(1, aiorma.LOCK_SHARED):
                    win.accumulate(np.ones(1, np.int64), 1, 0, aiorma.SUM)
                    raise ValueError("inside")
            assert win.engine.open_epochs() == []
            async with win.lock(1):  # the lock was released: a new one is granted
                pass
        await comm.barrier()
        value = int(win.memory[0])
        await win.free()
        return value

    assert run(main)[1] == 1  # the accumulate made before the exception landed


@pytest.mark.timeout(60)
def test_cancelled_block_closes_the_epoch() -> None:
    async def main(comm: aiorma.Comm) -> Any:
        win = await comm.win_allocate(4, np.int64)
        if comm.rank == 0:
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.05):
                    async with win.lock_all():
                        win.put(np.array([5], np.int64), 1, 3)
                        await asyncio.sleep(10)
            assert win.engine.open_epochs() == []
        await comm.barrier()
        value = int(win.memory[3])
        await win.free()
        return value

    assert run(main)[1] == 5


@pytest.mark.timeout(60)
def test_gats_blocks_exchange_data() -> None:
    async def main(comm: aiorma.Comm) -> Any:
        win = await comm.win_allocate(4, np.int64)
        other = 1 - comm.rank
        async with win.post([other]), win.start([other]):
            win.put(np.array([10 + comm.rank], np.int64), other, 0)
        value = int(win.memory[0])  # the exposure epoch is complete: the peer's put is in
        await win.free()
        return value

    assert run(main) == [11, 10]


@pytest.mark.timeout(60)
def test_plain_calls_still_return_requests() -> None:
    async def main(comm: aiorma.Comm) -> Any:
        win = await comm.win_allocate(4, np.int64)
        if comm.rank == 0:
            opened = win.lock(1)
            assert isinstance(opened, aiorma.Request)
            await opened
            closing = win.unlock(1)  # the nonblocking form: keep the closing Request
            await closing
        await comm.barrier()
        await win.free()

    run(main)


def test_an_epoch_request_answers_as_its_opening() -> None:
    """An EpochRequest is the opening's Request with a closing call: finished inside the call
    (every field a Request has reaches it, value or error) or pending (finished later, awaited
    or not, as a plain Request is)."""
    from aiorma.request import EpochRequest, Request, epoch_request, finish_pending, pending_request

    async def main() -> None:
        for opened in (
            Request.finished(None, None, "start"),
            Request.finished(42, None, "post"),
            Request.finished(None, RuntimeError("x"), "lock_all"),
        ):
            wrapped = epoch_request(opened, Request.finished)
            assert isinstance(wrapped, EpochRequest)
            # (A compiled Request lists its fields in __mypyc_attrs__ instead of __slots__.)
            fields = getattr(Request, "__mypyc_attrs__", None) or Request.__slots__
            for name in fields:
                assert getattr(wrapped, name) is getattr(opened, name), name

        progress = asyncio.get_running_loop().stop  # (never called: nothing tests it)
        for awaited_first in (False, True):
            pending = pending_request(progress, "lock", None, Request.finished)
            assert isinstance(pending, EpochRequest) and not pending.done()
            waiting = asyncio.ensure_future(pending) if awaited_first else None
            await asyncio.sleep(0)
            finish_pending(pending, 7, None)
            finish_pending(pending, 8, RuntimeError("late"))  # a second finish changes nothing
            assert pending.done() and pending.result() == 7 and pending.exception() is None
            assert waiting is None or await waiting == 7
            assert await pending == 7

    asyncio.run(main())
