"""FlagWatcher: wake collectives when a counter in this rank's flag memory reaches a value.

Flags and credits are written one-sidedly by peers (accumulate MAX into our flag window), so no
packet announces them: someone has to look.  Two ways to notice a change:

* **Pokes.**  Every flag write issued in this process pokes every watcher of this process once it
  has completed locally.  On the in-process (``local``) transport, where all ranks share one
  process and RMA lands when issued, that wakes the target at once and no polling is needed (a
  guard re-check every 50 ms stands in for a missed poke).
* **The rank's waiter**, for transports whose writers live in other processes (``mpi``): the
  watcher is a wait source of :class:`aiorma.waiting.Waiter`, which re-checks it after every poll
  and spins, parks and wakes on its doorbell by the one policy of the library.

Counters only grow; every check is ``memory[index] >= value`` (rule 7, docs/semantics.md).
"""

from __future__ import annotations

import asyncio
import weakref

import numpy as np

from ..waiting import Waiter

_GUARD = 0.05  # non-polling transports: a safety re-check, in case a write was not poked

_watchers: weakref.WeakSet[FlagWatcher] = weakref.WeakSet()


class FlagWatcher:
    """Futures waiting for ``memory[index] >= value`` on one rank's int64 flag memory."""

    def __init__(self, memory: np.ndarray, waiter: Waiter) -> None:
        self._memory = memory
        self._waiter = waiter
        self._loop = asyncio.get_running_loop()
        self._waits: list[tuple[int, int, asyncio.Future[None]]] = []
        self._guard: asyncio.TimerHandle | None = None
        self._done: asyncio.Future[None] = self._loop.create_future()
        self._done.set_result(None)
        if waiter.polled:
            waiter.add_source(self)
        _watchers.add(self)

    def reached(self, index: int, value: int) -> bool:
        return int(self._memory[index]) >= value

    def waiting(self) -> bool:
        return bool(self._waits)

    def wait(self, index: int, value: int) -> asyncio.Future[None]:
        """A future finished once ``memory[index] >= value`` (already finished if it is)."""
        if self._memory[index] >= value:
            return self._done
        future: asyncio.Future[None] = self._loop.create_future()
        self._waits.append((index, value, future))
        if self._waiter.polled:
            self._waiter.wake()
        elif self._guard is None:
            self._guard = self._loop.call_later(_GUARD, self._guard_check)
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
        return fired

    def fail(self, exc: BaseException) -> list[asyncio.Future[None]]:
        """Fail every pending wait (the Comm is closing or broken); the futures it failed."""
        waits, self._waits = self._waits, []
        failed = [future for _index, _value, future in waits if not future.done()]
        for future in failed:
            future.set_exception(exc)
        return failed

    def _guard_check(self) -> None:
        self._guard = None
        self.check()
        if self._waits:
            self._guard = self._loop.call_later(_GUARD, self._guard_check)

    async def close(self) -> None:
        if self._guard is not None:
            self._guard.cancel()
            self._guard = None
        self._waiter.remove_source(self)
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
