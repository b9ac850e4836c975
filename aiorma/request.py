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

    __slots__ = ("_future", "_progress", "description")

    def __init__(
        self,
        future: asyncio.Future[Any],
        progress: Callable[[], None] | None = None,
        description: str = "",
    ) -> None:
        self._future = future
        self._progress = progress
        self.description = description

    def done(self) -> bool:
        """True once the operation completed (successfully or not).  Does not drive progress."""
        return self._future.done()

    def test(self) -> bool:
        """Drive progress once, then report :meth:`done`."""
        if not self._future.done() and self._progress is not None:
            self._progress()
        return self._future.done()

    def result(self) -> Any:
        return self._future.result()

    def exception(self) -> BaseException | None:
        return self._future.exception()

    def add_done_callback(self, callback: Callable[[Request], None]) -> None:
        self._future.add_done_callback(lambda _f: callback(self))

    def __await__(self) -> Generator[Any, None, Any]:
        # shield: a cancelled waiter must not cancel the shared completion future.
        return asyncio.shield(self._future).__await__()

    def __repr__(self) -> str:
        state = "done" if self._future.done() else "pending"
        return f"<Request {self.description} {state}>"


def completed_request(value: Any = None, description: str = "") -> Request:
    """A Request that is already finished (for calls with nothing left to wait for)."""
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    future.set_result(value)
    return Request(future, None, description)
