"""MemoryWatcher: futures that finish when a word of this rank's own window memory meets a condition.

Peers write a rank's memory one-sidedly (signals of notified puts, the collectives' flags), so no
packet announces a change: someone has to look.  Two ways to notice one:

* **Pokes.**  On the in-process (``local``) transport every rank lives in this process and RMA
  lands when issued, so the transport pokes every watcher of the loop (:func:`poke_all`) after it
  applied a write; a guard re-check every 50 ms stands in for a missed poke.
* **The rank's waiter**, for transports whose writers live in other processes (``mpi``): the
  watcher is a wait source of :class:`aiorma._core.waiter.Waiter`, which re-checks it after every
  poll of its task and of an await that polls inline.

A watcher only turns a predicate into a future, at the call, and sees that something re-checks
it; how an await of that future waits (inline, suspended, the fairness checkpoint) is decided
where every await's is, :func:`aiorma._core.await_policy.wait` (``Window.wait_until`` returns a
:class:`~aiorma.Request` of it), or, inside a collective's job, by the job's runner.

A wait is a comparison of one element with a value, as OpenSHMEM's ``wait_until``: ``==``,
``!=``, ``<``, ``<=``, ``>``, ``>=``.  Words that only grow (the collectives' counters) are
waited on with ``>=``, which a late look can never miss.
"""

from __future__ import annotations

import asyncio
import operator
from collections.abc import Callable
from typing import Any, Final, Protocol

import numpy as np

from .context import Context, WatchEntry, context

_GUARD: Final = 0.05  # non-polling transports: a safety re-check, in case a write was not poked

#: The comparisons :meth:`MemoryWatcher.wait` accepts, by their Python spelling.
COMPARISONS: Final[dict[str, Callable[[Any, Any], Any]]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


#: A pending wait: where it looks, its test, the value tested against, the future it finishes.
_Wait = tuple[int | slice, Callable[[Any, Any], Any], Any, asyncio.Future[None]]


def _read(memory: np.ndarray, where: int | slice) -> Any:
    """``memory[where]``; one element as a Python scalar (``item``: one load, and a comparison
    of Python numbers costs a fraction of one of numpy scalars)."""
    if type(where) is int:
        return memory.item(where)
    return memory[where]


class Waiter(Protocol):
    """What a watcher needs of the rank's :class:`aiorma._core.waiter.Waiter` (this module sits below
    it: the local transport pokes watchers)."""

    polled: bool

    def add_source(self, source: Any) -> None: ...

    def remove_source(self, source: Any) -> None: ...

    def wake(self) -> None: ...


class MemoryWatcher:
    """Futures waiting for ``memory[index] <compare> value`` on one rank's own window memory."""

    def __init__(self, memory: np.ndarray, waiter: Waiter) -> None:
        self.memory = memory
        self._waiter = waiter
        self._loop = asyncio.get_running_loop()
        self._waits: list[_Wait] = []
        self._guard: asyncio.TimerHandle | None = None
        self._done: asyncio.Future[None] = self._loop.create_future()
        self._done.set_result(None)
        self._failure: BaseException | None = None  # once failed, every later wait fails too
        # A source of the rank's waiter on every transport: the waiter re-checks it after each
        # poll where there is one, and fails it when the rank fails (a peer left: the write it
        # waits for may never come).
        waiter.add_source(self)
        self._context: Context = context()  # the loop's thread's, where poke_all finds us
        self._entry = WatchEntry(self.check, self._loop)
        self._context.watchers.add(self._entry)

    def wait(self, index: int, value: Any, compare: str = ">=") -> asyncio.Future[None]:
        """A future finished once ``memory[index] <compare> value`` (already finished if so)."""
        return self.wait_for(index, COMPARISONS[compare], value)

    def wait_for(
        self, where: int | slice, test: Callable[[Any, Any], Any], value: Any
    ) -> asyncio.Future[None]:
        """A future finished once ``test(memory[where], value)`` is true (already finished if
        so): :meth:`wait`'s comparison of one element, or a test of several words."""
        if test(_read(self.memory, where), value):
            return self._done
        future: asyncio.Future[None] = self._loop.create_future()
        if self._failure is not None:
            # A collective step that registers its next wait after the failure (it was resumed
            # by something else that finished) must not wait for a peer that is gone.
            future.set_exception(self._failure)
            return future
        self._waits.append((where, test, value, future))
        if self._waiter.polled:
            self._waiter.wake()
        elif self._guard is None:
            self._guard = self._loop.call_later(_GUARD, self._guard_check)
        return future

    def waiting(self) -> bool:
        return bool(self._waits)

    def check(self) -> bool:
        """Finish every satisfied wait (and forget abandoned ones); True when any was."""
        waits = self._waits
        if not waits:
            return False
        memory = self.memory
        # Most looks find nothing: the list is rebuilt only when a wait leaves it.
        remaining: list[_Wait] | None = None
        fired = False
        for i in range(len(waits)):
            entry = waits[i]
            where, test, value, future = entry
            if not future.done():
                if not test(_read(memory, where), value):
                    if remaining is not None:
                        remaining.append(entry)
                    continue
                future.set_result(None)
                fired = True
            if remaining is None:
                remaining = waits[:i]
        if remaining is not None:
            self._waits = remaining
        return fired

    def fail(self, exc: BaseException) -> list[asyncio.Future[None]]:
        """Fail every pending wait, and every later one (the Comm is closing or broken, the
        window freed); the futures it failed."""
        if self._failure is None:
            self._failure = exc
        waits, self._waits = self._waits, []
        failed = [future for *_entry, future in waits if not future.done()]
        for future in failed:
            future.set_exception(exc)
        return failed

    def _guard_check(self) -> None:
        self._guard = None
        self.check()
        if self._waits:
            self._guard = self._loop.call_later(_GUARD, self._guard_check)

    def close(self) -> None:
        if self._guard is not None:
            self._guard.cancel()
            self._guard = None
        self._waiter.remove_source(self)
        self._context.watchers.discard(self._entry)


def poke_all() -> None:
    """A write into some rank's memory of this process completed: re-check every watcher of
    this loop (soon, once, however many writes completed in this turn of the loop)."""
    thread = context()
    if not thread.watchers:
        return
    loop = asyncio.get_running_loop()
    if loop in thread.poke_scheduled:
        return
    thread.poke_scheduled.add(loop)
    loop.call_soon(_check_all, loop, thread)


def _check_all(loop: asyncio.AbstractEventLoop, thread: Context) -> None:
    thread.poke_scheduled.discard(loop)
    for entry in list(thread.watchers):
        if entry.loop is loop:
            entry.check()
