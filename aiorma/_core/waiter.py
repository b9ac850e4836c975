"""The rank's background poller: when its task spins, when it parks, and on what.

Everything in aiorma that waits for a peer — an epoch's grant or "done", a lock hand-off, a
collective's flag — waits for a word of this rank's own memory to change.  Nothing announces the
change (the peer wrote it one-sidedly), so on a polled transport (MPI) someone has to look: an
await itself, for a bounded time, and after that (and while nobody awaits) the :class:`Waiter`'s
task.  How an await waits — inline, then polling between turns of the loop, then suspended until
the waiter's polling finishes its future — is decided by :func:`aiorma._core.await_policy.wait`,
not here; the waiter decides only how its own task polls, and leaves the polling to an await that
polls between turns (its polls are the same).  It runs while the rank has windows, and each turn
it polls the endpoint (which drives MPI progress, reports completions and finds changed control
regions) and re-checks every registered flag watcher.  Between turns:

* **Spin** while there was activity within the spin window: yield to the event loop
  (``asyncio.sleep(0)``), so other tasks run, and poll again.  When this node has more ranks
  than cores, also ``os.sched_yield()`` — a spinning rank must hand its core to a rank that has
  work.  The window is 2 ms either way (``_SPIN``).
* **Leave the polling** to an await that polls between turns of the loop
  (:func:`aiorma._core.await_policy.wait`), until its deadline (``await_polling_until``): only
  yield meanwhile — its polls are the same, and it resumes from its own.
* **Keep spinning** up to 50 ms while own requests are in flight
  (:class:`~aiorma.transport.base.PollNeed` ``REQUESTS``: towards a peer on another node they
  complete only while we drive MPI progress; we rang the peer when we started them).
* **Block in the selector** while a worker thread is inside MPI (``THREADS``): a spinning loop
  thread would keep the interpreter from it for up to Python's 5 ms switch interval; the
  thread's completion wakes the loop at once.
* **Park** when the spin window has passed: announce it (peers skip ringing a rank that polls),
  look once more, then wait for the endpoint's doorbell (a peer that wrote our control region, or
  needs our MPI progress, rings it) with ``loop.add_reader``, costing no CPU.  A parked rank
  still polls after a guard interval: 1 ms while some progress needs our polling (requests in
  flight, or windows on user memory that MPICH serves by active messages), else 50 ms in case a
  ring was lost (a datagram between hosts may be).

Rings are hints; correctness never depends on one arriving, only speed.  The in-process
transport reports every change by an event-loop callback and needs no task at all.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from typing import Final, Protocol

from ..transport.base import Endpoint, PollNeed
from .context import context
from .settings import cores_available

# Read at every turn, so module constants (an enum member's read goes through the enum
# metaclass's ``__getattr__`` hook on Python 3.11).
_NEED_THREADS: Final = PollNeed.THREADS
_NEED_REQUESTS: Final = PollNeed.REQUESTS
_NEED_IDLE: Final = PollNeed.IDLE

# The spin window: how long after the last activity a waiting rank keeps polling before it parks
# (a ping-pong stays on the fast path).  The same with more ranks than cores, where each spin
# also yields the core (sched_yield): a shorter window there made every step of a collective
# whose ranks share cores wait for a doorbell wake-up (docs/benchmarks.md, *Off-node at the
# network's speed ...*, collectives, says by how much).
_SPIN: Final = 2e-3
# Own requests in flight (towards a peer we rang) complete only while we drive MPI progress: keep
# spinning this long for them before falling back to guard polls.
_SPIN_REQUESTS: Final = 0.05
_GUARD_BUSY: Final = 1e-3
_GUARD_IDLE: Final = 0.05


class WaitSource(Protocol):
    """Something with waits of its own on this rank's memory (a collectives flag watcher)."""

    def check(self) -> bool:
        """Finish every satisfied wait; True when any was."""

    def waiting(self) -> bool:
        """True while some wait is pending."""

    def fail(self, exc: BaseException) -> object:
        """Fail every pending wait."""


