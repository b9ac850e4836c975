"""The fairness probe shared by tests/test_fairness.py and its mpiexec script: a 5 ms timer beside a
task that awaits aiorma calls in a loop."""

from __future__ import annotations

import asyncio
import time

import numpy as np

import aiorma

PERIOD = 0.005


async def reader_loop_beside_a_timer(win: aiorma.Window, me: int, duration: float) -> tuple[int, float, int]:
    """Ticks of a 5 ms timer while this task loops on awaited shared-lock epochs on its own window
    for ``duration`` seconds; the ticks expected; the epochs.  The timer sleeps 5 ms after each
    tick, so every moment it waits for the loop beyond its due time is lost: ticks/expected is
    5 ms over 5 ms plus its mean lateness."""
    out = np.zeros(1, np.int64)
    stop = asyncio.Event()
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while not stop.is_set():
            await asyncio.sleep(PERIOD)
            ticks += 1

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    start = time.perf_counter()
    epochs = 0
    while time.perf_counter() - start < duration:
        win.lock(me, aiorma.LOCK_SHARED)
        win.get(out, me, 0)
        await win.unlock(me)
        epochs += 1
    elapsed = time.perf_counter() - start
    stop.set()
    await task
    return ticks, elapsed / PERIOD, epochs
