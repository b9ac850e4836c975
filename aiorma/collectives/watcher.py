"""FlagWatcher: wake collectives when a counter in this rank's flag memory reaches a value.

Flags and credits are written one-sidedly by peers (accumulate MAX into our flag window), so no
packet announces them: someone has to look.  Two ways to notice a change:

* **Pokes.**  Every flag write issued in this process pokes every watcher of this process once it
  has completed locally.  On the in-process (``local``) transport, where all ranks share one
  process and RMA lands when issued, that wakes the target at once and no polling is needed.
* **Polling**, for transports whose writers live in other processes (``mpi``): while any wait is
  pending, a poll task drives the transport (``ProgressDriver.progress``) and re-checks.  After
  any progress it spins for ``spin_seconds`` (``asyncio.sleep(0)`` plus ``os.sched_yield()``, so
  that with more ranks than cores the rank that has work gets the CPU), then backs off to sleeps
  of ``_BACKOFF`` seconds so a rank waiting for a late peer costs little CPU.  :func:`spin_for`
  shortens the spin when there are more ranks than cores: spinning ranks then take CPU from the
  ranks that have work (measured at 8 ranks on 2 cores: 1 ms beats 5 ms for tree and data-heavy
  collectives and is no worse for the barrier; short blocking naps instead of yields did not
  help).

Counters only grow; every check is ``memory[index] >= value`` (DESIGN §5).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import weakref
from collections.abc import Callable

import numpy as np

_BACKOFF = 1e-3  # asyncio cannot sleep shorter than the selector's 1 ms resolution anyway
_GUARD = 0.05  # non-polling transports: a safety re-check, in case a write was not poked


def spin_for(ranks: int) -> float:
    """Spin time after progress: 5 ms, or 1 ms when ``ranks`` exceed the cores we may use."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return 5e-3 if ranks <= cores else 1e-3


_watchers: weakref.WeakSet[FlagWatcher] = weakref.WeakSet()


class FlagWatcher:
    """Futures waiting for ``memory[index] >= value`` on one rank's int64 flag memory."""

    def __init__(
        self,
        memory: np.ndarray,
        progress: Callable[[], None],
        *,
        polling: bool,
        spin_seconds: float = 5e-3,
    ) -> None:
        self._memory = memory
        self._progress = progress
        self._polling = polling
        self._spin = spin_seconds
        self._loop = asyncio.get_running_loop()
        self._waits: list[tuple[int, int, asyncio.Future[None]]] = []
        self._task: asyncio.Task[None] | None = None
        self._done: asyncio.Future[None] = self._loop.create_future()
        self._done.set_result(None)
        self._last_activity = time.perf_counter()
        _watchers.add(self)

    def reached(self, index: int, value: int) -> bool:
        return int(self._memory[index]) >= value

    def wait(self, index: int, value: int) -> asyncio.Future[None]:
        """A future finished once ``memory[index] >= value`` (already finished if it is)."""
        if self._memory[index] >= value:
            return self._done
        future: asyncio.Future[None] = self._loop.create_future()
        self._waits.append((index, value, future))
        self._last_activity = time.perf_counter()
        if self._task is None:
            self._task = self._loop.create_task(self._poll())
        return future

    def check(self) -> bool:
        """Finish every satisfied wait; True when any was."""
        if not self._waits:
            return False
        memory = self._memory
        remaining = []
        fired = False
        for entry in self._waits:
            index, value, future = entry
            if memory[index] >= value:
                if not future.done():
                    future.set_result(None)
                fired = True
            elif not future.done():
                remaining.append(entry)
        self._waits = remaining
        if fired:
            self._last_activity = time.perf_counter()
        return fired

    def fail(self, exc: BaseException) -> None:
        """Fail every pending wait (the Comm is closing or broken)."""
        waits, self._waits = self._waits, []
        for _index, _value, future in waits:
            if not future.done():
                future.set_exception(exc)

    async def _poll(self) -> None:
        try:
            while self._waits:
                if self._polling:
                    self._progress()
                self.check()
                if not self._waits:
                    break
                if not self._polling:
                    await asyncio.sleep(_GUARD)
                elif time.perf_counter() - self._last_activity < self._spin:
                    os.sched_yield()
                    await asyncio.sleep(0)
                else:
                    await asyncio.sleep(_BACKOFF)
        finally:
            self._task = None

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        _watchers.discard(self)


_poke_scheduled: set[asyncio.AbstractEventLoop] = set()


def poke_all(_: object = None) -> None:
    """A flag write of this process completed locally: re-check every watcher of this loop (soon,
    once, however many writes completed in this turn of the loop)."""
    loop = asyncio.get_running_loop()
    if loop in _poke_scheduled:
        return
    _poke_scheduled.add(loop)
    loop.call_soon(_check_all, loop)


def _check_all(loop: asyncio.AbstractEventLoop) -> None:
    _poke_scheduled.discard(loop)
    for watcher in list(_watchers):
        if watcher._loop is loop:
            watcher.check()
