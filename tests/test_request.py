"""A pending Request without a future: the driver finishes it with ``finish_pending``; a future is
made only when something waits (an await, a done-callback)."""

from __future__ import annotations

import asyncio
import gc

import pytest

from aiorma.request import Request, finish_pending, pending_request


def _pending() -> Request:
    return pending_request(lambda: None, "put", None)


async def test_pending_answers_nothing_until_finished() -> None:
    request = _pending()
    assert not request.done()
    assert request.test() is False  # (drives its progress callable, which changes nothing)
    with pytest.raises(asyncio.InvalidStateError):
        request.result()
    with pytest.raises(asyncio.InvalidStateError):
        request.exception()
    finish_pending(request, "value", None)
    assert request.done() and request.test() and request.result() == "value"
    assert await request == "value"


async def test_an_error_reaches_an_await_made_before_and_after() -> None:
    request = _pending()
    waiting = asyncio.ensure_future(request)
    await asyncio.sleep(0)  # the await made the future and waits on it
    finish_pending(request, None, RuntimeError("failed"))
    with pytest.raises(RuntimeError, match="failed"):
        await waiting
    with pytest.raises(RuntimeError, match="failed"):
        await request
    assert isinstance(request.exception(), RuntimeError)


async def test_a_cancelled_await_leaves_it_finishable() -> None:
    request = _pending()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.01):
            await request
    assert not request.done()
    finish_pending(request, 3, None)
    assert await request == 3


async def test_done_callbacks_run_once_finished() -> None:
    request = _pending()
    seen: list[Request] = []
    request.add_done_callback(seen.append)
    await asyncio.sleep(0)
    assert seen == []
    finish_pending(request, None, None)
    await asyncio.sleep(0)
    assert seen == [request]


async def test_an_error_nobody_awaits_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    # One awaited and abandoned (it has a future), one never awaited (it has none).
    abandoned, ignored = _pending(), _pending()
    waiting = asyncio.ensure_future(abandoned)
    await asyncio.sleep(0)
    waiting.cancel()
    await asyncio.sleep(0)
    finish_pending(abandoned, None, RuntimeError("failed"))
    finish_pending(ignored, None, RuntimeError("failed"))
    del abandoned, ignored, waiting
    gc.collect()
    await asyncio.sleep(0)
    assert "never retrieved" not in caplog.text
