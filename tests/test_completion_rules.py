"""docs/completion.md's buffer rules hold as stated, on the local transport with its delay hook
holding operations back (as a slow network would): a put's origin array is not copied at the call,
so changing it before the Request completes changes what lands; a list is converted (copied) at the
call; a get's result is filled only by completion; an origin held by an epoch waiting for its lock
is read when the epoch activates; and inside ``async with mutex:`` RMA still needs an epoch."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

import aiorma
from aiorma.sync import Mutex
from aiorma.transport.base import RmaOp

DELAY = 0.05


def delay_everything(_origin: int, _op: RmaOp) -> float:
    return DELAY


async def test_put_reads_its_origin_array_until_local_completion() -> None:
    async with aiorma.connect_local(2, op_delay=delay_everything) as comms:
        wins = await asyncio.gather(*(c.win_allocate(4, np.int64) for c in comms))
        async with wins[0].lock(1, aiorma.LOCK_EXCLUSIVE):
            origin = np.array([1, 2, 3, 4], np.int64)
            put = wins[0].put(origin, 1, 0)
            assert not put.done()
            origin[:] = 9  # too early (the rule says wait for the Request): the 9s land
            await put
            values = [5, 6]
            landed = wins[0].put(values, 1, 0)  # a list: converted (copied) at the call
            values[0] = 0
            assert not landed.done()
            await landed
        assert wins[1].memory.tolist() == [5, 6, 9, 9]
        await asyncio.gather(*(w.free() for w in wins))


async def test_get_result_is_valid_only_after_completion() -> None:
    async with aiorma.connect_local(2, op_delay=delay_everything) as comms:
        wins = await asyncio.gather(*(c.win_allocate(2, np.int64) for c in comms))
        wins[1].memory[:] = [7, 8]
        result = np.zeros(2, np.int64)
        async with wins[0].lock(1, aiorma.LOCK_SHARED):
            get = wins[0].get(result, 1, 0)
            assert result.tolist() == [0, 0] and not get.done()
            assert (await get) is result
            assert result.tolist() == [7, 8]
        await asyncio.gather(*(w.free() for w in wins))


async def test_an_epoch_waiting_for_its_lock_reads_the_origin_when_it_activates() -> None:
    async with aiorma.connect_local(2) as comms:
        wins = await asyncio.gather(*(c.win_allocate(1, np.int64) for c in comms))
        holder = wins[1].lock(1, aiorma.LOCK_EXCLUSIVE)  # rank 1 holds its own window
        await holder
        waiting = wins[0].lock(1, aiorma.LOCK_EXCLUSIVE)
        origin = np.array([1], np.int64)
        put = wins[0].put(origin, 1, 0)  # recorded: the epoch waits for the lock
        origin[0] = 2
        await wins[1].unlock(1)
        await waiting
        await put
        await wins[0].unlock(1)
        assert wins[1].memory[0] == 2
        await asyncio.gather(*(w.free() for w in wins))


async def test_a_mutex_is_no_epoch() -> None:
    async with aiorma.connect_local(2) as comms:
        wins = await asyncio.gather(*(c.win_allocate(1, np.int64) for c in comms))
        mutexes = await asyncio.gather(*(Mutex.create(c) for c in comms))
        async with mutexes[0]:
            with pytest.raises(aiorma.EpochError):
                wins[0].put(np.ones(1, np.int64), 0, 0)

        async def increment(rank: int) -> None:  # the page's example
            win, mutex, value = wins[rank], mutexes[rank], np.zeros(1, np.int64)
            for _ in range(5):
                async with mutex, win.lock(0, aiorma.LOCK_SHARED):
                    await win.get(value, 0, 0)
                    value += 1
                    win.put(value, 0, 0)

        await asyncio.gather(increment(0), increment(1))
        assert wins[0].memory[0] == 10
        await asyncio.gather(*(m.free() for m in mutexes))
        await asyncio.gather(*(w.free() for w in wins))
