"""Where an await of aiorma waits: the one function that decides it, :func:`wait`.

An awaited :class:`~aiorma.Request` is finished, or its completion future is pending.  What the
await then does is decided here, and only here:

* **Pending, polled transport (MPI), inline waiting on**: poll the rank's endpoint — and the
  wait sources of its waiter (memory watchers, the collectives' runner) — inside the await for a
  bounded time (:data:`INLINE_OWN_CORE`; :data:`INLINE_SHARED_CORE` with the core handed on by
  ``sched_yield`` between polls when the node has more ranks than cores).  An on-time peer's
  grant, "done" or flag arrives sooner than one turn of the event loop would take.
* **Still pending, polled transport**: keep polling, once per turn of the event loop (of trio's
  scheduler in a trio task), for up to :data:`POLL_BETWEEN_TURNS` (the waiter's spin window),
  so that the rank's other tasks and timers run between polls and the poll that finishes the
  future resumes the task at once (:func:`_poll_between_turns`; one await of a rank at a time,
  and not while a worker thread is inside MPI).
* **Still pending after that** (a late peer, or the transport is not polled): suspend on the
  event loop until the future is done — through :func:`asyncio.shield` in an asyncio task,
  through the trio bridge (:func:`aiorma._core.host.wait_future`) in a trio task.  Either way a
  cancelled await abandons only the wait: the completion future is shared and stays as it was,
  so the operation continues and the Request can be awaited again.
* **Finished without suspending**: the fairness checkpoint — yield to the loop if this thread's
  tasks have not done so for :data:`FAIR_SLICE` (trio's checkpoint in a trio task; under
  asyncio a resume from a timer due now, :func:`_give_way`).

The times of the last suspension or checkpoint are kept in the thread's
:class:`~aiorma._core.context.Context` (``last_await``), which the rank's
:class:`~aiorma._core.waiter.Waiter` also reads: an awaiting program is activity, so it keeps
spinning rather than parking.  The waiter is the rank's background poller; it is what a suspended
await relies on to be woken (its task polls, then finishes the future), never where an await
decides anything; while an await polls between turns, it leaves the polling to that await.  A
memory watcher (:mod:`aiorma._core.watch`) turns a predicate on memory into such a future at the
call (``Window.wait_until``), so an await of it is an await of a future like any other.  Awaits
inside a collective's job are the exception: the job's runner steps them itself
(:mod:`aiorma.collectives.runner`) and the job's own Request is awaited through here."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Generator
from typing import Any, Final, Protocol

from ..transport.base import PollNeed
from .context import Context
from .host import checkpoint, in_trio, wait_future

#: Awaiting Requests yields to the event loop at least once per this many seconds.  A Request
#: that finished inside its call would otherwise never yield, and a task awaiting aiorma calls in
#: a loop would starve its rank's timers, timeouts, other tasks and in-process peers.  1 ms keeps
#: a 5 ms timer within a fifth of its period, while a loop turn (10-15 µs) every millisecond
#: costs the hot path about 1 %.
FAIR_SLICE = 1e-3

# Inline waiting: how long awaiting a pending Request polls inside the await before it suspends
# on the event loop.  An on-time peer answers a fence or a post sooner than a turn of the loop,
# let alone a park, would take (docs/benchmarks.md, *The thin path, inline waiting ...*, has the
# costs); past the bound the peer is late and the rank's other tasks get the loop.  Shorter when
# ranks outnumber cores, with the core handed on between polls (sched_yield), so that the peer we
# wait for can run.
INLINE_OWN_CORE = 1e-4
INLINE_SHARED_CORE = 3e-5
# Past the inline bound, the awaiting task keeps polling once per turn of the event loop for this
# long (the waiter's spin window, aiorma._core.waiter), before it waits on the future alone.
POLL_BETWEEN_TURNS = 2e-3
#: The clock, a static of the compiled module: no look-up of a global on the hot path.
perf_counter: Final = time.perf_counter
_NEED_THREADS: Final = PollNeed.THREADS


class Sources(Protocol):
    """What the inline poll needs of the rank's :class:`~aiorma._core.waiter.Waiter`."""

    oversubscribed: bool
    await_polling_until: float

    def check_sources(self) -> bool: ...

    def wake(self) -> None: ...


class Needs(Protocol):
    """What :func:`wait` needs of the rank's endpoint: whether a worker thread is inside MPI."""

    def poll_need(self) -> PollNeed: ...


class Polling(Protocol):
    """What :func:`wait` needs of a rank's :class:`~aiorma._core.driver.ProgressDriver` to poll
    inside an await (the module sits below the driver)."""

    @property
    def waiter(self) -> Sources: ...

    @property
    def endpoint(self) -> Needs: ...

    def poll_turn(self) -> bool: ...

    def failed(self, error: BaseException) -> None: ...


