"""Completion guarantees held against a slow network: the local transport's delay hooks hold RMA
operations back (as a congested network would), so an ordering bug is caught every run instead of
by an MPI race now and then.  Each test here failed on a bug planted in a copy of the library:

* a closing call or flush whose RMA is marked complete without waiting for it — the target must
  hold the data once ``unlock`` / ``unlock_all`` / ``complete`` / ``fence`` / ``flush`` completes;
* a notified put whose signal is written before its data is complete, whichever window carries
  the signal, and a ``signal`` written before the RMA issued ahead of it;
* a ``wait_until`` comparison that confuses strict and non-strict;
* an exclusive lock granted while another rank holds the lock shared (or the reverse).

A trio cancellation that cancelled the shared Request instead of abandoning only the wait is
caught by tests/test_cancellation_audit.py (each row awaits the same Request again after the
cancel scope, under trio too), and an epoch activated against rule 13a with overlapping access
groups by tests/test_engine.py::test_rule13a_lock_towards_a_target_of_an_active_start_stays_deferred.

Every test runs with the inline path on and off (``AIORMA_INLINE``), since either may serve a call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import numpy as np
import pytest

import aiorma
from aiorma import LOCK_EXCLUSIVE, LOCK_SHARED
from aiorma.transport.base import RmaOp

DELAY = 0.03
pytestmark = [pytest.mark.timeout(60), pytest.mark.parametrize("inline", ["on", "off"])]


@pytest.fixture(autouse=True)
def _inline(inline: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if inline == "off":
        monkeypatch.setenv("AIORMA_INLINE", "0")


def delay_data(_origin: int, op: RmaOp) -> float:
    """Hold back every operation on more than one element: the data, not the one-word signals."""
    return DELAY if op.count > 1 else 0.0


def delay_all(_origin: int, _op: RmaOp) -> float:
    return DELAY


DATA = np.arange(1, 9, dtype=np.int64)

Close = Callable[[aiorma.Window, aiorma.Window], Awaitable[None]]


async def _lock_unlock(origin: aiorma.Window, _target: aiorma.Window) -> None:
    origin.lock(1, LOCK_EXCLUSIVE)
    origin.put(DATA, 1, 0)
    await origin.unlock(1)


async def _lock_all_unlock_all(origin: aiorma.Window, _target: aiorma.Window) -> None:
    origin.lock_all()
    origin.put(DATA, 1, 0)
    await origin.unlock_all()


async def _lock_flush(origin: aiorma.Window, _target: aiorma.Window) -> None:
    origin.lock(1, LOCK_SHARED)
    origin.put(DATA, 1, 0)
    await origin.flush(1)
    # (checked before the unlock: the flush alone completed the put at the target)


async def _lock_all_flush_all(origin: aiorma.Window, _target: aiorma.Window) -> None:
    origin.lock_all()
    origin.put(DATA, 1, 0)
    await origin.flush_all()


async def _start_complete(origin: aiorma.Window, target: aiorma.Window) -> None:
    target.post([0])
    origin.start([1])
    origin.put(DATA, 1, 0)
    await origin.complete()


async def _fence(origin: aiorma.Window, target: aiorma.Window) -> None:
    await asyncio.gather(origin.fence(), target.fence())
    origin.put(DATA, 1, 0)
    target.fence(aiorma.MODE_NOSUCCEED)
    await origin.fence(aiorma.MODE_NOSUCCEED)


CLOSES: dict[str, Close] = {
    "unlock": _lock_unlock,
    "unlock_all": _lock_all_unlock_all,
    "flush": _lock_flush,
    "flush_all": _lock_all_flush_all,
    "complete": _start_complete,
    "fence": _fence,
}


@pytest.mark.parametrize("close", list(CLOSES))
async def test_closing_call_completes_only_with_the_data_at_the_target(close: str, inline: str) -> None:
    """The origin's closing call (or flush) completes only once its delayed put is in the
    target's memory."""
    async with aiorma.connect_local(2, op_delay=delay_all) as comms:
        wins = await asyncio.gather(*(c.win_allocate(8, np.int64) for c in comms))
        await CLOSES[close](wins[0], wins[1])
        assert wins[1].memory.tolist() == DATA.tolist(), f"{close} completed before the data landed"
        await _close_everything(wins)


async def _close_everything(wins: list[aiorma.Window]) -> None:
    for win in wins:
        for epoch in win.engine.open_epochs():
            kind = epoch.kind.value
            if kind == "lock":
                await win.unlock(1)
            elif kind == "lock_all":
                await win.unlock_all()
            elif kind == "post":
                await win.wait()
    await asyncio.gather(*(w.free() for w in wins))


