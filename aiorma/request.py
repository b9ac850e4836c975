"""Request: the awaitable handle every synchronization, RMA and collective call returns."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator
from typing import Any


class Request:
    """Completion of one operation that already took effect when it was called.

    * ``await request`` is the blocking form; keeping the Request and awaiting (or testing) it
      later is the nonblocking form.  Awaiting a finished Request does not yield.
    * :meth:`test` drives progress once and reports completion (MPI_Test); :meth:`done` only looks.
    * :meth:`result` is the operation's value: the result buffer for get-like RMA calls, ``None``
      otherwise.  It raises the operation's error, or :class:`asyncio.InvalidStateError` before
      completion.

    Cancellation: cancelling a task that awaits a Request (``asyncio.timeout``, ``anyio.fail_after``,
    ``task.cancel()``) abandons only that wait.  The operation itself cannot be withdrawn — peers'
    counters already account for it — so it continues, its epoch closes normally, and the same
    Request can be awaited again.
    """

    __slots__ = ("_error", "_future", "_progress", "_value", "description")

    def __init__(
        self,
        future: asyncio.Future[Any] | None,
        progress: Callable[[], None] | None = None,
        description: str = "",
    ) -> None:
        self._future = future
        self._progress = progress
        self._value: Any = None
        self._error: BaseException | None = None
        self.description = description

    @classmethod
    def finished(
        cls, value: Any = None, error: BaseException | None = None, description: str = ""
    ) -> Request:
        """A Request for an operation that completed inside its call: no future, no event loop."""
        request = cls(None, None, description)
        request._value = value
        request._error = error
        return request

    def done(self) -> bool:
        """True once the operation completed (successfully or not).  Does not drive progress."""
        return self._future is None or self._future.done()

    def test(self) -> bool:
        """Drive progress once, then report :meth:`done`."""
        future = self._future
        if future is None:
            return True
        if not future.done() and self._progress is not None:
            self._progress()
        return future.done()

    def result(self) -> Any:
        if self._future is not None:
            return self._future.result()
        if self._error is not None:
            raise self._error
        return self._value

    def exception(self) -> BaseException | None:
        return self._future.exception() if self._future is not None else self._error

    def add_done_callback(self, callback: Callable[[Request], None]) -> None:
        if self._future is None:
            asyncio.get_running_loop().call_soon(callback, self)
        else:
            self._future.add_done_callback(lambda _f: callback(self))

    def __await__(self) -> Generator[Any, None, Any]:
        future = self._future
        if future is None:
            if self._error is not None:
                raise self._error
            return self._value
        if future.done():
            return future.result()
        # shield: a cancelled waiter must not cancel the shared completion future.
        return (yield from asyncio.shield(future).__await__())

    def __repr__(self) -> str:
        state = "done" if self.done() else "pending"
        return f"<Request {self.description} {state}>"


def completed_request(value: Any = None, description: str = "") -> Request:
    """A Request that is already finished (for calls with nothing left to wait for)."""
    return Request.finished(value, None, description)