class Waiter:
    """Runs one rank's polling on a polled endpoint; see the module docstring."""

    def __init__(
        self,
        endpoint: Endpoint,
        poll: Callable[[], bool],
        on_failure: Callable[[BaseException], None],
        ranks_on_node: int = 1,
    ) -> None:
        self._endpoint = endpoint
        self._poll = poll  # one turn: poll the endpoint and act on what it found
        self._on_failure = on_failure  # an exception escaped a turn: fail the rank's windows
        self.polled = endpoint.polled
        self.oversubscribed = ranks_on_node > cores_available()
        # A tuple, replaced on change: a check iterates it while a source may add or remove one.
        self._sources: tuple[WaitSource, ...] = ()
        self._task: asyncio.Task[None] | None = None
        self._parked: asyncio.Future[bool] | None = None
        self._last_activity = time.perf_counter()
        self._running = False
        #: Until this time (``time.perf_counter``) an await of this rank polls between turns of
        #: the loop (aiorma._core.await_policy): the task leaves the polling to it meanwhile.
        self.await_polling_until = 0.0

    # -------------------------------------------------------------------- interface

    def add_source(self, source: WaitSource) -> None:
        self._sources = (*self._sources, source)

    def remove_source(self, source: WaitSource) -> None:
        self._sources = tuple(s for s in self._sources if s is not source)

    def start(self) -> None:
        """Run the polling task (polled endpoints only); idempotent."""
        if not self.polled or self._task is not None:
            return
        self._running = True
        self._last_activity = time.perf_counter()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="aiorma waiter")

    def wake(self) -> None:
        """Something happened that the task should look at now (a call made progress, a worker
        thread finished an operation): end a park and restart the spin window."""
        self._last_activity = time.perf_counter()
        parked = self._parked
        if parked is not None and not parked.done():
            parked.set_result(True)

    def fail_sources(self, exc: BaseException) -> None:
        for source in self._sources:
            source.fail(exc)

    def check_sources(self) -> bool:
        """Look at every wait source once (each finishes what its check found); True when any
        did.  Cheap when there is none: the inline wait calls it at every turn."""
        if not self._sources:
            return False
        fired = False
        for source in self._sources:
            fired |= source.check()
        return fired

    async def stop(self) -> None:
        self._running = False
        task, self._task = self._task, None
        if task is not None:
            self._endpoint.parking(False)
            self.wake()
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise

    # -------------------------------------------------------------------- the task

    async def _run(self) -> None:
        try:
            await self._turns()
        except Exception as exc:  # never die silently: every pending Request learns why
            self._running = False
            self._on_failure(exc)

    async def _turns(self) -> None:
        endpoint = self._endpoint
        spin, shared_core = _SPIN, self.oversubscribed
        # The loop's thread's Context: a program awaiting aiorma Requests (its last_await) is
        # activity even when every call finished inside itself (such calls wake no one).
        thread = context()
        while self._running:
            if time.perf_counter() < self.await_polling_until:
                await asyncio.sleep(0)
                continue
            active = self._poll()
            active |= self.check_sources()
            now = time.perf_counter()
            if active:
                self._last_activity = now
            need = endpoint.poll_need()
            if need is _NEED_THREADS:
                # A worker thread is inside MPI.  Spinning here would keep the interpreter from
                # it (Python hands the GIL to a waiting thread only every 5 ms): block in the
                # selector instead; its completion wakes the loop and us.
                if await self._park(None, _GUARD_BUSY):
                    self._last_activity = time.perf_counter()
                continue
            idle = now - max(self._last_activity, thread.last_await)
            if idle < spin or (need is _NEED_REQUESTS and idle < _SPIN_REQUESTS):
                if shared_core:
                    os.sched_yield()
                await asyncio.sleep(0)
                continue
            endpoint.parking(True)
            # One more look after announcing the park: a peer that wrote our memory before it saw
            # the announcement did not ring (see MpiEndpoint.parking).
            if self._poll() | self.check_sources():
                endpoint.parking(False)
                self._last_activity = time.perf_counter()
                continue
            guard = _GUARD_IDLE if need is _NEED_IDLE else _GUARD_BUSY
            woke = await self._park(endpoint.doorbell(), guard)
            endpoint.parking(False)
            if woke:
                self._last_activity = time.perf_counter()

    async def _park(self, fileno: int | None, timeout: float) -> bool:
        """Wait until ``fileno`` is readable or :meth:`wake` is called (True), or ``timeout``
        passes (False)."""
        loop = asyncio.get_running_loop()
        self._parked = ready = loop.create_future()
        timer = loop.call_later(timeout, _settle, ready, False)
        if fileno is not None:
            loop.add_reader(fileno, _settle, ready, True)
        try:
            return await ready
        finally:
            timer.cancel()
            if fileno is not None:
                loop.remove_reader(fileno)
            self._parked = None


def _settle(future: asyncio.Future[bool], value: bool) -> None:
    if not future.done():
        future.set_result(value)