@pytest.mark.parametrize("same_window", [True, False], ids=["signal_in_data_window", "signal_window"])
async def test_notified_put_signals_only_after_its_data(same_window: bool, inline: str) -> None:
    """put_signal: the signal word is written only once the (delayed) block is complete at the
    target, whether the signal lives in the data window or in another one."""
    async with aiorma.connect_local(2, op_delay=delay_data) as comms:
        data = await asyncio.gather(*(c.win_allocate(16, np.int64) for c in comms))
        words = data if same_window else await asyncio.gather(*(c.win_allocate(2, np.int64) for c in comms))
        index = 15 if same_window else 0
        for win in {id(w): w for w in [*data, *words]}.values():
            await win.lock_all(aiorma.MODE_NOCHECK)
        arrived = words[1].wait_until(index, ">=", 1)
        data[0].put_signal(DATA, 1, 0, words[0], index, 1)
        await arrived
        assert data[1].memory[:8].tolist() == DATA.tolist(), "the signal overtook its data"
        for win in {id(w): w for w in [*data, *words]}.values():
            await win.unlock_all()
        await asyncio.gather(*(w.free() for w in {id(w): w for w in [*data, *words]}.values()))


async def test_signal_is_written_after_the_rma_issued_before_it(inline: str) -> None:
    """``signal`` orders after every RMA call issued before it towards that rank in its window:
    once the signal word is seen, the (delayed) put made just before it is in memory."""
    async with aiorma.connect_local(2, op_delay=delay_data) as comms:
        data = await asyncio.gather(*(c.win_allocate(9, np.int64) for c in comms))
        for win in data:
            await win.lock_all(aiorma.MODE_NOCHECK)
        arrived = data[1].wait_until(8, "==", 7)
        data[0].put(DATA, 1, 0)
        data[0].signal(1, 8, 7)
        await arrived
        assert data[1].memory[:8].tolist() == DATA.tolist(), "the signal overtook the put"
        for win in data:
            await win.unlock_all()
        await asyncio.gather(*(w.free() for w in data))


CASES = [  # (compare, met while the word equals VALUE, met once it is VALUE + 1)
    (">", False, True),
    (">=", True, True),
    ("<", False, False),
    ("<=", True, False),
    ("==", True, False),
    ("!=", False, True),
]
VALUE = 5


@pytest.mark.parametrize(("compare", "at_value", "above"), CASES)
async def test_wait_until_strict_and_non_strict(
    compare: str, at_value: bool, above: bool, inline: str
) -> None:
    """wait_until(i, compare, VALUE) with the word at VALUE, then raised to VALUE + 1 by a peer."""
    async with aiorma.connect_local(2) as comms:
        words = await asyncio.gather(*(c.win_allocate(1, np.int64) for c in comms))
        for win in words:
            await win.lock_all(aiorma.MODE_NOCHECK)
        await words[0].signal(1, 0, VALUE)
        waiting = words[1].wait_until(0, compare, VALUE)
        await asyncio.sleep(0.01)
        assert waiting.done() is at_value, f"{compare} {VALUE} with the word at {VALUE}"
        await words[0].signal(1, 0, VALUE + 1)
        await asyncio.sleep(0.01)
        assert waiting.done() is (at_value or above), f"{compare} {VALUE} with the word at {VALUE + 1}"
        for win in words:
            await win.unlock_all()
        await asyncio.gather(*(w.free() for w in words))


@pytest.mark.parametrize(
    ("held", "asked"),
    [(LOCK_SHARED, LOCK_EXCLUSIVE), (LOCK_EXCLUSIVE, LOCK_SHARED)],
    ids=["exclusive_vs_shared_holders", "shared_vs_exclusive_holder"],
)
async def test_lock_is_not_granted_against_a_conflicting_holder(
    held: object, asked: object, inline: str
) -> None:
    """Ranks 1 and 2 hold rank 0's lock as ``held`` (one of them, for EXCLUSIVE); rank 3 asks
    for ``asked``: not granted until every holder has unlocked, then granted."""
    async with aiorma.connect_local(4) as comms:
        wins = await asyncio.gather(*(c.win_allocate(1, np.int64) for c in comms))
        holders = [1, 2] if held is LOCK_SHARED else [1]
        for rank in holders:
            await wins[rank].lock(0, held)  # type: ignore[arg-type]
        asked_for = wins[3].lock(0, asked)  # type: ignore[arg-type]
        for rank in holders:
            await asyncio.sleep(0.02)
            assert not asked_for.done(), f"{asked} granted while rank {rank} holds the lock {held}"
            await wins[rank].unlock(0)
        await asyncio.wait_for(asyncio.shield(asyncio.ensure_future(_wait(asked_for))), 5)
        await wins[3].unlock(0)
        await asyncio.gather(*(w.free() for w in wins))


async def _wait(request: aiorma.Request) -> None:
    await request
