"""Where an await waits is decided in one function (aiorma._core.await_policy.wait), and the hot
path does not pay for it: awaiting a finished Request with no checkpoint due makes no Python call.

The behaviour of the waits themselves (inline polling, suspension under asyncio and trio,
cancellation, fairness) is tested where it shows: test_fairness.py, test_cancellation_audit.py,
test_any_loop.py, test_notified.py and the registry's scenarios.
"""

from __future__ import annotations

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
