"""Where an await waits is decided in one function (aiorma._core.await_policy.wait), and the hot
path does not pay for it: awaiting a finished Request with no checkpoint due makes no Python call.

The behaviour of the waits themselves (inline polling, suspension under asyncio and trio,
cancellation, fairness) is tested where it shows: test_fairness.py, test_cancellation_audit.py,
test_any_loop.py, test_notified.py and the registry's scenarios.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Generator
from time import perf_counter
from typing import Any

import pytest

from aiorma import _native
from aiorma import request as request_module
from aiorma._core import await_policy
from aiorma._core.context import context
from aiorma.request import FAIR_SLICE, Request


def _python_calls(run: Any) -> tuple[list[str], Any]:
    """The functions entered while ``run()`` runs, and its value: Python functions, and aiorma's
    compiled ones called from Python (other C functions are not counted)."""
    entered: list[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            entered.append(frame.f_code.co_name)
        elif event == "c_call" and str(getattr(arg, "__module__", "")).startswith("aiorma"):
            entered.append(arg.__name__)

    sys.setprofile(profile)
    try:
        value = run()
    finally:
        sys.setprofile(None)
    return entered, value


def _step(awaiting: Generator[Any, None, Any]) -> Any:
    """Run an ``__await__`` that is expected to finish without yielding; its value."""
    try:
        awaiting.send(None)
    except StopIteration as stop:
        return stop.value
    raise AssertionError("the await yielded")


@pytest.mark.parametrize("value", [None, 7])
def test_a_finished_request_with_no_checkpoint_due_makes_no_call(value: Any) -> None:
    request = Request.finished(value, None, "put")
    context().last_await = perf_counter()  # a checkpoint was just made: none is due
    awaiting = request.__await__()
    entered, result = _python_calls(lambda: _step(awaiting))
    assert result == value
    # (Compiled, the await's own generator is C: it is not a call the profiler sees.)
    own = [] if _native.running_compiled(request_module) else ["__await__"]
    assert entered == ["<lambda>", "_step", *own]


def test_a_finished_request_with_a_checkpoint_due_goes_through_the_policy() -> None:
    """The other side of the fast test in Request.__await__: past FAIR_SLICE the await enters
    await_policy.wait (which then checkpoints; that needs a loop, so it is only entered here)."""
    request = Request.finished(None, None, "put")
    context().last_await = perf_counter() - 2 * FAIR_SLICE
    awaiting = request.__await__()

    def attempt() -> None:
        with pytest.raises(RuntimeError, match="no running event loop"):
            awaiting.send(None)  # the asyncio checkpoint asks for the running loop

    # That the await needed the running loop shows it went through the policy's checkpoint;
    # the calls show which functions did it, where they are Python's (compiled calls between
    # compiled modules are C calls the profiler does not see).
    entered, _ = _python_calls(attempt)
    if not _native.running_compiled(request_module):
        assert "wait" in entered
    if not _native.running_compiled(await_policy):
        assert "_give_way" in entered


class _FakeWaiter:
    """A waiter whose one wait source finishes ``future`` when ``landed`` is set (a peer's write
    into this rank's memory), counting its checks."""

    oversubscribed = False

    def __init__(self, future: Any) -> None:
        self.future = future
        self.landed = False
        self.checks = 0

    def check_sources(self) -> bool:
        self.checks += 1
        if self.landed and not self.future.done():
            self.future.set_result(None)
        return False


class _FakeDriver:
    def __init__(self, waiter: _FakeWaiter, polls_until_landed: int | None) -> None:
        self.waiter = waiter
        self.polls = 0
        self._until = polls_until_landed

    def poll_turn(self) -> bool:
        self.polls += 1
        if self._until is not None and self.polls >= self._until:
            self.waiter.landed = True
        return False

    def failed(self, error: BaseException) -> None:
        raise AssertionError(f"unexpected failure {error!r}")


def test_an_inline_wait_looks_at_own_memory_before_polling_the_transport(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What a peer already wrote into this rank's memory ends the inline wait without a poll of
    the transport (several MPI calls); a wait that needs polls still gets one per turn."""
    import asyncio

    from aiorma._core import await_policy

    # The order of looks is the point, not the bound: a busy machine must not end the wait first.
    monkeypatch.setattr(await_policy, "INLINE_OWN_CORE", 60.0)
    _poll_inline = await_policy._poll_inline

    loop = asyncio.new_event_loop()
    try:
        landed = loop.create_future()
        waiter = _FakeWaiter(landed)
        waiter.landed = True
        driver = _FakeDriver(waiter, None)
        assert _poll_inline(landed, driver)
        assert (driver.polls, waiter.checks) == (0, 1)

        later = loop.create_future()
        waiter = _FakeWaiter(later)
        driver = _FakeDriver(waiter, 3)  # the write shows up after the third poll
        assert _poll_inline(later, driver)
        assert (driver.polls, waiter.checks) == (3, 4)
    finally:
        loop.close()


def test_a_poll_s_news_is_looked_at_before_the_core_is_handed_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ranks outnumber cores: the inline wait yields the core between polls.  What a poll let
    land (off node, a peer's put may need this rank's progress) is looked at right after that
    poll, not after a yield that may cost a time slice."""
    import asyncio

    from aiorma._core import await_policy

    yields: list[int] = []
    monkeypatch.setattr(await_policy.os, "sched_yield", lambda: yields.append(1))
    # The order of looks is the point, not the bound: a busy machine must not end the wait first
    # (a 30 µs bound did, once in CI: three fake polls took longer).
    monkeypatch.setattr(await_policy, "INLINE_SHARED_CORE", 60.0)
    loop = asyncio.new_event_loop()
    try:
        future = loop.create_future()
        waiter = _FakeWaiter(future)
        waiter.oversubscribed = True
        driver = _FakeDriver(waiter, 3)
        assert await_policy._poll_inline(future, driver)
        assert (driver.polls, len(yields)) == (3, 2)
    finally:
        loop.close()


# ---------------------------------------------------------------- polling between turns of the loop


class _TurnsWaiter(_FakeWaiter):
    """A waiter whose one wait source finishes every future of ``futures`` when ``landed`` is set."""

    def __init__(self, *futures: Any) -> None:
        super().__init__(futures[0])
        self.futures = futures
        self.await_polling_until = 0.0
        self.wakes = 0

    def check_sources(self) -> bool:
        self.checks += 1
        if self.landed:
            for future in self.futures:
                if not future.done():
                    future.set_result(None)
        return self.landed

    def wake(self) -> None:
        self.wakes += 1


class _Endpoint:
    def __init__(self) -> None:
        self.need = await_policy.PollNeed.IDLE

    def poll_need(self) -> Any:
        return self.need


class _TurnsDriver(_FakeDriver):
    def __init__(self, waiter: _TurnsWaiter, polls_until_landed: int | None) -> None:
        super().__init__(waiter, polls_until_landed)
        self.endpoint = _Endpoint()


class _Awaiting:
    """An await of ``future`` through the policy, as ``Request.__await__`` makes it."""

    def __init__(self, future: Any, driver: Any) -> None:
        self.future, self.driver = future, driver

    def __await__(self) -> Generator[Any, None, Any]:
        yield from await_policy.wait(self.future, self.driver, context())
        return self.future.result()


@pytest.fixture
def no_inline_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every await is past its inline bound at once (a late peer), so it suspends."""
    monkeypatch.setattr(await_policy, "INLINE_OWN_CORE", 0.0)
    monkeypatch.setattr(await_policy, "POLL_BETWEEN_TURNS", 60.0)  # the polls, not the bound, end it


async def _count_turns(turns: list[int]) -> None:
    while True:
        turns.append(1)
        await asyncio.sleep(0)


@pytest.mark.usefixtures("no_inline_wait")
async def test_a_suspended_await_polls_once_per_turn_and_resumes_in_its_own_poll() -> None:
    """Past the inline bound the awaiting task polls between turns of the loop: the rank's other
    tasks run between its polls, and the poll that finishes its future resumes it, with no
    waiter task polling (none exists here: an await that only waited on the future would hang)."""
    future = asyncio.get_running_loop().create_future()
    waiter = _TurnsWaiter(future)
    driver = _TurnsDriver(waiter, 20)
    turns: list[int] = []
    ticker = asyncio.create_task(_count_turns(turns))
    try:
        await asyncio.wait_for(_Awaiting(future, driver), 10)
    finally:
        ticker.cancel()
    assert driver.polls == 20
    assert len(turns) >= 18  # the other task ran between the polls after the inline one
    assert waiter.await_polling_until == 0.0  # the waiter polls again
    assert waiter.wakes >= 1  # the poll's news restarted the waiter's spin window


@pytest.mark.usefixtures("no_inline_wait")
async def test_one_await_polls_at_a_time_and_the_others_are_woken_by_its_polls() -> None:
    loop = asyncio.get_running_loop()
    first, second = loop.create_future(), loop.create_future()
    waiter = _TurnsWaiter(first, second)
    driver = _TurnsDriver(waiter, 30)
    polling: list[float] = []

    async def second_await() -> None:
        await asyncio.sleep(0)
        polling.append(waiter.await_polling_until)  # the first await polls now
        polls_before = driver.polls
        await _Awaiting(second, driver)
        polling.append(driver.polls - polls_before)

    await asyncio.wait_for(asyncio.gather(_Awaiting(first, driver), second_await()), 10)
    assert polling[0] > 0.0
    # The second await polled inline once, then waited: every other poll was the first await's.
    assert driver.polls == 30
    assert waiter.await_polling_until == 0.0


@pytest.mark.usefixtures("no_inline_wait")
async def test_a_cancelled_polling_await_leaves_the_operation_and_the_polling() -> None:
    future = asyncio.get_running_loop().create_future()
    waiter = _TurnsWaiter(future)
    driver = _TurnsDriver(waiter, None)  # never lands
    task = asyncio.ensure_future(_Awaiting(future, driver))
    for _ in range(5):
        await asyncio.sleep(0)
    assert waiter.await_polling_until > 0.0
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not future.done()  # the shared completion future stays as it was
    assert waiter.await_polling_until == 0.0


@pytest.mark.usefixtures("no_inline_wait")
async def test_an_await_stops_polling_while_a_worker_thread_is_inside_mpi() -> None:
    """A task yielding to the loop would keep the interpreter from a worker thread inside MPI:
    the await then waits on the future, which someone else finishes (here a timer)."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()
    waiter = _TurnsWaiter(future)
    driver = _TurnsDriver(waiter, None)
    driver.endpoint.need = await_policy.PollNeed.THREADS
    loop.call_later(0.05, future.set_result, "done")
    assert await asyncio.wait_for(_Awaiting(future, driver), 10) == "done"
    assert driver.polls == 2  # the inline poll and one between turns, then none
    assert waiter.await_polling_until == 0.0


async def test_past_its_time_an_await_waits_on_the_future(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(await_policy, "INLINE_OWN_CORE", 0.0)
    monkeypatch.setattr(await_policy, "POLL_BETWEEN_TURNS", 0.0)
    loop = asyncio.get_running_loop()
    future = loop.create_future()
    waiter = _TurnsWaiter(future)
    driver = _TurnsDriver(waiter, None)
    loop.call_later(0.05, future.set_result, 3)
    assert await asyncio.wait_for(_Awaiting(future, driver), 10) == 3
    assert driver.polls == 2


async def test_an_abandoned_polling_await_holds_the_waiter_s_polls_no_longer_than_its_time() -> None:
    """The waiter leaves the polling to an await until that await's deadline, and polls again
    after it even when the await's ``finally`` never ran (a coroutine dropped unclosed)."""
    from aiorma._core.waiter import Waiter

    class _Endpoint:
        polled = True

        def poll_need(self) -> Any:
            return await_policy.PollNeed.REQUESTS  # keeps the waiter spinning, never parked

        def parking(self, parked: bool) -> None:
            assert not parked, "the waiter parked"

    polls: list[float] = []
    waiter = Waiter(_Endpoint(), lambda: polls.append(perf_counter()) is None, lambda exc: None)  # type: ignore[arg-type]
    waiter.await_polling_until = held_until = perf_counter() + 0.05
    waiter.start()
    try:
        await asyncio.sleep(0.1)
    finally:
        await waiter.stop()
    assert polls and min(polls) >= held_until


def test_a_trio_task_polls_between_checkpoints_and_resumes_in_its_own_poll(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In a trio task the await polls between trio's checkpoints: the run's other tasks run
    between its polls, and its own poll resumes it (no waiter here either)."""
    trio = pytest.importorskip("trio")
    from aiorma._core.host import open_host

    monkeypatch.setattr(await_policy, "INLINE_OWN_CORE", 0.0)
    monkeypatch.setattr(await_policy, "POLL_BETWEEN_TURNS", 60.0)
    seen: dict[str, Any] = {}

    async def main() -> None:
        loop = await open_host()
        future = loop.create_future()
        waiter = _TurnsWaiter(future)
        driver = _TurnsDriver(waiter, 20)
        turns: list[int] = []

        async def count() -> None:
            while True:
                turns.append(1)
                await trio.lowlevel.checkpoint()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(count)
            with trio.fail_after(10):
                await _Awaiting(future, driver)
            nursery.cancel_scope.cancel()
        seen.update(polls=driver.polls, turns=len(turns), until=waiter.await_polling_until)

    trio.run(main)
    assert seen["polls"] == 20
    assert seen["turns"] >= 18
    assert seen["until"] == 0.0