def wait(
    future: asyncio.Future[Any] | None, driver: Polling | None, thread: Context
) -> Generator[Any, None, None]:
    """Wait, from the awaiting task (``yield from`` inside an ``__await__``), until ``future`` is
    done (None: an operation that finished inside its call), by the rules of the module
    docstring; ``driver`` is the rank's driver when it polls inside awaits (None: suspend at
    once), ``thread`` the calling thread's Context.  Returns nothing: the caller reads the
    outcome (the future's result or exception).  Raises the future's exception only when it
    suspended on it, and the awaiting task's cancellation (which leaves ``future`` as it was).

    Does nothing, calling nothing, when ``future`` is done and no checkpoint is due (the time
    since ``thread.last_await`` is below :data:`FAIR_SLICE`): a hot caller may test that first
    and skip the call (``Request.__await__`` does, so a finished Request costs no extra call)."""
    if future is not None and not future.done() and (driver is None or not _poll_inline(future, driver)):
        try:
            trio_task = in_trio()
            polled = driver is not None and (yield from _poll_between_turns(future, driver, trio_task))
            if not polled and trio_task:  # park the trio task until the future is done (.host)
                yield from wait_future(future).__await__()
            elif not polled:
                # shield: a cancelled waiter must not cancel the shared completion future.
                yield from asyncio.shield(future).__await__()
        finally:
            thread.last_await = perf_counter()
        return
    now = perf_counter()
    if now - thread.last_await >= FAIR_SLICE:
        # A checkpoint (trio's rule that every await is one, bounded for speed); under asyncio
        # one that lets the timers due meanwhile run first (see _give_way).  Cancellation here
        # abandons only the wait.
        thread.last_await = now  # (the waiter, if it runs now, sees a busy program)
        if in_trio():
            yield from checkpoint().__await__()
        else:
            yield from _give_way().__await__()
        thread.last_await = perf_counter()


def _poll_inline(future: asyncio.Future[Any], driver: Polling) -> bool:
    """Poll the rank's endpoint and wait sources, for a short bounded time, until ``future`` is
    done (True) or the bound passes (False: suspend on the loop)."""
    poll, waiter = driver.poll_turn, driver.waiter
    share_core = waiter.oversubscribed
    deadline = perf_counter() + (INLINE_SHARED_CORE if share_core else INLINE_OWN_CORE)
    # Own memory first (a collective's flags and LL slots, watched words): a few loads, where a
    # poll of the transport is several MPI calls, so what a peer wrote since the call is seen
    # without paying a poll.  Then each turn polls and looks at once at what the poll let land
    # (off node, a peer's put may need our progress) — before the core is handed on.
    try:
        waiter.check_sources()
    except Exception as exc:  # as in the waiter's task: the rank fails, with the cause
        driver.failed(exc)
    while not future.done():
        _poll_and_look(poll, waiter, driver)
        if future.done():
            return True
        if perf_counter() >= deadline:
            return False
        if share_core:
            os.sched_yield()
    return True


def _poll_and_look(poll: Callable[[], bool], waiter: Sources, driver: Polling) -> bool:
    """One turn of a wait: poll the endpoint, then look at once at what the poll let land in
    the wait sources; True when either found anything.  An exception fails the rank, with the
    cause, as in the waiter's task."""
    try:
        return poll() | waiter.check_sources()
    except Exception as exc:
        driver.failed(exc)
        return False


def _poll_between_turns(
    future: asyncio.Future[Any], driver: Polling, trio_task: bool
) -> Generator[Any, None, bool]:
    """Poll the rank's endpoint and wait sources once per turn of the event loop, for up to
    :data:`POLL_BETWEEN_TURNS`, until ``future`` is done (True) or the time passes (False: wait
    on the future itself, which the rank's waiter finishes).  One await of a rank polls so at a
    time (False at once for another): the others are woken when its polls finish their futures.

    Between polls the task yields to the loop (a bare ``yield``, as ``asyncio.sleep(0)``; in a
    trio task, trio's checkpoint), so the rank's other tasks and timers run, and a cancellation
    arrives there.  What it saves against waiting on the future while the waiter polls: a
    completion found by this task's own poll resumes it at once, where one found by the waiter
    resumes it two turns of the loop later (the shield's callback, then the task's wake-up),
    each turn with another poll in it.

    The waiter leaves the polling to this await until ``waiter.await_polling_until``, a time
    rather than a flag: an await abandoned without its ``finally`` (a coroutine never closed)
    then holds the polling no longer than its deadline, and the waiter's polls resume."""
    waiter = driver.waiter
    now = perf_counter()
    if now < waiter.await_polling_until:
        return False  # another await polls
    poll, poll_need = driver.poll_turn, driver.endpoint.poll_need
    share_core = waiter.oversubscribed
    waiter.await_polling_until = deadline = now + POLL_BETWEEN_TURNS
    try:
        while True:
            if share_core:
                os.sched_yield()
            if trio_task:
                yield from checkpoint().__await__()
            else:
                yield  # one turn of the event loop
            if _poll_and_look(poll, waiter, driver):
                waiter.wake()  # activity: the waiter's spin window restarts, as after its own polls
            if future.done():
                return True
            # A worker thread inside MPI needs the interpreter to finish, which a task yielding to
            # the loop keeps from it (the waiter blocks in the selector for it instead).
            if perf_counter() >= deadline or poll_need() is _NEED_THREADS:
                return False
    finally:
        waiter.await_polling_until = 0.0


def _give_way() -> asyncio.Future[None]:
    """A future that a timer due *now* finishes.  A bare ``yield`` (``asyncio.sleep(0)``) puts the
    task back in the ready queue, where it runs again before the timers that fell due during its
    slice (asyncio moves those to the queue behind it): a 5 ms timer beside a loop of awaited
    calls waited two slices, not one.  Resuming from a timer orders the task after them."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[None] = loop.create_future()
    loop.call_at(loop.time(), _resume, future)
    return future


def _resume(future: asyncio.Future[None]) -> None:
    if not future.done():  # (cancelled: the task gave up the wait)
        future.set_result(None)
