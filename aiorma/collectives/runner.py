"""SerialRunner: runs a Comm's collectives one after another, the first step inside the call.

Collectives of one Comm run in the order they were called, one at a time on each rank.  That is
what MPI asks of nonblocking collectives (same order everywhere), and it lets every pair of ranks
count its messages identically: the k-th message from A to B belongs to the same collective and
step on both sides, so landing slots, flags and credits can be numbered per pair (see
:mod:`aiorma.collectives.landing`).

Each job is a coroutine.  Instead of wrapping it in an :class:`asyncio.Task` (whose first step
would wait for the next turn of the event loop), the runner steps the coroutine itself: the first
step runs *inside the collective call* when no earlier collective is still running, so the call
issues its first puts at once (a call pushes its work as far as it can go: docs/architecture.md),
and later steps run from the done-callbacks of the futures the coroutine awaits — or sooner, from
:meth:`SerialRunner.pump`, when an await that polls inline finds the awaited future finished.
Coroutines may await asyncio futures (including tasks and ``asyncio.gather``) and
``asyncio.sleep``; nothing in them may rely on ``asyncio.current_task()``.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any, Final

from .._core.context import context
from ..errors import CollectiveStreamBroken

JobFactory = Callable[[], Coroutine[Any, Any, Any]]


class ResultError(Exception):
    """Raised by a job whose communication finished on this rank (its message counts match the
    peers') but whose result could not be made here, e.g. bytes that do not unpickle: the job's
    Request fails with ``cause`` and later collectives run as usual, unlike any other exception,
    which leaves the counts unknown and breaks the stream."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(cause)
        self.cause = cause


#: What a job's ``step()`` returns when the job has finished, where its ``send`` would raise
#: ``StopIteration`` (see ``SerialRunner._stepper``).
FINISHED: Final = object()


class SerialRunner:
    """Run jobs strictly in submission order; each job's future carries its result or error."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        # A job's future is None until someone needs it (see start()).
        self._queue: deque[tuple[JobFactory, asyncio.Future[Any] | None]] = deque()
        self._coro: Coroutine[Any, Any, Any] | None = None
        # The job's ``step`` where it has one (an exchange program): send() without raising
        # StopIteration at the end (it returns FINISHED instead).
        self._stepper: Callable[[], Any] | None = None
        self._future: asyncio.Future[Any] | None = None
        self._stepping = False
        self.failure: BaseException | None = None
        self._last: asyncio.Future[Any] | None = None
        self._awaiting: asyncio.Future[Any] | None = None  # what the current job is suspended on
        #: Jobs submitted so far (each rank of a Comm submits the same sequence).
        self.submitted = 0
        #: A wait source (:class:`aiorma._core.waiter.WaitSource`) that resumes the job in the poll
        #: that finished what it awaits (see :meth:`pump`).
        self.resumer = _Resumer(self)

    @property
    def idle(self) -> bool:
        return self._coro is None and not self._queue

    def submit(self, factory: JobFactory) -> asyncio.Future[Any]:
        """Queue ``factory()``'s coroutine; start it now if nothing else is running."""
        future: asyncio.Future[Any] = self._loop.create_future()
        self._last = future
        self.submitted += 1
        if self.failure is not None:
            future.set_exception(CollectiveStreamBroken(f"an earlier collective failed: {self.failure!r}"))
            return future
        self._queue.append((factory, future))
        if self._coro is None and not self._stepping:
            self._run(None)
        return future

    def start(self, factory: JobFactory) -> asyncio.Future[Any] | None:
        """:meth:`submit`, except that a job that runs to its end inside this call and returns
        None (a small collective whose peers were on time) makes no future: None says so.  The
        future is made as soon as one is needed — the job waits, fails or returns a value."""
        if self._coro is not None or self._stepping or self._queue or self.failure is not None:
            return self.submit(factory)
        self.submitted += 1
        self._last = None
        self._queue.append((factory, None))
        self._run(None)
        return self._made_future()

    def _made_future(self) -> asyncio.Future[Any] | None:
        # A method, not ``self._last`` read in start(): the type checker (and so the compiled
        # code) would keep start()'s ``self._last = None`` as known, though _run changed it.
        return self._last

    async def drain(self) -> None:
        """Wait until every submitted job has finished (successfully or not)."""
        while self._last is not None and not self._last.done():
            await asyncio.wait([self._last])

    def pump(self) -> bool:
        """Resume the current job now if the future it awaits has finished; True if it did.

        A finished future resumes the job through its done-callback, which asyncio runs a turn of
        the event loop later.  An await that polls inline (``Request.__await__`` on a polled
        transport) calls this after every poll instead, so a collective runs step after step
        inside the await that waits for it; the late callback then finds nothing to do."""
        awaiting = self._awaiting
        if awaiting is None or self._stepping or not awaiting.done():
            return False
        self._awaiting = None
        self._run(None)
        return True

    # ------------------------------------------------------------------ stepping

    def _resume(self, future: asyncio.Future[Any]) -> None:
        if future is self._awaiting:  # not already resumed by pump()
            self._awaiting = None
            self._run(None)

    def _run(self, _done: object) -> None:
        """Step the current job; when it finishes, start the next one (iteratively)."""
        if self._stepping:  # a step that completed a future synchronously: the callback comes later
            return
        self._stepping = True
        try:
            while True:
                if self._coro is None:
                    if not self._queue:
                        return
                    factory, self._future = self._queue.popleft()
                    try:
                        self._coro = factory()
                        self._stepper = getattr(self._coro, "step", None)
                    except BaseException as exc:
                        self._future_of_job()
                        self._fail(exc)
                        continue
                if not self._step():
                    return  # suspended on a future or a sleep
        finally:
            self._stepping = False

    def _future_of_job(self) -> asyncio.Future[Any]:
        """The current job's future, made now if it has none yet (:meth:`start`)."""
        if self._future is None:
            self._future = self._last = self._loop.create_future()
        return self._future

    def _step(self) -> bool:
        """Advance the current coroutine once.  True when it finished (the next job may start)."""
        coro = self._coro
        assert coro is not None
        thread = context()
        thread.runner_depth += 1  # Requests awaited in the job yield asyncio futures, to us, even under trio
        try:
            try:
                stepper = self._stepper
                yielded = coro.send(None) if stepper is None else stepper()
            finally:
                thread.runner_depth -= 1
        except StopIteration as stop:
            return self._finished(stop.value)
        except ResultError as failed:
            future = self._future_of_job()
            self._coro = self._future = None
            if not future.done():
                future.set_exception(failed.cause)
            return True
        except BaseException as exc:
            self._future_of_job()
            self._coro = None
            self._fail(exc)
            return True
        if yielded is FINISHED:
            return self._finished(None)
        self._future_of_job()  # the job waits: its Request needs the future
        if yielded is None:  # a bare yield (asyncio.sleep(0)): resume on the next loop turn
            self._loop.call_soon(self._run, None)
        elif isinstance(yielded, asyncio.Future):
            yielded._asyncio_future_blocking = False
            self._awaiting = yielded
            yielded.add_done_callback(self._resume)
        else:
            coro.close()
            self._coro = None
            self._fail(RuntimeError(f"a collective awaited {yielded!r}, which is not an asyncio future"))
            return True
        return False

    def _finished(self, value: Any) -> bool:
        """The current job returned ``value``: its future (if it has one, or a value needs one)
        gets it; True (the next job may start)."""
        if self._future is not None or value is not None:
            future = self._future_of_job()
            if not future.done():
                future.set_result(value)
        self._coro = self._future = None
        return True

    def fail(self, make_error: Callable[[], BaseException]) -> list[asyncio.Future[Any]]:
        """A peer failed: every later collective gets a failed Request at once, and the queued
        ones fail now (they would wait on a broken stream).  The running one fails through its
        flag waits (:meth:`MemoryWatcher.fail`).  Returns the futures it failed, and the running
        one's, which fails soon."""
        if self.failure is None:
            self.failure = make_error()
        failed = [] if self._future is None else [self._future]
        while self._queue:
            _factory, queued = self._queue.popleft()
            if queued is not None and not queued.done():
                queued.set_exception(make_error())
                failed.append(queued)
        return failed

    def _fail(self, exc: BaseException) -> None:
        """The current job failed: peers' counters no longer match ours, so fail every later job."""
        future, self._future = self._future, None
        self.failure = exc
        if future is not None and not future.done():
            future.set_exception(exc)
        broken = CollectiveStreamBroken(f"an earlier collective failed: {exc!r}")
        while self._queue:
            _factory, queued = self._queue.popleft()
            if queued is not None and not queued.done():
                queued.set_exception(broken)


class _Resumer:
    """The runner as a wait source of the rank's waiter: after each poll, resume the job if what
    it awaits has finished.  It never asks the waiter to keep polling (the flag watcher does
    that for the flags the job waits on) and fails nothing itself (the job fails through them)."""

    def __init__(self, runner: SerialRunner) -> None:
        self._runner = runner

    def check(self) -> bool:
        return self._runner.pump()

    def waiting(self) -> bool:
        return False

    def fail(self, exc: BaseException) -> None:
        return None
