"""aiorma under trio: its asyncio machinery hosted in the trio run, and the bridge between the two.

aiorma's progress machinery — futures finished by the progress driver, the waiter's task, timers,
doorbell readers, worker threads, the collectives' jobs — is written against asyncio's event loop
interface.  Under trio (``trio.run``, anyio's trio backend, ``aiorma.run(main, backend="trio")``)
there is no asyncio loop, so aiorma brings one and *hosts* it inside the trio run:

* :class:`HostedLoop` is a real ``asyncio.SelectorEventLoop`` whose selector never blocks.  A trio
  system task (:func:`_drive`) runs its iterations: one ``_run_once`` (ready callbacks, due timers,
  ready file descriptors), then, when nothing is ready, it sleeps in trio until the loop's next
  timer or until the loop's epoll descriptor turns readable — which it does when a doorbell, the
  self-pipe of ``call_soon_threadsafe`` (worker threads) or any other reader the loop watches is
  readable.  A callback scheduled from a trio task while the driver sleeps writes the self-pipe,
  so it runs at once.  So aiorma's internals run unchanged, interleaved with the program's trio
  tasks on the same thread, and cost no CPU while idle.
* The hosted loop is the thread's *running* asyncio loop for as long as the trio run has aiorma
  open, so ``asyncio.get_running_loop()`` inside aiorma finds it from trio tasks too.
* Trio tasks never await an asyncio future directly: an await of a :class:`~aiorma.Request`
  (whose waiting :func:`aiorma._core.await_policy.wait` decides, this module only providing the
  trio side: :func:`in_trio`, :func:`wait_future`, :func:`checkpoint`) and the entry points that
  run asyncio code (:func:`hosted`) wait through :func:`wait_future`, which parks the trio task
  until the future's done-callback reschedules it.  A trio cancellation (``move_on_after``,
  ``fail_after``, a cancelled nursery) abandons that wait only: the operation continues, exactly as
  a cancelled asyncio await of a Request.

Under asyncio none of this runs: :func:`in_trio` is one test of an empty list.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import selectors
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

from .context import context

T = TypeVar("T")
P = ParamSpec("P")

# This thread's hosted loops and the collectives' runner depth are fields of its Context
# (aiorma._core.context: hosted_loops, runner_depth).


def in_trio() -> bool:
    """True when the code awaiting runs in a trio task (not in a task of the hosted loop, and not
    in a collective's job stepped by its runner)."""
    thread = context()
    return bool(thread.hosted_loops) and thread.runner_depth == 0 and asyncio.current_task() is None


class _NonBlockingSelector(selectors.DefaultSelector):  # type: ignore[misc,valid-type]
    """The hosted loop never blocks in its selector: the trio driver does the waiting."""

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        return super().select(0)


class HostedLoop(asyncio.SelectorEventLoop):
    """An asyncio loop whose iterations a trio task runs (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__(_NonBlockingSelector())
        self.asleep = False  # the driver waits in trio: a new callback must wake it

    def call_soon(  # type: ignore[override]
        self, callback: Callable[..., object], *args: Any, context: Any = None
    ) -> asyncio.Handle:
        handle = super().call_soon(callback, *args, context=context)
        self._wake_driver()
        return handle

    def call_at(  # type: ignore[override]
        self, when: float, callback: Callable[..., object], *args: Any, context: Any = None
    ) -> asyncio.TimerHandle:
        handle = super().call_at(when, callback, *args, context=context)
        self._wake_driver()
        return handle

    def _wake_driver(self) -> None:
        """Something new to run while the driver sleeps in trio: make the epoll fd readable."""
        if self.asleep:
            self.asleep = False
            self._write_to_self()  # type: ignore[attr-defined]


async def _drive(loop: HostedLoop, stopped: Any) -> None:
    import trio

    epoll = loop._selector.fileno()  # type: ignore[attr-defined]
    try:
        while not stopped.is_set():
            loop._run_once()  # type: ignore[attr-defined]
            if loop._ready:  # type: ignore[attr-defined]
                await trio.lowlevel.checkpoint()
                continue
            scheduled = loop._scheduled  # type: ignore[attr-defined]
            timeout = max(0.0, scheduled[0]._when - loop.time()) if scheduled else math.inf
            loop.asleep = True
            try:
                with trio.move_on_after(timeout):
                    await trio.lowlevel.wait_readable(epoll)
            finally:
                loop.asleep = False
    finally:
        stopped.set()


async def open_host() -> HostedLoop:
    """The hosted loop of the current trio run, started on first use (a trio system task drives
    it until the run ends)."""
    import trio

    loops = context().hosted_loops
    token = trio.lowlevel.current_trio_token()
    for hosted_loop in loops:
        if isinstance(hosted_loop, HostedLoop) and hosted_loop.trio_token is token:  # type: ignore[attr-defined]
            return hosted_loop
    loop = HostedLoop()
    loop.trio_token = token  # type: ignore[attr-defined]
    stopped = trio.Event()
    loops.append(loop)
    asyncio.events._set_running_loop(loop)

    async def drive() -> None:
        try:
            await _drive(loop, stopped)
        finally:
            _close(loop)

    trio.lowlevel.spawn_system_task(drive, name="aiorma hosted asyncio loop")
    return loop


def _close(loop: HostedLoop) -> None:
    loops = context().hosted_loops  # (the trio run's thread: where open_host put it)
    if loop in loops:
        loops.remove(loop)
    if asyncio.events._get_running_loop() is loop:
        asyncio.events._set_running_loop(None)
    loop.close()


async def wait_future(future: asyncio.Future[T]) -> T:
    """From a trio task: wait for ``future`` (of the hosted loop) and return its result.  A trio
    cancellation abandons the wait, not the future."""
    import trio

    if not future.done():
        task = trio.lowlevel.current_task()
        waiting = [True]

        def wake(_done: object) -> None:
            if waiting[0]:  # (an abandoned wait's callback may already have been scheduled)
                waiting[0] = False
                trio.lowlevel.reschedule(task)

        future.add_done_callback(wake)

        def abort(_raise_cancel: object) -> Any:
            waiting[0] = False
            future.remove_done_callback(wake)
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)
    return future.result()


async def checkpoint() -> None:
    """trio's checkpoint (a schedule point and a cancellation point)."""
    import trio

    await trio.lowlevel.checkpoint()


async def run_hosted(coro: Coroutine[Any, Any, T]) -> T:
    """From a trio task: run ``coro`` as a task of the hosted loop and return its result.  If the
    trio task is cancelled, the hosted task is cancelled too and waited for (so that what it
    holds is released), then the cancellation propagates."""
    import trio

    loop = await open_host()
    task = loop.create_task(coro)
    try:
        return await wait_future(task)
    except trio.Cancelled:
        task.cancel()
        with trio.CancelScope(shield=True), contextlib.suppress(BaseException):
            await wait_future(task)  # (its own outcome: the cancellation is what propagates)
        raise


def hosted(fn: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, Coroutine[Any, Any, T]]:
    """Decorate an ``async def`` of the public API whose body uses asyncio: called from a trio
    task, its coroutine runs on the hosted loop (:func:`run_hosted`); from asyncio, as before."""

    @functools.wraps(fn)
    def call(*args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, T]:
        coro = fn(*args, **kwargs)
        if in_trio():
            return run_hosted(coro)
        return coro

    return call


class HostedContext(contextlib.AbstractAsyncContextManager[T]):
    """An async context manager of asyncio code (``connect``, ``connect_local``) usable from
    trio: entering and leaving run on the hosted loop."""

    def __init__(self, manager: contextlib.AbstractAsyncContextManager[T]) -> None:
        self._manager = manager

    async def __aenter__(self) -> T:
        if not _trio_running():
            return await self._manager.__aenter__()
        await open_host()
        return await run_hosted(self._manager.__aenter__())

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        if not _trio_running():
            return await self._manager.__aexit__(*exc_info)
        return await run_hosted(self._manager.__aexit__(*exc_info))


def _trio_running() -> bool:
    """True inside a trio task (the first aiorma call of a trio run comes before any hosting)."""
    if asyncio.events._get_running_loop() is not None and asyncio.current_task() is not None:
        return False  # an asyncio task (of a plain loop, or of the hosted one)
    try:
        import trio
    except ImportError:
        return False
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        return False
    return True
