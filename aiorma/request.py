"""Request: the awaitable handle every synchronization, RMA and collective call returns."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Generator
from typing import Any, Final

from ._core import await_policy
from ._core.await_policy import Polling, wait
from ._core.context import context, per_thread
from .errors import RmaUsageError

#: Awaiting Requests yields to the event loop at least once per this many seconds.  A Request
#: that finished inside its call would otherwise never yield, and a task awaiting aiorma calls in
#: a loop would starve its rank's timers, timeouts, other tasks and in-process peers.  1 ms keeps
#: a 5 ms timer within a fifth of its period, while a loop turn (10-15 µs) every millisecond
#: costs the hot path about 1 %.  (The rule is ``aiorma._core.await_policy.wait``'s.)
FAIR_SLICE: Final = await_policy.FAIR_SLICE
#: The clock, a static of the compiled module: no look-up of a global on the hot path.
perf_counter: Final = time.perf_counter

_finished_empty: Final[dict[str, Request]] = {}  # see finished_request


class Request:
    """Completion of one operation that already took effect when it was called.

    * ``await request`` is the blocking form; keeping the Request and awaiting (or testing) it
      later is the nonblocking form.  Awaiting a pending Request on a polled transport first polls
      for a few tens of microseconds inside the await (an on-time peer is answered without a loop
      turn), then suspends.  Awaiting is fair: it yields to the event loop at least once per
      :data:`FAIR_SLICE` (1 ms), even when the Request is already finished, so a task awaiting
      aiorma calls in a loop never starves the rank's other tasks and timers.
    * :meth:`test` drives progress once and reports completion (MPI_Test); :meth:`done` only looks.
    * :meth:`result` is the operation's value: the result buffer for get-like RMA calls, ``None``
      otherwise.  It raises the operation's error, or :class:`asyncio.InvalidStateError` before
      completion.

    Awaitable from asyncio tasks and, with aiorma opened under trio, from trio tasks alike.

    Cancellation: cancelling a task that awaits a Request (``asyncio.timeout``, ``anyio.fail_after``,
    ``task.cancel()``, trio's ``move_on_after`` and cancel scopes) abandons only that wait.  The
    operation itself cannot be withdrawn — peers' counters already account for it — so it
    continues, its epoch closes normally, and the same Request can be awaited again.
    """

    __slots__ = ("_driver", "_error", "_future", "_pending", "_progress", "_value", "description")

    def __init__(
        self,
        future: asyncio.Future[Any] | None,
        progress: Callable[[], None] | None = None,
        description: str = "",
        driver: Polling | None = None,
    ) -> None:
        self._future = future
        self._progress = progress
        self._driver = driver  # the rank's driver when awaiting polls inline (None: it suspends)
        self._value: Any = None
        self._error: BaseException | None = None
        # Finished by finish_pending(), not by a future: a Request kept pending (nonblocking
        # calls in flight) makes no asyncio future until something waits for it.
        self._pending = False
        self.description = description

    @classmethod
    def finished(
        cls, value: Any = None, error: BaseException | None = None, description: str = ""
    ) -> Request:
        """A Request for an operation that completed inside its call: :func:`finished_request`."""
        return finished_request(value, error, description)

    def done(self) -> bool:
        """True once the operation completed (successfully or not).  Does not drive progress."""
        return not self._pending and (self._future is None or self._future.done())

    def test(self) -> bool:
        """MPI_Test: drive progress once (the rank's transport and engines), then report
        :meth:`done`.  Never waits."""
        if not self.done() and self._progress is not None:
            self._progress()
        return self.done()

    def result(self) -> Any:
        """The operation's value once done: the result array for get-like RMA calls, ``None``
        otherwise.  Raises the operation's error, or :class:`asyncio.InvalidStateError` before
        completion."""
        if self._pending:
            raise asyncio.InvalidStateError("Result is not set.")
        if self._future is not None:
            return self._future.result()
        if self._error is not None:
            raise self._error
        return self._value

    def exception(self) -> BaseException | None:
        """The operation's error once done (None if it succeeded).  Raises
        :class:`asyncio.InvalidStateError` before completion."""
        if self._pending:
            raise asyncio.InvalidStateError("Exception is not set.")
        return self._future.exception() if self._future is not None else self._error

    def add_done_callback(self, callback: Callable[[Request], None]) -> None:
        """Call ``callback(request)`` on the event loop once the operation completes (soon, if
        it has)."""
        future = self._waitable()
        if future is None:
            asyncio.get_running_loop().call_soon(callback, self)
        else:
            future.add_done_callback(lambda _f: callback(self))

    def _waitable(self) -> asyncio.Future[Any] | None:
        """The future to wait on (made now for a pending Request that had none), or None when
        finished."""
        future = self._future
        if future is None and self._pending:
            future = self._future = asyncio.get_running_loop().create_future()
        return future

    def __await__(self) -> Generator[Any, None, Any]:
        future = self._future
        if future is None and self._pending:
            future = self._waitable()
        # This thread's Context: its last_await is when a task of this thread last checkpointed.
        try:
            thread = per_thread.context
        except AttributeError:  # the thread's first await of a Request, without a connection
            thread = context()
        # How the await waits is decided by aiorma._core.await_policy.wait.  Its do-nothing case
        # (finished, no checkpoint due) is tested here first: the hot path makes no call.
        if (future is not None and not future.done()) or perf_counter() - thread.last_await >= FAIR_SLICE:
            yield from wait(future, self._driver, thread)
        if future is None:
            if self._error is not None:
                raise self._error
            return self._value
        return future.result()

    def __repr__(self) -> str:
        state = "done" if self.done() else "pending"
        return f"<Request {self.description} {state}>"


class EpochRequest(Request):
    """The Request of a call that opens an epoch (``lock``, ``lock_all``, ``start``, ``post``),
    usable as an async context manager for the whole epoch::

        async with win.lock(rank, aiorma.LOCK_EXCLUSIVE):
            win.put(data, rank, 0)
        # unlocked here, and the epoch is complete (the put is in rank's memory)

    Entering awaits the opening (the lock granted, the exposure granted).  Leaving makes the
    matching closing call (``unlock``, ``unlock_all``, ``complete``, ``wait``) and awaits its
    Request, so the block ends with the epoch complete.  An exception inside the block still closes
    the epoch, then propagates.  A cancelled block (``asyncio.timeout``) closes the epoch too — the
    closing call takes effect at once — and awaits its completion unless cancelled again, in which
    case the epoch completes in the background.  Without ``async with`` it is the plain Request of
    the opening call.
    """

    __slots__ = ("_close",)

    def __init__(
        self,
        future: asyncio.Future[Any] | None,
        progress: Callable[[], None] | None,
        description: str,
        driver: Polling | None,
        close: Callable[[], Request],
    ) -> None:
        # The fields set here, not through Request.__init__: every epoch opening makes one, and
        # this saves a call on that hot path.
        self._future = future
        self._progress = progress
        self._driver = driver
        self._value: Any = None
        self._error: BaseException | None = None
        self._pending = False
        self.description = description
        self._close = close

    async def __aenter__(self) -> EpochRequest:
        try:
            await self
        except BaseException:
            # The opening took effect at the call, so an entry abandoned while it waits (a lock
            # queued behind another rank's, a start whose target has not posted) must close the
            # epoch now: otherwise it is granted later and held for good.  An opening that
            # failed opened nothing.
            if not self.done() or self.exception() is None:
                self._close_abandoned()
            raise
        return self

    def _close_abandoned(self) -> None:
        """Make the closing call for an entry given up; its completion runs in the background
        (its outcome is retrieved, so a failure there adds no noise to the one propagating)."""
        try:
            closing = self._close()
        except Exception:  # the window failed or was freed: nothing is held
            return
        closing.add_done_callback(_retrieve_request)

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        await self._close()


class OutcomeRequest(Request):
    """The Request of a call made of several dependent steps (``aiorma.sync``'s calls): finished
    by :meth:`succeed` or :meth:`fail`, from the last step's done-callback."""

    __slots__ = ("_outcome",)

    def __init__(self, description: str, progress: Callable[[], None]) -> None:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        Request.__init__(self, future, progress, description)
        self._outcome = future

    def succeed(self, value: Any = None) -> None:
        if not self._outcome.done():
            self._outcome.set_result(value)

    def fail(self, error: BaseException) -> None:
        if not self._outcome.done():
            self._outcome.set_exception(error)


class AcquireRequest(OutcomeRequest):
    """The Request of an ``acquire`` (``aiorma.sync``): finishes when the lock or permit is the
    caller's.  A cancelled (or otherwise interrupted) await of it abandons the acquire:
    ``on_abandon(self, granted)`` tells its object, which gives the grant back — now if it had
    come, else when it comes."""

    __slots__ = ("_on_abandon", "abandoned", "started")

    def __init__(
        self,
        description: str,
        progress: Callable[[], None],
        on_abandon: Callable[[AcquireRequest, bool], None],
    ) -> None:
        OutcomeRequest.__init__(self, description, progress)
        self._on_abandon = on_abandon
        self.abandoned = False
        self.started = False  # it left this rank's local line: the shared state knows of it

    def __await__(self) -> Generator[Any, None, Any]:
        if self.abandoned:
            raise RmaUsageError(f"{self.description} was abandoned (an await of it was cancelled)")
        try:
            return (yield from Request.__await__(self))
        except BaseException as exc:
            # Anything but the acquire's own failure (a cancellation, a timeout, an interrupt)
            # means the caller will not hold it: it must not stay granted.
            if not (self.done() and self.exception() is exc):
                self.abandon()
            raise

    def abandon(self) -> None:
        """Give up this acquire: a grant already here, or still to come, is given back."""
        if self.abandoned:
            return
        self.abandoned = True
        if not self.done():
            self.fail(RmaUsageError(f"{self.description} was abandoned (an await of it was cancelled)"))
            self.exception()  # nobody is waiting for this error: not "never retrieved"
            self._on_abandon(self, False)
        elif self.exception() is None:
            self._on_abandon(self, True)


def finish_as(future: asyncio.Future[None], request: Request) -> None:
    """Finish ``future`` (if it is not yet) as the finished ``request`` did: its error, or None."""
    if not future.done():
        error = request.exception()
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(None)


def finished_request(value: Any = None, error: BaseException | None = None, description: str = "") -> Request:
    """A Request for an operation that completed inside its call: no future, no event loop.
    Those with nothing to return are immutable and shared, one per description (the hot path
    makes one per call).  (A function, where the hot path calls it, rather than the classmethod
    :meth:`Request.finished`: compiled, a call of a classmethod is a generic Python call.)"""
    if value is None and error is None:
        shared = _finished_empty.get(description)
        if shared is None:
            shared = _finished_empty[description] = Request(None, None, description)
        return shared
    request = Request(None, None, description)
    request._value = value
    request._error = error
    return request


def pending_request(
    progress: Callable[[], None],
    description: str,
    driver: Polling | None,
    close: Callable[[], Request] | None = None,
) -> Request:
    """The Request of an operation still in progress, finished later by :func:`finish_pending`
    (an :class:`EpochRequest` when ``close`` is given).  It has no asyncio future until an await
    or a done-callback needs one: a program that keeps thousands of calls in flight pays for no
    future (and no loop look-up) per call, nor the cyclic GC for walking them."""
    if close is None:
        request = Request(None, progress, description, driver)
    else:
        request = EpochRequest(None, progress, description, driver, close)
    request._pending = True
    return request


def epoch_request(opened: Request, close: Callable[[], Request]) -> EpochRequest:
    """An :class:`EpochRequest` for an opening that finished inside its call."""
    request = EpochRequest(None, None, opened.description, None, close)
    request._value = opened._value
    request._error = opened._error
    return request


def finish_pending(request: Request, value: Any, error: BaseException | None) -> None:
    """Finish a Request made by :func:`pending_request` (once: a second finish is ignored, as
    when a failed rank's Requests failed before their tokens were reported).  Its future, if an
    await made one, is finished too, with an error marked retrieved: a Request nobody awaits
    logs nothing, with or without a future."""
    if not request._pending:
        return
    request._value = value
    request._error = error
    request._pending = False
    future = request._future
    if future is not None:
        request._future = None  # (finished: the fields answer from now on)
        if not future.done():
            if error is not None:
                future.set_exception(error)
                future.exception()
            else:
                future.set_result(value)


def completed_request(value: Any = None, description: str = "") -> Request:
    """A Request that is already finished (for calls with nothing left to wait for)."""
    return finished_request(value, None, description)


def mark_retrieved(futures: list[asyncio.Future[Any]]) -> None:
    """The program may never await these failed (or failing) Requests (it is leaving, or
    failing): mark their exceptions retrieved once they have one, so asyncio logs no "Future
    exception was never retrieved" for them.  Awaiting one still raises."""
    for future in futures:
        if future.done():
            _retrieve(future)
        else:
            future.add_done_callback(_retrieve)


def _retrieve_request(request: Request) -> None:
    request.exception()


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()
